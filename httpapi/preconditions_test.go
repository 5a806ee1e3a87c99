package httpapi_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"storelink"
)

// An endpoint's answers carry its ETag, the same from the operator's and
// the partner's GET, and a PATCH or DELETE with If-Match is made only while
// the endpoint has one of the tags: If-Match: "nope" is 412 and changes
// nothing, the ETag read is taken once and then is stale, * and a list
// holding the tag are taken, weak tags never match, and a field that is no
// list of tags is 400.
func TestEndpointIfMatch(t *testing.T) {
	t.Parallel()
	a := newWebhookAPI(t, webhookOptions{})
	created, cb := a.admin201Endpoint(`{"url":"https://partner.example/a"}`)
	if created == "" || !strings.HasPrefix(created, `"`) {
		t.Fatalf("ETag of the new endpoint = %q, want a strong tag", created)
	}
	id := cb.ID
	admin := "/admin/webhooks/" + id
	own := "/webhooks/" + a.ClientID + "/endpoints/" + id
	tag := a.etagOf("GET", admin, adminAuth())
	if tag != created {
		t.Fatalf("ETag of GET %s = %q, want the one created %q", admin, tag, created)
	}
	if got := a.etagOf("GET", own, map[string]string{"x-api-key": a.APIKey}); got != tag {
		t.Fatalf("the partner's GET gives ETag %q, want the operator's %q", got, tag)
	}

	patch := func(path, ifMatch, body string, h map[string]string) (*http.Response, []byte) {
		t.Helper()
		h = withHeader(h, "Content-Type", "application/json")
		if ifMatch != "" {
			h["If-Match"] = ifMatch
		}
		return a.do("PATCH", path, strings.NewReader(body), h)
	}
	resp, b := patch(admin, `"nope"`, `{"url":"https://partner.example/b"}`, adminAuth())
	if p := problem(t, resp, b, 412); p.Type != "/problems/precondition_failed" {
		t.Errorf("412 of type %q", p.Type)
	}
	if got := a.clientEndpoint(id); got.URL != "https://partner.example/a" {
		t.Fatalf("after the 412 the endpoint's url is %s, want it unchanged", got.URL)
	}

	resp, b = patch(admin, `W/"x", `+tag, `{"description":"ERP"}`, adminAuth())
	if resp.StatusCode != 200 {
		t.Fatalf("PATCH with a list holding the ETag = %d %s", resp.StatusCode, b)
	}
	next := resp.Header.Get("ETag")
	if next == "" || next == tag || a.etagOf("GET", admin, adminAuth()) != next {
		t.Fatalf("ETag after the change %q (before %q), want a new one that GET gives too", next, tag)
	}
	resp, b = patch(own, tag, `{"enabled":false}`, map[string]string{"x-api-key": a.APIKey})
	problem(t, resp, b, 412)
	resp, b = patch(own, "W/"+next, `{"enabled":false}`, map[string]string{"x-api-key": a.APIKey})
	problem(t, resp, b, 412)
	resp, b = patch(own, next, `{"enabled":false}`, map[string]string{"x-api-key": a.APIKey})
	if resp.StatusCode != 200 || a.clientEndpoint(id).Enabled {
		t.Fatalf("the partner's PATCH with the ETag = %d %s, want the endpoint disabled", resp.StatusCode, b)
	}
	resp, b = patch(admin, "*", `{"enabled":true}`, adminAuth())
	if resp.StatusCode != 200 {
		t.Fatalf("PATCH with If-Match * = %d %s", resp.StatusCode, b)
	}
	for _, bad := range []string{"nope", `"a" "b"`, `"a`, `*, "a"`, ` `} {
		resp, b = patch(admin, bad, `{"enabled":true}`, adminAuth())
		if p := problem(t, resp, b, 400); !strings.Contains(p.Detail, "If-Match") {
			t.Errorf("If-Match %q: detail %q, want one naming If-Match", bad, p.Detail)
		}
	}

	cur := a.etagOf("GET", admin, adminAuth())
	del := func(path, ifMatch string, h map[string]string) (*http.Response, []byte) {
		return a.do("DELETE", path, nil, withHeader(h, "If-Match", ifMatch))
	}
	resp, b = del(own, next, map[string]string{"x-api-key": a.APIKey})
	problem(t, resp, b, 412)
	if e := a.clientEndpoint(id); e.DeletedAt != nil {
		t.Fatal("the refused DELETE deleted the endpoint")
	}
	if resp, b = del(admin, cur, adminAuth()); resp.StatusCode != 204 {
		t.Fatalf("DELETE with the ETag = %d %s", resp.StatusCode, b)
	}
	if resp, b = del(own, cur, map[string]string{"x-api-key": a.APIKey}); resp.StatusCode != 204 {
		t.Fatalf("DELETE again, with the ETag it had = %d %s, want 204: it is deleted", resp.StatusCode, b)
	}
}

// Two PATCHes sent at once with the same If-Match: one is made, the other
// is 412, whichever comes first.
func TestEndpointIfMatchConcurrent(t *testing.T) {
	t.Parallel()
	a := newWebhookAPI(t, webhookOptions{})
	tag, e := a.admin201Endpoint(`{"url":"https://partner.example/a"}`)
	for round := range 5 {
		var wg sync.WaitGroup
		codes := make([]int, 2)
		for i := range codes {
			wg.Go(func() {
				resp, _ := a.do("PATCH", "/admin/webhooks/"+e.ID, strings.NewReader(`{"description":"writer `+string(rune('A'+i))+`"}`),
					withHeader(adminAuth(), "Content-Type", "application/json", "If-Match", tag))
				codes[i] = resp.StatusCode
			})
		}
		wg.Wait()
		if !(codes[0] == 200 && codes[1] == 412 || codes[0] == 412 && codes[1] == 200) {
			t.Fatalf("round %d: two PATCHes on one ETag answered %v, want one 200 and one 412", round, codes)
		}
		tag = a.etagOf("GET", "/admin/webhooks/"+e.ID, adminAuth())
	}
}

// A client's ETag stays while nothing it shows changes (its capacity taken
// by an upload, a key used) and changes with a new store.
func TestClientETag(t *testing.T) {
	t.Parallel()
	// A bucket that refills slowly (55 bytes a second), so that the
	// upload's bytes are still taken when the client is read.
	a := newAPI(t, apiOptions{capacity: storelink.CapacityPolicy{Base: 200_000, Window: time.Hour}})
	path := "/admin/clients/" + a.ClientID
	tag := a.etagOf("GET", path, adminAuth())
	if !strings.HasPrefix(tag, `"`) {
		t.Fatalf("ETag of a client = %q, want a strong tag", tag)
	}
	resp, b := a.upload("feed.csv", []byte(feed), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("upload = %d %s", resp.StatusCode, b)
	}
	var c storelink.ClientDetail
	a.admin("GET", path, "", 200, &c)
	if c.Capacity.BytesLeft == c.Capacity.BytesPerWindow {
		t.Fatalf("capacity %+v: the upload took none", c.Capacity)
	}
	if got := a.etagOf("GET", path, adminAuth()); got != tag {
		t.Fatalf("ETag after an upload took capacity = %q, want %q still", got, tag)
	}
	a.admin("PUT", path+"/stores/S9", `{"name":"Köln"}`, 201, nil)
	if got := a.etagOf("GET", path, adminAuth()); got == tag {
		t.Fatalf("ETag after a new store = %q, the same as before", got)
	}
}

// admin201Endpoint registers an endpoint for the demo client and returns
// its answer's ETag, with the endpoint.
func (a *api) admin201Endpoint(body string) (string, storelink.EndpointSecret) {
	a.t.Helper()
	resp, b := a.do("POST", "/admin/clients/"+a.ClientID+"/webhooks", strings.NewReader(body),
		withHeader(adminAuth(), "Content-Type", "application/json"))
	if resp.StatusCode != 201 {
		a.t.Fatalf("new endpoint = %d %s", resp.StatusCode, b)
	}
	var e storelink.EndpointSecret
	decodeInto(a.t, b, &e)
	return resp.Header.Get("ETag"), e
}

// etagOf sends a call that must answer 200 and returns its ETag.
func (a *api) etagOf(method, path string, h map[string]string) string {
	a.t.Helper()
	resp, b := a.do(method, path, nil, h)
	if resp.StatusCode != 200 {
		a.t.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, b)
	}
	return resp.Header.Get("ETag")
}

func adminAuth() map[string]string {
	return map[string]string{"Authorization": "Bearer " + adminToken}
}

// withHeader is a copy of h with the pairs given set.
func withHeader(h map[string]string, pairs ...string) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		out[k] = v
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		out[pairs[i]] = pairs[i+1]
	}
	return out
}
