package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"storelink"
	"storelink/httpapi"
)

// hangingEndpoint is a webhook endpoint that answers nothing until the
// test lets it go (or the sender gives up); arrived counts its requests.
type hangingEndpoint struct {
	*httptest.Server
	arrived atomic.Int32
	release chan struct{}
}

func newHangingEndpoint(t *testing.T) *hangingEndpoint {
	t.Helper()
	h := &hangingEndpoint{release: make(chan struct{})}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.arrived.Add(1)
		select {
		case <-h.release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(func() { h.letGo(); h.Close() })
	return h
}

func (h *hangingEndpoint) letGo() {
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}

// endpointFor registers an endpoint at url for the client.
func (c tenant) endpointFor(url string) string {
	c.a.t.Helper()
	var e storelink.EndpointSecret
	c.a.admin("POST", "/admin/clients/"+c.ClientID+"/webhooks", fmt.Sprintf(`{"url":%q}`, url), 201, &e)
	return e.ID
}

// testSend is the client's POST /webhooks/{client_id}/endpoints/{id}/test.
func (c tenant) testSend(endpointID string) (*http.Response, []byte) {
	c.a.t.Helper()
	return c.a.partner("POST", "/webhooks/"+c.ClientID+"/endpoints/"+endpointID+"/test", "", c.APIKey)
}

// The test sends are divided per partner: with two of a partner's test
// sends waiting on an endpoint that does not answer, its next gets 429
// partner_busy with Retry-After, while another partner's test send, and
// the operator's of the partner's endpoint, are sent; once the endpoint
// answers, the partner sends again.
func TestTestSendsPerPartner(t *testing.T) {
	a := newAPI(t, apiOptions{webhooks: &webhookOptions{timeout: time.Minute}, testSends: httpapi.NewTestSends(time.Minute)})
	hang := newHangingEndpoint(t)
	ok := newReceiver(t, nil)
	p, q := a.newPartner("P", 2), a.newPartner("Q", 1)[0]
	hung := []string{p[0].endpointFor(hang.URL), p[1].endpointFor(hang.URL)}
	pOK, qOK := p[0].endpointFor(ok.URL), q.endpointFor(ok.URL)

	done := make(chan int, len(hung))
	for i, id := range hung {
		go func() {
			req, _ := http.NewRequest("POST", a.URL+"/webhooks/"+p[i].ClientID+"/endpoints/"+id+"/test", nil)
			req.Header.Set("x-api-key", p[i].APIKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- 0
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
	}
	waitFor(t, "both of P's test sends at the endpoint", func() bool { return hang.arrived.Load() == 2 })

	resp, body := p[0].testSend(pOK)
	if pr := problem(t, resp, body, http.StatusTooManyRequests); pr.Type != "/problems/partner_busy" || resp.Header.Get("Retry-After") != "60" {
		t.Fatalf("P's third test send: %+v, Retry-After %q", pr, resp.Header.Get("Retry-After"))
	}
	conformAnswer(t, "POST", "/webhooks/"+p[0].ClientID+"/endpoints/"+pOK+"/test", resp, body)

	var res storelink.TestResult
	if resp, body := q.testSend(qOK); resp.StatusCode != http.StatusOK || json.Unmarshal(body, &res) != nil || res.StatusCode != http.StatusNoContent {
		t.Fatalf("Q's test send beside P's = %d %s", resp.StatusCode, body)
	}
	a.admin("POST", "/admin/webhooks/"+pOK+"/test", "", http.StatusOK, &res)
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("the operator's test send of P's endpoint: %+v", res)
	}

	hang.letGo()
	for range hung {
		select {
		case status := <-done:
			if status != http.StatusOK {
				t.Fatalf("P's held test send = %d", status)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("P's held test sends did not end 20s after the endpoint answered")
		}
	}
	if resp, body := p[0].testSend(pOK); resp.StatusCode != http.StatusOK {
		t.Fatalf("P's test send after its others ended = %d %s", resp.StatusCode, body)
	}
}

// A test send is bounded in time by TestSends, whatever the webhook
// client's own timeout: one to an endpoint that never answers ends with
// an error, and gives its place back.
func TestTestSendTimeout(t *testing.T) {
	a := newAPI(t, apiOptions{webhooks: &webhookOptions{timeout: time.Hour}, testSends: httpapi.NewTestSends(300 * time.Millisecond)})
	hang := newHangingEndpoint(t)
	p := a.newPartner("P", 1)[0]
	id := p.endpointFor(hang.URL)
	for i := range 3 { // more than the partner's share, one after another
		resp, body := p.testSend(id)
		var res storelink.TestResult
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &res) != nil || res.Error == "" || res.StatusCode != 0 {
			t.Fatalf("test send %d to an endpoint that does not answer = %d %s, want 200 with an error", i+1, resp.StatusCode, body)
		}
	}
	if n := hang.arrived.Load(); n != 3 {
		t.Fatalf("the endpoint got %d requests, want 3", n)
	}
}
