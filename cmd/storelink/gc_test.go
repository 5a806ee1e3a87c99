package main

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
)

// gogcPercent reads the GC percent a running serve reports on /metrics.
func gogcPercent(t *testing.T, p *proc) string {
	t.Helper()
	resp, err := http.Get(p.URL + "/metrics")
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
		if got := gogcPercent(t, p); got != "400" {
			t.Fatalf("go_gc_gogc_percent = %s, want 400 (serve's setting while no large file is in memory)", got)
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
