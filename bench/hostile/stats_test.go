package main

import (
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var ds []time.Duration
		for _, n := range ns {
			ds = append(ds, time.Duration(n)*time.Millisecond)
		}
		return ds
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100 … 1, unsorted
	}
	for _, tc := range []struct {
		name string
		ds   []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 0.99, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"p50 of 100 is the 50th", ms(hundred...), 0.50, 50 * time.Millisecond},
		{"p99 of 10 is the largest", ms(5, 1, 9, 3, 2, 8, 4, 6, 7, 10), 0.99, 10 * time.Millisecond},
		{"p50 of 4 is the 2nd", ms(40, 10, 30, 20), 0.50, 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentile(tc.ds, tc.p); got != tc.want {
				t.Errorf("percentile(%v, %v) = %v, want %v", tc.ds, tc.p, got, tc.want)
			}
		})
	}
}

func TestVerdict(t *testing.T) {
	base := summarise([]sample{{kind: "upload", dur: 10 * time.Millisecond}, {kind: "stock", dur: 20 * time.Millisecond}})
	l := limits{maxRSS: 300 << 20}
	during := func(d time.Duration, fail string) summary {
		return summarise([]sample{{kind: "upload", dur: 5 * time.Millisecond}, {kind: "portal", dur: d, fail: fail}})
	}
	for _, tc := range []struct {
		name   string
		peak   int64
		during summary
		want   []string // substrings of the reasons, in order; none: passes
	}{
		{"within every bound", 300 << 20, during(90*time.Millisecond, ""), nil},
		{"p99 at twice the baseline plus 50 ms passes", 100 << 20, during(90*time.Millisecond, ""), nil},
		{"p99 just above it fails", 100 << 20, during(91*time.Millisecond, ""), []string{"p99 91ms > 2×20ms+50ms"}},
		{"RSS over the limit fails", 300<<20 + 1, during(time.Millisecond, ""), []string{"peak RSS 300 MiB > 300 MiB"}},
		{"a failed request fails, however fast", 100 << 20, during(time.Millisecond, "429"), []string{"1 well-behaved requests failed (portal 429 ×1)"}},
		{"every reason is given", 1 << 30, during(5*time.Second, "timeout"), []string{"peak RSS 1024 MiB", "portal timeout", "p99 5000ms"}},
		{"no request answered fails", 0, summarise(nil), []string{"no well-behaved request"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why := verdict(tc.peak, base, tc.during, l)
			if len(why) != len(tc.want) {
				t.Fatalf("verdict = %q, want %d reasons like %q", why, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(why[i], w) {
					t.Errorf("reason %d = %q, want it to contain %q", i, why[i], w)
				}
			}
		})
	}
}

func TestParseMemStatus(t *testing.T) {
	status := "Name:\tstorelink\nVmPeak:\t 1300000 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t9\n"
	rss, hwm, err := parseMemStatus([]byte(status))
	if err != nil || rss != 100<<20 || hwm != 200<<20 {
		t.Fatalf("parseMemStatus = %d, %d, %v; want 100 MiB, 200 MiB", rss, hwm, err)
	}
	if _, _, err := parseMemStatus([]byte("Name:\tx\n")); err == nil {
		t.Fatal("parseMemStatus of a status without VmRSS: no error")
	}
}

func TestEAN13(t *testing.T) {
	if got := ean13(400638133393); got != "4006381333931" {
		t.Fatalf("ean13 = %s, want 4006381333931 (the README's example)", got)
	}
}
