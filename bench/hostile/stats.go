package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// summary is what a phase's well-behaved requests came to.
type summary struct {
	n, failed int
	causes    map[string]int // "upload 503" → count
	p50, p99  time.Duration
	kindP99   map[string]time.Duration
	kindN     map[string]int
}

// summarise computes a phase's figures. Latencies count every request,
// failed ones too (a timeout is a latency the partner lived through).
func summarise(ss []sample) summary {
	s := summary{n: len(ss), causes: map[string]int{}, kindP99: map[string]time.Duration{}, kindN: map[string]int{}}
	all := make([]time.Duration, 0, len(ss))
	byKind := map[string][]time.Duration{}
	for _, x := range ss {
		all = append(all, x.dur)
		byKind[x.kind] = append(byKind[x.kind], x.dur)
		if x.fail != "" {
			s.failed++
			s.causes[x.kind+" "+x.fail]++
		}
	}
	s.p50, s.p99 = percentile(all, 0.50), percentile(all, 0.99)
	for k, d := range byKind {
		s.kindP99[k] = percentile(d, 0.99)
		s.kindN[k] = len(d)
	}
	return s
}

// percentile returns the nearest-rank p-quantile of ds (0 when empty): the
// smallest value that at least p of the values are at or below.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(p*float64(len(s)) + 0.999999999)
	return s[min(max(rank, 1), len(s))-1]
}

// limits are the pass criteria of an attack.
type limits struct {
	maxRSS int64 // bytes
}

// verdict applies the rule of issue 24 to an attack: serve's peak RSS at
// most maxRSS, no well-behaved request failed, and its p99 during the attack
// at most twice its p99 without the attack plus 50 ms. It returns the
// reasons it failed, none when it passed.
func verdict(peak int64, base, during summary, l limits) []string {
	var why []string
	if peak > l.maxRSS {
		why = append(why, fmt.Sprintf("peak RSS %d MiB > %d MiB", peak>>20, l.maxRSS>>20))
	}
	if during.n == 0 {
		why = append(why, "no well-behaved request was answered")
	}
	if during.failed > 0 {
		why = append(why, fmt.Sprintf("%d well-behaved requests failed (%s)", during.failed, causes(during.causes)))
	}
	if bound := allowedP99(base.p99); during.p99 > bound {
		why = append(why, fmt.Sprintf("p99 %s > 2×%s+50ms", ms(during.p99), ms(base.p99)))
	}
	return why
}

// allowedP99 is the highest well-behaved p99 an attack may cause.
func allowedP99(base time.Duration) time.Duration { return 2*base + 50*time.Millisecond }

// causes lists failure causes, most frequent first.
func causes(m map[string]int) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// ms prints a duration in milliseconds, with one decimal below 10 ms.
func ms(d time.Duration) string {
	f := float64(d) / float64(time.Millisecond)
	if f < 10 {
		return fmt.Sprintf("%.1fms", f)
	}
	return fmt.Sprintf("%.0fms", f)
}

// kinds prints the per-kind p99s in a fixed order.
func (s summary) kinds() string {
	keys := slices.Sorted(maps.Keys(s.kindP99))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %s (%d)", k, ms(s.kindP99[k]), s.kindN[k])
	}
	return strings.Join(parts, ", ")
}
