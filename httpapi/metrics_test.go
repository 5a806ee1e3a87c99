package httpapi_test

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"storelink"
	"storelink/httpapi"
	"storelink/internal/promcheck"
)

const (
	metricsDocFile = "../docs/operations.md"
	promConfigFile = "../deploy/prometheus.yml"
	alertsFile     = "../deploy/alerts.yml"
)

// TestMetricsMatchDeployAndDocs runs a real server with the processor and
// the webhook deliverer, makes it produce every label value of its counters
// (uploads applied and rejected, rows applied and rejected, deliveries
// succeeded, retried, failed and gone), and checks that
//   - every storelink_ metric registered is in GET /metrics,
//   - docs/operations.md's Health, metrics and logs section lists exactly those metrics, with
//     their labels,
//   - deploy/alerts.yml uses only metrics, labels and label values that
//     GET /metrics shows, and jobs that deploy/prometheus.yml scrapes.
func TestMetricsMatchDeployAndDocs(t *testing.T) {
	a := newAPI(t, apiOptions{webhooks: &webhookOptions{schedule: []time.Duration{10 * time.Millisecond}}})
	exerciseMetrics(t, a)
	exp := waitExposition(t, a, "storelink_webhook_attempts_total", "outcome", "succeeded", "retry", "failed", "gone")
	registered := registeredMetrics(t, a.reg)

	t.Run("registered metrics are exposed", func(t *testing.T) {
		for _, name := range slices.Sorted(maps.Keys(registered)) {
			if _, ok := exp.Types[name]; !ok {
				t.Errorf("%s is registered but not in GET /metrics; exerciseMetrics must make it appear", name)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(exp.Types)) {
			if _, ok := registered[name]; strings.HasPrefix(name, "storelink_") && !ok {
				t.Errorf("%s is in GET /metrics but was not seen registered", name)
			}
		}
	})

	t.Run("docs/operations.md lists the metrics", func(t *testing.T) {
		documented := documentedMetrics(t)
		for _, name := range slices.Sorted(maps.Keys(registered)) {
			labels, ok := documented[name]
			switch {
			case !ok:
				t.Errorf("%s (labels %v) is exposed but not in docs/operations.md's Health, metrics and logs section", name, registered[name])
			case !slices.Equal(labels, registered[name]):
				t.Errorf("docs/operations.md documents %s with labels %v; the metric has %v", name, labels, registered[name])
			}
		}
		for _, name := range slices.Sorted(maps.Keys(documented)) {
			if _, ok := registered[name]; !ok {
				t.Errorf("docs/operations.md documents %s, which the server does not expose", name)
			}
		}
	})

	t.Run("alert rules", func(t *testing.T) {
		jobs := scrapeJobs(t)
		rules := alertRules(t)
		if len(rules) == 0 {
			t.Fatalf("%s has no alert rule", alertsFile)
		}
		for _, r := range rules {
			checkAlertExpr(t, r, exp, jobs)
		}
		// The alerts the operations docs promise.
		for _, want := range []string{
			`storelink_uploads_processed_total{status="rejected"}`,
			`storelink_webhook_attempts_total{outcome=~"failed|gone"}`,
			`storelink_webhook_attempts_total{outcome="retry"}`,
			`storelink_webhook_oldest_pending_seconds`,
			`storelink_upload_queue_depth`,
			`probe_success{job="storelink-readyz"}`,
		} {
			if !slices.ContainsFunc(rules, func(r alertRule) bool { return strings.Contains(r.Expr, want) }) {
				t.Errorf("no alert rule of %s uses %s", alertsFile, want)
			}
		}
	})
}

// exerciseMetrics makes the server count something under every label value:
// uploads applied (with a rejected row) and rejected, and one order event
// delivered to an endpoint that succeeds, one that always fails (a retry,
// then failed once the one-step schedule is spent) and one that answers 410.
func exerciseMetrics(t *testing.T, a *api) {
	t.Helper()
	putStock(a, "S1;"+ean1+";SKU-1;100;19.99;Dept 3")
	for _, f := range []struct {
		body   string
		status storelink.UploadStatus
	}{
		{"store;ean;article_number;quantity;price\nS1;" + ean2 + ";SKU-2;5;5.00\nS1;not-an-ean;SKU-3;5;5.00\n", storelink.UploadApplied},
		{"store;ean\nS1;" + ean2 + "\n", storelink.UploadRejected},
	} {
		resp, b := a.upload("feed.csv", []byte(f.body), nil)
		id := regexp.MustCompile(`"upload_id":"([^"]+)"`).FindSubmatch(b)
		if resp.StatusCode != 200 || id == nil {
			t.Fatalf("upload = %d %s", resp.StatusCode, b)
		}
		if u := a.waitUpload(string(id[1])); u.Status != f.status {
			t.Fatalf("upload of %q = %+v, want %s", f.body, u, f.status)
		}
	}

	for _, status := range []int{http.StatusNoContent, http.StatusInternalServerError, http.StatusGone} {
		rec := newReceiver(t, func(*hit, int, http.ResponseWriter) int { return status })
		a.endpointAt(rec.URL)
	}
	a.placeOrder("METRICS-1")
}

// waitExposition reads GET /metrics until the series name has every one of
// the label's values, for at most 10s.
func waitExposition(t *testing.T, a *api, name, label string, values ...string) promcheck.Exposition {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, b := a.do("GET", "/metrics", nil, map[string]string{"Authorization": "Bearer " + adminToken})
		if resp.StatusCode != 200 {
			t.Fatalf("GET /metrics = %d %s", resp.StatusCode, b)
		}
		e, err := promcheck.Parse(string(b))
		if err != nil {
			t.Fatalf("GET /metrics: %v", err)
		}
		if e.Has(name, label, values...) {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /metrics: after 10s %s has no series with %s in each of %v:\n%s", name, label, values, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// registeredMetrics lists the storelink_ metrics registered on reg, with
// their variable labels sorted, whether or not they have a series yet.
func registeredMetrics(t *testing.T, reg *prometheus.Registry) map[string][]string {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() { reg.Describe(ch); close(ch) }()
	descRE := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	out := map[string][]string{}
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		if !strings.HasPrefix(m[1], "storelink_") {
			continue
		}
		var labels []string
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(l), "c("), ")"); l != "" {
				labels = append(labels, l)
			}
		}
		slices.Sort(labels)
		out[m[1]] = labels
	}
	if len(out) == 0 {
		t.Fatal("no storelink_ metric registered")
	}
	return out
}

// documentedMetrics lists the metrics docs/operations.md's Health, metrics and logs section names, as
// `name` or `name{label,...}`, with their labels sorted.
func documentedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(metricsDocFile)
	if err != nil {
		t.Fatal(err)
	}
	_, ops, ok := strings.Cut(string(b), "\n## Health, metrics and logs\n")
	if !ok {
		t.Fatalf("%s has no section Health, metrics and logs", metricsDocFile)
	}
	ops, _, _ = strings.Cut(ops, "\n## ")
	out := map[string][]string{}
	for _, m := range regexp.MustCompile("`(storelink_[a-z0-9_]+)(?:\\{([^}]*)\\})?`").FindAllStringSubmatch(ops, -1) {
		labels := []string{}
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
		slices.Sort(labels)
		if prev, dup := out[m[1]]; dup && !slices.Equal(prev, labels) {
			t.Errorf("docs/operations.md documents %s twice, with labels %v and %v", m[1], prev, labels)
		}
		out[m[1]] = labels
	}
	return out
}

// scrapeJobs reads deploy/prometheus.yml: it must load deploy/alerts.yml and
// scrape storelink at /metrics. It returns the job names.
func scrapeJobs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(promConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%s: %v", promConfigFile, err)
	}
	if !slices.Contains(cfg.RuleFiles, "alerts.yml") {
		t.Errorf("%s: rule_files %v does not load alerts.yml", promConfigFile, cfg.RuleFiles)
	}
	var jobs []string
	metrics := false
	for _, sc := range cfg.ScrapeConfigs {
		if sc.JobName == "" || slices.Contains(jobs, sc.JobName) {
			t.Errorf("%s: job_name %q is empty or repeated", promConfigFile, sc.JobName)
		}
		jobs = append(jobs, sc.JobName)
		n := 0
		for _, s := range sc.StaticConfigs {
			n += len(s.Targets)
		}
		if n == 0 {
			t.Errorf("%s: job %s has no target", promConfigFile, sc.JobName)
		}
		if sc.JobName == "storelink" {
			metrics = sc.MetricsPath == "/metrics" || sc.MetricsPath == ""
		}
	}
	if !metrics {
		t.Errorf("%s: no job storelink scraping /metrics", promConfigFile)
	}
	return jobs
}

// alertRule is one rule of deploy/alerts.yml.
type alertRule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// alertRules reads deploy/alerts.yml in Prometheus's rule file format and
// checks the shape of each rule.
func alertRules(t *testing.T) []alertRule {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string      `yaml:"name"`
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	duration := regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)
	var rules []alertRule
	names := map[string]bool{}
	for _, g := range file.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("%s: group %q has no name or no rules", alertsFile, g.Name)
		}
		for _, r := range g.Rules {
			switch {
			case r.Alert == "" || r.Record != "":
				t.Errorf("%s: group %s: a rule that is not an alert: %+v", alertsFile, g.Name, r)
			case names[r.Alert]:
				t.Errorf("%s: alert %s is defined twice", alertsFile, r.Alert)
			case strings.TrimSpace(r.Expr) == "":
				t.Errorf("%s: alert %s has no expr", alertsFile, r.Alert)
			case r.For != "" && !duration.MatchString(r.For):
				t.Errorf("%s: alert %s: for %q is not a duration", alertsFile, r.Alert, r.For)
			case r.Labels["severity"] != "critical" && r.Labels["severity"] != "warning":
				t.Errorf("%s: alert %s: severity %q, want critical or warning", alertsFile, r.Alert, r.Labels["severity"])
			case r.Annotations["summary"] == "" || r.Annotations["description"] == "":
				t.Errorf("%s: alert %s needs a summary and a description", alertsFile, r.Alert)
			}
			names[r.Alert] = true
			rules = append(rules, r)
		}
	}
	return rules
}

// checkAlertExpr checks that an alert's expression names only metrics GET
// /metrics shows (or Prometheus's up and the blackbox exporter's
// probe_success on a scraped job), with labels those metrics have and
// values they take.
func checkAlertExpr(t *testing.T, r alertRule, exp promcheck.Exposition, jobs []string) {
	t.Helper()
	_, problems := promcheck.Check(r.Expr, exp, jobs)
	for _, p := range problems {
		t.Errorf("alert %s: %s", r.Alert, p)
	}
}

// Order calls are counted by action and outcome, and HTTP requests by
// route pattern, method and code: a create, its replay with the same
// idempotency key, a fulfil of a fulfilled order (409), a create for an
// unknown store (refused), and a made-up method.
func TestOrderCallMetrics(t *testing.T) {
	a := newAPI(t, apiOptions{})
	putStock(a, "S1;"+ean1+";SKU-1;100;19.99;Dept 3")
	admin := map[string]string{"Authorization": "Bearer " + adminToken, "Idempotency-Key": "k-1", "Content-Type": "application/json"}
	body := newOrderBody(a.ClientID, "M-1", "S1", ean1)
	for range 2 {
		if resp, b := a.do("POST", "/orders", strings.NewReader(body), admin); resp.StatusCode != 201 {
			t.Fatalf("create = %d %s", resp.StatusCode, b)
		}
	}
	resp, b := a.do("GET", "/orders?client_id="+a.ClientID, nil, map[string]string{"Authorization": "Bearer " + adminToken})
	id := regexp.MustCompile(`"order_id":"([^"]+)"`).FindSubmatch(b)
	if resp.StatusCode != 200 || id == nil {
		t.Fatalf("orders = %d %s", resp.StatusCode, b)
	}
	a.admin("POST", "/orders/"+string(id[1])+"/fulfil", `{}`, 200, nil)
	a.admin("POST", "/orders/"+string(id[1])+"/fulfil", `{}`, 409, nil)
	a.admin("POST", "/orders", newOrderBody(a.ClientID, "M-2", "S9", ean1), 422, nil)
	a.do("BREW", "/orders", nil, nil)

	resp, b = a.do("GET", "/metrics", nil, map[string]string{"Authorization": "Bearer " + adminToken})
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics = %d", resp.StatusCode)
	}
	for _, want := range []string{
		`storelink_order_calls_total{action="create",outcome="succeeded"} 1`,
		`storelink_order_calls_total{action="create",outcome="replayed"} 1`,
		`storelink_order_calls_total{action="create",outcome="refused"} 1`,
		`storelink_order_calls_total{action="fulfil",outcome="succeeded"} 1`,
		`storelink_order_calls_total{action="fulfil",outcome="conflict"} 1`,
		`storelink_http_requests_total{code="201",method="POST",route="/orders"} 2`,
		`storelink_http_requests_total{code="409",method="POST",route="/orders/{order_id}/fulfil"} 1`,
		`storelink_http_requests_total{code="405",method="other",route="none"} 1`,
	} {
		if !strings.Contains(string(b), want+"\n") {
			t.Errorf("GET /metrics lacks %s", want)
		}
	}
}

// GET /metrics of the API needs the admin token, checked as the operator
// API's: none or a wrong one is a 401 problem that says how to scrape
// without it, and wrong ones count towards the failed-login limit. With
// PublicMetrics anyone reads it.
func TestMetricsNeedAdminToken(t *testing.T) {
	a := newAPI(t, apiOptions{authLimit: httpapi.NewAuthLimiter(3)})
	for _, c := range []struct {
		what   string
		header map[string]string
		want   int
	}{
		{"no token", nil, 401},
		{"a wrong token", map[string]string{"Authorization": "Bearer " + strings.Repeat("x", 40)}, 401},
		{"an API key", map[string]string{"x-api-key": a.APIKey}, 401},
		{"the admin token", map[string]string{"Authorization": "Bearer " + adminToken}, 200},
	} {
		resp, b := a.do("GET", "/metrics", nil, c.header)
		if resp.StatusCode != c.want {
			t.Fatalf("%s: GET /metrics = %d %s, want %d", c.what, resp.StatusCode, b, c.want)
		}
		if c.want == 200 {
			if !strings.Contains(string(b), "storelink_http_requests_total{") {
				t.Errorf("%s: GET /metrics lacks storelink_http_requests_total:\n%s", c.what, b)
			}
			continue
		}
		p := problem(t, resp, b, c.want)
		if p.Type != "/problems/unauthorized" || !strings.Contains(p.Detail, "--metrics-addr") ||
			resp.Header.Get("WWW-Authenticate") != `Bearer realm="storelink-admin"` {
			t.Errorf("%s: %s %+v (WWW-Authenticate %q); want an unauthorized problem naming --metrics-addr",
				c.what, resp.Status, p, resp.Header.Get("WWW-Authenticate"))
		}
		if strings.Contains(string(b), "storelink_") {
			t.Errorf("%s: the 401 shows metrics: %s", c.what, b)
		}
	}
	// Three wrong tokens from one address empty its bucket: the fourth try
	// is refused, the right token too.
	for range 2 {
		a.do("GET", "/metrics", nil, map[string]string{"Authorization": "Bearer " + strings.Repeat("y", 40)})
	}
	if resp, b := a.do("GET", "/metrics", nil, map[string]string{"Authorization": "Bearer " + adminToken}); resp.StatusCode != 429 ||
		resp.Header.Get("Retry-After") == "" {
		t.Errorf("GET /metrics with the token after 3 wrong ones = %d %s, want 429 with Retry-After", resp.StatusCode, b)
	}

	public := newAPI(t, apiOptions{publicMetrics: true})
	if resp, b := public.do("GET", "/metrics", nil, nil); resp.StatusCode != 200 || !strings.Contains(string(b), "storelink_") {
		t.Errorf("with PublicMetrics, GET /metrics without a token = %d %s, want 200 and the metrics", resp.StatusCode, short(b))
	}
}

// MetricsHandler, the listener of its own, serves GET (and HEAD) /metrics
// without credentials and nothing else: every other path of the API is a
// 404 problem there, another method on /metrics 405. Its requests are
// counted as the API's.
func TestMetricsHandlerServesOnlyMetrics(t *testing.T) {
	a := newAPI(t, apiOptions{})
	srv := httptest.NewServer(a.srv.MetricsHandler())
	t.Cleanup(srv.Close)
	get := func(method, path string, header map[string]string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, b := get("GET", "/metrics", nil)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") ||
		!strings.Contains(string(b), "storelink_http_requests_total{") {
		t.Fatalf("GET /metrics without credentials = %d %q %s, want 200 and the metrics", resp.StatusCode, resp.Header.Get("Content-Type"), short(b))
	}
	if resp, _ := get("HEAD", "/metrics", nil); resp.StatusCode != 200 {
		t.Errorf("HEAD /metrics = %d, want 200", resp.StatusCode)
	}
	admin := map[string]string{"Authorization": "Bearer " + adminToken}
	for _, path := range []string{"/", "/healthz", "/readyz", "/openapi.yaml", "/admin/partners", "/orders", "/dashboard/",
		"/stock/" + a.ClientID + "/uploads", "/metrics/", "/problems/not_found"} {
		resp, b := get("GET", path, admin)
		if p := problem(t, resp, b, 404); p.Type != "/problems/not_found" {
			t.Errorf("GET %s on the metrics listener = %+v, want a not_found problem", path, p)
		}
	}
	resp, b = get("POST", "/metrics", admin)
	if problem(t, resp, b, 405); !strings.Contains(resp.Header.Get("Allow"), "GET") {
		t.Errorf("POST /metrics: Allow %q, want GET", resp.Header.Get("Allow"))
	}
	_, b = get("GET", "/metrics", nil)
	if !strings.Contains(string(b), `storelink_http_requests_total{code="404",method="GET",route="none"}`) ||
		!strings.Contains(string(b), `storelink_http_requests_total{code="200",method="GET",route="/metrics"}`) {
		t.Errorf("the metrics listener's requests are not counted:\n%s", grep(b, "storelink_http_requests_total"))
	}
}

// short is the start of b, for a message.
func short(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// grep is the lines of b holding sub.
func grep(b []byte, sub string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Each scrape runs the database gauges' queries on the pool the partners'
// requests share, so at most httpapi.MaxMetricsScrapes scrapes are
// gathered at once on each listener, whoever may reach it (--public-metrics,
// or a --metrics-addr left open): one more is a 503 problem with
// Retry-After at once, and the scrapes in flight are answered.
func TestMetricsScrapesBounded(t *testing.T) {
	for _, c := range []struct {
		what string
		url  func(a *api) string
	}{
		{"the API's listener with PublicMetrics", func(a *api) string { return a.URL }},
		{"the metrics listener", func(a *api) string {
			srv := httptest.NewServer(a.srv.MetricsHandler())
			t.Cleanup(srv.Close)
			return srv.URL
		}},
	} {
		t.Run(c.what, func(t *testing.T) {
			a := newAPI(t, apiOptions{publicMetrics: true})
			entered, release := make(chan struct{}, 64), make(chan struct{})
			a.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "test_slow_gauge", Help: "A gauge whose gathering waits."},
				func() float64 {
					entered <- struct{}{}
					select {
					case <-release:
					case <-time.After(20 * time.Second):
					}
					return 1
				}))
			var once sync.Once
			free := func() { once.Do(func() { close(release) }) }
			t.Cleanup(free)
			base := c.url(a)
			type answer struct {
				resp *http.Response
				body []byte
				err  error
			}
			const extra = 3
			answers := make(chan answer, httpapi.MaxMetricsScrapes+extra)
			for range httpapi.MaxMetricsScrapes + extra {
				go func() {
					cl := &http.Client{Timeout: 30 * time.Second}
					resp, err := cl.Get(base + "/metrics")
					if err != nil {
						answers <- answer{err: err}
						return
					}
					defer resp.Body.Close()
					b, err := io.ReadAll(resp.Body)
					answers <- answer{resp, b, err}
				}()
			}
			deadline := time.After(10 * time.Second)
			for i := range extra {
				select {
				case ans := <-answers:
					if ans.err != nil {
						t.Fatalf("GET /metrics: %v", ans.err)
					}
					p := problem(t, ans.resp, ans.body, 503)
					if p.Type != "/problems/unavailable" || ans.resp.Header.Get("Retry-After") == "" || !strings.Contains(p.Detail, "scrape") {
						t.Errorf("scrape beyond the bound: %+v (Retry-After %q); want an unavailable problem about scrapes with Retry-After",
							p, ans.resp.Header.Get("Retry-After"))
					}
				case <-deadline:
					t.Fatalf("%d scrapes at once: after 10 s only %d of the %d beyond the first %d were answered; %d are being gathered",
						httpapi.MaxMetricsScrapes+extra, i, extra, httpapi.MaxMetricsScrapes, len(entered))
				}
			}
			if n := len(entered); n > httpapi.MaxMetricsScrapes {
				t.Errorf("%d scrapes gathered at once, want at most %d", n, httpapi.MaxMetricsScrapes)
			}
			free()
			for range httpapi.MaxMetricsScrapes {
				select {
				case ans := <-answers:
					if ans.err != nil || ans.resp.StatusCode != 200 || !strings.Contains(string(ans.body), "test_slow_gauge 1") {
						t.Errorf("a scrape within the bound: %v %v %s, want 200 and the metrics", ans.err, ans.resp, short(ans.body))
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the scrapes within the bound were not answered within 10 s of the gauge's release")
				}
			}
		})
	}
}
