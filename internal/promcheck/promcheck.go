// Package promcheck checks PromQL queries (alert rules, dashboard panels)
// against what a server's GET /metrics shows, for the tests that keep
// deploy/ and the metrics telling the same story. It reads queries as text:
// it knows the selectors, label matchers and the functions and keywords
// the queries use, not all of PromQL.
package promcheck

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Exposition is a parsed GET /metrics: the type of each family, and for
// each series name (families, and _bucket, _sum, _count) the values seen
// of each label.
type Exposition struct {
	Types  map[string]string
	Series map[string]map[string]map[string]bool
}

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+\S+`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// Parse reads the text exposition format.
func Parse(text string) (Exposition, error) {
	e := Exposition{Types: map[string]string{}, Series: map[string]map[string]map[string]bool{}}
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			e.Types[f[2]] = f[3]
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			return e, fmt.Errorf("cannot read line %q", line)
		}
		labels := e.Series[m[1]]
		if labels == nil {
			labels = map[string]map[string]bool{}
			e.Series[m[1]] = labels
		}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			if labels[p[1]] == nil {
				labels[p[1]] = map[string]bool{}
			}
			labels[p[1]][strings.ReplaceAll(p[2], `\"`, `"`)] = true
		}
	}
	return e, nil
}

// Has tells whether the series name has a series with each of the
// label's values.
func (e Exposition) Has(name, label string, values ...string) bool {
	for _, v := range values {
		if !e.Series[name][label][v] {
			return false
		}
	}
	return true
}

// External are the series a query may use that storelink does not expose:
// Prometheus's own up for a scraped job, and the blackbox exporter's
// probe_success. A query must select them by job.
var External = []string{"up", "probe_success"}

var (
	selector = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	matcher  = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*$`)
	ident    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	// PromQL's functions and keywords that the queries may use.
	words = []string{
		"sum", "min", "max", "avg", "count", "topk", "bottomk", "quantile", "stddev", "group",
		"rate", "irate", "increase", "delta", "deriv", "histogram_quantile", "clamp_min", "clamp_max",
		"abs", "absent", "absent_over_time", "max_over_time", "min_over_time", "avg_over_time", "time", "vector", "scalar",
		"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset",
	}
)

// Check checks that expr names only series exp shows (or External ones
// selected by a job of jobs), selects on labels they have, with values
// they take (a regexp's every top-level alternative matching one; any
// HTTP status for a label code). It returns the series named and what is
// wrong, one line a problem.
func Check(expr string, exp Exposition, jobs []string) (names, problems []string) {
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for _, open := range []string{"(", "{", "["} {
		closing := map[string]string{"(": ")", "{": "}", "[": "]"}[open]
		if strings.Count(expr, open) != strings.Count(expr, closing) {
			fail("unbalanced %s%s", open, closing)
		}
	}
	for _, m := range selector.FindAllStringSubmatch(expr, -1) {
		name := m[1]
		for _, text := range strings.Split(m[2], ",") {
			if strings.TrimSpace(text) == "" {
				continue
			}
			mm := matcher.FindStringSubmatch(text)
			if mm == nil {
				fail("cannot read the matcher %q of %s", text, name)
				continue
			}
			label, op, value := mm[1], mm[2], mm[3]
			var domain []string
			switch {
			case label == "job": // set by Prometheus, for every series
				domain = jobs
			case slices.Contains(External, name):
				fail("%s{%s}: select it by job", name, label)
				continue
			default:
				values, ok := exp.Series[name][label]
				if !ok {
					fail("%s has no label %s in GET /metrics (labels: %v)", name, label, slices.Sorted(maps.Keys(exp.Series[name])))
					continue
				}
				domain = slices.Collect(maps.Keys(values))
				if label == "code" { // every HTTP status may come
					for c := 100; c < 600; c++ {
						domain = append(domain, strconv.Itoa(c))
					}
				}
			}
			alts := []string{regexp.QuoteMeta(value)}
			if op == "=~" || op == "!~" {
				alts = topAlternatives(value)
			}
			for _, alt := range alts {
				re, err := regexp.Compile("^(?:" + alt + ")$")
				if err != nil {
					fail("%s{%s}: %v", name, label, err)
				} else if !slices.ContainsFunc(domain, re.MatchString) {
					slices.Sort(domain)
					if len(domain) > 20 {
						domain = append(domain[:20], "…")
					}
					fail("%s{%s%s%q}: %q matches none of the values %v", name, label, op, value, alt, domain)
				}
			}
		}
	}
	// What is left without strings, matchers, ranges and grouping labels
	// is functions, keywords and series names.
	rest := regexp.MustCompile(`"(?:[^"\\]|\\.)*"`).ReplaceAllString(expr, " ")
	rest = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`).ReplaceAllString(rest, " ")
	rest = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`).ReplaceAllString(rest, " ")
	rest = regexp.MustCompile(`\b[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?\b`).ReplaceAllString(rest, " ")
	for _, id := range ident.FindAllString(rest, -1) {
		switch {
		case slices.Contains(words, id):
		case slices.Contains(External, id):
			names = append(names, id)
			if !strings.Contains(expr, id+`{job="`) {
				fail("%s must select a job Prometheus scrapes, as %s{job=\"...\"}", id, id)
			}
		default:
			names = append(names, id)
			if _, ok := exp.Series[id]; !ok {
				fail("%s is not in GET /metrics (nor a PromQL function or keyword this check knows)", id)
			}
		}
	}
	if len(names) == 0 {
		fail("no series named")
	}
	return names, problems
}

// topAlternatives splits a regexp at its top-level |, so that each
// alternative can be checked to match something.
func topAlternatives(re string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(re); i++ {
		switch re[i] {
		case '\\':
			i++
		case '(':
			depth++
		case ')':
			depth--
		case '|':
			if depth == 0 {
				out = append(out, re[start:i])
				start = i + 1
			}
		}
	}
	return append(out, re[start:])
}
