package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"storelink"
	"storelink/dashboard"
)

// apiStatus is the status the partner API answers a key with.
func apiStatus(t *testing.T, f *fixture, clientID, key string) int {
	t.Helper()
	req, err := http.NewRequest("GET", f.URL+"/clients/"+clientID+"/api-keys", nil)
	must(t, err)
	req.Header.Set("x-api-key", key)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestPortalAPIKeys: the keys page lists the client's keys by id, prefix,
// creation and last use, never a key; creating one needs the token, shows
// the key once (it then opens the API), makes one key when the form is
// sent twice, and stops at the most a client may have with a message that
// says so; revoking needs the token, ends the key, refuses another
// client's key as not found, and refuses the last key with a message
// beside it.
func TestPortalAPIKeys(t *testing.T) {
	eachDatabase(t, fixtureOptions{}, func(t *testing.T, f *fixture) {
		s := f.seedData()
		ctx := context.Background()
		b := f.browser()
		b.portalLogin(s.ClientID, s.APIKey)
		page := b.page("/portal/api-keys")
		keys, err := f.services.Partners.APIKeys(ctx, s.ClientID)
		must(t, err)
		for _, k := range keys {
			wantContains(t, "the keys page", page, `data-key="`+k.ID+`"`, k.Prefix+"…")
		}
		other, err := f.services.Partners.APIKeys(ctx, s.OtherClientID)
		must(t, err)
		if strings.Contains(page, other[0].ID) {
			t.Error("the keys page shows the other client's key")
		}
		token, seen := formValue(t, page, "/portal/api-keys", "csrf"), formValue(t, page, "/portal/api-keys", "seen")

		if resp, _ := b.post("/portal/api-keys", url.Values{"seen": {seen}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("create without the token = %d, want 403", resp.StatusCode)
		}
		resp, body := b.post("/portal/api-keys", url.Values{"csrf": {token}, "seen": {seen}})
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("Set-Cookie") != "" {
			t.Fatalf("create = %d, Cache-Control %q", resp.StatusCode, resp.Header.Get("Cache-Control"))
		}
		key := shownOnce(t, "the page after creating a key", body)
		wantContains(t, "the page after creating a key", body, `data-then="/portal/api-keys"`)
		f.keep(key)
		if got := apiStatus(t, f, s.ClientID, key); got != http.StatusOK {
			t.Errorf("the new key at the API = %d, want 200", got)
		}
		b.page("/portal/api-keys")
		if resp, body := b.post("/portal/api-keys", url.Values{"csrf": {token}, "seen": {seen}}); resp.StatusCode != http.StatusConflict ||
			onceRE.MatchString(body) || !strings.Contains(body, "sent twice") {
			t.Errorf("the create form sent again = %d; want 409 and no key", resp.StatusCode)
		}
		// Up to the most a client may have: then the form is gone, and a
		// create sent anyway says why it is refused.
		for range storelink.MaxAPIKeys - 3 {
			seen = formValue(t, b.page("/portal/api-keys"), "/portal/api-keys", "seen")
			resp, body := b.post("/portal/api-keys", url.Values{"csrf": {token}, "seen": {seen}})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("create = %d", resp.StatusCode)
			}
			f.keep(shownOnce(t, "the page after creating a key", body))
		}
		page = b.page("/portal/api-keys")
		wantContains(t, "the keys page at the most keys", page, `id="keys-full"`, "the most a client may have")
		keys, err = f.services.Partners.APIKeys(ctx, s.ClientID)
		must(t, err)
		resp, body = b.post("/portal/api-keys", url.Values{"csrf": {token}, "seen": {dashboard.KeysSeen(keys)}})
		if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "API keys, the most it may have: revoke one first.") || len(keys) != storelink.MaxAPIKeys {
			t.Errorf("a sixth key = %d with %d keys; want 409 saying so", resp.StatusCode, len(keys))
		}

		// A session signed in with the second key ends when it is revoked.
		second := f.browser()
		second.portalLogin(s.ClientID, s.SecondKey)
		revoke := func(id string) string { return "/portal/api-keys/" + id + "/revoke" }
		if resp, _ := b.post(revoke(s.SecondKeyID), nil); resp.StatusCode != http.StatusForbidden {
			t.Errorf("revoke without the token = %d, want 403", resp.StatusCode)
		}
		for _, id := range []string{other[0].ID, "no-such-key"} {
			if resp, _ := b.post(revoke(id), url.Values{"csrf": {token}}); resp.StatusCode != http.StatusNotFound {
				t.Errorf("revoke %s = %d, want 404", id, resp.StatusCode)
			}
		}
		if got := apiStatus(t, f, s.OtherClientID, s.OtherAPIKey); got != http.StatusOK {
			t.Errorf("the other client's key at the API = %d after the refused revoke", got)
		}
		// The key this session signed in with, by its prefix: keys made in
		// one millisecond list in no set order.
		mine := slices.IndexFunc(keys, func(k storelink.APIKey) bool { return k.Prefix == storelink.KeyPrefix(s.APIKey) })
		if mine < 0 {
			t.Fatalf("the key signed in with is not among %+v", keys)
		}
		for _, k := range keys {
			if k.ID == keys[mine].ID {
				continue
			}
			resp, _ := b.post(revoke(k.ID), url.Values{"csrf": {token}})
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/portal/api-keys?done=revoked" {
				t.Fatalf("revoke %s = %d %q", k.ID, resp.StatusCode, resp.Header.Get("Location"))
			}
		}
		if got := apiStatus(t, f, s.ClientID, s.SecondKey); got != http.StatusUnauthorized {
			t.Errorf("a revoked key at the API = %d, want 401", got)
		}
		if resp, _ := second.get("/portal/orders"); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("a session of a revoked key = %d, want the sign-in redirect", resp.StatusCode)
		}
		wantContains(t, "the page after revoking", b.page("/portal/api-keys?done=revoked"), "The API key is revoked")
		resp, body = b.post(revoke(keys[mine].ID), url.Values{"csrf": {token}})
		if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "is the last key of client") || !strings.Contains(body, `<p class="error" role="alert">`) {
			t.Errorf("revoke the last key = %d, want 409 saying so beside it", resp.StatusCode)
		}
		if got := apiStatus(t, f, s.ClientID, s.APIKey); got != http.StatusOK {
			t.Errorf("the last key at the API = %d after the refused revoke, want 200", got)
		}
		f.checkNoSecretLogged()
	})
}
