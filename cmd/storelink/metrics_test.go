package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestServeMetricsListener: with --metrics-addr, serve answers GET /metrics
// there without credentials and nothing else; on --addr, /metrics needs
// the admin token (401 without it or with a wrong one), unless serve runs
// with --public-metrics. Neither the token nor a wrong one is ever logged.
// SIGTERM stops both listeners and exits 0.
func TestServeMetricsListener(t *testing.T) {
	t.Parallel()
	p := startServe(t, t.TempDir(), "--demo", "--metrics-addr", "127.0.0.1:0")
	if p.MetricsURL == "" || p.AdminToken == "" {
		t.Fatalf("serve with --metrics-addr printed no metrics address, or no admin token was generated:\n%s", p.stdout)
	}
	base := strings.TrimSuffix(p.MetricsURL, "/metrics")
	if base == p.URL {
		t.Fatalf("the metrics listener is the API's: %s", p.MetricsURL)
	}
	wrong := "sla_" + strings.Repeat("0", 64)
	get := func(url, token string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	code, body := get(p.MetricsURL, "")
	if code != http.StatusOK || !strings.Contains(body, "storelink_webhook_pending_deliveries") || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("GET %s without credentials = %d, want 200 with storelink's and Go's metrics:\n%.300s", p.MetricsURL, code, body)
	}
	for _, path := range []string{"/", "/healthz", "/readyz", "/openapi.yaml", "/dashboard/", "/admin/partners", "/orders"} {
		if code, body := get(base+path, p.AdminToken); code != http.StatusNotFound || strings.Contains(body, "storelink_") {
			t.Errorf("GET %s on the metrics listener = %d %.200s, want 404", path, code, body)
		}
	}

	for _, c := range []struct {
		what, token string
		want        int
	}{{"no token", "", 401}, {"a wrong token", wrong, 401}, {"the admin token", p.AdminToken, 200}} {
		code, body := get(p.URL+"/metrics", c.token)
		if code != c.want || (code == 200) != strings.Contains(body, "storelink_upload_queue_depth") {
			t.Errorf("GET /metrics on --addr with %s = %d %.200s, want %d", c.what, code, body, c.want)
		}
	}

	public := startServe(t, t.TempDir(), "--public-metrics")
	if code, body := get(public.URL+"/metrics", ""); code != http.StatusOK || !strings.Contains(body, "storelink_upload_queue_depth") {
		t.Errorf("GET /metrics on --addr of a serve with --public-metrics, no token = %d %.200s, want 200", code, body)
	}
	if public.MetricsURL != "" {
		t.Errorf("a serve without --metrics-addr printed a metrics address %s", public.MetricsURL)
	}

	if err := p.Stop(); err != nil {
		t.Errorf("SIGTERM: %v\n%s", err, p.stderr)
	}
	log := p.stdout.String() + p.stderr.String()
	for what, secret := range map[string]string{"admin token": p.AdminToken, "wrong token": wrong} {
		if strings.Contains(log, secret) || strings.Contains(log, secret[4:20]) {
			t.Errorf("the %s is in serve's output:\n%s", what, log)
		}
	}
	if !strings.Contains(p.stderr.String(), `"listener":"metrics","method":"GET","path":"/metrics","status":200`) {
		t.Errorf("no request log line of the metrics listener's scrape:\n%s", p.stderr)
	}
}
