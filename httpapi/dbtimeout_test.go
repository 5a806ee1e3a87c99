package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"storelink"
)

// stalledUploads is the upload service over a database that takes
// connections and never answers: Accept and Upload wait until their
// context ends, as a driver's calls do, and tell how long their context
// gave them.
type stalledUploads struct {
	storelink.UploadService
	gave chan time.Duration
}

func (s stalledUploads) stall(ctx context.Context) error {
	d, _ := ctx.Deadline()
	s.gave <- time.Until(d)
	<-ctx.Done()
	return fmt.Errorf("read from the database: %w", ctx.Err())
}

func (s stalledUploads) Accept(ctx context.Context, _ storelink.NewUpload, _ storelink.CapacityPolicy) (*storelink.Upload, storelink.Capacity, error) {
	return nil, storelink.Capacity{}, s.stall(ctx)
}

func (s stalledUploads) Upload(ctx context.Context, _, _ string) (*storelink.Upload, error) {
	return nil, s.stall(ctx)
}

// pacedBody sends b in parts, gap apart: it arrives over (parts-1)*gap.
// sent gets the time its last byte was handed on.
func pacedBody(b []byte, parts int, gap time.Duration) (body io.Reader, sent <-chan time.Time) {
	r, w := io.Pipe()
	done := make(chan time.Time, 1)
	go func() {
		defer func() { done <- time.Now() }()
		size := (len(b) + parts - 1) / parts
		for i := 0; i < len(b); i += size {
			if i > 0 {
				time.Sleep(gap)
			}
			if _, err := w.Write(b[i:min(i+size, len(b))]); err != nil {
				return
			}
		}
		w.Close()
	}()
	return r, done
}

// sendSlowly sends a request whose body b arrives over (parts-1)*gap; it
// returns the answer and how long after the body's last byte it came.
func (a *api) sendSlowly(method, path string, b []byte, parts int, gap time.Duration, header map[string]string) (*http.Response, []byte, time.Duration) {
	a.t.Helper()
	body, sent := pacedBody(b, parts, gap)
	req, err := http.NewRequest(method, a.URL+path, body)
	if err != nil {
		a.t.Fatal(err)
	}
	req.ContentLength = int64(len(b))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	answered := time.Now()
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	return resp, got, answered.Sub(<-sent)
}

// A database that never answers costs a request the database timeout: the
// answer is 503 with Retry-After 5 and says so, for a request without a
// body as for an upload whose body took longer than the timeout to arrive.
// The upload's accepting still has the time the checks before its body
// left: the body's arrival is no database time, and never more than the
// timeout is waited in all.
func TestDatabaseTimeoutStalledDatabase(t *testing.T) {
	const timeout = time.Second
	gave := make(chan time.Duration, 2)
	a := newAPI(t, apiOptions{noProcessor: true, databaseTimeout: timeout, uploads: func(u storelink.UploadService) storelink.UploadService {
		return stalledUploads{UploadService: u, gave: gave}
	}})
	check := func(what string, resp *http.Response, b []byte, took time.Duration) {
		t.Helper()
		p := problem(t, resp, b, http.StatusServiceUnavailable)
		if p.Type != "/problems/unavailable" || p.Detail != "The database did not answer within 1s. Retry after 5 seconds." ||
			resp.Header.Get("Retry-After") != "5" {
			t.Errorf("%s: %+v, Retry-After %q; want the database timeout's 503 with Retry-After 5", what, p, resp.Header.Get("Retry-After"))
		}
		if d := <-gave; d <= timeout/2 || d > timeout {
			t.Errorf("%s: the stalled call's context gave it %s, want most of the database timeout %s", what, d, timeout)
		}
		// The slack is for a loaded machine; it is far under a second
		// timeout.
		if took < timeout/2 || took > timeout+700*time.Millisecond {
			t.Errorf("%s answered %s after its body, want about %s", what, took, timeout)
		}
	}

	start := time.Now()
	resp, b := a.do("GET", "/stock/"+a.ClientID+"/uploads/some-upload", nil, map[string]string{"x-api-key": a.APIKey})
	check("a status read", resp, b, time.Since(start))

	const parts, gap = 4, 500 * time.Millisecond // 1.5 s, more than the timeout
	resp, b, took := a.sendSlowly("PUT", "/stock/"+a.ClientID+"/slow.csv", []byte(feed), parts, gap,
		map[string]string{"x-api-key": a.APIKey, "Content-Type": "application/csv"})
	check("an upload whose body took 1.5s", resp, b, took)
}

// Neither a body that takes longer than the database timeout to arrive
// nor a test send that does is cut by it: an upload, an operator call's
// JSON body and a test send to an endpoint slower than the timeout each
// succeed.
func TestDatabaseTimeoutSparesBodiesAndTestSends(t *testing.T) {
	const timeout = 300 * time.Millisecond
	a := newAPI(t, apiOptions{noProcessor: true, databaseTimeout: timeout, webhooks: &webhookOptions{}})
	const parts, gap = 4, timeout // over 3 timeouts

	resp, b, _ := a.sendSlowly("PUT", "/stock/"+a.ClientID+"/slow.csv", []byte(feed), parts, gap,
		map[string]string{"x-api-key": a.APIKey, "Content-Type": "application/csv"})
	if resp.StatusCode != http.StatusOK {
		t.Errorf("upload whose body took %s with a database timeout of %s = %d %s", (parts-1)*gap, timeout, resp.StatusCode, b)
	}
	resp, b, _ = a.sendSlowly("POST", "/admin/partners", []byte(`{"name":"Slow to send"}`), parts, gap,
		map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"})
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("operator call whose body took %s with a database timeout of %s = %d %s", (parts-1)*gap, timeout, resp.StatusCode, b)
	}

	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // an endpoint that answers after three database timeouts
		case <-time.After(3 * timeout):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(slow.Close)
	p := a.newPartner("P", 1)[0]
	resp, b = p.testSend(p.endpointFor(slow.URL))
	var res storelink.TestResult
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &res) != nil || res.StatusCode != http.StatusNoContent || res.Error != "" {
		t.Errorf("test send to an endpoint that answers after %s with a database timeout of %s = %d %s, want its 204", 3*timeout, timeout, resp.StatusCode, b)
	}
}
