package httpapi_test

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"storelink"
)

const (
	readmeFile     = "../README.md"
	promConfigFile = "../deploy/prometheus.yml"
	alertsFile     = "../deploy/alerts.yml"
)

// externalMetrics are the series deploy/alerts.yml may use that storelink
// does not expose: Prometheus's own up, and the blackbox exporter's
// probe_success for /readyz. Each must name a job of deploy/prometheus.yml.
var externalMetrics = []string{"up", "probe_success"}

// TestMetricsMatchDeployAndREADME runs a real server with the processor and
// the webhook deliverer, makes it produce every label value of its counters
// (uploads applied and rejected, rows applied and rejected, deliveries
// succeeded, retried, failed and gone), and checks that
//   - every storelink_ metric registered is in GET /metrics,
//   - README.md's Operations section lists exactly those metrics, with
//     their labels,
//   - deploy/alerts.yml uses only metrics, labels and label values that
//     GET /metrics shows, and jobs that deploy/prometheus.yml scrapes.
func TestMetricsMatchDeployAndREADME(t *testing.T) {
	a := newAPI(t, apiOptions{webhooks: &webhookOptions{schedule: []time.Duration{10 * time.Millisecond}}})
	exerciseMetrics(t, a)
	exp := waitExposition(t, a, "storelink_webhook_attempts_total", "outcome", "succeeded", "retry", "failed", "gone")
	registered := registeredMetrics(t, a.reg)

	t.Run("registered metrics are exposed", func(t *testing.T) {
		for _, name := range slices.Sorted(maps.Keys(registered)) {
			if _, ok := exp.types[name]; !ok {
				t.Errorf("%s is registered but not in GET /metrics; exerciseMetrics must make it appear", name)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(exp.types)) {
			if _, ok := registered[name]; strings.HasPrefix(name, "storelink_") && !ok {
				t.Errorf("%s is in GET /metrics but was not seen registered", name)
			}
		}
	})

	t.Run("README lists the metrics", func(t *testing.T) {
		documented := readmeMetrics(t)
		for _, name := range slices.Sorted(maps.Keys(registered)) {
			labels, ok := documented[name]
			switch {
			case !ok:
				t.Errorf("%s (labels %v) is exposed but not in README.md's Operations section", name, registered[name])
			case !slices.Equal(labels, registered[name]):
				t.Errorf("README.md documents %s with labels %v; the metric has %v", name, labels, registered[name])
			}
		}
		for _, name := range slices.Sorted(maps.Keys(documented)) {
			if _, ok := registered[name]; !ok {
				t.Errorf("README.md documents %s, which the server does not expose", name)
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

// exposition is a parsed GET /metrics: the type of each family, and for
// each series name (families, and _bucket, _sum, _count) the values seen of
// each label.
type exposition struct {
	types  map[string]string
	series map[string]map[string]map[string]bool
}

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+\S+`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

func parseExposition(t *testing.T, text string) exposition {
	t.Helper()
	e := exposition{types: map[string]string{}, series: map[string]map[string]map[string]bool{}}
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			e.types[f[2]] = f[3]
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("GET /metrics: cannot read line %q", line)
		}
		labels := e.series[m[1]]
		if labels == nil {
			labels = map[string]map[string]bool{}
			e.series[m[1]] = labels
		}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			if labels[p[1]] == nil {
				labels[p[1]] = map[string]bool{}
			}
			labels[p[1]][p[2]] = true
		}
	}
	return e
}

// waitExposition reads GET /metrics until the series name has every one of
// the label's values, for at most 10s.
func waitExposition(t *testing.T, a *api, name, label string, values ...string) exposition {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, b := a.do("GET", "/metrics", nil, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("GET /metrics = %d %s", resp.StatusCode, b)
		}
		e := parseExposition(t, string(b))
		missing := slices.DeleteFunc(slices.Clone(values), func(v string) bool { return e.series[name][label][v] })
		if len(missing) == 0 {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /metrics: after 10s %s has no series with %s in %v:\n%s", name, label, missing, b)
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

// readmeMetrics lists the metrics README.md's Operations section names, as
// `name` or `name{label,...}`, with their labels sorted.
func readmeMetrics(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(readmeFile)
	if err != nil {
		t.Fatal(err)
	}
	_, ops, ok := strings.Cut(string(b), "\n## Operations\n")
	if !ok {
		t.Fatalf("%s has no Operations section", readmeFile)
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
			t.Errorf("README.md documents %s twice, with labels %v and %v", m[1], prev, labels)
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

var (
	// selectorRE is a metric name with its label matchers.
	selectorRE = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	matcherRE  = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*$`)
	identRE    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	// PromQL's functions and keywords that the rules may use.
	promqlWords = []string{
		"sum", "min", "max", "avg", "count", "topk", "bottomk", "quantile", "stddev", "group",
		"rate", "irate", "increase", "delta", "deriv", "histogram_quantile", "clamp_min", "clamp_max",
		"abs", "absent", "absent_over_time", "max_over_time", "min_over_time", "avg_over_time", "time", "vector", "scalar",
		"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset",
	}
)

// checkAlertExpr checks that an expression names only metrics GET /metrics
// shows (or Prometheus's up and the blackbox exporter's probe_success on a
// scraped job), with labels those metrics have and values they take.
func checkAlertExpr(t *testing.T, r alertRule, exp exposition, jobs []string) {
	t.Helper()
	expr := r.Expr
	if strings.Count(expr, "(") != strings.Count(expr, ")") || strings.Count(expr, "{") != strings.Count(expr, "}") ||
		strings.Count(expr, "[") != strings.Count(expr, "]") {
		t.Errorf("alert %s: unbalanced brackets in %q", r.Alert, expr)
	}
	for _, m := range selectorRE.FindAllStringSubmatch(expr, -1) {
		name := m[1]
		for _, matcher := range strings.Split(m[2], ",") {
			if strings.TrimSpace(matcher) == "" {
				continue
			}
			mm := matcherRE.FindStringSubmatch(matcher)
			if mm == nil {
				t.Errorf("alert %s: cannot read the matcher %q of %s", r.Alert, matcher, name)
				continue
			}
			label, op, value := mm[1], mm[2], mm[3]
			var domain []string
			switch {
			case slices.Contains(externalMetrics, name):
				if label != "job" {
					t.Errorf("alert %s: %s{%s}: only job is checked; use job", r.Alert, name, label)
					continue
				}
				domain = jobs
			default:
				values, ok := exp.series[name][label]
				if !ok {
					t.Errorf("alert %s: %s has no label %s in GET /metrics (labels: %v)", r.Alert, name, label,
						slices.Sorted(maps.Keys(exp.series[name])))
					continue
				}
				domain = slices.Collect(maps.Keys(values))
				if label == "code" { // every HTTP status may come
					for c := 100; c < 600; c++ {
						domain = append(domain, strconv.Itoa(c))
					}
				}
			}
			checkMatcher(t, r.Alert, fmt.Sprintf("%s{%s}", name, strings.TrimSpace(matcher)), op, value, domain)
		}
	}

	// What is left without strings, matchers, ranges and grouping labels
	// is functions, keywords and metric names.
	rest := regexp.MustCompile(`"(?:[^"\\]|\\.)*"`).ReplaceAllString(expr, " ")
	rest = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`).ReplaceAllString(rest, " ")
	rest = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`).ReplaceAllString(rest, " ")
	rest = regexp.MustCompile(`\b[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?\b`).ReplaceAllString(rest, " ")
	metrics := 0
	for _, id := range identRE.FindAllString(rest, -1) {
		switch {
		case slices.Contains(promqlWords, id):
		case slices.Contains(externalMetrics, id):
			metrics++
			if !strings.Contains(expr, id+`{job="`) {
				t.Errorf("alert %s: %s must select a job of %s, as %s{job=\"...\"}", r.Alert, id, promConfigFile, id)
			}
		case strings.HasPrefix(id, "storelink_"):
			metrics++
			if _, ok := exp.series[id]; !ok {
				t.Errorf("alert %s: %s is not in GET /metrics", r.Alert, id)
			}
		default:
			t.Errorf("alert %s: %q is neither a storelink metric nor a PromQL function or keyword this test knows", r.Alert, id)
		}
	}
	if metrics == 0 {
		t.Errorf("alert %s: %q uses no metric", r.Alert, expr)
	}
}

// checkMatcher checks that a matcher can select something: an = or != value
// is one the label takes, and each alternative of a =~ or !~ regexp matches
// one.
func checkMatcher(t *testing.T, alert, what, op, value string, domain []string) {
	t.Helper()
	alts := []string{value}
	if op == "=~" || op == "!~" {
		alts = strings.Split(value, "|")
	}
	for _, alt := range alts {
		pattern := regexp.QuoteMeta(alt)
		if op == "=~" || op == "!~" {
			pattern = alt
		}
		re, err := regexp.Compile("^(?:" + pattern + ")$")
		if err != nil {
			t.Errorf("alert %s: %s: %v", alert, what, err)
			continue
		}
		if !slices.ContainsFunc(domain, re.MatchString) {
			slices.Sort(domain)
			if len(domain) > 20 {
				domain = append(domain[:20], "…")
			}
			t.Errorf("alert %s: %s: %q matches none of the values %v", alert, what, alt, domain)
		}
	}
}

// Order calls are counted by action and outcome, and HTTP requests by
// route pattern, method and code: a create, its replay with the same
// idempotency key, a fulfil of a fulfilled order (409), a create for an
// unknown store (refused), and a made-up method.
func TestOrderCallMetrics(t *testing.T) {
	a := newAPI(t, apiOptions{})
	putStock(a, "S1;"+ean1+";SKU-1;100;19.99;Dept 3")
	admin := map[string]string{"Authorization": "Bearer " + adminToken, "Idempotency-Key": "k-1"}
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

	resp, b = a.do("GET", "/metrics", nil, nil)
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
