package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"storelink"
)

// uploadEventLabel is how the forms name stock_upload.finished.
const uploadEventLabel = "Upload finished (stock_upload.finished)"

// fieldset is the fieldset of class class in a page's first form whose
// action is action.
func fieldset(t *testing.T, page, action, class string) string {
	t.Helper()
	form := regexp.MustCompile(`(?s)<form [^>]*action="` + regexp.QuoteMeta(action) + `".*?</form>`).FindString(page)
	m := regexp.MustCompile(`(?s)<fieldset class="states ` + class + `">.*?</fieldset>`).FindString(form)
	if m == "" {
		t.Fatalf("no fieldset %s in the form of %s", class, action)
	}
	return m
}

// recorder is a webhook receiver that keeps the bodies it is sent.
type recorder struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, req.Header.Get("webhook-test")+" "+string(b))
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bodies) == 0 {
		return ""
	}
	return r.bodies[len(r.bodies)-1]
}

// TestUploadEventsInPortal: the portal's endpoint forms offer
// stock_upload.finished apart from the order states, clearly labelled; an
// endpoint registered for it alone says it gets no order event; its change
// form shows it ticked; the deliveries of an upload's event link to the
// upload, those of order events still to their orders; and a test send of
// it sends an upload event.
func TestUploadEventsInPortal(t *testing.T) {
	eachDatabase(t, fixtureOptions{}, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		s := f.seedData()
		rec := newRecorder(t)
		b, page := portalSession(t, f, s)
		orderStates := fieldset(t, page, "/portal/endpoints", "order-states")
		other := fieldset(t, page, "/portal/endpoints", "other-events")
		for _, st := range storelink.OrderStates {
			wantContains(t, "the order states of the register form", orderStates, `value="`+string(st)+`"`)
		}
		if strings.Contains(orderStates, string(storelink.EventUploadFinished)) {
			t.Errorf("the order states of the register form offer the upload event: %s", orderStates)
		}
		wantContains(t, "the other events of the register form", other, `name="states" value="stock_upload.finished"`, uploadEventLabel)
		wantContains(t, "the test send's choice", page, `<option value="stock_upload.finished">`+uploadEventLabel+`</option>`,
			`<option value="assigned">assigned</option>`)

		token, seen := formValue(t, page, "/portal/endpoints", "csrf"), formValue(t, page, "/portal/endpoints", "seen")
		resp, body := b.post("/portal/endpoints", url.Values{"csrf": {token}, "seen": {seen}, "url": {rec.URL + "/uploads"},
			"states": {"stock_upload.finished"}})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("register for upload events = %d: %s", resp.StatusCode, body)
		}
		f.keep(shownOnce(t, "the page after registering", body))
		list, err := f.services.Webhooks.Endpoints(ctx, s.ClientID)
		must(t, err)
		e := list[len(list)-1]
		if !slices.Equal(e.States, []storelink.OrderState{storelink.EventUploadFinished}) {
			t.Fatalf("the endpoint registered has states %v, want the upload event alone", e.States)
		}
		page = b.page("/portal/endpoints")
		wantContains(t, "the endpoints page", page, "States: "+uploadEventLabel+"; no order event", "States: all order states")
		edit := b.page("/portal/endpoints/" + e.ID + "/edit")
		wantContains(t, "the change form", fieldset(t, edit, "/portal/endpoints/"+e.ID+"/edit", "other-events"),
			`value="stock_upload.finished" checked`)
		if strings.Contains(fieldset(t, edit, "/portal/endpoints/"+e.ID+"/edit", "order-states"), "checked") {
			t.Errorf("the change form ticks an order state of an endpoint of the upload event alone")
		}

		// Two uploads end, the seed's waiting one and this one: their
		// events go to that endpoint only, and their deliveries link to the
		// uploads.
		u := f.accept(s.ClientID, "stock-events.csv", "store;ean;article_number;quantity;price\nS1;"+ean1+";SKU-1;6;19.99\n")
		f.processAll()
		n, err := f.services.Orders.AnnounceUploads(ctx, 10)
		if err != nil || n != 2 {
			t.Fatalf("AnnounceUploads = %d, %v; want the events of the two uploads", n, err)
		}
		deliveries := b.page("/portal/deliveries")
		wantContains(t, "the deliveries", deliveries, `stock_upload.finished</span> of upload <a href="/portal/uploads/`+u.ID+`"`,
			`of order <a href="/portal/orders/`+s.OrderID+`"`)
		if strings.Contains(deliveries, `href="/portal/orders/"`) {
			t.Errorf("a delivery links to an order without an id")
		}
		wantContains(t, "the upload the delivery links to", b.page("/portal/uploads/"+u.ID), "stock-events.csv")

		// A test send of the upload event.
		test := "/portal/endpoints/" + e.ID + "/test"
		resp, body = b.post(test, url.Values{"csrf": {formValue(t, page, test, "csrf")}, "state": {"stock_upload.finished"}})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("test send = %d: %s", resp.StatusCode, body)
		}
		wantContains(t, "the test result", body, "HTTP 204", `<option value="stock_upload.finished" selected>`)
		if got := rec.last(); !strings.HasPrefix(got, "true ") || !strings.Contains(got, `"type":"stock_upload.finished"`) ||
			!strings.Contains(got, `"file_name":"test-stock.csv"`) {
			t.Errorf("the endpoint got %q, want a test upload event", got)
		}
		f.checkNoSecretLogged()
	})
}

// TestUploadEventsInConsole: the operator's endpoint forms offer
// stock_upload.finished beside the order states, the client's and the
// endpoint's pages name it, and the deliveries of an upload's event, in
// the list and on the endpoint's page, link to the upload.
func TestUploadEventsInConsole(t *testing.T) {
	eachDatabase(t, fixtureOptions{}, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		s := f.seedData()
		b, page, token := consoleSession(t, f, s)
		action := "/dashboard/clients/" + s.ClientID + "/endpoints"
		wantContains(t, "the register form", fieldset(t, page, action, "other-events"), `value="stock_upload.finished"`, uploadEventLabel)
		resp, body := b.post(action, url.Values{"csrf": {token}, "seen": {formValue(t, page, action, "seen")},
			"url": {"http://127.0.0.1:1/both"}, "states": {"assigned", "stock_upload.finished"}})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("register = %d: %s", resp.StatusCode, body)
		}
		f.keep(shownOnce(t, "the page after registering", body))
		list, err := f.services.Webhooks.Endpoints(ctx, s.ClientID)
		must(t, err)
		e := list[len(list)-1]
		if !slices.Equal(e.States, []storelink.OrderState{storelink.StateAssigned, storelink.EventUploadFinished}) {
			t.Fatalf("the endpoint registered has states %v", e.States)
		}
		wantContains(t, "the client's page", b.page("/dashboard/clients/"+s.ClientID), "<td>assigned, "+uploadEventLabel+"</td>")
		edit := "/dashboard/endpoints/" + e.ID + "/edit"
		wantContains(t, "the change form", fieldset(t, b.page(edit), edit, "other-events"), `value="stock_upload.finished" checked`)

		u := f.accept(s.ClientID, "stock-events.csv", "store;ean;article_number;quantity;price\nS1;"+ean1+";SKU-1;6;19.99\n")
		f.processAll()
		// The seed's waiting upload ends too.
		if n, err := f.services.Orders.AnnounceUploads(ctx, 10); err != nil || n != 2 {
			t.Fatalf("AnnounceUploads = %d, %v; want the events of the two uploads", n, err)
		}
		link := `of upload <a href="/dashboard/clients/` + s.ClientID + `/uploads/` + u.ID + `"`
		endpointPage := b.page("/dashboard/endpoints/" + e.ID)
		wantContains(t, "the endpoint's page", endpointPage, link, "<dd>assigned, "+uploadEventLabel+"</dd>",
			`<option value="stock_upload.finished">`+uploadEventLabel+`</option>`)
		deliveries := b.page("/dashboard/deliveries?client=" + s.ClientID)
		wantContains(t, "the deliveries", deliveries, link, `of order <a href="/dashboard/orders/`+s.OrderID+`"`)
		if strings.Contains(deliveries, `href="/dashboard/orders/"`) {
			t.Errorf("a delivery links to an order without an id")
		}
		wantContains(t, "the upload the delivery links to", b.page("/dashboard/clients/"+s.ClientID+"/uploads/"+u.ID), "stock-events.csv")
	})
}
