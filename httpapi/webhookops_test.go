package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"storelink"
	"storelink/webhook"
)

// testReceiver is an endpoint that records every request and answers 202
// with a body, or, while blocked, holds requests until unblocked.
type testReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	hits    []hit
	blocked chan struct{} // nil: answer at once
}

func newTestReceiver(t *testing.T, blocked bool) *testReceiver {
	t.Helper()
	r := &testReceiver{}
	if blocked {
		r.blocked = make(chan struct{})
	}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.hits = append(r.hits, hit{At: time.Now(), Path: req.URL.RequestURI(), Header: req.Header.Clone(), Body: body,
			ID: req.Header.Get(webhook.HeaderID)})
		r.mu.Unlock()
		if r.blocked != nil {
			select {
			case <-r.blocked:
			case <-req.Context().Done():
				return
			}
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte("thanks"))
	}))
	t.Cleanup(func() { r.unblock(); r.Close() })
	return r
}

func (r *testReceiver) unblock() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.blocked != nil {
		select {
		case <-r.blocked:
		default:
			close(r.blocked)
		}
	}
}

func (r *testReceiver) got() []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hit(nil), r.hits...)
}

// waitFor waits up to 10s until the receiver has n requests.
func (r *testReceiver) waitFor(t *testing.T, n int) []hit {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if hits := r.got(); len(hits) >= n {
			return hits
		}
		if time.Now().After(deadline) {
			t.Fatalf("receiver got %d requests in 10s, want %d", len(r.got()), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// eventSchema compiles schema/order-event.json, formats asserted.
func eventSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	const path = "../schema/order-event.json"
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(path, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// partner sends a partner call with key, its body (if any) as JSON, and
// returns the answer.
func (a *api) partner(method, path, body, key string) (*http.Response, []byte) {
	a.t.Helper()
	return a.do(method, path, strings.NewReader(body), jsonHeader(body, "x-api-key", key))
}

// otherClient makes the partner's client for FR and returns it with its key.
func (a *api) otherClient() storelink.NewClient {
	a.t.Helper()
	var c storelink.NewClient
	a.admin("POST", "/admin/partners/"+a.PartnerID+"/clients", `{"country_code":"FR","currency":"EUR"}`, 201, &c)
	return c
}

// A test send goes at once, signed with the endpoint's secret and with its
// key, marked webhook-test: true, to the endpoint's URL with ${eventId}
// replaced; its event is valid against schema/order-event.json in the
// state asked for, and is stored nowhere: no event in the pull feed, no
// delivery, no attempt in the stats. The answer tells what the endpoint
// answered, or why nothing usable came. The partner can test its own
// endpoints, not another client's.
func TestWebhookTestSend(t *testing.T) {
	t.Parallel()
	a := newWebhookAPI(t, webhookOptions{})
	rec := newTestReceiver(t, false)
	ep := a.addEndpoint(`{"url":"` + rec.URL + `/hooks/${eventId}","api_key":"partner-key","states":["assigned"]}`)
	sch := eventSchema(t)

	var res storelink.TestResult
	a.admin("POST", "/admin/webhooks/"+ep.ID+"/test", `{"state":"fulfilled"}`, 200, &res)
	if res.StatusCode != 202 || res.ResponseExcerpt != "thanks" || res.Error != "" || res.DurationMS < 0 {
		t.Fatalf("test send answered %+v, want 202 with the receiver's body", res)
	}
	hits := rec.got()
	if len(hits) != 1 {
		t.Fatalf("receiver got %d requests, want the test send", len(hits))
	}
	h := hits[0]
	checkSigned(t, h, ep.Secret)
	if h.Header.Get("webhook-test") != "true" || h.Header.Get("x-api-key") != "partner-key" || h.Path != "/hooks/"+h.ID ||
		h.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("test send: path %s, headers %v; want webhook-test: true, the key, the event id in the path", h.Path, h.Header)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(h.Body))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("test event %s is not valid against the schema: %v", h.Body, err)
	}
	var ev storelink.Event
	decodeInto(t, h.Body, &ev)
	if ev.State != storelink.StateFulfilled || ev.EventID != h.ID || ev.StoreID != "S1" || !strings.HasPrefix(ev.OrderNumber, "TEST-") {
		t.Fatalf("test event = %s, want a fulfilled TEST- order at S1 with the webhook-id as its id", h.Body)
	}

	// The partner's own test, with no body: an assigned event.
	resp, body := a.partner("POST", "/webhooks/"+a.ClientID+"/endpoints/"+ep.ID+"/test", "", a.APIKey)
	if resp.StatusCode != 200 {
		t.Fatalf("partner test = %d %s", resp.StatusCode, body)
	}
	decodeInto(t, rec.waitFor(t, 2)[1].Body, &ev)
	if ev.State != storelink.StateAssigned {
		t.Fatalf("partner test event state = %s, want assigned", ev.State)
	}
	other := a.otherClient()
	resp, body = a.partner("POST", "/webhooks/"+other.ID+"/endpoints/"+ep.ID+"/test", "", other.APIKey)
	problem(t, resp, body, 404)
	resp, body = a.partner("POST", "/webhooks/"+other.ID+"/endpoints/"+ep.ID+"/test", "", a.APIKey)
	problem(t, resp, body, 403)
	resp, body = a.do("POST", "/admin/webhooks/"+ep.ID+"/test", strings.NewReader(`{"state":"open"}`),
		map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"})
	problem(t, resp, body, 422)
	if n := len(rec.got()); n != 2 {
		t.Fatalf("receiver got %d requests, want the 2 test sends only", n)
	}

	// Stored nowhere.
	resp, body = a.partner("GET", "/events/"+a.ClientID, "", a.APIKey)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"events":[]`) {
		t.Fatalf("pull feed after test sends = %d %s, want no events", resp.StatusCode, body)
	}
	if ds := a.deliveries(""); len(ds) != 0 {
		t.Fatalf("deliveries after test sends = %s, want none", dump(ds))
	}
	var d storelink.EndpointDetail
	a.admin("GET", "/admin/webhooks/"+ep.ID, "", 200, &d)
	if d.Stats.Attempts != 0 {
		t.Fatalf("stats after test sends = %+v, want no attempt counted", d.Stats)
	}

	// Nothing listens: the answer says why.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	gone := a.endpointAt(deadURL + "/hooks")
	var refused storelink.TestResult
	a.admin("POST", "/admin/webhooks/"+gone.ID+"/test", "", 200, &refused)
	if refused.StatusCode != 0 || refused.Error != "connection refused" {
		t.Fatalf("test send to a closed port answered %+v, want connection refused", refused)
	}
}

// A test send goes through the address guard of every delivery: to an
// endpoint that resolves to loopback, with private addresses not allowed
// to the sender, nothing is sent, and the answer says why, as a
// delivery's attempt does.
func TestWebhookTestSendAddressGuard(t *testing.T) {
	t.Parallel()
	a := newWebhookAPI(t, webhookOptions{guardSends: true, schedule: []time.Duration{time.Hour}})
	rec := newTestReceiver(t, false)
	ep := a.endpointAt(rec.URL + "/hooks")
	var res storelink.TestResult
	a.admin("POST", "/admin/webhooks/"+ep.ID+"/test", "", 200, &res)
	if res.StatusCode != 0 || res.Error != "address 127.0.0.1 is not allowed (loopback)" {
		t.Fatalf("test send to loopback answered %+v, want the guard's refusal", res)
	}
	_, eventID := a.placeOrder("WH-GUARD-1")
	d := a.waitDelivery(eventID, ep.ID, "attempted", func(d storelink.Delivery) bool { return len(d.Attempts) > 0 })
	if d.Attempts[0].Error != res.Error {
		t.Fatalf("the delivery's attempt = %+v, want the test send's refusal %q", d.Attempts[0], res.Error)
	}
	if n := len(rec.got()); n != 0 {
		t.Fatalf("receiver got %d requests, want none", n)
	}
}

// A deleted endpoint is sent nothing more, not even what the deliverer
// had claimed for it and not yet sent; its pending deliveries are
// cancelled (those in flight too, whose attempts are still recorded), no
// new event is queued for it, and it and its deliveries stay readable,
// the events in the pull feed. It cannot be changed, tested or recovered.
func TestWebhookDeleteEndpoint(t *testing.T) {
	t.Parallel()
	a := newWebhookAPI(t, webhookOptions{timeout: time.Minute})
	rec := newTestReceiver(t, true)
	ep := a.endpointAt(rec.URL + "/hooks")
	// The attempts in flight to it hold in the receiver (one: an endpoint
	// that has not answered yet is given no more, worker/pacing.go); the
	// next are claimed ahead, waiting for a place.
	const orders = 40
	for i := range orders {
		a.placeOrder(fmt.Sprintf("WH-DEL-%d", i))
	}
	rec.waitFor(t, 1)
	// Time for the deliverer's rounds (10ms apart) to claim ahead, which
	// nothing outside the deliverer shows: the claims are in its memory.
	time.Sleep(100 * time.Millisecond)
	inFlight := len(rec.got())

	resp, body := a.do("DELETE", "/admin/webhooks/"+ep.ID, nil, map[string]string{"Authorization": "Bearer " + adminToken})
	if resp.StatusCode != 204 || len(body) != 0 {
		t.Fatalf("DELETE = %d %s, want 204", resp.StatusCode, body)
	}
	rec.unblock() // the attempts in flight end, and their places free
	// An absence: a window in which what was claimed ahead would be sent.
	time.Sleep(300 * time.Millisecond)
	if n := len(rec.got()); n != inFlight {
		t.Fatalf("receiver got %d requests, want the %d in flight when it was deleted and no more", n, inFlight)
	}

	var d storelink.EndpointDetail
	a.admin("GET", "/admin/webhooks/"+ep.ID, "", 200, &d)
	if d.DeletedAt == nil || d.Enabled || d.Stats.Pending != 0 {
		t.Fatalf("deleted endpoint = %s, want deleted_at, disabled, nothing pending", dump(d))
	}
	list := a.deliveries("&endpoint_id=" + ep.ID)
	attempted := 0
	for _, dl := range list {
		if dl.State != storelink.DeliveryCancelled {
			t.Fatalf("delivery to the deleted endpoint = %s, want cancelled", dump(dl))
		}
		attempted += len(dl.Attempts)
	}
	if len(list) != orders || attempted != inFlight {
		t.Fatalf("%d deliveries with %d attempts listed, want %d with %d", len(list), attempted, orders, inFlight)
	}
	if e := a.clientWebhooks(); len(e) != 0 {
		t.Fatalf("the client's endpoints = %s, want none", dump(e))
	}
	a.placeOrder("WH-DEL-AFTER")
	if n := len(a.deliveries("&endpoint_id=" + ep.ID)); n != orders {
		t.Fatalf("%d deliveries to the deleted endpoint after a new event, want %d", n, orders)
	}
	var feed struct {
		Events []json.RawMessage `json:"events"`
	}
	resp, body = a.partner("GET", "/events/"+a.ClientID+"?limit=1000", "", a.APIKey)
	decodeInto(t, body, &feed)
	if resp.StatusCode != 200 || len(feed.Events) != orders+1 {
		t.Fatalf("pull feed = %d with %d events, want %d", resp.StatusCode, len(feed.Events), orders+1)
	}
	for _, c := range []struct{ method, path, body string }{
		{"PATCH", "/admin/webhooks/" + ep.ID, `{"enabled":true}`},
		{"POST", "/admin/webhooks/" + ep.ID + "/test", ``},
		{"POST", "/admin/webhooks/" + ep.ID + "/recover", `{"since":"2020-01-01T00:00:00Z"}`},
		{"POST", "/admin/webhooks/" + ep.ID + "/rotate-secret", ``},
		{"POST", "/admin/deliveries/" + list[0].ID + "/redeliver", ``},
	} {
		resp, body := a.do(c.method, c.path, strings.NewReader(c.body), jsonHeader(c.body, "Authorization", "Bearer "+adminToken))
		problem(t, resp, body, 409)
	}
	a.admin("DELETE", "/admin/webhooks/"+ep.ID, "", 204, nil)
	if n := len(rec.got()); n != inFlight {
		t.Fatalf("receiver got %d requests in the end, want %d", n, inFlight)
	}
}

// clientWebhooks is the demo client's webhook_endpoints.
func (a *api) clientWebhooks() []storelink.Endpoint {
	a.t.Helper()
	var c storelink.ClientDetail
	a.admin("GET", "/admin/clients/"+a.ClientID, "", 200, &c)
	return c.Endpoints
}

// Recovering an endpoint's failed deliveries since a time sends them again
// in event order per order, with a fresh schedule; those failed before
// the time stay failed. The stats count the failed deliveries before and
// none after.
func TestWebhookRecover(t *testing.T) {
	t.Parallel()
	a := newWebhookAPI(t, webhookOptions{schedule: []time.Duration{10 * time.Millisecond}})
	var mu sync.Mutex
	healthy := false
	rec := newReceiver(t, func(*hit, int, http.ResponseWriter) int {
		mu.Lock()
		defer mu.Unlock()
		if healthy {
			return http.StatusNoContent
		}
		return http.StatusServiceUnavailable
	})
	ep := a.endpointAt(rec.URL)
	failed := func(d storelink.Delivery) bool { return d.State == storelink.DeliveryFailed }
	_, early := a.placeOrder("WH-REC-0")
	// A millisecond after the early delivery was queued, which is the
	// precision the recovery compares at: the early one is before it.
	since := a.waitDelivery(early, ep.ID, "failed", failed).CreatedAt.Add(time.Millisecond).UTC()
	o, assigned := a.placeOrder("WH-REC-1")
	a.waitDelivery(assigned, ep.ID, "failed", failed)
	fulfilled := a.fulfil(o.ID)
	a.waitDelivery(fulfilled, ep.ID, "failed", failed)
	_, other := a.placeOrder("WH-REC-2")
	a.waitDelivery(other, ep.ID, "failed", failed)
	var d storelink.EndpointDetail
	a.admin("GET", "/admin/webhooks/"+ep.ID, "", 200, &d)
	if d.Stats.FailedDeliveries != 4 || d.Stats.Attempts != 8 || d.Stats.Succeeded != 0 || d.Stats.LastFailureAt == nil {
		t.Fatalf("stats before the recovery = %+v, want 4 failed deliveries of 8 failed attempts", d.Stats)
	}
	before := len(rec.got())

	mu.Lock()
	healthy = true
	mu.Unlock()
	var answer map[string]int
	a.admin("POST", "/admin/webhooks/"+ep.ID+"/recover", `{"since":"`+since.Format(time.RFC3339Nano)+`"}`, 202, &answer)
	if answer["deliveries"] != 3 {
		t.Fatalf("recover answered %v, want 3 deliveries", answer)
	}
	hits := rec.waitIDs([]string{assigned, fulfilled, other}, 5*time.Second)
	var order []string
	for _, h := range hits[before:] {
		if h.ID == assigned || h.ID == fulfilled {
			order = append(order, h.ID)
		}
	}
	if len(order) != 2 || order[0] != assigned || order[1] != fulfilled {
		t.Fatalf("the order's events arrived as %v, want assigned %s, then fulfilled %s", order, assigned, fulfilled)
	}
	a.waitDelivery(other, ep.ID, "succeeded", succeeded)
	a.waitDelivery(fulfilled, ep.ID, "succeeded", succeeded)
	if dl, _ := a.delivery(early, ep.ID); dl.State != storelink.DeliveryFailed {
		t.Fatalf("the delivery failed before since = %s, want failed still", dump(dl))
	}
	a.admin("GET", "/admin/webhooks/"+ep.ID, "", 200, &d)
	if d.Stats.FailedDeliveries != 1 || d.Stats.Succeeded != 3 || d.Stats.LastSuccessAt == nil {
		t.Fatalf("stats after the recovery = %+v, want 1 failed delivery left, 3 attempts succeeded", d.Stats)
	}
	auth := map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"}
	for body, status := range map[string]int{`{}`: 422, `{"since":"yesterday"}`: 422, `{"since":1}`: 400, `{"sinse":"2026-01-01T00:00:00Z"}`: 400} {
		resp, answer := a.do("POST", "/admin/webhooks/"+ep.ID+"/recover", strings.NewReader(body), auth)
		problem(t, resp, answer, status)
	}
}

// Each attempt lists the URL it went to: after the endpoint's URL changes,
// the earlier attempts still show the old one.
func TestWebhookAttemptURL(t *testing.T) {
	t.Parallel()
	a := newWebhookAPI(t, webhookOptions{})
	rec := newReceiver(t, nil)
	ep := a.endpointAt(rec.URL + "/old/${eventId}")
	_, first := a.placeOrder("WH-URL-1")
	a.waitDelivery(first, ep.ID, "succeeded", succeeded)
	a.admin("PATCH", "/admin/webhooks/"+ep.ID, `{"url":"`+rec.URL+`/new"}`, 200, nil)
	_, second := a.placeOrder("WH-URL-2")
	d2 := a.waitDelivery(second, ep.ID, "succeeded", succeeded)
	d1, _ := a.delivery(first, ep.ID)
	if got := d1.Attempts[0].URL; got != rec.URL+"/old/"+first {
		t.Fatalf("the first attempt's url = %q, want %q", got, rec.URL+"/old/"+first)
	}
	if got := d2.Attempts[0].URL; got != rec.URL+"/new" {
		t.Fatalf("the second attempt's url = %q, want %q", got, rec.URL+"/new")
	}
}

// The partner sees its own client's endpoints with their stats and never
// a secret, pages its deliveries with after, and redelivers its own; it
// sees nothing of another client's.
func TestPartnerWebhooks(t *testing.T) {
	t.Parallel()
	a := newWebhookAPI(t, webhookOptions{})
	rec := newReceiver(t, nil)
	ep := a.addEndpoint(`{"url":"` + rec.URL + `","api_key":"secret-partner-key"}`)
	var events []string
	for i := range 3 {
		_, ev := a.placeOrder(fmt.Sprintf("WH-P-%d", i))
		events = append(events, ev)
	}
	rec.waitIDs(events, 5*time.Second)
	for _, ev := range events {
		a.waitDelivery(ev, ep.ID, "succeeded", succeeded)
	}
	c := "/webhooks/" + a.ClientID

	resp, body := a.partner("GET", c+"/endpoints", "", a.APIKey)
	if resp.StatusCode != 200 || strings.Contains(string(body), ep.Secret) || strings.Contains(string(body), "secret-partner-key") ||
		strings.Contains(string(body), `"secret"`) {
		t.Fatalf("partner endpoints = %d %s, want 200 without a secret or key", resp.StatusCode, body)
	}
	var eps struct {
		Endpoints []storelink.EndpointDetail `json:"endpoints"`
	}
	decodeInto(t, body, &eps)
	if len(eps.Endpoints) != 1 || eps.Endpoints[0].ID != ep.ID || eps.Endpoints[0].Stats.Succeeded != 3 || !eps.Endpoints[0].HasAPIKey {
		t.Fatalf("partner endpoints = %s, want the endpoint with 3 successes", body)
	}

	type page struct {
		Deliveries []storelink.Delivery `json:"deliveries"`
		NextCursor string               `json:"next_cursor"`
	}
	var ids []string
	after := ""
	for range 5 {
		resp, body := a.partner("GET", c+"/deliveries?limit=2&after="+after, "", a.APIKey)
		if resp.StatusCode != 200 {
			t.Fatalf("partner deliveries = %d %s", resp.StatusCode, body)
		}
		var p page
		decodeInto(t, body, &p)
		for _, d := range p.Deliveries {
			ids = append(ids, d.EventID)
			if len(d.Attempts) != 1 || d.Attempts[0].URL != rec.URL {
				t.Fatalf("partner delivery = %s, want its attempt with its url", dump(d))
			}
		}
		if p.NextCursor == "" {
			break
		}
		after = p.NextCursor
	}
	if len(ids) != 3 || ids[0] != events[2] || ids[2] != events[0] {
		t.Fatalf("partner deliveries paged by 2 = %v, want %v newest first", ids, events)
	}

	// Filtered by event, by its order and by its order number.
	second, _ := a.delivery(events[1], ep.ID)
	for _, q := range []string{"event_id=" + events[1], "order_id=" + second.OrderID, "order_number=WH-P-1",
		"order_number=WH-P-1&status=succeeded", "order_number=WH-P-1&status=succeeded&state=succeeded"} {
		resp, body := a.partner("GET", c+"/deliveries?"+q, "", a.APIKey)
		var p page
		decodeInto(t, body, &p)
		if resp.StatusCode != 200 || len(p.Deliveries) != 1 || p.Deliveries[0].EventID != events[1] {
			t.Fatalf("partner deliveries ?%s = %d %s, want the event's one delivery", q, resp.StatusCode, body)
		}
	}

	if resp, body := a.partner("GET", c+"/deliveries?order_number=WH-P-1&status=failed", "", a.APIKey); resp.StatusCode != 200 ||
		!strings.Contains(string(body), `"deliveries":[]`) {
		t.Fatalf("partner deliveries of a succeeded order's number with status=failed = %d %s, want none", resp.StatusCode, body)
	}

	other := a.otherClient()
	d, _ := a.delivery(events[0], ep.ID)
	for _, cl := range []struct {
		method, path, key string
		status            int
	}{
		{"GET", c + "/deliveries?order_number=" + strings.Repeat("9", 129), a.APIKey, 400},
		{"GET", c + "/deliveries?after=garbage", a.APIKey, 400},
		{"GET", c + "/deliveries?state=lost", a.APIKey, 400},
		{"GET", c + "/deliveries?status=lost", a.APIKey, 400},
		{"GET", c + "/deliveries?status=failed&state=pending", a.APIKey, 400},
		{"GET", "/webhooks/" + other.ID + "/deliveries?after=" + d.ID, other.APIKey, 400},
		{"GET", c + "/deliveries", other.APIKey, 403},
		{"GET", c + "/endpoints", "slk_wrong", 401},
		{"POST", "/webhooks/" + other.ID + "/deliveries/" + d.ID + "/redeliver", other.APIKey, 404},
		{"POST", c + "/deliveries/nope/redeliver", a.APIKey, 404},
	} {
		resp, body := a.partner(cl.method, cl.path, "", cl.key)
		problem(t, resp, body, cl.status)
	}
	resp, body = a.partner("GET", "/webhooks/"+other.ID+"/endpoints", "", other.APIKey)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"endpoints":[]`) {
		t.Fatalf("the other client's endpoints = %d %s, want none", resp.StatusCode, body)
	}
	resp, body = a.partner("POST", c+"/deliveries/"+d.ID+"/redeliver", "", a.APIKey)
	if resp.StatusCode != 202 {
		t.Fatalf("partner redeliver = %d %s", resp.StatusCode, body)
	}
	a.waitDelivery(events[0], ep.ID, "sent again", func(d storelink.Delivery) bool { return succeeded(d) && len(d.Attempts) == 2 })
}

// GET /admin/clients/{client_id}/webhooks lists a client's endpoints as
// GET /admin/webhooks/{endpoint_id} shows each, a page at a time, and
// never a secret or key; an unknown client is 404.
func TestAdminClientEndpoints(t *testing.T) {
	t.Parallel()
	a := newWebhookAPI(t, webhookOptions{})
	first := a.addEndpoint(`{"url":"http://127.0.0.1:9/one","api_key":"their-key-1","description":"Order system"}`)
	second := a.endpointAt("http://127.0.0.1:9/two")
	path := "/admin/clients/" + a.ClientID + "/webhooks"

	var one storelink.EndpointDetail
	a.admin("GET", "/admin/webhooks/"+first.ID, "", 200, &one)
	var p1, p2 storelink.EndpointPage
	resp, body := a.do("GET", path+"?limit=1", nil, map[string]string{"Authorization": "Bearer " + adminToken})
	if resp.StatusCode != 200 || strings.Contains(string(body), first.Secret) || strings.Contains(string(body), "their-key-1") {
		t.Fatalf("client endpoints = %d %s, want 200 without a secret or key", resp.StatusCode, body)
	}
	decodeInto(t, body, &p1)
	a.admin("GET", path+"?limit=1&after="+p1.NextCursor, "", 200, &p2)
	if len(p1.Endpoints) != 1 || p1.NextCursor == "" || len(p2.Endpoints) != 1 || p2.Endpoints[0].ID != second.ID || p2.NextCursor != "" {
		t.Fatalf("client endpoints by 1 = %s then %s, want the first, then the second and no next page", dump(p1), dump(p2))
	}
	// The stats' window ends when each is read.
	listed := p1.Endpoints[0]
	listed.Stats.Since, one.Stats.Since = time.Time{}, time.Time{}
	if got, want := dump(listed), dump(one); got != want || listed.Description != "Order system" {
		t.Fatalf("listed endpoint = %s, want it as GET /admin/webhooks/{endpoint_id} shows it: %s", got, want)
	}

	for _, q := range []string{"/admin/clients/nope/webhooks", "/admin/clients/" + a.otherClient().ID + "x/webhooks"} {
		resp, body := a.do("GET", q, nil, map[string]string{"Authorization": "Bearer " + adminToken})
		problem(t, resp, body, 404)
	}
	for _, q := range []string{path + "?after=garbage", path + "?limit=0", path + "?limit=501"} {
		resp, body := a.do("GET", q, nil, map[string]string{"Authorization": "Bearer " + adminToken})
		problem(t, resp, body, 400)
	}
	resp, body = a.do("GET", path, nil, nil)
	problem(t, resp, body, 401)
}

// The operator's lists of partners and clients page with next_cursor and
// search with q.
func TestAdminLists(t *testing.T) {
	t.Parallel()
	a := newAPI(t, apiOptions{})
	for _, name := range []string{"Zeta", "Yak"} {
		a.admin("POST", "/admin/partners", `{"name":"`+name+`"}`, 201, nil)
	}
	var p1, p2 storelink.PartnerPage
	a.admin("GET", "/admin/partners?limit=2", "", 200, &p1)
	a.admin("GET", "/admin/partners?limit=2&after="+p1.NextCursor, "", 200, &p2)
	if len(p1.Partners) != 2 || p1.Partners[0].Name != "Acme" || p1.Partners[1].Name != "Yak" || p1.NextCursor == "" ||
		len(p2.Partners) != 1 || p2.Partners[0].Name != "Zeta" || p2.NextCursor != "" {
		t.Fatalf("partners by 2 = %s then %s, want Acme, Yak, then Zeta", dump(p1), dump(p2))
	}
	var cs storelink.ClientPage
	a.admin("GET", "/admin/clients?q=acme", "", 200, &cs)
	if len(cs.Clients) != 1 || cs.Clients[0].ID != a.ClientID || cs.Clients[0].PartnerName != "Acme" {
		t.Fatalf("clients matching acme = %s", dump(cs))
	}
	for _, q := range []string{"/admin/partners?after=%21", "/admin/clients?after=garbage", "/admin/clients?limit=501"} {
		resp, body := a.do("GET", q, nil, map[string]string{"Authorization": "Bearer " + adminToken})
		problem(t, resp, body, 400)
	}
}

// A body nested too deep is refused as soon as it is, before the endpoint is
// looked up: a partner's test call with a megabyte of brackets, or of keys
// each opening an object, for an endpoint that does not exist gets 400 saying
// where, not 404; the same call with a plain body gets the 404.
func TestTestEndpointDeepBody(t *testing.T) {
	a := newAPI(t, apiOptions{webhooks: &webhookOptions{}})
	path := "/webhooks/" + a.ClientID + "/endpoints/no-such-endpoint/test"
	for unit, at := range map[string]string{"[": "at byte 33 ", `{"a":`: "at byte 161 "} {
		resp, body := a.partner("POST", path, strings.Repeat(unit, (1<<20)/len(unit)), a.APIKey)
		if p := problem(t, resp, body, http.StatusBadRequest); !strings.Contains(p.Detail, "nested deeper than 32 levels "+at) {
			t.Errorf("%q × 1 MiB: %q, want nested deeper than 32 levels %s", unit, p.Detail, at)
		}
	}
	resp, body := a.partner("POST", path, `{"state":"assigned"}`, a.APIKey)
	problem(t, resp, body, http.StatusNotFound)
}
