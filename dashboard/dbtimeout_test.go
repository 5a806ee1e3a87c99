package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"storelink"
)

// A test send to an endpoint that answers after three database timeouts,
// from a form that takes three database timeouts to arrive, shows what
// came of it on the endpoint's page: neither the form's arrival nor the
// send is database time, and the page read after them has the database
// time the request left.
func TestTestSendSlowerThanDatabaseTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	f := newFixture(t, fixtureOptions{databaseTimeout: timeout})
	s := f.seedData()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(3 * timeout):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(slow.Close)
	at := slow.URL + "/hooks"
	_, err := f.services.Webhooks.UpdateEndpoint(context.Background(), "", s.EndpointID, storelink.EndpointPatch{URL: &at})
	must(t, err)
	b := f.browser()
	b.login()
	form := url.Values{"csrf": {b.csrf()}, "state": {"cancelled"}}.Encode()

	body, w := io.Pipe()
	go func() {
		for i, part := range []string{form[:len(form)/2], form[len(form)/2:]} {
			if i > 0 {
				time.Sleep(3 * timeout) // a slow client: the form's second half comes late
			}
			if _, err := io.WriteString(w, part); err != nil {
				return
			}
		}
		w.Close()
	}()
	req, err := http.NewRequest("POST", f.URL+"/dashboard/endpoints/"+s.EndpointID+"/test", body)
	must(t, err)
	req.ContentLength = int64(len(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, page := b.do(req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("test send = %d: %s", resp.StatusCode, page)
	}
	wantContains(t, "the test result", page, "Test send", "HTTP 204", `<option value="cancelled" selected>`)
}
