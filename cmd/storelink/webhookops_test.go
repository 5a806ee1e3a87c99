package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestServeWebhookOperations: serve wires the test send and the deletion
// of an endpoint to its deliverer: a test send reaches a receiver marked
// webhook-test: true, for the operator and for the partner, and a deleted
// endpoint stays readable.
func TestServeWebhookOperations(t *testing.T) {
	p := startServe(t, t.TempDir(), "--demo")
	b, err := os.ReadFile(filepath.Join(p.Data, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(b))
	var mu sync.Mutex
	var marks []string
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		marks = append(marks, r.Header.Get("webhook-test"))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rec.Close()

	a := call(t, http.MethodPost, p.URL+"/admin/clients/"+p.ClientID+"/webhooks", token, "", []byte(`{"url":"`+rec.URL+`/hooks"}`))
	id, _ := a.body["endpoint_id"].(string)
	if a.code != http.StatusCreated || id == "" {
		t.Fatalf("register an endpoint: %d %v", a.code, a.body)
	}
	if a := call(t, http.MethodPost, p.URL+"/admin/webhooks/"+id+"/test", token, "", nil); a.code != http.StatusOK || a.body["status_code"] != 204.0 {
		t.Fatalf("operator's test send: %d %v, want 200 with the receiver's 204", a.code, a.body)
	}
	if a := call(t, http.MethodPost, p.URL+"/webhooks/"+p.ClientID+"/endpoints/"+id+"/test", "", p.APIKey, nil); a.code != http.StatusOK ||
		a.body["status_code"] != 204.0 {
		t.Fatalf("partner's test send: %d %v, want 200 with the receiver's 204", a.code, a.body)
	}
	mu.Lock()
	got := strings.Join(marks, ",")
	mu.Unlock()
	if got != "true,true" {
		t.Fatalf("receiver's webhook-test headers = %q, want two test sends", got)
	}
	if a := call(t, http.MethodDelete, p.URL+"/admin/webhooks/"+id, token, "", nil); a.code != http.StatusNoContent {
		t.Fatalf("delete: %d %v", a.code, a.body)
	}
	if a := call(t, http.MethodGet, p.URL+"/admin/webhooks/"+id, token, "", nil); a.code != http.StatusOK || a.body["deleted_at"] == nil {
		t.Fatalf("the deleted endpoint: %d %v, want it with deleted_at", a.code, a.body)
	}
}
