package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"storelink/webhook"
)

// forwardHit is one request the partner's application got from listen.
type forwardHit struct {
	method, path, id, apiKey string
	verifyErr                error
	body                     []byte
	status                   int
}

// forwardApp is the partner's application behind `listen --forward-to`:
// it verifies each request itself, as a real one would, and answers the
// statuses of answers in turn, then 204.
type forwardApp struct {
	*httptest.Server
	keys    [][]byte
	mu      sync.Mutex
	answers []int
	hits    []forwardHit
}

func newForwardApp(t *testing.T, secret string, answers ...int) *forwardApp {
	t.Helper()
	key, err := webhook.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	a := &forwardApp{keys: [][]byte{key}, answers: answers}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h := forwardHit{method: r.Method, path: r.URL.Path, id: r.Header.Get(webhook.HeaderID), apiKey: r.Header.Get("x-api-key"), body: body,
			verifyErr: webhook.Verify(a.keys, r.Header, body, time.Now(), 5*time.Minute), status: http.StatusNoContent}
		a.mu.Lock()
		if len(a.answers) > 0 {
			h.status, a.answers = a.answers[0], a.answers[1:]
		}
		a.hits = append(a.hits, h)
		a.mu.Unlock()
		if h.status == http.StatusInternalServerError {
			http.Error(w, "the application failed", h.status)
			return
		}
		w.WriteHeader(h.status)
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *forwardApp) snapshot() []forwardHit {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]forwardHit(nil), a.hits...)
}

// waitFor polls cond until it holds, for at most 20s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 20s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestListenForward: a real serve delivers an order's events to
// `storelink listen --forward-to`, which verifies them and passes them on
// to the partner's application; the application's 500 makes the service
// retry, its 2xx settles the delivery, and an application that is gone
// gets the service a 502 and a retry.
func TestListenForward(t *testing.T) {
	p := startServe(t, t.TempDir(), "--demo", "--webhook-timeout", "5s", "--webhook-retry-schedule", "100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms")
	app := newForwardApp(t, p.WebhookSecret, http.StatusInternalServerError)
	l := startListen(t, noEnv, "--secret", p.WebhookSecret, "--forward-to", app.URL+"/app/hooks")
	pointDemoEndpoint(t, p, l.URL+"/webhooks")

	id := mustUpload(t, p, "stock.csv", []byte("store;ean;article_number;quantity;price\nS1;4006381333931;SKU-1;10;19.99\n"))
	if u := p.waitUpload(t, id, 10*time.Second); u["status"] != "applied" {
		t.Fatalf("stock upload: %v", u)
	}
	var o struct {
		ID string `json:"order_id"`
	}
	crashAdmin(t, p, "POST", "/orders", map[string]any{"order_number": "FWD-1", "client_id": p.ClientID,
		"items": []map[string]string{{"ean": "4006381333931", "marketplace_article_number": "MP-1"}}}, 201, &o)

	// The first event: the application fails it once, then takes it.
	waitFor(t, "the application accepts the first event", func() bool { return len(app.snapshot()) >= 2 })
	hits := app.snapshot()
	if hits[0].id == "" || hits[1].id != hits[0].id || hits[0].status != 500 || hits[1].status != 204 {
		t.Fatalf("the application's hits %+v, want one event answered 500 then 204", hits)
	}
	for _, h := range hits {
		if h.method != http.MethodPost || h.path != "/app/hooks" || h.verifyErr != nil || !strings.Contains(string(h.body), o.ID) {
			t.Fatalf("the application got %s %s verified=%v %s; want the signed event of order %s at /app/hooks",
				h.method, h.path, h.verifyErr, h.body, o.ID)
		}
	}
	delivery := func(eventID string) map[string]any {
		_, page := p.get(t, "/webhooks/"+p.ClientID+"/deliveries")
		list, _ := page["deliveries"].([]any)
		for _, d := range list {
			if d := d.(map[string]any); d["event_id"] == eventID {
				return d
			}
		}
		return nil
	}
	var d map[string]any
	waitFor(t, "the service records the delivery succeeded", func() bool {
		d = delivery(hits[0].id)
		return d != nil && d["state"] == "succeeded"
	})
	attempts, _ := d["attempts"].([]any)
	var codes []float64
	for _, a := range attempts {
		codes = append(codes, a.(map[string]any)["status_code"].(float64))
	}
	if len(codes) != 2 || codes[0] != 500 || codes[1] != 204 {
		t.Fatalf("the service's attempts answered %v, want the application's 500 then 204", codes)
	}
	if got := l.stdout.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, hits[0].id) {
		t.Fatalf("stdout %q, want the accepted event once", got)
	}
	for _, want := range []string{hits[0].id + " -> " + app.URL + "/app/hooks: 500 in ", hits[0].id + " -> " + app.URL + "/app/hooks: 204 in "} {
		if !strings.Contains(l.stderr.String(), want) {
			t.Fatalf("stderr %q does not say %q", l.stderr, want)
		}
	}

	// The application is gone: the next event's attempts get 502 and the
	// delivery stays pending, to be retried.
	app.Close()
	crashAdmin(t, p, "POST", "/orders/"+o.ID+"/fulfil", map[string]any{}, 200, nil)
	waitFor(t, "the service records a 502 for the second event", func() bool {
		_, page := p.get(t, "/webhooks/"+p.ClientID+"/deliveries")
		list, _ := page["deliveries"].([]any)
		for _, d := range list {
			d := d.(map[string]any)
			attempts, _ := d["attempts"].([]any)
			if d["event_id"] != hits[0].id && len(attempts) >= 2 && d["state"] == "pending" {
				last := attempts[len(attempts)-1].(map[string]any)
				return last["status_code"] == 502.0
			}
		}
		return false
	})
	if !strings.Contains(l.stderr.String(), "unreachable after") {
		t.Fatalf("stderr %q does not say the application is unreachable", l.stderr)
	}
	if strings.Contains(l.stderr.String(), strings.TrimPrefix(p.WebhookSecret, "whsec_")) {
		t.Fatal("stderr shows the secret")
	}
}

// TestListenForwardFailures: listen answers 502 when the application
// refuses the connection or does not answer within --forward-timeout, and
// passes the application's own status and headers back otherwise; a
// delivery it cannot verify never reaches the application.
func TestListenForwardFailures(t *testing.T) {
	secret := webhook.NewSecret()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/hooks"
	ln.Close()

	release := make(chan struct{})
	var slowHits, appHits int
	var mu sync.Mutex
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		slowHits++
		mu.Unlock()
		select { // a peer that does not answer in time
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		appHits++
		mu.Unlock()
		w.Header().Set("Retry-After", "7")
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, strings.Repeat("x", forwardMaxAnswer+100))
	}))
	defer app.Close()

	for _, tt := range []struct {
		name, to string
		want     int
	}{
		{"refused", closed, http.StatusBadGateway},
		{"too slow", slow.URL, http.StatusBadGateway},
		{"the application's answer", app.URL, http.StatusServiceUnavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := startListen(t, noEnv, "--secret", secret, "--forward-to", tt.to, "--forward-timeout", "300ms")
			h := signed(t, []string{secret}, "evt-"+strings.ReplaceAll(tt.name, " ", "-"), time.Now(), listenEvent)
			req, _ := http.NewRequest(http.MethodPost, l.URL+"/webhooks", strings.NewReader(listenEvent))
			req.Header = h
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("%d %s, want %d", resp.StatusCode, body, tt.want)
			}
			if tt.want == http.StatusServiceUnavailable && (resp.Header.Get("Retry-After") != "7" || len(body) != forwardMaxAnswer) {
				t.Fatalf("Retry-After %q and a body of %d bytes, want the application's 7 and its first %d bytes",
					resp.Header.Get("Retry-After"), len(body), forwardMaxAnswer)
			}
			if l.stdout.String() != "" {
				t.Fatalf("stdout %q: an event the application did not accept is printed", l.stdout)
			}
			// A forged delivery is refused by listen itself.
			if code, _ := post(t, l.URL, signed(t, []string{webhook.NewSecret()}, "forged", time.Now(), listenEvent), listenEvent); code != 401 {
				t.Fatalf("forged delivery: %d, want 401", code)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if slowHits != 1 || appHits != 1 {
		t.Fatalf("the applications got %d and %d requests, want one each (forged ones never reach them)", slowHits, appHits)
	}
}

// TestListenForwardUsage: --forward-to must be an http(s) URL and the
// timeout positive.
func TestListenForwardUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--forward-to", "127.0.0.1:3000"},
		{"--forward-to", "ftp://127.0.0.1/x"},
		{"--forward-to", "http://127.0.0.1:3000/x", "--forward-timeout", "0s"},
	} {
		var stdout, stderr strings.Builder
		code := run(t.Context(), append([]string{"listen", "--addr", "127.0.0.1:0", "--secret", webhook.NewSecret()}, args...), noEnv, nil, &stdout, &stderr)
		if code != 2 {
			t.Fatalf("%v: exit code %d, want 2; stderr: %s", args, code, stderr.String())
		}
	}
}
