package httpapi_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// csvOf is a stock file of about n bytes: a header and rows for store S1.
func csvOf(n int) []byte {
	var b bytes.Buffer
	b.WriteString("store;ean;article_number;quantity;price\n")
	for b.Len() < n {
		b.WriteString("S1;4006381333931;SKU-1;5;19.99\n")
	}
	return b.Bytes()[:n]
}

// A partner whose clients hold slow upload bodies up to its share of the
// upload memory gets 429 partner_busy with Retry-After for its next upload
// (a validation, checked as it arrives, holds no body and is still
// taken), while another partner uploads and validates a file of the
// largest size; once the slow bodies end, the partner is served again.
func TestUploadMemoryPerPartner(t *testing.T) {
	a := newAPI(t, apiOptions{maxFileSize: 1 << 20, maxUploadMemory: 4 << 20, uploadMemoryShare: 2 << 20, validationsPerMinute: 1000})
	p, q := a.newPartner("P", 3), a.newPartner("Q", 1)[0]
	file := csvOf(1 << 20)
	// Two of P's clients hold an upload body of 1 MiB each, all but its
	// last byte: 2 MiB, P's whole share.
	held := []*slowBody{p[0].startSlow("held.csv", len(file), file[:len(file)-1]), p[1].startSlow("held.csv", len(file), file[:len(file)-1])}

	small := csvOf(200)
	var resp *http.Response
	var body []byte
	waitFor(t, "refusing P's third client's upload", func() bool {
		restartEnded(held, p[:2], file)
		resp, body = p[2].put("next.csv", bytes.NewReader(small), nil)
		return resp.StatusCode != http.StatusOK
	})
	if pr := problem(t, resp, body, http.StatusTooManyRequests); pr.Type != "/problems/partner_busy" || resp.Header.Get("Retry-After") != "5" ||
		resp.Header.Get("RateLimit") == "" {
		t.Fatalf("P's upload beyond its share: %+v, header %v", pr, resp.Header)
	}
	conformAnswer(t, "PUT", "/stock/"+p[2].ClientID+"/next.csv", resp, body)
	if resp, body := p[2].put("validate", bytes.NewReader(small), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("P's validation with its share taken = %d %s", resp.StatusCode, body)
	}

	// Q is untouched: a file of the largest size, uploaded and validated.
	if resp, body := q.put("q.csv", bytes.NewReader(file), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("Q's upload beside P at its share = %d %s", resp.StatusCode, body)
	}
	if resp, body := q.put("validate", bytes.NewReader(file), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("Q's validation beside P at its share = %d %s", resp.StatusCode, body)
	}

	for i, h := range held {
		if r := h.finish(t, file[len(file)-1:]); r.err != nil || r.status != http.StatusOK {
			t.Fatalf("P's held body %d, finished: %d %v %s", i, r.status, r.err, r.body)
		}
	}
	if resp, body := p[2].put("next.csv", bytes.NewReader(small), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("P's upload after its bodies ended = %d %s", resp.StatusCode, body)
	}
}

// When several partners at their share take the whole budget, a body of
// another partner gets 503 with Retry-After: the pool is busy for all.
func TestUploadMemoryPoolSpent(t *testing.T) {
	a := newAPI(t, apiOptions{maxFileSize: 1 << 20, maxUploadMemory: 2 << 20, uploadMemoryShare: 1 << 20, validationsPerMinute: 1000})
	p, q, r := a.newPartner("P", 1)[0], a.newPartner("Q", 1)[0], a.newPartner("R", 1)[0]
	file := csvOf(1 << 20)
	held := []*slowBody{p.startSlow("held.csv", len(file), file[:len(file)-1]), q.startSlow("held.csv", len(file), file[:len(file)-1])}
	var resp *http.Response
	var body []byte
	waitFor(t, "refusing R's upload", func() bool {
		restartEnded(held, []tenant{p, q}, file)
		resp, body = r.put("r.csv", strings.NewReader(string(csvOf(200))), nil)
		return resp.StatusCode != http.StatusOK
	})
	if pr := problem(t, resp, body, http.StatusServiceUnavailable); pr.Type != "/problems/unavailable" || resp.Header.Get("Retry-After") != "5" {
		t.Fatalf("R's upload with the budget spent: %+v, Retry-After %q", pr, resp.Header.Get("Retry-After"))
	}
}

// restartEnded sends again each held body (all of file but its last byte)
// that has been answered: the upload polling for a refusal takes a few KiB
// while it is received, and a held body growing to its last MiB just then
// is refused.
func restartEnded(held []*slowBody, by []tenant, file []byte) {
	for i, h := range held {
		select {
		case <-h.done:
			held[i] = by[i].startSlow("held.csv", len(file), file[:len(file)-1])
		default:
		}
	}
}
