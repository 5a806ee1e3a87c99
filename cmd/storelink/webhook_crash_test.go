package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"storelink/webhook"
)

// A crash of serve loses no event. The test kills
// `storelink serve` (SIGKILL) while deliveries are pending and in flight,
// starts it again on the same data folder, and checks that every event
// reaches the receiver at least once, in order per order, and exactly once
// after deduplication by webhook-id.

// crashHit is one request the receiver got.
type crashHit struct {
	id     string
	state  string
	order  string
	body   []byte
	at     time.Time
	status int
}

// crashReceiver is a partner endpoint that is slow (10-60ms an answer) and
// fails the first attempt of one event in five, and keeps what it got.
type crashReceiver struct {
	*httptest.Server
	keys     [][]byte
	mu       sync.Mutex
	hits     []crashHit
	seen     map[string]int
	inflight int
	badSig   []string
	// hold, while set, keeps every request that comes from answering
	// until it is closed or the request's connection goes.
	hold chan struct{}
}

func newCrashReceiver(t *testing.T, secret string) *crashReceiver {
	t.Helper()
	key, err := webhook.ParseSecret(secret)
	if err != nil {
		t.Fatalf("demo webhook secret: %v", err)
	}
	r := &crashReceiver{keys: [][]byte{key}, seen: map[string]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func (r *crashReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	id := req.Header.Get(webhook.HeaderID)
	var ev struct {
		State   string `json:"state"`
		OrderID string `json:"order_id"`
	}
	_ = json.Unmarshal(body, &ev)
	h := fnv.New32a()
	h.Write([]byte(id))
	sum := h.Sum32()

	r.mu.Lock()
	if err := webhook.Verify(r.keys, req.Header, body, time.Now(), 5*time.Minute); err != nil || req.URL.Path != "/hooks/"+id {
		r.badSig = append(r.badSig, fmt.Sprintf("%s %s: %v", id, req.URL.Path, err))
	}
	r.seen[id]++
	first := r.seen[id] == 1
	r.inflight++
	hold := r.hold
	r.mu.Unlock()

	if hold != nil {
		select {
		case <-hold:
		case <-req.Context().Done():
		}
	}
	time.Sleep(time.Duration(10+sum%50) * time.Millisecond) // a receiver that takes 10-60 ms to answer
	status := http.StatusNoContent
	if first && sum%5 == 0 {
		status = http.StatusInternalServerError
	}
	r.mu.Lock()
	r.inflight--
	r.hits = append(r.hits, crashHit{id: id, state: ev.State, order: ev.OrderID, body: body, at: time.Now(), status: status})
	r.mu.Unlock()
	w.WriteHeader(status)
}

func (r *crashReceiver) snapshot() (hits []crashHit, inflight int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]crashHit(nil), r.hits...), r.inflight
}

// crashAdmin sends an operator call and decodes the answer into v.
func crashAdmin(tb testing.TB, p *proc, method, path string, body any, want int, v any) {
	tb.Helper()
	if err := crashCall(p, method, path, body, want, v); err != nil {
		tb.Fatal(err)
	}
}

// pointDemoEndpoint enables the demo client's one webhook endpoint and
// points it at url.
func pointDemoEndpoint(tb testing.TB, p *proc, url string) {
	tb.Helper()
	var client struct {
		Endpoints []struct {
			ID string `json:"endpoint_id"`
		} `json:"webhook_endpoints"`
	}
	crashAdmin(tb, p, "GET", "/admin/clients/"+p.ClientID, nil, 200, &client)
	if len(client.Endpoints) != 1 {
		tb.Fatalf("demo client has endpoints %+v, want one", client.Endpoints)
	}
	crashAdmin(tb, p, "PATCH", "/admin/webhooks/"+client.Endpoints[0].ID, map[string]any{"url": url, "enabled": true}, 200, nil)
}

// crashCall is crashAdmin for goroutines other than the test's.
func crashCall(p *proc, method, path string, body any, want int, v any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, p.URL+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+p.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s = %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			return fmt.Errorf("%s %s: %w: %s", method, path, err, b)
		}
	}
	return nil
}

type crashDelivery struct {
	ID      string `json:"delivery_id"`
	EventID string `json:"event_id"`
	State   string `json:"state"`
}

func crashDeliveries(tb testing.TB, p *proc, state string) []crashDelivery {
	tb.Helper()
	var page struct {
		Deliveries []crashDelivery `json:"deliveries"`
	}
	crashAdmin(tb, p, "GET", "/admin/deliveries?limit=500&client_id="+p.ClientID+"&state="+state, nil, 200, &page)
	return page.Deliveries
}

// crashEventIDs pages through GET /events/{client_id}.
func crashEventIDs(tb testing.TB, p *proc) []string {
	tb.Helper()
	var ids []string
	after := ""
	for {
		var page struct {
			Events []struct {
				EventID string `json:"event_id"`
			} `json:"events"`
			NextCursor string `json:"next_cursor"`
		}
		getJSON(tb, p, "/events/"+p.ClientID+"?limit=100&after="+after, &page)
		for _, e := range page.Events {
			ids = append(ids, e.EventID)
		}
		if len(page.Events) == 0 || page.NextCursor == "" {
			return ids
		}
		after = page.NextCursor
	}
}

func TestWebhookCrashLosesNoEvent(t *testing.T) {
	t.Parallel()
	const orders = 100
	args := []string{"--demo", "--webhook-timeout", "2s", "--webhook-retry-schedule", "50ms,100ms,200ms,400ms,800ms,1s,1s,1s"}
	p := startServe(t, t.TempDir(), args...)
	if p.ClientID == "" || p.WebhookSecret == "" || p.AdminToken == "" {
		t.Fatalf("serve --demo printed no client, webhook secret or admin token:\n%s", p.stdout)
	}
	rec := newCrashReceiver(t, p.WebhookSecret)

	// Orders made before any event exists, so that every event goes to the
	// receiver.
	fulfilOrders(t, p, p, rec.URL, orders)

	// Kill while deliveries are pending and one is being answered: the
	// receiver holds the requests that come from now on, so that one is
	// still being answered when the kill comes, however loaded the machine.
	hold := make(chan struct{})
	rec.mu.Lock()
	rec.hold = hold
	rec.mu.Unlock()
	pending := len(crashDeliveries(t, p, "pending"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, inflight := rec.snapshot(); inflight > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no delivery in flight to kill")
		}
		time.Sleep(time.Millisecond)
	}
	before, inflight := rec.snapshot()
	p.Kill()
	rec.mu.Lock()
	rec.hold = nil
	rec.mu.Unlock()
	close(hold)
	if pending == 0 || inflight == 0 {
		t.Fatalf("killed with %d deliveries pending and %d in flight: the crash came too late to test anything", pending, inflight)
	}
	t.Logf("killed with %d of %d deliveries pending, %d in flight, %d requests received", pending, 2*orders, inflight, len(before))

	q := restart(t, p, args...)
	q.AdminToken = p.AdminToken
	events := crashEventIDs(t, q)
	if len(events) != 2*orders {
		t.Fatalf("GET /events lists %d events, want %d", len(events), 2*orders)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		left := crashDeliveries(t, q, "pending")
		failed := crashDeliveries(t, q, "failed")
		if len(failed) > 0 {
			t.Fatalf("deliveries failed: %+v", failed)
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries still pending 20s after the restart", len(left))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if all := crashDeliveries(t, q, "succeeded"); len(all) != 2*orders {
		t.Errorf("%d deliveries succeeded, want %d", len(all), 2*orders)
	}

	hits, _ := rec.snapshot()
	checkCrashHits(t, hits, events)
	rec.mu.Lock()
	if len(rec.badSig) > 0 {
		t.Errorf("%d requests not signed with the demo secret or at a wrong URL, e.g. %s", len(rec.badSig), rec.badSig[0])
	}
	rec.mu.Unlock()
}

// checkCrashHits checks what the receiver got against the events: each
// taken at least once, with the same body every time it came, exactly once
// after deduplication by webhook-id, and per order the fulfilled event not
// before its assigned event was taken.
func checkCrashHits(t *testing.T, hits []crashHit, events []string) {
	t.Helper()
	want := map[string]bool{}
	for _, id := range events {
		want[id] = true
	}
	body := map[string][]byte{}
	var dedup []string // the events as a deduplicating receiver processes them
	taken := map[string]int{}
	firstTaken := map[string]int{} // order/state -> index of the first 2xx
	firstSent := map[string]int{}
	duplicates := 0
	for i, h := range hits {
		if !want[h.id] {
			t.Errorf("received webhook-id %q, which is not an event of the client", h.id)
			continue
		}
		if b, ok := body[h.id]; ok && !bytes.Equal(b, h.body) {
			t.Errorf("event %s came with two different bodies", h.id)
		}
		body[h.id] = h.body
		key := h.order + "/" + h.state
		if _, ok := firstSent[key]; !ok {
			firstSent[key] = i
		}
		if h.status >= 300 {
			continue
		}
		if taken[h.id]++; taken[h.id] == 1 {
			dedup = append(dedup, h.id)
			firstTaken[key] = i
		} else {
			duplicates++
		}
	}
	missing := 0
	for _, id := range events {
		if taken[id] == 0 {
			missing++
		}
	}
	if missing > 0 || len(dedup) != len(events) {
		t.Errorf("%d of %d events never taken by the receiver; %d processed after deduplication", missing, len(events), len(dedup))
	}
	for key, sent := range firstSent {
		order, state, _ := strings.Cut(key, "/")
		if state != "fulfilled" {
			continue
		}
		if assigned, ok := firstTaken[order+"/assigned"]; !ok || sent < assigned {
			t.Errorf("order %s: fulfilled sent (request %d) before assigned was taken (request %d)", order, sent, assigned)
		}
	}
	t.Logf("%d requests for %d events: %d duplicates taken again after the crash", len(hits), len(events), duplicates)
}

// fulfilOrders points the demo endpoint at url, puts stock through b, and
// makes orders orders through a, each assigned then fulfilled, from 8
// callers at once.
func fulfilOrders(t *testing.T, a, b *proc, url string, orders int) {
	t.Helper()
	pointDemoEndpoint(t, a, url+"/hooks/${eventId}")
	id := mustUpload(t, b, "stock.csv", []byte("store;ean;article_number;quantity;price;store_article_location\n"+
		"S1;4006381333931;SKU-1;100000;19.99;A1\n"))
	if u := a.waitUpload(t, id, 10*time.Second); u["status"] != "applied" {
		t.Fatalf("stock upload: %v", u)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < orders; i += 8 {
				var o struct {
					ID string `json:"order_id"`
				}
				err := crashCall(a, "POST", "/orders", map[string]any{
					"order_number": fmt.Sprintf("ORDER-%03d", i), "client_id": a.ClientID, "store_id": "S1",
					"items": []map[string]string{{"ean": "4006381333931", "marketplace_article_number": "MP-1"}},
				}, 201, &o)
				if err == nil {
					err = crashCall(a, "POST", "/orders/"+o.ID+"/fulfil", map[string]any{}, 200, nil)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}
