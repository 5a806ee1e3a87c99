package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"storelink/webhook"
)

// An endpoint a partner registers for stock_upload.finished is told, signed,
// of each upload of its client that ends: an upload with a row dropped as
// applied with rows_rejected, a rejected one as rejected (the behaviour
// suite covers cancels and set-asides); the demo's endpoint, which takes
// every order state, is told nothing of them, and a test send of the
// upload event is an example of the same shape.
func TestUploadFinishedWebhook(t *testing.T) {
	type got struct {
		header http.Header
		body   []byte
	}
	var (
		mu   sync.Mutex
		hits []got
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		hits = append(hits, got{r.Header.Clone(), b})
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()
	p := startServe(t, t.TempDir(), "--demo")

	resp, b := authDo(t, "POST", p.URL+"/webhooks/"+p.ClientID+"/endpoints",
		`{"url":"`+recv.URL+`/uploads","states":["stock_upload.finished"],"description":"feed outcomes"}`,
		"x-api-key", p.APIKey, "Content-Type", "application/json")
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("register: %d %s", resp.StatusCode, b)
	}
	var ep struct {
		ID     string   `json:"endpoint_id"`
		States []string `json:"states"`
		Secret string   `json:"secret"`
	}
	if err := json.Unmarshal(b, &ep); err != nil || len(ep.States) != 1 || ep.States[0] != "stock_upload.finished" {
		t.Fatalf("registered endpoint %s, %v", b, err)
	}
	key, err := webhook.ParseSecret(ep.Secret)
	if err != nil {
		t.Fatal(err)
	}
	resp, b = authDo(t, "POST", p.URL+"/webhooks/"+p.ClientID+"/endpoints",
		`{"url":"`+recv.URL+`/nope","states":["stock_upload.started"]}`, "x-api-key", p.APIKey, "Content-Type", "application/json")
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(b), "stock_upload.finished") {
		t.Fatalf("an unknown event in states: %d %s, want a 422 that lists what may be named", resp.StatusCode, b)
	}

	code, partial := p.upload(t, "partial.csv", []byte("store;ean;article_number;quantity;price\nS1;4006381333931;A-1;5;9.99\nS9;4006381333931;A-1;5;9.99\n"))
	if code != http.StatusOK {
		t.Fatalf("upload: %d %v", code, partial)
	}
	partialID := partial["upload_id"].(string)
	p.waitUpload(t, partialID, 30*time.Second)
	code, rejected := p.upload(t, "rejected.csv", []byte("store;ean\nS1;4006381333931\n"))
	if code != http.StatusOK {
		t.Fatalf("upload: %d %v", code, rejected)
	}
	rejectedID := rejected["upload_id"].(string)
	p.waitUpload(t, rejectedID, 30*time.Second)

	events := map[string]map[string]any{}
	waitUntil(t, 30*time.Second, "told of both uploads", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, h := range hits {
			if err := webhook.Verify([][]byte{key}, h.header, h.body, time.Now(), 5*time.Minute); err != nil {
				t.Fatalf("delivery not signed with the endpoint's secret: %v", err)
			}
			var ev map[string]any
			if err := json.Unmarshal(h.body, &ev); err != nil {
				t.Fatalf("body %s: %v", h.body, err)
			}
			if ev["event_id"] != h.header.Get(webhook.HeaderID) {
				t.Fatalf("event %v came as webhook-id %s", ev, h.header.Get(webhook.HeaderID))
			}
			events[ev["upload_id"].(string)] = ev
		}
		return len(events) == 2
	})
	for id, want := range map[string]map[string]any{
		partialID:  {"status": "applied", "file_name": "partial.csv", "rows_total": 2.0, "rows_applied": 1.0, "rows_rejected": 1.0},
		rejectedID: {"status": "rejected", "file_name": "rejected.csv", "rows_applied": 0.0},
	} {
		ev := events[id]
		for k, v := range want {
			if ev[k] != v {
				t.Errorf("event of %s: %s = %v, want %v (%v)", id, k, ev[k], v, ev)
			}
		}
		if ev["type"] != "stock_upload.finished" || ev["client_id"] != p.ClientID || ev["status_url"] != "/stock/"+p.ClientID+"/uploads/"+id {
			t.Errorf("event of %s = %v", id, ev)
		}
		_, st := p.get(t, ev["status_url"].(string))
		if st["upload_id"] != id || st["status"] != ev["status"] {
			t.Errorf("status_url %s reads %v", ev["status_url"], st)
		}
	}

	// The deliveries name the upload, not an order; none went to the demo
	// endpoint.
	resp, b = authDo(t, "GET", p.URL+"/webhooks/"+p.ClientID+"/deliveries?limit=100", "", "x-api-key", p.APIKey)
	var list struct {
		Deliveries []struct {
			EndpointID string `json:"endpoint_id"`
			UploadID   string `json:"upload_id"`
			OrderID    string `json:"order_id"`
			EventState string `json:"event_state"`
		} `json:"deliveries"`
	}
	if err := json.Unmarshal(b, &list); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("deliveries: %d %s %v", resp.StatusCode, b, err)
	}
	for _, d := range list.Deliveries {
		if d.EndpointID != ep.ID || d.UploadID == "" || d.OrderID != "" || d.EventState != "stock_upload.finished" {
			t.Fatalf("delivery %+v, want only the uploads' to %s", d, ep.ID)
		}
	}

	// A test send of the upload event.
	resp, b = authDo(t, "POST", p.URL+"/webhooks/"+p.ClientID+"/endpoints/"+ep.ID+"/test", `{"state":"stock_upload.finished"}`,
		"x-api-key", p.APIKey, "Content-Type", "application/json")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("test send: %d %s", resp.StatusCode, b)
	}
	mu.Lock()
	last := hits[len(hits)-1]
	mu.Unlock()
	var ex map[string]any
	if err := json.Unmarshal(last.body, &ex); err != nil || ex["type"] != "stock_upload.finished" || ex["file_name"] != "test-stock.csv" ||
		last.header.Get("webhook-test") != "true" {
		t.Fatalf("test send arrived as %s %v (webhook-test %q)", last.body, err, last.header.Get("webhook-test"))
	}
}
