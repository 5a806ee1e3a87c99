package main

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// runtimeMetric reads a gauge a running serve reports on /metrics.
func runtimeMetric(t *testing.T, p *proc, name string) float64 {
	t.Helper()
	resp, err := http.Get(p.URL + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s %q: %v", name, v, err)
			}
			return f
		}
	}
	t.Fatalf("GET /metrics = %d without %s (%v)", resp.StatusCode, name, sc.Err())
	return 0
}

// serve sets the Go runtime's memory limit to --memory-limit, and leaves
// the runtime's own (GOMEMLIMIT) without it; GOGC is the runtime's in both.
func TestServeMemoryLimit(t *testing.T) {
	t.Run("flag", func(t *testing.T) {
		p := startServeEnv(t, t.TempDir(), []string{"GOGC=", "GOMEMLIMIT=200MiB"}, "--memory-limit", "300MiB")
		if got := runtimeMetric(t, p, "go_gc_gomemlimit_bytes"); got != 300<<20 {
			t.Fatalf("go_gc_gomemlimit_bytes = %.0f, want --memory-limit's %d", got, 300<<20)
		}
		if got := runtimeMetric(t, p, "go_gc_gogc_percent"); got != 100 {
			t.Fatalf("go_gc_gogc_percent = %.0f, want Go's default 100", got)
		}
	})
	t.Run("runtime", func(t *testing.T) {
		p := startServeEnv(t, t.TempDir(), []string{"GOGC=120", "GOMEMLIMIT=200MiB"})
		if got := runtimeMetric(t, p, "go_gc_gomemlimit_bytes"); got != 200<<20 {
			t.Fatalf("go_gc_gomemlimit_bytes = %.0f, want GOMEMLIMIT's %d", got, 200<<20)
		}
		if got := runtimeMetric(t, p, "go_gc_gogc_percent"); got != 120 {
			t.Fatalf("go_gc_gogc_percent = %.0f, want GOGC's 120", got)
		}
	})
	t.Run("variable", func(t *testing.T) {
		env := map[string]string{"STORELINK_MEMORY_LIMIT": "1GiB"}
		c, err := parseConfig("serve", nil, func(k string) string { return env[k] }, io.Discard)
		if err != nil || c.MemoryLimit != 1<<30 {
			t.Fatalf("STORELINK_MEMORY_LIMIT=1GiB: %+v, %v", c, err)
		}
		env["STORELINK_MEMORY_LIMIT"] = "lots"
		if _, err := parseConfig("serve", nil, func(k string) string { return env[k] }, io.Discard); !isUsage(err) {
			t.Fatalf("STORELINK_MEMORY_LIMIT=lots: %v, want a usage error", err)
		}
	})
}
