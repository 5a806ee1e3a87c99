package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"storelink"
	"storelink/webhook"
)

// partnerJSON sends a partner call with the client's key, checks its
// status and decodes the answer into v (when not nil).
func (a *api) partnerJSON(method, path, body string, want int, v any) []byte {
	a.t.Helper()
	resp, b := a.partner(method, path, body, a.APIKey)
	if resp.StatusCode != want {
		a.t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			a.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return b
}

// A partner manages its own endpoints with its API key: it registers one
// (the secret shown once), changes and disables it, rotates its secret,
// recovers its failed deliveries and deletes it, and none of these reach
// another client's endpoint, which is the same 404 as one that does not
// exist.
func TestPartnerManagesEndpoints(t *testing.T) {
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
	base := "/webhooks/" + a.ClientID + "/endpoints"

	var ep storelink.EndpointSecret
	a.partnerJSON("POST", base, `{"url":"`+rec.URL+`/hooks","states":["assigned"],"description":"ERP (staging)"}`, 201, &ep)
	if ep.ID == "" || ep.ClientID != a.ClientID || !strings.HasPrefix(ep.Secret, webhook.SecretPrefix) || !ep.Enabled ||
		ep.Description != "ERP (staging)" {
		t.Fatalf("registered endpoint = %+v", ep)
	}
	var list struct{ Endpoints []storelink.EndpointDetail }
	b := a.partnerJSON("GET", base, "", 200, &list)
	if len(list.Endpoints) != 1 || list.Endpoints[0].ID != ep.ID || strings.Contains(string(b), ep.Secret) {
		t.Fatalf("the partner's endpoints = %s; want the one registered, without its secret", b)
	}
	for body, status := range map[string]int{
		`{"url":"ftp://example.test/"}`:               422,
		`{"url":"` + rec.URL + `","states":["nope"]}`: 422,
		`{"url":1}`: 400,
		`{"url":"` + rec.URL + `","description":"a\tb"}`:                             422,
		`{"url":"` + rec.URL + `","description":"` + strings.Repeat("x", 201) + `"}`: 422,
	} {
		resp, answer := a.partner("POST", base, body, a.APIKey)
		problem(t, resp, answer, status)
	}

	var changed storelink.Endpoint
	a.partnerJSON("PATCH", base+"/"+ep.ID, `{"url":"`+rec.URL+`/v2","states":["assigned","fulfilled"],"description":"ERP"}`, 200, &changed)
	if changed.URL != rec.URL+"/v2" || len(changed.States) != 2 || changed.Description != "ERP" {
		t.Fatalf("changed endpoint = %+v", changed)
	}
	var rotated storelink.EndpointSecret
	a.partnerJSON("POST", base+"/"+ep.ID+"/rotate-secret", `{"overlap":"1h"}`, 200, &rotated)
	if rotated.Secret == ep.Secret || !strings.HasPrefix(rotated.Secret, webhook.SecretPrefix) || rotated.PreviousSecretUntil == nil {
		t.Fatalf("rotated endpoint = %+v; want a new secret and until when the old one signs", rotated)
	}

	// A failed delivery, recovered by the partner once its receiver is
	// healthy again.
	since := time.Now().UTC().Add(-time.Minute)
	_, eventID := a.placeOrder("SELF-1")
	a.waitDelivery(eventID, ep.ID, "failed", func(d storelink.Delivery) bool { return d.State == storelink.DeliveryFailed })
	mu.Lock()
	healthy = true
	mu.Unlock()
	var recovered map[string]int
	a.partnerJSON("POST", base+"/"+ep.ID+"/recover", `{"since":"`+since.Format(time.RFC3339)+`"}`, 202, &recovered)
	if recovered["deliveries"] != 1 {
		t.Fatalf("recover answered %v, want 1 delivery", recovered)
	}
	d := a.waitDelivery(eventID, ep.ID, "succeeded", succeeded)
	if got := d.Attempts[len(d.Attempts)-1].URL; got != rec.URL+"/v2" {
		t.Fatalf("the recovered delivery went to %s, want the changed URL %s/v2", got, rec.URL)
	}

	// Another client of the same partner, with its own key, reaches none
	// of it, and is told nothing more than for an endpoint that does not
	// exist.
	other := a.otherClient()
	obase := "/webhooks/" + other.ID + "/endpoints/"
	for _, c := range []struct{ method, path, body string }{
		{"PATCH", obase + ep.ID, `{"enabled":false}`},
		{"DELETE", obase + ep.ID, ""},
		{"POST", obase + ep.ID + "/rotate-secret", ""},
		{"POST", obase + ep.ID + "/recover", `{"since":"2026-01-01T00:00:00Z"}`},
		{"PATCH", obase + "nope", `{"enabled":false}`},
		{"DELETE", obase + "nope", ""},
	} {
		resp, answer := a.partner(c.method, c.path, c.body, other.APIKey)
		problem(t, resp, answer, 404)
	}
	// Nor does the client's own key on the other client's paths.
	resp, answer := a.partner("PATCH", obase+ep.ID, `{"enabled":false}`, a.APIKey)
	problem(t, resp, answer, 403)

	var off storelink.Endpoint
	a.partnerJSON("PATCH", base+"/"+ep.ID, `{"enabled":false}`, 200, &off)
	if off.Enabled {
		t.Fatalf("disabled endpoint = %+v", off)
	}
	a.partnerJSON("DELETE", base+"/"+ep.ID, "", 204, nil)
	resp, answer = a.partner("PATCH", base+"/"+ep.ID, `{"enabled":true}`, a.APIKey)
	problem(t, resp, answer, 409)
	resp, answer = a.partner("POST", base+"/"+ep.ID+"/rotate-secret", "", a.APIKey)
	problem(t, resp, answer, 409)
	a.partnerJSON("GET", base, "", 200, &list)
	if len(list.Endpoints) != 0 {
		t.Fatalf("after the delete the partner's endpoints = %+v, want none", list.Endpoints)
	}
}

// The partner's endpoint URL goes through the same guard as the operator's:
// without --webhook-allow-private a private address is refused, with no
// connection made to it.
func TestPartnerEndpointAddressGuard(t *testing.T) {
	t.Parallel()
	a := newWebhookAPI(t, webhookOptions{denyPrivate: true})
	base := "/webhooks/" + a.ClientID + "/endpoints"
	for _, url := range []string{"http://127.0.0.1:9/", "http://10.0.0.1/", "http://[::1]/"} {
		resp, answer := a.partner("POST", base, `{"url":"`+url+`"}`, a.APIKey)
		problem(t, resp, answer, 422)
	}
	var list struct{ Endpoints []storelink.EndpointDetail }
	a.partnerJSON("GET", base, "", 200, &list)
	if len(list.Endpoints) != 0 {
		t.Fatalf("endpoints after refusals = %+v, want none", list.Endpoints)
	}
}

// A partner lists its API keys (never the keys themselves), makes new ones
// up to the limit, each shown once and working at once, and revokes them,
// except the last; another client's key is the same 404 as a random one.
func TestPartnerManagesAPIKeys(t *testing.T) {
	t.Parallel()
	a := newAPI(t, apiOptions{})
	path := "/clients/" + a.ClientID + "/api-keys"
	type keyList struct {
		APIKeys []storelink.APIKey `json:"api_keys"`
	}
	var list keyList
	a.partnerJSON("GET", path, "", 200, &list)
	if len(list.APIKeys) != 1 || list.APIKeys[0].Prefix == "" || !strings.HasPrefix(a.APIKey, list.APIKeys[0].Prefix) {
		t.Fatalf("keys = %+v; want the client's one key, named by a prefix of it", list)
	}
	first := list.APIKeys[0].ID

	var made []storelink.NewAPIKey
	for range storelink.MaxAPIKeys - 1 {
		var k storelink.NewAPIKey
		a.partnerJSON("POST", path, "", 201, &k)
		if k.KeyID == "" || k.APIKey == "" {
			t.Fatalf("new key = %+v", k)
		}
		made = append(made, k)
	}
	resp, answer := a.partner("POST", path, "", a.APIKey)
	problem(t, resp, answer, 409)
	b := a.partnerJSON("GET", path, "", 200, &list)
	if len(list.APIKeys) != storelink.MaxAPIKeys {
		t.Fatalf("keys = %s; want %d", b, storelink.MaxAPIKeys)
	}
	for _, k := range append(made, storelink.NewAPIKey{APIKey: a.APIKey}) {
		if strings.Contains(string(b), k.APIKey) {
			t.Fatalf("the key list shows a key: %s", b)
		}
	}
	// A new key works at once, and can revoke the first.
	newest := made[len(made)-1]
	if resp, body := a.partner("DELETE", path+"/"+first, "", newest.APIKey); resp.StatusCode != 204 {
		t.Fatalf("revoke with a new key = %d %s", resp.StatusCode, body)
	}
	resp, answer = a.partner("GET", path, "", a.APIKey)
	problem(t, resp, answer, 401)

	// Another client's key id is the same 404 as a random one.
	other := a.otherClient()
	var otherKeys keyList
	if resp, body := a.partner("GET", "/clients/"+other.ID+"/api-keys", "", other.APIKey); resp.StatusCode != 200 {
		t.Fatalf("the other client's keys = %d %s", resp.StatusCode, body)
	} else if err := json.Unmarshal(body, &otherKeys); err != nil || len(otherKeys.APIKeys) != 1 {
		t.Fatalf("the other client's keys = %s, %v", body, err)
	}
	for _, id := range []string{otherKeys.APIKeys[0].ID, "nope"} {
		resp, answer := a.partner("DELETE", path+"/"+id, "", newest.APIKey)
		problem(t, resp, answer, 404)
	}

	// Revoke all but the last; the last stays.
	for _, k := range made[:len(made)-1] {
		if resp, body := a.partner("DELETE", path+"/"+k.KeyID, "", newest.APIKey); resp.StatusCode != 204 {
			t.Fatalf("revoke %s = %d %s", k.KeyID, resp.StatusCode, body)
		}
	}
	resp, answer = a.partner("DELETE", path+"/"+newest.KeyID, "", newest.APIKey)
	problem(t, resp, answer, 409)
	var last keyList
	resp, body := a.partner("GET", path, "", newest.APIKey)
	if err := json.Unmarshal(body, &last); resp.StatusCode != 200 || err != nil || len(last.APIKeys) != 1 || last.APIKeys[0].ID != newest.KeyID {
		t.Fatalf("keys at the end = %d %s; want %s alone", resp.StatusCode, body, newest.KeyID)
	}
}
