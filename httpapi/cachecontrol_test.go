package httpapi_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// Every answer that shows a secret or an API key says no cache may keep
// it; every answer to a call made with x-api-key is private and varies by
// the key (its files are kept by no cache at all); a problem is kept by
// none.
func TestCacheControl(t *testing.T) {
	t.Parallel()
	a := newWebhookAPI(t, webhookOptions{})
	key := map[string]string{"x-api-key": a.APIKey}
	keyJSON := withHeader(key, "Content-Type", "application/json")
	admin := withHeader(adminAuth(), "Content-Type", "application/json")
	var up struct {
		UploadID string `json:"upload_id"`
	}
	_, b := a.upload("feed.csv", []byte(feed), nil)
	decodeInto(t, b, &up)
	a.waitUpload(up.UploadID)
	ep := a.endpointAt("https://partner.example/a")
	u := "/stock/" + a.ClientID + "/uploads/" + up.UploadID

	type call struct {
		method, path, body string
		h                  map[string]string
		status             int
	}
	noStore := []call{
		{"POST", "/admin/partners/" + a.PartnerID + "/clients", `{"country_code":"FR","currency":"EUR"}`, admin, 201},
		{"POST", "/admin/clients/" + a.ClientID + "/api-keys", "", admin, 201},
		{"POST", "/admin/clients/" + a.ClientID + "/webhooks", `{"url":"https://partner.example/b"}`, admin, 201},
		{"POST", "/admin/webhooks/" + ep.ID + "/rotate-secret", "", admin, 200},
		{"POST", "/webhooks/" + a.ClientID + "/endpoints", `{"url":"https://partner.example/c"}`, keyJSON, 201},
		{"POST", "/webhooks/" + a.ClientID + "/endpoints/" + ep.ID + "/rotate-secret", "", keyJSON, 200},
		{"POST", "/clients/" + a.ClientID + "/api-keys", "", key, 201},
		{"GET", "/admin/clients/nope", "", admin, 404},
		{"GET", "/stock/" + a.ClientID + "/uploads/nope", "", key, 404},
	}
	for _, c := range noStore {
		resp, b := a.do(c.method, c.path, strings.NewReader(c.body), c.h)
		if resp.StatusCode != c.status {
			t.Fatalf("%s %s = %d %s, want %d", c.method, c.path, resp.StatusCode, b, c.status)
		}
		if got := resp.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s %s: Cache-Control = %q, want no-store", c.method, c.path, got)
		}
	}

	private := []call{
		{"GET", "/stock/" + a.ClientID + "/uploads", "", key, 200},
		{"GET", u, "", key, 200},
		{"GET", "/stock/" + a.ClientID + "/stock", "", key, 200},
		{"GET", "/events/" + a.ClientID, "", key, 200},
		{"GET", "/webhooks/" + a.ClientID + "/endpoints", "", key, 200},
		{"GET", "/webhooks/" + a.ClientID + "/endpoints/" + ep.ID, "", key, 200},
		{"GET", "/webhooks/" + a.ClientID + "/deliveries", "", key, 200},
		{"GET", "/clients/" + a.ClientID + "/api-keys", "", key, 200},
		{"PUT", "/stock/" + a.ClientID + "/validate", feed, withHeader(key, "Content-Type", "text/csv"), 200},
	}
	for _, c := range private {
		resp, b := a.do(c.method, c.path, strings.NewReader(c.body), c.h)
		if resp.StatusCode != c.status {
			t.Fatalf("%s %s = %d %s, want %d", c.method, c.path, resp.StatusCode, b, c.status)
		}
		if got := resp.Header.Get("Cache-Control"); got != "private" {
			t.Errorf("%s %s: Cache-Control = %q, want private", c.method, c.path, got)
		}
		checkVary(t, c.method+" "+c.path, resp)
	}
	for _, file := range []string{u + "/file", u + "/errors.csv"} {
		resp, b := a.do("GET", file, nil, key)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s = %d %s", file, resp.StatusCode, b)
		}
		if got := resp.Header.Get("Cache-Control"); got != "private, no-store" {
			t.Errorf("GET %s: Cache-Control = %q, want private, no-store", file, got)
		}
		checkVary(t, "GET "+file, resp)
	}
}

// checkVary checks that an answer varies by x-api-key.
func checkVary(t *testing.T, what string, resp *http.Response) {
	t.Helper()
	var vary []string
	for _, v := range resp.Header.Values("Vary") {
		for _, f := range strings.Split(v, ",") {
			vary = append(vary, strings.ToLower(strings.TrimSpace(f)))
		}
	}
	if !slices.Contains(vary, "x-api-key") {
		t.Errorf("%s: Vary = %q, want x-api-key", what, resp.Header.Values("Vary"))
	}
}
