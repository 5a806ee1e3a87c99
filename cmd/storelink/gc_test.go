package main

import (
	"bufio"
	"strconv"
	"strings"
	"testing"
)

// gogcPercent reads the GC percent a running serve reports on /metrics.
func gogcPercent(t *testing.T, p *proc) string {
	t.Helper()
	resp, err := p.getMetrics(nil)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_gc_gogc_percent "); ok {
			return v
		}
	}
	t.Fatalf("GET /metrics = %d without go_gc_gogc_percent (%v)", resp.StatusCode, sc.Err())
	return ""
}

// serve collects garbage at its own setting (gcmode) unless the operator
// set GOGC, which it then leaves alone.
func TestServeGCSetting(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		t.Setenv("GOGC", "")
		p := startServe(t, t.TempDir())
		// 400 while the heap is small; lower, down to 50, while what the
		// last collection found live was more than 12 MB, as it may be
		// right after start-up on a busy machine. Go's own default, 100,
		// would say serve set nothing.
		got := gogcPercent(t, p)
		n, err := strconv.Atoi(got)
		if err != nil || n < 50 || n > 400 || n == 100 {
			t.Fatalf("go_gc_gogc_percent = %s, want serve's setting: 400 while no large file is in memory, or between 50 and 400 (not Go's 100) as the heap grows", got)
		}
	})
	t.Run("operator", func(t *testing.T) {
		t.Setenv("GOGC", "120")
		p := startServe(t, t.TempDir())
		if got := gogcPercent(t, p); got != "120" {
			t.Fatalf("go_gc_gogc_percent = %s, want the operator's 120", got)
		}
	})
}
