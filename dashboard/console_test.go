package dashboard_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"storelink"
)

// consoleSession logs a browser in to the dashboard and returns it with the
// seed client's page and its CSRF token.
func consoleSession(t *testing.T, f *fixture, s seed) (*browser, string, string) {
	t.Helper()
	b := f.browser()
	b.login()
	page := b.page("/dashboard/clients/" + s.ClientID)
	return b, page, formValue(t, page, "/dashboard/clients/"+s.ClientID+"/endpoints", "csrf")
}

// TestConsoleRegisterEndpoint: a client's page lists its endpoints with
// links to each one's page and change form, and registers one more: the
// form refuses without the session's token, refuses what the operator API
// refuses beside the form with what was typed kept (not the key), and
// shows the new endpoint's secret once; sent again, it makes no second
// endpoint.
func TestConsoleRegisterEndpoint(t *testing.T) {
	eachDatabase(t, fixtureOptions{denyPrivate: true}, func(t *testing.T, f *fixture) {
		s := f.seedData()
		b, page, token := consoleSession(t, f, s)
		action := "/dashboard/clients/" + s.ClientID + "/endpoints"
		wantContains(t, "the client's page", page, `href="/dashboard/endpoints/`+s.EndpointID+`"`,
			`href="/dashboard/endpoints/`+s.EndpointID+`/edit"`, `action="`+action+`"`)
		seen := formValue(t, page, action, "seen")
		count := func() int {
			list, err := f.services.Webhooks.Endpoints(context.Background(), s.ClientID)
			must(t, err)
			return len(list)
		}
		before := count()
		form := func(u string, states ...string) url.Values {
			return url.Values{"csrf": {token}, "seen": {seen}, "url": {u}, "states": states, "api_key": {"console-hook-key-5521"},
				"description": {"ERP (prod)"}}
		}
		f.keep("console-hook-key-5521")

		if resp, _ := b.post(action, url.Values{"url": {"https://hooks.example.com/x"}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("register without the token = %d, want 403", resp.StatusCode)
		}
		if resp, _ := b.post(action, url.Values{"csrf": {"forged"}, "url": {"https://hooks.example.com/x"}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("register with a wrong token = %d, want 403", resp.StatusCode)
		}
		for _, c := range []struct {
			name, url string
			states    []string
			says      string
		}{
			{"a loopback address", "http://127.0.0.1:8080/hooks", []string{"fulfilled"}, "url: 127.0.0.1 is a loopback address, which is not allowed for webhooks unless the operator starts serve with --webhook-allow-private"},
			{"an ftp URL", "ftp://hooks.example.com/x", []string{"assigned"}, "url: the scheme must be http or https."},
		} {
			resp, body := b.post(action, form(c.url, c.states...))
			if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `<p class="error" role="alert">`+html.EscapeString(c.says)) {
				t.Errorf("register %s = %d, want 422 saying %q beside the form", c.name, resp.StatusCode, c.says)
			}
			wantContains(t, "the refused form of "+c.name, body, `name="url" value="`+html.EscapeString(c.url)+`"`,
				`value="ERP (prod)"`, `value="`+c.states[0]+`" checked`, "Type the key again")
			f.checkNoSecret("the refused form of "+c.name, body)
		}
		if n := count(); n != before {
			t.Fatalf("refused forms registered %d endpoints", n-before)
		}

		resp, body := b.post(action, form("https://hooks.example.com/erp/${eventId}", "assigned", "cancelled"))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("Location") != "" ||
			resp.Header.Get("Set-Cookie") != "" {
			t.Fatalf("register = %d, Cache-Control %q; want 200, no-store: %s", resp.StatusCode, resp.Header.Get("Cache-Control"), body)
		}
		secret := shownOnce(t, "the page after registering", body)
		wantContains(t, "the page after registering", body, `data-then="/dashboard/clients/`+s.ClientID+`"`, `data-copy="once-value"`)
		f.keep(secret)
		list, err := f.services.Webhooks.Endpoints(context.Background(), s.ClientID)
		must(t, err)
		e := list[len(list)-1]
		if len(list) != before+1 || e.URL != "https://hooks.example.com/erp/${eventId}" || !slices.Equal(e.States, []storelink.OrderState{"assigned", "cancelled"}) ||
			!e.HasAPIKey || e.Description != "ERP (prod)" || !e.Enabled {
			t.Errorf("the endpoint registered = %+v", e)
		}
		if got := signingSecrets(t, f, s.ClientID, e.ID); len(got) != 1 || got[0] != secret {
			t.Errorf("the endpoint signs with %d secrets, the one shown among them: %v", len(got), slices.Contains(got, secret))
		}
		wantContains(t, "the client's page", b.page("/dashboard/clients/"+s.ClientID), `data-endpoint="`+e.ID+`"`)
		resp, body = b.post(action, form("https://hooks.example.com/erp/${eventId}", "assigned"))
		if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "sent twice") || onceRE.MatchString(body) || count() != before+1 {
			t.Errorf("the form sent again = %d, %d endpoints; want 409 and still %d", resp.StatusCode, count(), before+1)
		}
		if resp, _ := b.post("/dashboard/clients/no-such-client/endpoints", url.Values{"csrf": {token}, "seen": {seen},
			"url": {"https://hooks.example.com/x"}}); resp.StatusCode != http.StatusNotFound {
			t.Errorf("register for an unknown client = %d, want 404", resp.StatusCode)
		}
		f.checkNoSecretLogged()
	})
}

// TestConsoleEditEndpoint: the change form shows the endpoint as it is;
// it refuses without the token, refuses what the API refuses beside the
// form with the input kept, and changes the URL, states, key, description
// and enabled flag (disabling it).
func TestConsoleEditEndpoint(t *testing.T) {
	eachDatabase(t, fixtureOptions{denyPrivate: true}, func(t *testing.T, f *fixture) {
		s := f.seedData()
		b, _, token := consoleSession(t, f, s)
		edit := "/dashboard/endpoints/" + s.EndpointID + "/edit"
		page := b.page(edit)
		wantContains(t, "the change form", page, `name="url" value="http://127.0.0.1:1/hooks/${eventId}"`, `name="enabled" value="yes" checked`,
			`name="remove_api_key"`, "keep the one it has")

		if resp, _ := b.post(edit, url.Values{"description": {"x"}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("change without the token = %d, want 403", resp.StatusCode)
		}
		resp, body := b.post(edit, url.Values{"csrf": {token}, "url": {"http://10.0.0.7/hooks"}, "enabled": {"yes"}, "description": {"kept"},
			"states": {"returned"}})
		if resp.StatusCode != 422 || !strings.Contains(body, "url: 10.0.0.7 is a private address") || !strings.Contains(body, `value="http://10.0.0.7/hooks"`) ||
			!strings.Contains(body, `value="kept"`) || !strings.Contains(body, `value="returned" checked`) {
			t.Errorf("change to a private address = %d, want 422 beside the form with the input kept", resp.StatusCode)
		}
		if e := endpointOf(t, f, "", s.EndpointID); e.URL != "http://127.0.0.1:1/hooks/${eventId}" || e.Description != "" {
			t.Errorf("a refused change changed the endpoint: %+v", e)
		}

		f.keep("console-new-key-9934")
		resp, _ = b.post(edit, url.Values{"csrf": {token}, "url": {"https://hooks.example.com/v3/${eventId}"}, "states": {"fulfilled"},
			"description": {"v3 receiver"}, "api_key": {"console-new-key-9934"}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/endpoints/"+s.EndpointID+"?done=updated" {
			t.Fatalf("change = %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		e := endpointOf(t, f, "", s.EndpointID)
		if e.URL != "https://hooks.example.com/v3/${eventId}" || !slices.Equal(e.States, []storelink.OrderState{"fulfilled"}) ||
			e.Enabled || !e.HasAPIKey || e.Description != "v3 receiver" {
			t.Errorf("the endpoint after the change = %+v", e)
		}
		job, err := f.services.Webhooks.TestDelivery(context.Background(), "", s.EndpointID, storelink.StateAssigned)
		must(t, err)
		if job.APIKey != "console-new-key-9934" {
			t.Error("the endpoint does not send the new x-api-key")
		}
		wantContains(t, "the page after the change", b.page("/dashboard/endpoints/"+s.EndpointID+"?done=updated"), "The endpoint is changed.",
			`id="endpoint-state">disabled`)
		for _, p := range []string{"/dashboard/endpoints/no-such-endpoint/edit"} {
			if resp, _ := b.get(p); resp.StatusCode != http.StatusNotFound {
				t.Errorf("GET %s = %d, want 404", p, resp.StatusCode)
			}
			if resp, _ := b.post(p, url.Values{"csrf": {token}}); resp.StatusCode != http.StatusNotFound {
				t.Errorf("POST %s = %d, want 404", p, resp.StatusCode)
			}
		}
		f.checkNoSecretLogged()
	})
}

// TestConsoleRotateAndDelete: an endpoint's page rotates its secret (the
// token needed, an overlap that is none refused beside the form, the new
// secret shown once and signing beside the old one, the form sent twice
// making one), and deletes it only when the box saying so is ticked.
func TestConsoleRotateAndDelete(t *testing.T) {
	eachDatabase(t, fixtureOptions{}, func(t *testing.T, f *fixture) {
		s := f.seedData()
		b, _, token := consoleSession(t, f, s)
		path := "/dashboard/endpoints/" + s.EndpointID
		rotate := path + "/rotate-secret"
		seen := formValue(t, b.page(path), rotate, "seen")
		before := signingSecrets(t, f, s.ClientID, s.EndpointID)

		if resp, _ := b.post(rotate, url.Values{"seen": {seen}, "overlap": {"1h"}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("rotate without the token = %d, want 403", resp.StatusCode)
		}
		resp, body := b.post(rotate, url.Values{"csrf": {token}, "seen": {seen}, "overlap": {"soon"}})
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `<p class="error" role="alert">`) || onceRE.MatchString(body) {
			t.Errorf("rotate with an overlap that is none = %d, want 422 beside the form", resp.StatusCode)
		}
		resp, body = b.post(rotate, url.Values{"csrf": {token}, "seen": {seen}, "overlap": {"1h"}})
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("rotate = %d", resp.StatusCode)
		}
		secret := shownOnce(t, "the page after rotating", body)
		f.keep(secret)
		wantContains(t, "the page after rotating", body, `data-then="`+path+`"`, "the old secret too until")
		if got := signingSecrets(t, f, s.ClientID, s.EndpointID); len(got) != 2 || got[0] != secret || got[1] != before[0] {
			t.Errorf("after the rotation the endpoint signs with %d secrets, want the new and the old", len(got))
		}
		resp, body = b.post(rotate, url.Values{"csrf": {token}, "seen": {seen}, "overlap": {"1h"}})
		if resp.StatusCode != http.StatusConflict || onceRE.MatchString(body) || signingSecrets(t, f, s.ClientID, s.EndpointID)[0] != secret {
			t.Errorf("the rotation sent again = %d; want 409 and no new secret", resp.StatusCode)
		}

		del := path + "/delete"
		if resp, _ := b.post(del, url.Values{"confirm": {"yes"}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("delete without the token = %d, want 403", resp.StatusCode)
		}
		if resp, _ := b.post(del, url.Values{"csrf": {token}}); resp.StatusCode != http.StatusBadRequest || endpointOf(t, f, "", s.EndpointID).DeletedAt != nil {
			t.Errorf("delete without the confirmation = %d, want 400 and the endpoint kept", resp.StatusCode)
		}
		resp, _ = b.post(del, url.Values{"csrf": {token}, "confirm": {"yes"}})
		if resp.StatusCode != http.StatusSeeOther || endpointOf(t, f, "", s.EndpointID).DeletedAt == nil {
			t.Errorf("delete = %d, want 303 and the endpoint deleted", resp.StatusCode)
		}
		if strings.Contains(b.page("/dashboard/clients/"+s.ClientID), `data-endpoint="`+s.EndpointID+`"`) {
			t.Error("the client's page still lists the deleted endpoint")
		}
		seen = formValue(t, body, rotate, "seen")
		resp, body = b.post(rotate, url.Values{"csrf": {token}, "seen": {seen}, "overlap": {"1h"}})
		if resp.StatusCode != http.StatusConflict || !strings.Contains(body, `<p class="error" role="alert">`) || onceRE.MatchString(body) {
			t.Errorf("rotating a deleted endpoint = %d, want 409 saying why", resp.StatusCode)
		}
		f.checkNoSecretLogged()
	})
}

// TestConsoleAPIKeys: a client's page creates a key (the token needed,
// shown once, opening the API, the form sent twice making one) and revokes
// keys, the last one too, as the operator API does.
func TestConsoleAPIKeys(t *testing.T) {
	eachDatabase(t, fixtureOptions{}, func(t *testing.T, f *fixture) {
		s := f.seedData()
		b, page, token := consoleSession(t, f, s)
		create := "/dashboard/clients/" + s.ClientID + "/api-keys"
		seen := formValue(t, page, create, "seen")
		if resp, _ := b.post(create, url.Values{"seen": {seen}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("create without the token = %d, want 403", resp.StatusCode)
		}
		resp, body := b.post(create, url.Values{"csrf": {token}, "seen": {seen}})
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("Set-Cookie") != "" {
			t.Fatalf("create = %d", resp.StatusCode)
		}
		key := shownOnce(t, "the page after creating a key", body)
		f.keep(key)
		wantContains(t, "the page after creating a key", body, `data-then="/dashboard/clients/`+s.ClientID+`"`)
		if got := apiStatus(t, f, s.ClientID, key); got != http.StatusOK {
			t.Errorf("the new key at the API = %d, want 200", got)
		}
		resp, body = b.post(create, url.Values{"csrf": {token}, "seen": {seen}})
		if resp.StatusCode != http.StatusConflict || onceRE.MatchString(body) || !strings.Contains(body, "sent twice") {
			t.Errorf("the create form sent again = %d; want 409 and no key", resp.StatusCode)
		}

		keys, err := f.services.Partners.APIKeys(context.Background(), s.ClientID)
		must(t, err)
		revoke := func(id string) string { return "/dashboard/clients/" + s.ClientID + "/api-keys/" + id + "/revoke" }
		if resp, _ := b.post(revoke(keys[0].ID), nil); resp.StatusCode != http.StatusForbidden {
			t.Errorf("revoke without the token = %d, want 403", resp.StatusCode)
		}
		if resp, _ := b.post(revoke("no-such-key"), url.Values{"csrf": {token}}); resp.StatusCode != http.StatusNotFound {
			t.Errorf("revoke an unknown key = %d, want 404", resp.StatusCode)
		}
		for _, k := range keys {
			resp, _ := b.post(revoke(k.ID), url.Values{"csrf": {token}})
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/clients/"+s.ClientID+"?done=revoked" {
				t.Fatalf("revoke %s = %d %q", k.ID, resp.StatusCode, resp.Header.Get("Location"))
			}
		}
		for _, k := range []string{s.APIKey, s.SecondKey, key} {
			if got := apiStatus(t, f, s.ClientID, k); got != http.StatusUnauthorized {
				t.Errorf("a revoked key at the API = %d, want 401", got)
			}
		}
		wantContains(t, "the page after revoking", b.page("/dashboard/clients/"+s.ClientID+"?done=revoked"), "The API key is revoked",
			`<h2>API keys <span class="count">0</span>`)
		f.checkNoSecretLogged()
	})
}

// TestConsoleStores: a client's page adds a store (the token needed, a
// store id the API refuses refused beside the form with what was typed),
// renames one, and removes one after a page that asks, with its stock.
func TestConsoleStores(t *testing.T) {
	eachDatabase(t, fixtureOptions{}, func(t *testing.T, f *fixture) {
		s := f.seedData()
		b, _, token := consoleSession(t, f, s)
		add := "/dashboard/clients/" + s.ClientID + "/stores"
		if resp, _ := b.post(add, url.Values{"store_id": {"S7"}, "name": {"Hamburg"}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("add without the token = %d, want 403", resp.StatusCode)
		}
		resp, body := b.post(add, url.Values{"csrf": {token}, "store_id": {"S/7"}, "name": {"Hamburg Altona"}})
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `<p class="error" role="alert">store_id must not contain control characters or &#39;/&#39;.`) ||
			!strings.Contains(body, `name="store_id" value="S/7"`) || !strings.Contains(body, `value="Hamburg Altona"`) {
			t.Errorf("add a store id with a slash = %d, want 400 beside the form with the input kept", resp.StatusCode)
		}
		resp, _ = b.post(add, url.Values{"csrf": {token}, "store_id": {"S7"}, "name": {"Hamburg Altona"}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != add[:len(add)-len("/stores")]+"?done=store-added" {
			t.Fatalf("add = %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		resp, _ = b.post(add, url.Values{"csrf": {token}, "store_id": {"S7"}, "name": {"Hamburg"}})
		if resp.StatusCode != http.StatusSeeOther || !strings.HasSuffix(resp.Header.Get("Location"), "?done=store-renamed") {
			t.Fatalf("rename = %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		page := b.page("/dashboard/clients/" + s.ClientID + "?done=store-renamed")
		wantContains(t, "the client's page", page, "The store is renamed.", `data-store="S7"`, "<td>Hamburg</td>")

		ask := "/dashboard/clients/" + s.ClientID + "/stores/S1/delete"
		wantContains(t, "the page that asks", b.page(ask), "Its stock in force is removed with it", `name="confirm" value="yes"`)
		if resp, _ := b.get("/dashboard/clients/" + s.ClientID + "/stores/S9/delete"); resp.StatusCode != http.StatusNotFound {
			t.Errorf("the page that asks of an unknown store = %d, want 404", resp.StatusCode)
		}
		if resp, _ := b.post(ask, url.Values{"confirm": {"yes"}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("remove without the token = %d, want 403", resp.StatusCode)
		}
		if resp, _ := b.post(ask, url.Values{"csrf": {token}}); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("remove without the confirmation = %d, want 400", resp.StatusCode)
		}
		resp, _ = b.post(ask, url.Values{"csrf": {token}, "confirm": {"yes"}})
		if resp.StatusCode != http.StatusSeeOther || !strings.HasSuffix(resp.Header.Get("Location"), "?done=store-removed") {
			t.Fatalf("remove = %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		stores, err := f.services.Partners.Stores(context.Background(), s.ClientID)
		must(t, err)
		if len(stores) != 2 || stores[0].ID != "S2" || stores[1].ID != "S7" {
			t.Errorf("stores after the removal = %+v, want S2 and S7", stores)
		}
		stock, _, err := f.services.Uploads.Stock(context.Background(), s.ClientID, storelink.StockFilter{StoreID: "S1", Limit: 10})
		must(t, err)
		if len(stock) != 0 {
			t.Errorf("the removed store has %d stock rows", len(stock))
		}
	})
}
