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
func pacedBody(b []byte, parts int, gap time.Duration) io.Reader {
	r, w := io.Pipe()
	go func() {
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
	return r
}

// sendSlowly sends a request whose body b arrives over (parts-1)*gap.
func (a *api) sendSlowly(method, path string, b []byte, parts int, gap time.Duration, header map[string]string) (*http.Response, []byte) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.URL+path, pacedBody(b, parts, gap))
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
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
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
	check := func(what string, resp *http.Response, b []byte, took, least time.Duration) {
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
		if took < least || took > least+timeout+700*time.Millisecond {
			t.Errorf("%s answered after %s, want about %s", what, took, least+timeout)
		}
	}

	start := time.Now()
	resp, b := a.do("GET", "/stock/"+a.ClientID+"/uploads/some-upload", nil, map[string]string{"x-api-key": a.APIKey})
	check("a status read", resp, b, time.Since(start), timeout/2)

	const parts, gap = 4, 500 * time.Millisecond // 1.5 s, more than the timeout
	start = time.Now()
	resp, b = a.sendSlowly("PUT", "/stock/"+a.ClientID+"/slow.csv", []byte(feed), parts, gap,
		map[string]string{"x-api-key": a.APIKey, "Content-Type": "application/csv"})
	check("an upload whose body took 1.5s", resp, b, time.Since(start), (parts-1)*gap+timeout/2)
}

// Neither a body that takes longer than the database timeout to arrive
// nor a test send that does is cut by it: an upload, an operator call's
// JSON body and a test send to an endpoint slower than the timeout each
// succeed.
func TestDatabaseTimeoutSparesBodiesAndTestSends(t *testing.T) {
	const timeout = 300 * time.Millisecond
	a := newAPI(t, apiOptions{noProcessor: true, databaseTimeout: timeout, webhooks: &webhookOptions{}})
	const parts, gap = 4, timeout // over 3 timeouts

	resp, b := a.sendSlowly("PUT", "/stock/"+a.ClientID+"/slow.csv", []byte(feed), parts, gap,
		map[string]string{"x-api-key": a.APIKey, "Content-Type": "application/csv"})
	if resp.StatusCode != http.StatusOK {
		t.Errorf("upload whose body took %s with a database timeout of %s = %d %s", (parts-1)*gap, timeout, resp.StatusCode, b)
	}
	resp, b = a.sendSlowly("POST", "/admin/partners", []byte(`{"name":"Slow to send"}`), parts, gap,
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
