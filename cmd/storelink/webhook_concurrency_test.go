package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// --webhook-concurrency reaches the deliverer: with 2, an endpoint that
// answered once (a new one is given one request at a time until it
// answers) and then holds every request gets 2 at once, never a third,
// though 11 events of 11 orders could all go; once it answers, every event
// arrives.
func TestWebhookConcurrencyFlag(t *testing.T) {
	t.Parallel()
	const orders, limit = 12, 2
	p := startServe(t, t.TempDir(), "--demo", "--webhook-timeout", "30s", "--webhook-concurrency", fmt.Sprint(limit))
	if p.ClientID == "" || p.AdminToken == "" {
		t.Fatalf("serve --demo printed no client or admin token:\n%s", p.stdout)
	}
	var (
		mu             sync.Mutex
		inflight, peak int
		seen           = map[string]bool{}
		gate           = make(chan struct{})
		answered       bool // the first request, answered at once
	)
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		first := !answered
		answered = true
		inflight++
		peak = max(peak, inflight)
		mu.Unlock()
		if !first {
			<-gate
		}
		mu.Lock()
		inflight--
		seen[r.Header.Get("webhook-id")] = true
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rec.Close)
	t.Cleanup(func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	})

	pointDemoEndpoint(t, p, rec.URL+"/hooks")
	id := mustUpload(t, p, "stock.csv", []byte("store;ean;article_number;quantity;price\nS1;4006381333931;SKU-1;1000;19.99\n"))
	if u := p.waitUpload(t, id, 10*time.Second); u["status"] != "applied" {
		t.Fatalf("stock upload: %v", u)
	}
	for i := range orders {
		crashAdmin(t, p, "POST", "/orders", map[string]any{
			"order_number": fmt.Sprintf("CONC-%02d", i), "client_id": p.ClientID, "store_id": "S1",
			"items": []map[string]string{{"ean": "4006381333931", "marketplace_article_number": "MP-1"}},
		}, 201, nil)
	}

	// The endpoint holds what it gets: wait for the limit, then give the
	// deliverer time to send more if it would.
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := inflight
		mu.Unlock()
		if n >= limit {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests in flight after 10 s, want %d", n, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // an absence: a window for one request too many
	mu.Lock()
	got := peak
	mu.Unlock()
	if got != limit {
		t.Fatalf("%d requests in flight at once to the endpoint, want %d (--webhook-concurrency)", got, limit)
	}

	close(gate)
	deadline = time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n == orders {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events arrived", n, orders)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
