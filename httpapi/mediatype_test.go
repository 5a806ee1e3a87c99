package httpapi_test

import (
	"strings"
	"testing"

	"storelink"
)

// A JSON body sent without Content-Type, as text/plain, XML or a form is
// 415 (/problems/unsupported) with Accept: application/json, before it is
// read, and nothing is made; application/json with parameters and +json
// types are taken. A call whose body is optional may come without one, and
// a stream of unknown length (chunked) is checked as any body.
func TestJSONBodyContentType(t *testing.T) {
	t.Parallel()
	a := newAPI(t, apiOptions{})
	body := `{"name":"Typed"}`
	for _, c := range []struct {
		ct     string // "-" for none
		status int
	}{
		{"-", 415},
		{"text/plain", 415},
		{"text/plain; charset=utf-8", 415},
		{"application/xml", 415},
		{"text/xml", 415},
		{"application/x-www-form-urlencoded", 415},
		{"multipart/form-data; boundary=x", 415},
		{"application/json; charset=iso-8859-1", 415},
		{"application/json; charset", 415},
		{"json", 415},
		{"application/json", 201},
		{"application/json; charset=utf-8", 201},
		{"Application/JSON; Charset=UTF-8", 201},
		{"application/merge-patch+json", 201},
		{"application/vnd.storelink+json; version=1", 201},
	} {
		h := map[string]string{"Authorization": "Bearer " + adminToken}
		if c.ct != "-" {
			h["Content-Type"] = c.ct
		}
		resp, b := a.do("POST", "/admin/partners", strings.NewReader(body), h)
		if c.status != 415 {
			if resp.StatusCode != c.status {
				t.Errorf("Content-Type %q: %d %s, want %d", c.ct, resp.StatusCode, b, c.status)
			}
			continue
		}
		p := problem(t, resp, b, 415)
		if p.Type != "/problems/"+storelink.EUNSUPPORTED || !strings.Contains(p.Detail, "Content-Type") {
			t.Errorf("Content-Type %q: problem %+v, want unsupported naming the Content-Type", c.ct, p)
		}
		if got := resp.Header.Get("Accept"); got != "application/json" {
			t.Errorf("Content-Type %q: Accept = %q, want application/json", c.ct, got)
		}
	}
	var page storelink.PartnerPage
	a.admin("GET", "/admin/partners?q=Typed", "", 200, &page)
	if len(page.Partners) != 5 {
		t.Errorf("%d partners named Typed, want the 5 sent as JSON: %s", len(page.Partners), dump(page.Partners))
	}

	// A PATCH's 415 names its type in Accept-Patch too.
	a2 := newWebhookAPI(t, webhookOptions{})
	e := a2.endpointAt("https://partner.example/a")
	resp, b := a2.do("PATCH", "/admin/webhooks/"+e.ID, strings.NewReader(`{"enabled":false}`),
		map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "text/plain"})
	problem(t, resp, b, 415)
	if got := resp.Header.Get("Accept-Patch"); got != "application/json" {
		t.Errorf("PATCH 415: Accept-Patch = %q, want application/json", got)
	}
	if !a2.clientEndpoint(e.ID).Enabled {
		t.Error("the PATCH refused with 415 disabled the endpoint")
	}
	// The partner's calls check it as the operator's.
	resp, b = a2.do("POST", "/webhooks/"+a2.ClientID+"/endpoints", strings.NewReader(`{"url":"https://partner.example/b"}`),
		map[string]string{"x-api-key": a2.APIKey})
	problem(t, resp, b, 415)

	// An optional body left out: no type to check.
	o := mustOrder(a2, "POST", "/orders", newOrderBody(a2.ClientID, "CT-1", "S1", ean1), 201)
	resp, b = a2.do("POST", "/orders/"+o.ID+"/cancel", nil, map[string]string{"Authorization": "Bearer " + adminToken})
	if resp.StatusCode != 200 {
		t.Errorf("cancel without a body = %d %s, want 200", resp.StatusCode, b)
	}

	// A body of unknown length is checked as any other.
	got := rawRequest(t, a.URL, "POST /admin/partners HTTP/1.1\r\nHost: storelink\r\nAuthorization: Bearer "+adminToken+
		"\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n10\r\n"+body+"\r\n0\r\n\r\n")
	if !strings.HasPrefix(got, "HTTP/1.1 415 ") {
		t.Errorf("a chunked JSON body without Content-Type: %q, want 415", got)
	}
}
