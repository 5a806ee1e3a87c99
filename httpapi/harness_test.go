package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"storelink"
	"storelink/httpapi"
	"storelink/service"
	"storelink/webhook"
	"storelink/worker"
)

// webhookOptions are the webhook settings of a test API: short, so that a
// whole retry schedule runs in well under a second.
type webhookOptions struct {
	schedule []time.Duration // default 50ms, 100ms, 200ms
	timeout  time.Duration   // default 2s
	// denyPrivate refuses loopback and private URLs, as serve does without
	// --webhook-allow-private; the tests' receivers are on loopback, so the
	// default allows them.
	denyPrivate bool
	// guardSends registers loopback URLs but has the client refuse them
	// when it dials, so that the address guard of sending is seen at work
	// without connecting anywhere.
	guardSends bool
}

// wireWebhooks gives the API its webhook store, the services svc made again
// with a sealer, and runs a deliverer until the test ends. It returns the
// store, and the deliverer's wake-up, which the API must call when an event
// or a redelivery is written.
func wireWebhooks(t *testing.T, svc *service.Services, reg *prometheus.Registry, deps *httpapi.Deps, o webhookOptions) (*service.Services, func()) {
	t.Helper()
	if o.schedule == nil {
		o.schedule = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}
	}
	if o.timeout == 0 {
		o.timeout = 2 * time.Second
	}
	key := make([]byte, storelink.SealKeySize)
	_, _ = rand.Read(key)
	sealer, err := storelink.NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	store := svc.With(service.WithSealer(sealer))
	deps.Webhooks, deps.WebhookAllowPrivate = store.Webhooks, !o.denyPrivate

	client := webhook.NewClient(o.timeout, !o.denyPrivate && !o.guardSends)
	d := worker.NewDeliverer(store.Webhooks, client, storelink.RetryPolicy{Schedule: o.schedule, Jitter: 0.2}, o.timeout, nil, "test", reg)
	// Retries come due every few tens of milliseconds here; serve's 1s
	// poll would dominate every timing the tests look at.
	d.Interval = 10 * time.Millisecond
	deps.Tester, deps.EndpointDeleted = d, d.DropEndpoint
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	// Registered before the server's cleanup, so it runs after it.
	t.Cleanup(func() { cancel(); <-done; client.CloseIdleConnections() })
	return store, d.Wake
}

// newWebhookAPI is newAPI with webhooks and stock for ean1 and ean2 at S1,
// enough for a hundred orders.
func newWebhookAPI(t *testing.T, o webhookOptions) *api {
	t.Helper()
	a := newAPI(t, apiOptions{webhooks: &o})
	putStock(a, "S1;"+ean1+";SKU-1;1000;19.99;Dept 3", "S1;"+ean2+";SKU-2;1000;5.00;Dept 4")
	return a
}

// addEndpoint registers an endpoint for the demo client; body is the JSON
// of POST /admin/clients/{client_id}/webhooks.
func (a *api) addEndpoint(body string) storelink.EndpointSecret {
	a.t.Helper()
	var e storelink.EndpointSecret
	a.admin("POST", "/admin/clients/"+a.ClientID+"/webhooks", body, 201, &e)
	if e.ID == "" || !strings.HasPrefix(e.Secret, webhook.SecretPrefix) || !e.Enabled {
		a.t.Fatalf("new endpoint = %+v", e)
	}
	return e
}

// endpointAt registers an endpoint for url with every state and no key.
func (a *api) endpointAt(url string) storelink.EndpointSecret {
	a.t.Helper()
	return a.addEndpoint(fmt.Sprintf(`{"url":%q}`, url))
}

// clientEndpoint reads an endpoint as GET /admin/clients/{client_id} shows it.
func (a *api) clientEndpoint(id string) storelink.Endpoint {
	a.t.Helper()
	var c storelink.ClientDetail
	a.admin("GET", "/admin/clients/"+a.ClientID, "", 200, &c)
	for _, e := range c.Endpoints {
		if e.ID == id {
			return e
		}
	}
	a.t.Fatalf("endpoint %s not in the client's webhook_endpoints: %+v", id, c.Endpoints)
	return storelink.Endpoint{}
}

// placeOrder creates an assigned order at S1 and returns it with the event
// id of its assigned event.
func (a *api) placeOrder(number string) (storelink.Order, string) {
	a.t.Helper()
	o := mustOrder(a, "POST", "/orders", newOrderBody(a.ClientID, number, "S1", ean1), 201)
	return o, a.lastEvent(o.ID, storelink.StateAssigned)
}

// fulfil fulfils every item of an order and returns the fulfilled event id.
func (a *api) fulfil(orderID string) string {
	a.t.Helper()
	mustOrder(a, "POST", "/orders/"+orderID+"/fulfil", `{}`, 200)
	return a.lastEvent(orderID, storelink.StateFulfilled)
}

// lastEvent returns the id of the order's latest event, which must be in
// state s.
func (a *api) lastEvent(orderID string, s storelink.OrderState) string {
	a.t.Helper()
	evs, _ := orderEvents(a, orderID)
	if len(evs) == 0 || evs[len(evs)-1].State != s {
		a.t.Fatalf("events of order %s = %+v, want the last one %s", orderID, evs, s)
	}
	return evs[len(evs)-1].EventID
}

// deliveries lists the demo client's deliveries, newest first.
func (a *api) deliveries(query string) []storelink.Delivery {
	a.t.Helper()
	var page struct {
		Deliveries []storelink.Delivery `json:"deliveries"`
	}
	a.admin("GET", "/admin/deliveries?limit=500&client_id="+a.ClientID+query, "", 200, &page)
	return page.Deliveries
}

// delivery finds the delivery of one event to one endpoint.
func (a *api) delivery(eventID, endpointID string) (storelink.Delivery, bool) {
	a.t.Helper()
	for _, d := range a.deliveries("") {
		if d.EventID == eventID && d.EndpointID == endpointID {
			return d, true
		}
	}
	return storelink.Delivery{}, false
}

// waitDelivery polls the delivery of an event to an endpoint until ok says
// it is as wanted, for at most 10s.
func (a *api) waitDelivery(eventID, endpointID string, what string, ok func(storelink.Delivery) bool) storelink.Delivery {
	a.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, found := a.delivery(eventID, endpointID)
		if found && ok(d) {
			return d
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("delivery of event %s to %s: not %s after 10s: %s", eventID, endpointID, what, dump(d))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func succeeded(d storelink.Delivery) bool { return d.State == storelink.DeliverySucceeded }

func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// hit is one request a receiver got.
type hit struct {
	At     time.Time
	Path   string // the request URI: path and query
	Header http.Header
	Body   []byte
	ID     string // webhook-id
	Event  storelink.Event
	Status int // what the receiver answered
}

// receiver is a partner's webhook endpoint: a real HTTP server that records
// every request and answers as answer says. answer gets the request and the
// number of earlier requests with the same webhook-id, one request at a
// time; it returns a status, or 0 to hang until the sender gives up or the
// test ends.
type receiver struct {
	*httptest.Server
	t       *testing.T
	mu      sync.Mutex
	hits    []hit
	answer  func(h *hit, seen int, w http.ResponseWriter) int
	arrived chan struct{}
	release chan struct{}
}

// newReceiver starts a receiver. Its cleanup runs before the API's (it is
// registered later), and first lets hanging requests go so that the
// deliverer's attempts end at once.
func newReceiver(t *testing.T, answer func(h *hit, seen int, w http.ResponseWriter) int) *receiver {
	t.Helper()
	r := &receiver{t: t, answer: answer, arrived: make(chan struct{}, 1), release: make(chan struct{})}
	if r.answer == nil {
		r.answer = func(*hit, int, http.ResponseWriter) int { return http.StatusNoContent }
	}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() { close(r.release); r.Close() })
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	h := hit{At: time.Now(), Path: req.URL.RequestURI(), Header: req.Header.Clone(), Body: body, ID: req.Header.Get(webhook.HeaderID)}
	_ = json.Unmarshal(body, &h.Event)
	r.mu.Lock()
	seen := 0
	for _, o := range r.hits {
		if o.ID == h.ID {
			seen++
		}
	}
	h.Status = r.answer(&h, seen, w)
	r.hits = append(r.hits, h)
	r.mu.Unlock()
	select {
	case r.arrived <- struct{}{}:
	default:
	}
	if h.Status == 0 {
		select {
		case <-req.Context().Done():
		case <-r.release:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		return
	}
	w.WriteHeader(h.Status)
}

// got returns a copy of the requests so far.
func (r *receiver) got() []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hit(nil), r.hits...)
}

// wait waits until the receiver has had n requests, for at most limit, and
// returns them.
func (r *receiver) wait(n int, limit time.Duration) []hit {
	r.t.Helper()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		if hits := r.got(); len(hits) >= n {
			return hits
		}
		select {
		case <-r.arrived:
		case <-time.After(5 * time.Millisecond):
		case <-deadline.C:
			r.t.Fatalf("receiver got %d requests in %s, want %d: %s", len(r.got()), limit, n, dumpHits(r.got()))
		}
	}
}

// waitIDs waits until every id has been received with a 2xx answer.
func (r *receiver) waitIDs(ids []string, limit time.Duration) []hit {
	r.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		hits := r.got()
		ok := map[string]bool{}
		for _, h := range hits {
			if h.Status >= 200 && h.Status < 300 {
				ok[h.ID] = true
			}
		}
		missing := 0
		for _, id := range ids {
			if !ok[id] {
				missing++
			}
		}
		if missing == 0 {
			return hits
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("after %s, %d of %d events not received", limit, missing, len(ids))
		}
		select {
		case <-r.arrived:
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func dumpHits(hits []hit) string {
	var b strings.Builder
	for _, h := range hits {
		fmt.Fprintf(&b, "\n  %s %s %s -> %d", h.At.Format("15:04:05.000"), h.ID, h.Event.State, h.Status)
	}
	return b.String()
}

// closedURL is an http URL on a loopback port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close()
	return u
}

// checkSigned verifies a received request with each secret on its own, with
// our Verify and with the official Standard Webhooks library.
func checkSigned(t *testing.T, h hit, secrets ...string) {
	t.Helper()
	for i, s := range secrets {
		key, err := webhook.ParseSecret(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := webhook.Verify([][]byte{key}, h.Header, h.Body, time.Now(), 5*time.Minute); err != nil {
			t.Errorf("webhook.Verify with secret %d of %d: %v (webhook-signature %q)", i+1, len(secrets), err, h.Header.Get(webhook.HeaderSignature))
		}
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(h.Body, h.Header); err != nil {
			t.Errorf("official library's Verify with secret %d of %d: %v", i+1, len(secrets), err)
		}
	}
}

// checkNotSigned makes sure a secret does not verify a request.
func checkNotSigned(t *testing.T, h hit, secret string) {
	t.Helper()
	key, _ := webhook.ParseSecret(secret)
	if err := webhook.Verify([][]byte{key}, h.Header, h.Body, time.Now(), 5*time.Minute); err != webhook.ErrBadSignature {
		t.Errorf("Verify with a secret that did not sign = %v, want ErrBadSignature", err)
	}
}

func signatures(h hit) []string { return strings.Fields(h.Header.Get(webhook.HeaderSignature)) }

func compact(t *testing.T, b []byte) string {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return out.String()
}
