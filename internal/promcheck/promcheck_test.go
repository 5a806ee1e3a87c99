package promcheck

import (
	"slices"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	exp, err := Parse(`# TYPE storelink_attempts_total counter
storelink_attempts_total{outcome="failed"} 1
storelink_attempts_total{outcome="gone"} 2
storelink_requests_total{code="200",route="/x"} 3
`)
	if err != nil {
		t.Fatal(err)
	}
	if exp.Types["storelink_attempts_total"] != "counter" || !exp.Has("storelink_attempts_total", "outcome", "failed", "gone") {
		t.Fatalf("parsed %+v", exp)
	}
	jobs := []string{"storelink", "storelink-readyz"}
	for _, c := range []struct {
		expr  string
		names []string
		wrong string // a part of the one problem, or "" for none
	}{
		{`sum by (outcome) (rate(storelink_attempts_total{outcome=~"failed|gone"}[5m])) > 0`, []string{"storelink_attempts_total"}, ""},
		{`storelink_requests_total{code=~"5.."} / storelink_requests_total`, []string{"storelink_requests_total", "storelink_requests_total"}, ""},
		{`probe_success{job="storelink-readyz"} == 0`, []string{"probe_success"}, ""},
		{`storelink_attempts_total{outcome=~"failed|gonne"}`, []string{"storelink_attempts_total"}, `"gonne" matches none`},
		{`storelink_attempts_total{store="S1"}`, []string{"storelink_attempts_total"}, "has no label store"},
		{`storelink_attempt_total`, []string{"storelink_attempt_total"}, "not in GET /metrics"},
		{`probe_success == 0`, []string{"probe_success"}, "must select a job"},
		{`up{job="other"}`, []string{"up"}, `"other" matches none`},
		{`sum(rate(storelink_attempts_total[5m])`, []string{"storelink_attempts_total"}, "unbalanced ()"},
	} {
		names, problems := Check(c.expr, exp, jobs)
		if !slices.Equal(names, c.names) {
			t.Errorf("%s: names %v, want %v", c.expr, names, c.names)
		}
		switch {
		case c.wrong == "" && len(problems) > 0:
			t.Errorf("%s: problems %q, want none", c.expr, problems)
		case c.wrong != "" && (len(problems) != 1 || !strings.Contains(problems[0], c.wrong)):
			t.Errorf("%s: problems %q, want one saying %q", c.expr, problems, c.wrong)
		}
	}
}
