package httpapi_test

import (
	"bytes"
	"net/http"
	"testing"
)

// The uploads in flight are counted per partner: with its three clients
// each holding a slow upload or validation, the partner is at
// --max-uploads-in-flight (3 here) and its next gets 429 uploads_in_flight
// with Retry-After, from any of its clients, while another partner
// uploads and validates.
func TestUploadsInFlightPerPartner(t *testing.T) {
	a := newAPI(t, apiOptions{maxUploadsInFlight: 3, validationsPerMinute: 1000})
	p, q := a.newPartner("P", 3), a.newPartner("Q", 1)[0]
	file := csvOf(2000)
	held := []*slowBody{
		p[0].startSlow("held.csv", len(file), file[:100]),
		p[1].startSlow("validate", len(file), file[:100]),
		p[2].startSlow("validate", -1, file[:100]),
	}
	var resp *http.Response
	var body []byte
	waitFor(t, "refusing P's fourth validation", func() bool {
		resp, body = p[0].put("validate", bytes.NewReader(file), nil)
		return resp.StatusCode != http.StatusOK
	})
	if pr := problem(t, resp, body, http.StatusTooManyRequests); pr.Type != "/problems/uploads_in_flight" || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("P's fourth in flight: %+v, Retry-After %q", pr, resp.Header.Get("Retry-After"))
	}
	resp, body = p[2].put("next.csv", bytes.NewReader(file), nil)
	if pr := problem(t, resp, body, http.StatusTooManyRequests); pr.Type != "/problems/uploads_in_flight" || resp.Header.Get("RateLimit") == "" {
		t.Fatalf("P's upload beyond its uploads in flight: %+v, header %v", pr, resp.Header)
	}

	if resp, body := q.put("q.csv", bytes.NewReader(file), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("Q's upload beside P at its limit = %d %s", resp.StatusCode, body)
	}
	if resp, body := q.put("validate", bytes.NewReader(file), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("Q's validation beside P at its limit = %d %s", resp.StatusCode, body)
	}

	for i, h := range held {
		if r := h.finish(t, file[100:]); r.err != nil || r.status != http.StatusOK {
			t.Fatalf("P's held body %d, finished: %d %v %s", i, r.status, r.err, r.body)
		}
	}
	if resp, body := p[2].put("next.csv", bytes.NewReader(file), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("P's upload after its bodies ended = %d %s", resp.StatusCode, body)
	}
}
