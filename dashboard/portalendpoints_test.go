package dashboard_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"storelink"
)

// formValue reads the value of the named field of the form whose action
// is action, from a page.
func formValue(t *testing.T, page, action, name string) string {
	t.Helper()
	re := regexp.MustCompile(`action="` + regexp.QuoteMeta(action) + `"[^>]*>(?s:.*?)name="` + regexp.QuoteMeta(name) + `" value="([^"]*)"`)
	m := re.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no field %s in the form to %s", name, action)
	}
	return html.UnescapeString(m[1])
}

// onceRE finds the secret or key a page shows once.
var onceRE = regexp.MustCompile(`id="once-value" class="mono" value="([^"]+)"`)

// shownOnce returns the secret the page shows once, failing when it shows
// none.
func shownOnce(t *testing.T, where, page string) string {
	t.Helper()
	m := onceRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("%s shows no secret", where)
	}
	return html.UnescapeString(m[1])
}

// portalSession signs a browser in to the portal as the seed's client and
// returns it with the endpoints page.
func portalSession(t *testing.T, f *fixture, s seed) (*browser, string) {
	t.Helper()
	b := f.browser()
	b.portalLogin(s.ClientID, s.APIKey)
	return b, b.page("/portal/endpoints")
}

// signingSecrets are the secrets a delivery to the endpoint is signed with
// now.
func signingSecrets(t *testing.T, f *fixture, clientID, endpointID string) []string {
	t.Helper()
	job, err := f.services.Webhooks.TestDelivery(context.Background(), clientID, endpointID, storelink.StateAssigned)
	must(t, err)
	return job.Secrets
}

// TestPortalRegisterEndpoint: the register form refuses without the
// session's token, refuses what the partner API refuses (a URL the guard
// refuses, a bad scheme, a state that is none) beside the form with what
// was typed kept (not the key), registers with the URL, states, key and
// description given, and shows the endpoint's signing secret once: not on
// the next visit of the page, not in a log, and not a second endpoint when
// the form is sent again.
func TestPortalRegisterEndpoint(t *testing.T) {
	eachDatabase(t, fixtureOptions{denyPrivate: true}, func(t *testing.T, f *fixture) {
		s := f.seedData()
		b, page := portalSession(t, f, s)
		token, seen := formValue(t, page, "/portal/endpoints", "csrf"), formValue(t, page, "/portal/endpoints", "seen")
		count := func() int {
			list, err := f.services.Webhooks.Endpoints(context.Background(), s.ClientID)
			must(t, err)
			return len(list)
		}
		before := count()
		form := func(u string, states ...string) url.Values {
			return url.Values{"csrf": {token}, "seen": {seen}, "url": {u}, "states": states, "api_key": {"hook-key-7781"},
				"description": {"Order service (prod)"}}
		}
		f.keep("hook-key-7781")

		if resp, _ := b.post("/portal/endpoints", url.Values{"url": {"https://hooks.example.com/x"}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("register without the token = %d, want 403", resp.StatusCode)
		}
		for _, c := range []struct {
			name, url string
			states    []string
			status    int
			says      string
		}{
			{"a loopback address", "http://127.0.0.1:8080/hooks", nil, 422, "url: 127.0.0.1 is a loopback address, which is not allowed for webhooks unless the operator starts serve with --webhook-allow-private"},
			{"a metadata address", "http://169.254.169.254/latest", nil, 422, "url: 169.254.169.254 is a cloud metadata address"},
			{"an ftp URL", "ftp://hooks.example.com/x", []string{"assigned"}, 422, "url: the scheme must be http or https."},
			{"a state that is none", "https://hooks.example.com/x", []string{"lost"}, 422, `states: &#34;lost&#34; is neither an order state nor an event an endpoint can ask for`},
		} {
			resp, body := b.post("/portal/endpoints", form(c.url, c.states...))
			if resp.StatusCode != c.status || !strings.Contains(body, `<p class="error" role="alert">`) || !strings.Contains(body, c.says) {
				t.Errorf("register %s = %d, want %d saying %q beside the form", c.name, resp.StatusCode, c.status, c.says)
			}
			wantContains(t, "the refused form of "+c.name, body, `name="url" value="`+html.EscapeString(c.url)+`"`,
				`value="Order service (prod)"`, "Type the key again")
			for _, st := range c.states {
				if st != "lost" {
					wantContains(t, "the refused form of "+c.name, body, `value="`+st+`" checked`)
				}
			}
			f.checkNoSecret("the refused form of "+c.name, body)
		}
		if n := count(); n != before {
			t.Fatalf("refused forms registered %d endpoints", n-before)
		}

		resp, body := b.post("/portal/endpoints", form(" https://hooks.example.com/storelink/${eventId} ", "assigned", "cancelled"))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("register = %d, Cache-Control %q; want 200, no-store: %s", resp.StatusCode, resp.Header.Get("Cache-Control"), body)
		}
		secret := shownOnce(t, "the page after registering", body)
		wantContains(t, "the page after registering", body, `data-then="/portal/endpoints"`, `data-copy="once-value"`, "It is shown this once")
		list, err := f.services.Webhooks.Endpoints(context.Background(), s.ClientID)
		must(t, err)
		e := list[len(list)-1]
		if len(list) != before+1 || e.URL != "https://hooks.example.com/storelink/${eventId}" || !slices.Equal(e.States, []storelink.OrderState{"assigned", "cancelled"}) ||
			!e.HasAPIKey || e.Description != "Order service (prod)" || !e.Enabled {
			t.Errorf("the endpoint registered = %+v", e)
		}
		if got := signingSecrets(t, f, s.ClientID, e.ID); len(got) != 1 || got[0] != secret {
			t.Errorf("the endpoint signs with %d secrets, the one shown among them: %v", len(got), slices.Contains(got, secret))
		}
		for _, h := range []string{"Location", "Set-Cookie"} {
			if v := resp.Header.Get(h); v != "" {
				t.Errorf("the answer that shows the secret has %s %q", h, v)
			}
		}
		f.keep(secret)
		// The next visit shows it no more; the same form sent again (a
		// browser resending it) makes no second endpoint.
		b.page("/portal/endpoints")
		resp, body = b.post("/portal/endpoints", form("https://hooks.example.com/storelink/${eventId}", "assigned"))
		if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "sent twice") || count() != before+1 {
			t.Errorf("the form sent again = %d, %d endpoints; want 409 and still %d", resp.StatusCode, count(), before+1)
		}
		f.checkNoSecret("the form sent again", body)
		f.checkNoSecretLogged()
	})
}

// TestPortalEditEndpoint: the change form shows the endpoint as it is
// (not a password its URL holds), refuses without the token, refuses
// what the API refuses beside the form with the input kept, changes only
// what differs, and another client's endpoint is not found.
func TestPortalEditEndpoint(t *testing.T) {
	eachDatabase(t, fixtureOptions{denyPrivate: true}, func(t *testing.T, f *fixture) {
		s := f.seedData()
		o := f.seedOther(s)
		b, _ := portalSession(t, f, s)
		edit := "/portal/endpoints/" + s.EndpointID + "/edit"
		page := b.page(edit)
		wantContains(t, "the change form", page, `name="url" value="http://127.0.0.1:1/hooks/${eventId}"`, `name="enabled" value="yes" checked`,
			`name="remove_api_key"`, "keep the one it has")
		token := formValue(t, page, edit, "csrf")
		list, err := f.services.Webhooks.Endpoints(context.Background(), s.ClientID)
		must(t, err)
		// Endpoints made in one millisecond are listed by id, which is
		// random within it: the passworded one is found by its URL.
		var passworded string
		for _, e := range list {
			if strings.Contains(e.URL, "pa55w0rd-in-url") {
				passworded = e.ID
			}
		}
		b.page("/portal/endpoints/" + passworded + "/edit") // checks that the password is not in it

		if resp, _ := b.post(edit, url.Values{"description": {"x"}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("change without the token = %d, want 403", resp.StatusCode)
		}
		long := strings.Repeat("d", storelink.MaxDescription+1)
		resp, body := b.post(edit, url.Values{"csrf": {token}, "url": {"http://10.0.0.7/hooks"}, "enabled": {"yes"}, "description": {"kept"}})
		if resp.StatusCode != 422 || !strings.Contains(body, "url: 10.0.0.7 is a private address") || !strings.Contains(body, `value="http://10.0.0.7/hooks"`) {
			t.Errorf("change to a private address = %d, want 422 beside the form with the URL kept", resp.StatusCode)
		}
		resp, body = b.post(edit, url.Values{"csrf": {token}, "url": {"https://hooks.example.com/v2"}, "enabled": {"yes"}, "description": {long}})
		if resp.StatusCode != 422 || !strings.Contains(body, "description is 201 characters long") || !strings.Contains(body, `value="https://hooks.example.com/v2"`) {
			t.Errorf("change with a long description = %d, want 422 beside the form with the input kept", resp.StatusCode)
		}
		if e := endpointOf(t, f, s.ClientID, s.EndpointID); e.URL != "http://127.0.0.1:1/hooks/${eventId}" || e.Description != "" {
			t.Errorf("refused changes changed the endpoint: %+v", e)
		}

		resp, _ = b.post(edit, url.Values{"csrf": {token}, "url": {"https://hooks.example.com/v2/${eventId}"}, "states": {"fulfilled", "returned"},
			"description": {"v2 receiver"}, "remove_api_key": {"yes"}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/portal/endpoints?done=updated" {
			t.Fatalf("change = %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		e := endpointOf(t, f, s.ClientID, s.EndpointID)
		if e.URL != "https://hooks.example.com/v2/${eventId}" || !slices.Equal(e.States, []storelink.OrderState{"fulfilled", "returned"}) ||
			e.Enabled || e.HasAPIKey || e.Description != "v2 receiver" {
			t.Errorf("the endpoint after the change = %+v", e)
		}
		wantContains(t, "the page after the change", b.page("/portal/endpoints?done=updated"), "The endpoint is changed.")
		// The passworded URL is kept when its field is left empty.
		resp, _ = b.post("/portal/endpoints/"+passworded+"/edit", url.Values{"csrf": {token}, "enabled": {"yes"}, "description": {"kept URL"}})
		if e := endpointOf(t, f, s.ClientID, passworded); resp.StatusCode != http.StatusSeeOther || !strings.Contains(e.URL, "pa55w0rd-in-url") || e.Description != "kept URL" {
			t.Errorf("change leaving the URL empty = %d, endpoint %q %q", resp.StatusCode, e.Description, e.URL)
		}

		for _, p := range []string{"/portal/endpoints/" + o.EndpointID + "/edit", "/portal/endpoints/no-such-endpoint/edit"} {
			if resp, _ := b.get(p); resp.StatusCode != http.StatusNotFound {
				t.Errorf("GET %s = %d, want 404", p, resp.StatusCode)
			}
			if resp, _ := b.post(p, url.Values{"csrf": {token}, "description": {"mine now"}}); resp.StatusCode != http.StatusNotFound {
				t.Errorf("POST %s = %d, want 404", p, resp.StatusCode)
			}
		}
		if e := endpointOf(t, f, s.OtherClientID, o.EndpointID); e.Description != "" {
			t.Errorf("the other client's endpoint was changed: %+v", e)
		}
		f.checkNoSecretLogged()
	})
}

func endpointOf(t *testing.T, f *fixture, clientID, id string) *storelink.EndpointDetail {
	t.Helper()
	e, err := f.services.Webhooks.Endpoint(context.Background(), clientID, id)
	must(t, err)
	return e
}

// TestPortalDeleteEndpoint: deleting asks first, on a page that says what
// it does; the delete needs the token and the confirmation, cancels the
// endpoint's pending deliveries, and another client's endpoint is not
// found.
func TestPortalDeleteEndpoint(t *testing.T) {
	eachDatabase(t, fixtureOptions{}, func(t *testing.T, f *fixture) {
		s := f.seedData()
		o := f.seedOther(s)
		ctx := context.Background()
		// An event of the order makes a pending delivery to the endpoint.
		_, err := f.services.Orders.FulfilOrder(ctx, s.OrderID, storelink.FulfilRequest{})
		must(t, err)
		b, _ := portalSession(t, f, s)
		del := "/portal/endpoints/" + s.EndpointID + "/delete"
		page := b.page(del)
		wantContains(t, "the delete page", page, "1 pending delivery is cancelled", "cannot be undone", `name="confirm" value="yes"`)
		token := formValue(t, page, del, "csrf")

		if resp, _ := b.post(del, url.Values{"confirm": {"yes"}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("delete without the token = %d, want 403", resp.StatusCode)
		}
		if resp, _ := b.post(del, url.Values{"csrf": {token}}); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("delete without the confirmation = %d, want 400", resp.StatusCode)
		}
		if e := endpointOf(t, f, s.ClientID, s.EndpointID); e.DeletedAt != nil {
			t.Fatal("a refused delete deleted the endpoint")
		}
		for _, id := range []string{o.EndpointID, "no-such-endpoint"} {
			if resp, _ := b.post("/portal/endpoints/"+id+"/delete", url.Values{"csrf": {token}, "confirm": {"yes"}}); resp.StatusCode != http.StatusNotFound {
				t.Errorf("delete of %s = %d, want 404", id, resp.StatusCode)
			}
		}
		resp, _ := b.post(del, url.Values{"csrf": {token}, "confirm": {"yes"}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/portal/endpoints?done=removed" {
			t.Fatalf("delete = %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		if e := endpointOf(t, f, s.ClientID, s.EndpointID); e.DeletedAt == nil {
			t.Error("the endpoint is not deleted")
		}
		ds, err := f.services.Webhooks.Deliveries(ctx, storelink.DeliveryFilter{EndpointID: s.EndpointID, State: storelink.DeliveryPending, Limit: 10})
		must(t, err)
		if len(ds) != 0 {
			t.Errorf("%d deliveries to the deleted endpoint are still pending", len(ds))
		}
		page = b.page("/portal/endpoints?done=removed")
		wantContains(t, "the page after the delete", page, "The endpoint is deleted")
		if strings.Contains(page, `data-endpoint="`+s.EndpointID+`"`) {
			t.Error("the deleted endpoint is still listed")
		}
		if e := endpointOf(t, f, s.OtherClientID, o.EndpointID); e.DeletedAt != nil {
			t.Error("the other client's endpoint was deleted")
		}
	})
}

// TestPortalRotateSecret: a rotation needs the token, refuses an overlap
// the API refuses beside the endpoint's form, and shows the new secret
// once; deliveries are then signed with both until the overlap ends, and
// the same form sent again rotates nothing.
func TestPortalRotateSecret(t *testing.T) {
	eachDatabase(t, fixtureOptions{}, func(t *testing.T, f *fixture) {
		s := f.seedData()
		o := f.seedOther(s)
		b, page := portalSession(t, f, s)
		rotate := "/portal/endpoints/" + s.EndpointID + "/rotate-secret"
		token, seen := formValue(t, page, rotate, "csrf"), formValue(t, page, rotate, "seen")
		old := signingSecrets(t, f, s.ClientID, s.EndpointID)

		if resp, _ := b.post(rotate, url.Values{"seen": {seen}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("rotate without the token = %d, want 403", resp.StatusCode)
		}
		resp, body := b.post(rotate, url.Values{"csrf": {token}, "seen": {seen}, "overlap": {"1000h"}})
		if resp.StatusCode != 422 || !strings.Contains(body, "overlap must be a duration such as 24h, at most 720h.") {
			t.Errorf("rotate with an overlap of 1000h = %d, want 422 saying so", resp.StatusCode)
		}
		if got := signingSecrets(t, f, s.ClientID, s.EndpointID); !slices.Equal(got, old) {
			t.Fatal("a refused rotation changed the secret")
		}
		if resp, _ := b.post("/portal/endpoints/"+o.EndpointID+"/rotate-secret", url.Values{"csrf": {token}, "seen": {seen}}); resp.StatusCode != http.StatusNotFound {
			t.Errorf("rotate the other client's endpoint = %d, want 404", resp.StatusCode)
		}

		resp, body = b.post(rotate, url.Values{"csrf": {token}, "seen": {seen}, "overlap": {"1h"}})
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("rotate = %d, Cache-Control %q", resp.StatusCode, resp.Header.Get("Cache-Control"))
		}
		secret := shownOnce(t, "the page after rotating", body)
		wantContains(t, "the page after rotating", body, "signed with the old secret too until")
		f.keep(secret)
		if got := signingSecrets(t, f, s.ClientID, s.EndpointID); len(got) != 2 || got[0] != secret || got[1] != old[0] {
			t.Errorf("after the rotation deliveries are signed with %d secrets; want the new one, then the old", len(got))
		}
		e := endpointOf(t, f, s.ClientID, s.EndpointID)
		if e.PreviousSecretUntil == nil || time.Until(*e.PreviousSecretUntil) > time.Hour+time.Minute || time.Until(*e.PreviousSecretUntil) < 59*time.Minute {
			t.Errorf("the old secret signs until %v, want in an hour", e.PreviousSecretUntil)
		}
		b.page("/portal/endpoints")
		if resp, body := b.post(rotate, url.Values{"csrf": {token}, "seen": {seen}, "overlap": {"1h"}}); resp.StatusCode != http.StatusConflict || onceRE.MatchString(body) {
			t.Errorf("the rotation sent again = %d; want 409 and no secret", resp.StatusCode)
		}
		if got := signingSecrets(t, f, s.ClientID, s.EndpointID); got[0] != secret {
			t.Error("the rotation sent again rotated the secret")
		}
		f.checkNoSecretLogged()
	})
}

// TestPortalRecover: "send them again" makes the endpoint's failed
// deliveries since the time given pending, says how many, refuses a time
// it cannot read beside the endpoint's form with what was typed, and needs
// the token; another client's endpoint is not found.
func TestPortalRecover(t *testing.T) {
	eachDatabase(t, fixtureOptions{}, func(t *testing.T, f *fixture) {
		s := f.seedData()
		o := f.seedOther(s)
		b, page := portalSession(t, f, s)
		recover := "/portal/endpoints/" + s.EndpointID + "/recover"
		token := formValue(t, page, recover, "csrf")
		since := time.Now().Add(-time.Hour).UTC().Format("2006-01-02T15:04")

		if resp, _ := b.post(recover, url.Values{"since": {since}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("recover without the token = %d, want 403", resp.StatusCode)
		}
		resp, body := b.post(recover, url.Values{"csrf": {token}, "since": {"last tuesday"}})
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "since: &#34;last tuesday&#34; is not a time") ||
			!strings.Contains(body, `value="last tuesday"`) {
			t.Errorf("recover since last tuesday = %d, want 400 beside the form with the input kept", resp.StatusCode)
		}
		checkDeliveryState(t, f, s, storelink.DeliveryFailed)
		if resp, _ := b.post("/portal/endpoints/"+o.EndpointID+"/recover", url.Values{"csrf": {token}, "since": {since}}); resp.StatusCode != http.StatusNotFound {
			t.Errorf("recover the other client's endpoint = %d, want 404", resp.StatusCode)
		}
		failed, err := f.services.Webhooks.Deliveries(context.Background(), storelink.DeliveryFilter{EndpointID: s.EndpointID,
			State: storelink.DeliveryFailed, Limit: 100})
		must(t, err)
		woken := f.woken.Load()
		resp, _ = b.post(recover, url.Values{"csrf": {token}, "since": {since}})
		want := "/portal/endpoints?done=recovered&n=" + strconv.Itoa(len(failed))
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want || len(failed) == 0 {
			t.Fatalf("recover = %d %q, want %s", resp.StatusCode, resp.Header.Get("Location"), want)
		}
		checkDeliveryState(t, f, s, storelink.DeliveryPending)
		if f.woken.Load() != woken+1 {
			t.Error("recover did not wake the deliverer")
		}
		wantContains(t, "the page after recover", b.page(want), "Failed deliveries made pending again: "+strconv.Itoa(len(failed))+".")
		if d := deliveryOf(t, f, s.OtherClientID, o.DeliveryID); d.State != storelink.DeliveryFailed {
			t.Errorf("the other client's failed delivery is %s", d.State)
		}
	})
}

func deliveryOf(t *testing.T, f *fixture, clientID, id string) storelink.Delivery {
	t.Helper()
	ds, err := f.services.Webhooks.Deliveries(context.Background(), storelink.DeliveryFilter{ClientID: clientID, Limit: 500})
	must(t, err)
	for _, d := range ds {
		if d.ID == id {
			return d
		}
	}
	t.Fatalf("no delivery %s of client %s", id, clientID)
	return storelink.Delivery{}
}

// TestPortalWriteLimit: the portal's write forms take the client's writes
// that the partner API takes too: at the rate, a form is answered 429 with
// Retry-After and a page that says so, and registers nothing, while the
// client's other writes through the API are refused alike and the
// partner's other client still writes.
func TestPortalWriteLimit(t *testing.T) {
	eachDatabase(t, fixtureOptions{writesPerMinute: 2}, func(t *testing.T, f *fixture) {
		s := f.seedData()
		b, page := portalSession(t, f, s)
		count := func() int {
			list, err := f.services.Webhooks.Endpoints(context.Background(), s.ClientID)
			must(t, err)
			return len(list)
		}
		register := func(page, u string) (*http.Response, string) {
			t.Helper()
			return b.post("/portal/endpoints", url.Values{"csrf": {formValue(t, page, "/portal/endpoints", "csrf")},
				"seen": {formValue(t, page, "/portal/endpoints", "seen")}, "url": {u}})
		}
		api := func(clientID, key string) *http.Response {
			t.Helper()
			req, err := http.NewRequest("POST", f.URL+"/webhooks/"+clientID+"/endpoints", strings.NewReader(`{"url":"http://127.0.0.1:9/api"}`))
			must(t, err)
			req.Header.Set("x-api-key", key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			must(t, err)
			resp.Body.Close()
			return resp
		}
		before := count()
		resp, body := register(page, "http://127.0.0.1:9/first")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the first write, a register form = %d: %s", resp.StatusCode, body)
		}
		f.keep(shownOnce(t, "the page after registering", body))
		if resp := api(s.ClientID, s.APIKey); resp.StatusCode != http.StatusCreated || resp.Header.Get("RateLimit") != `"write";r=0;t=60` {
			t.Fatalf("the second write, at the API = %d, RateLimit %q; want 201 with none left", resp.StatusCode, resp.Header.Get("RateLimit"))
		}
		resp, body = register(b.page("/portal/endpoints"), "http://127.0.0.1:9/third")
		if after, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != http.StatusTooManyRequests || after < 1 || after > 30 ||
			!strings.Contains(body, "This client has used up its writes (2 a minute, refilled evenly); nothing was written.") {
			t.Errorf("the third write, a register form = %d, Retry-After %q; want 429 saying so: %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		if onceRE.MatchString(body) || count() != before+2 {
			t.Errorf("the refused form: a secret shown %v, %d endpoints registered; want none beyond 2", onceRE.MatchString(body), count()-before)
		}
		if resp := api(s.ClientID, s.APIKey); resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("a write at the API after the portal's = %d, want 429", resp.StatusCode)
		}
		if resp := api(s.OtherClientID, s.OtherAPIKey); resp.StatusCode != http.StatusCreated {
			t.Errorf("the partner's other client's write = %d, want 201", resp.StatusCode)
		}
		f.checkNoSecretLogged()
	})
}
