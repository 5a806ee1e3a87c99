package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"storelink"
)

// TestEndpointPage: an endpoint's page shows its stats and lets the
// operator recover its failed deliveries since a time, send a test event
// and delete it, each a POST with the session's CSRF token; a deleted
// endpoint's pending deliveries are listed as cancelled, and it stays
// readable.
func TestEndpointPage(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	s := f.seedData()
	b := f.browser()
	b.login()
	token := b.csrf()
	page := "/dashboard/endpoints/" + s.EndpointID
	body := b.page(page)
	wantContains(t, "the endpoint page", body, "http://127.0.0.1:1/hooks/${eventId}", "attempts in 24h", `<b class="failed-deliveries">1</b>`,
		`action="`+page+`/recover"`, `action="`+page+`/test"`, `action="`+page+`/delete"`, `name="since"`, s.FailedDelivery, "Acme Retail · DE")
	if resp, _ := b.get("/dashboard/endpoints/nope"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown endpoint = %d, want 404", resp.StatusCode)
	}

	// Recover: refused without the token or with a time that cannot be
	// read; done with one.
	if resp, _ := b.post(page+"/recover", url.Values{"since": {"2000-01-01"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("recover without a token = %d, want 403", resp.StatusCode)
	}
	resp, body := b.post(page+"/recover", url.Values{"since": {"yesterday"}, "csrf": {token}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "since: &#34;yesterday&#34; is not a time") {
		t.Errorf("recover since yesterday = %d, want 400 naming the field:\n%s", resp.StatusCode, body)
	}
	checkDeliveryState(t, f, s, storelink.DeliveryFailed)
	resp, _ = b.post(page+"/recover", url.Values{"since": {"2000-01-01T00:00:00Z"}, "csrf": {token}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != page+"?done=recovered&n=1" {
		t.Fatalf("recover = %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	checkDeliveryState(t, f, s, storelink.DeliveryPending)
	if f.woken.Load() != 1 {
		t.Errorf("recover woke the deliverer %d times, want 1", f.woken.Load())
	}
	wantContains(t, "the page after recover", b.page(resp.Header.Get("Location")), "Failed deliveries made pending again: 1.")

	// A test send to an address that refuses connections (loopback port
	// 1): the page says so.
	resp, body = b.post(page+"/test", url.Values{"csrf": {token}, "state": {"cancelled"}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("test send = %d: %s", resp.StatusCode, body)
	}
	wantContains(t, "the test result", body, "Test send", "refused", `<option value="cancelled" selected>`)
	f.checkNoSecret("the test result", body)

	// Delete: only with the box ticked; then nothing but history.
	if resp, _ := b.post(page+"/delete", url.Values{"csrf": {token}}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("delete without confirming = %d, want 400", resp.StatusCode)
	}
	checkEndpointEnabled(t, f, s.ClientID, s.EndpointID, true)
	resp, _ = b.post(page+"/delete", url.Values{"csrf": {token}, "confirm": {"yes"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != page+"?done=deleted" {
		t.Fatalf("delete = %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	checkDeliveryState(t, f, s, storelink.DeliveryCancelled)
	body = b.page(resp.Header.Get("Location"))
	wantContains(t, "the deleted endpoint", body, `id="endpoint-state">deleted`, "The endpoint is deleted", s.FailedDelivery)
	for _, form := range []string{"/recover", "/test", "/delete"} {
		if strings.Contains(body, `action="`+page+form+`"`) {
			t.Errorf("the deleted endpoint's page still offers %s", form)
		}
	}
	if resp, _ := b.post(page+"/recover", url.Values{"since": {"2000-01-01"}, "csrf": {token}}); resp.StatusCode != http.StatusConflict {
		t.Errorf("recover of a deleted endpoint = %d, want 409", resp.StatusCode)
	}
	body = b.page("/dashboard/deliveries?state=cancelled&client=" + s.ClientID)
	wantContains(t, "the cancelled deliveries", body, `data-delivery="`+s.FailedDelivery+`" data-state="cancelled"`, "Cancelled: endpoint deleted", "deleted endpoint")
	if strings.Contains(body, "/deliveries/"+s.FailedDelivery+"/redeliver") {
		t.Error("a cancelled delivery offers a redeliver")
	}
	if strings.Contains(b.page("/dashboard/clients/"+s.ClientID), `data-endpoint="`+s.EndpointID+`"`) {
		t.Error("the client page still lists the deleted endpoint")
	}
	if _, err := f.services.Webhooks.Endpoint(context.Background(), "", s.EndpointID); err != nil {
		t.Errorf("the deleted endpoint cannot be read: %v", err)
	}
}
