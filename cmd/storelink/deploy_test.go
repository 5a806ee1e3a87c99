package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"storelink/internal/promcheck"
)

const (
	grafanaDashboard  = "../../deploy/grafana/storelink.json"
	alertRulesFile    = "../../deploy/alerts.yml"
	composePrometheus = "../../deploy/compose/prometheus.yml"
)

// TestDeployMetricsExist: every series the Grafana dashboard and the alert
// rules query exists in a real serve's GET /metrics, with the labels they
// select on and values those labels take. The serve is made to count
// something under every label value first: an upload applied with a
// rejected row and one rejected, order calls, and deliveries that succeed,
// are retried, fail and find their endpoint gone. Prometheus's up and the
// blackbox exporter's probe_success are not storelink's: they must select
// a job that deploy/compose/prometheus.yml scrapes. The serve is scraped
// on a --metrics-addr listener, as compose's Prometheus scrapes it.
func TestDeployMetricsExist(t *testing.T) {
	t.Parallel()
	p := startServe(t, t.TempDir(), "--demo", "--webhook-retry-schedule", "10ms", "--webhook-timeout", "2s", "--metrics-addr", "127.0.0.1:0")
	exerciseServe(t, p)
	exp := scrapeUntil(t, p, "storelink_webhook_attempts_total", "outcome", "succeeded", "retry", "failed", "gone")
	jobs := composeJobs(t)

	exprs := dashboardExprs(t)
	if len(exprs) < 10 {
		t.Fatalf("%s has %d queries; want one per panel", grafanaDashboard, len(exprs))
	}
	for _, r := range deployAlerts(t) {
		exprs = append(exprs, promExpr{where: "alert " + r.Alert, expr: r.Expr})
	}
	used := map[string]bool{}
	for _, e := range exprs {
		names, problems := promcheck.Check(e.expr, exp, jobs)
		for _, p := range problems {
			t.Errorf("%s: %s: %s", e.where, e.expr, p)
		}
		for _, name := range names {
			used[name] = true
		}
	}
	// What the dashboard is for: each of these is queried somewhere.
	for _, want := range []string{
		"storelink_upload_requests_total", "storelink_uploads_processed_total", "storelink_uploads_oldest_waiting_seconds",
		"storelink_upload_processing_seconds_bucket", "storelink_feed_rows_total", "storelink_webhook_attempts_total",
		"storelink_webhook_pending_deliveries", "storelink_webhook_attempt_seconds_bucket", "storelink_http_requests_total",
	} {
		if !used[want] {
			t.Errorf("neither the dashboard nor the alert rules query %s", want)
		}
	}
	t.Logf("%d queries checked, naming %d series", len(exprs), len(used))
}

// exerciseServe makes p count something under every label value the
// dashboard and the alerts select.
func exerciseServe(t *testing.T, p *proc) {
	t.Helper()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(ok.Close)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	t.Cleanup(failing.Close)
	gone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusGone) }))
	t.Cleanup(gone.Close)
	pointDemoEndpoint(t, p, ok.URL)
	for _, url := range []string{failing.URL, gone.URL} {
		crashAdmin(t, p, "POST", "/admin/clients/"+p.ClientID+"/webhooks", map[string]any{"url": url}, 201, nil)
	}

	const ean = "4006381333931"
	for _, f := range []struct{ body, status string }{
		{"store;ean;article_number;quantity;price\nS1;" + ean + ";SKU-1;10;9.99\nS1;not-an-ean;SKU-2;1;1.00\n", "applied"},
		{"store;ean\nS1;" + ean + "\n", "rejected"},
	} {
		id := mustUpload(t, p, "feed.csv", []byte(f.body))
		if u := p.waitUpload(t, id, 10*time.Second); u["status"] != f.status {
			t.Fatalf("upload %q: %v, want %s", f.body, u, f.status)
		}
	}
	var o struct {
		ID string `json:"order_id"`
	}
	crashAdmin(t, p, "POST", "/orders", map[string]any{"order_number": "DEPLOY-1", "client_id": p.ClientID,
		"items": []map[string]string{{"ean": ean, "marketplace_article_number": "MP-1"}}}, 201, &o)
	crashAdmin(t, p, "POST", "/orders/"+o.ID+"/fulfil", map[string]any{}, 200, nil)
	crashAdmin(t, p, "POST", "/orders/"+o.ID+"/fulfil", map[string]any{}, 409, nil)
	crashAdmin(t, p, "GET", "/orders/"+o.ID, nil, 200, nil)
}

// scrapeUntil reads p's GET /metrics until the series name has every one
// of the label's values, for at most 10s.
func scrapeUntil(t *testing.T, p *proc, name, label string, values ...string) promcheck.Exposition {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := p.getMetrics(nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET /metrics = %d %s", resp.StatusCode, b)
		}
		exp, err := promcheck.Parse(string(b))
		if err != nil {
			t.Fatalf("GET /metrics: %v", err)
		}
		if exp.Has(name, label, values...) {
			return exp
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /metrics: after 10s %s has no series with %s in each of %v", name, label, values)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// promExpr is one PromQL query and where it is.
type promExpr struct{ where, expr string }

// dashboardExprs reads every query of the Grafana dashboard, in panels and
// in the panels of collapsed rows.
func dashboardExprs(t *testing.T) []promExpr {
	t.Helper()
	b, err := os.ReadFile(grafanaDashboard)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels     []json.RawMessage `json:"panels"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	}
	var dash struct {
		UID    string  `json:"uid"`
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", grafanaDashboard, err)
	}
	var out []promExpr
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type == "row" {
				var inner []panel
				for _, raw := range p.Panels {
					var q panel
					if err := json.Unmarshal(raw, &q); err != nil {
						t.Fatalf("%s: row %q: %v", grafanaDashboard, p.Title, err)
					}
					inner = append(inner, q)
				}
				walk(inner)
				continue
			}
			if len(p.Targets) == 0 || p.Datasource == nil || p.Datasource.UID != "prometheus" {
				t.Errorf("%s: panel %q has no query or not the provisioned data source (uid prometheus)", grafanaDashboard, p.Title)
			}
			for _, q := range p.Targets {
				out = append(out, promExpr{where: fmt.Sprintf("panel %q", p.Title), expr: q.Expr})
			}
		}
	}
	walk(dash.Panels)
	return out
}

// deployAlerts reads the alert rules.
func deployAlerts(t *testing.T) []struct{ Alert, Expr string } {
	t.Helper()
	b, err := os.ReadFile(alertRulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string } `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatalf("%s: %v", alertRulesFile, err)
	}
	var rules []struct{ Alert, Expr string }
	for _, g := range file.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s has no rule", alertRulesFile)
	}
	return rules
}

// composeJobs reads the job names of compose.yaml's Prometheus.
func composeJobs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(composePrometheus)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName string `yaml:"job_name"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%s: %v", composePrometheus, err)
	}
	var jobs []string
	for _, sc := range cfg.ScrapeConfigs {
		jobs = append(jobs, sc.JobName)
	}
	return jobs
}

// composeTargets reads the targets of a job of compose.yaml's Prometheus.
func composeTargets(t *testing.T, job string) []string {
	t.Helper()
	b, err := os.ReadFile(composePrometheus)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%s: %v", composePrometheus, err)
	}
	var out []string
	for _, sc := range cfg.ScrapeConfigs {
		if sc.JobName == job {
			for _, s := range sc.StaticConfigs {
				out = append(out, s.Targets...)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestComposeFile: compose.yaml runs two storelink processes on its
// PostgreSQL with one secret key and one admin token, each with a metrics
// listener that Prometheus scrapes and no port publishes, and mounts into
// Prometheus and Grafana files that exist: the configuration whose jobs the
// queries use, the alert rules, the dashboard and its provisioning.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]struct {
			Build       string            `yaml:"build"`
			Image       string            `yaml:"image"`
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
			Ports       []string          `yaml:"ports"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	var storelinks []string
	for name, s := range c.Services {
		if s.Build == "." {
			storelinks = append(storelinks, name)
		}
		for _, v := range s.Volumes {
			if src, _, _ := strings.Cut(v, ":"); strings.HasPrefix(src, "./") {
				if _, err := os.Stat("../../" + src); err != nil {
					t.Errorf("service %s mounts %s, which is not in the repository", name, src)
				}
			}
		}
	}
	slices.Sort(storelinks)
	if len(storelinks) != 2 {
		t.Fatalf("compose.yaml builds storelink for %v; want two processes", storelinks)
	}
	a, b2 := c.Services[storelinks[0]].Environment, c.Services[storelinks[1]].Environment
	for _, v := range []string{"STORELINK_DATABASE_URL", "STORELINK_SECRET_KEY", "STORELINK_ADMIN_TOKEN"} {
		if a[v] == "" || a[v] != b2[v] {
			t.Errorf("%s of %s and %s: %q and %q; want one and the same", v, storelinks[0], storelinks[1], a[v], b2[v])
		}
	}
	// Prometheus scrapes each process's metrics listener, whose port is
	// published nowhere.
	_, port, err := net.SplitHostPort(a["STORELINK_METRICS_ADDR"])
	if err != nil || a["STORELINK_METRICS_ADDR"] != b2["STORELINK_METRICS_ADDR"] {
		t.Errorf("STORELINK_METRICS_ADDR of %s and %s: %q and %q; want one HOST:PORT", storelinks[0], storelinks[1],
			a["STORELINK_METRICS_ADDR"], b2["STORELINK_METRICS_ADDR"])
	}
	var want []string
	for _, name := range storelinks {
		want = append(want, name+":"+port)
		for _, p := range c.Services[name].Ports {
			if strings.HasSuffix(p, ":"+port) {
				t.Errorf("service %s publishes the metrics port: %s", name, p)
			}
		}
	}
	if got := composeTargets(t, "storelink"); !slices.Equal(got, want) {
		t.Errorf("%s: job storelink scrapes %v; want the metrics listeners %v", composePrometheus, got, want)
	}
	if !strings.HasPrefix(a["STORELINK_DATABASE_URL"], "postgres://") {
		t.Errorf("STORELINK_DATABASE_URL %q is not PostgreSQL", a["STORELINK_DATABASE_URL"])
	}
	for service, want := range map[string][]string{
		"prometheus": {"./deploy/compose/prometheus.yml:", "./deploy/alerts.yml:/etc/prometheus/alerts.yml"},
		"grafana":    {"./deploy/grafana/provisioning:/etc/grafana/provisioning", "./deploy/grafana/storelink.json:"},
	} {
		for _, w := range want {
			if !slices.ContainsFunc(c.Services[service].Volumes, func(v string) bool { return strings.HasPrefix(v, w) }) {
				t.Errorf("service %s does not mount %s (volumes %v)", service, w, c.Services[service].Volumes)
			}
		}
	}
}
