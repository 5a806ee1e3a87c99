package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"storelink"
	"storelink/httpapi"
)

// Validations have a rate of their own per client: each answer says what
// is left in RateLimit headers named "validate"; one beyond the rate gets
// 429 rate_limited with Retry-After, as the spec says, and the partner's
// other client, and uploads, are not touched by it.
func TestValidationRateLimit(t *testing.T) {
	a := newAPI(t, apiOptions{validationsPerMinute: 3})
	p := a.newPartner("P", 2)
	file := csvOf(2)
	path := "/stock/" + p[0].ClientID + "/validate"
	// The rate refills with time: t in the headers is short by the seconds
	// the requests took, which on a busy machine are more than one.
	start := time.Now()
	near := func(got, want string) bool { return ratelimitNear(got, want, time.Since(start)) }
	for i := range 3 {
		resp, body := p[0].put("validate", bytes.NewReader(file), nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("validation %d = %d %s", i+1, resp.StatusCode, body)
		}
		if got := resp.Header.Get("RateLimit-Policy"); got != `"validate";q=3;w=60` {
			t.Fatalf("validation %d: RateLimit-Policy %q", i+1, got)
		}
		// r counts down; t is the time to refill what was taken, 20s each.
		if got, want := resp.Header.Get("RateLimit"), fmt.Sprintf(`"validate";r=%d;t=%d`, 2-i, 20*(i+1)); !near(got, want) {
			t.Fatalf("validation %d: RateLimit %q, want about %q", i+1, got, want)
		}
		if i == 0 {
			conformAnswer(t, "PUT", path, resp, body)
		}
	}
	resp, body := p[0].put("validate", bytes.NewReader(file), nil)
	pr := problem(t, resp, body, http.StatusTooManyRequests)
	retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if pr.Type != "/problems/rate_limited" || retry < 1 || retry > 20 || resp.Header.Get("RateLimit-Policy") != `"validate";q=3;w=60` ||
		!near(resp.Header.Get("RateLimit"), `"validate";r=0;t=60`) {
		t.Fatalf("the fourth validation: %+v, header %v", pr, resp.Header)
	}
	conformAnswer(t, "PUT", path, resp, body)

	if resp, body := p[1].put("validate", bytes.NewReader(file), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("the partner's other client's validation = %d %s", resp.StatusCode, body)
	}
	if resp, body := p[0].put("feed.csv", bytes.NewReader(file), nil); resp.StatusCode != http.StatusOK ||
		!bytes.HasPrefix([]byte(resp.Header.Get("RateLimit")), []byte(`"upload";`)) {
		t.Fatalf("an upload of the client with no validation left = %d %s %v", resp.StatusCode, body, resp.Header)
	}
}

// ratelimitNear compares RateLimit headers, allowing t to be short by the
// time that passed since the first request, and a second more for rounding.
func ratelimitNear(got, want string, passed time.Duration) bool {
	var gr, gt, wr, wt int
	if _, err := fmt.Sscanf(got, `"validate";r=%d;t=%d`, &gr, &gt); err != nil {
		return false
	}
	_, _ = fmt.Sscanf(want, `"validate";r=%d;t=%d`, &wr, &wt)
	return gr == wr && gt <= wt && gt >= wt-1-int(passed.Seconds())
}

// A client's writes through the partner API have a rate of their own
// ("write"): each answer after authentication says what is left; one
// beyond the rate gets 429 rate_limited with Retry-After, as the spec
// says, and writes nothing, on every partner write route; the partner's
// other client and the operator are not touched by it; and the bucket
// refills with time. The limit reads a clock the test moves.
func TestWriteRateLimit(t *testing.T) {
	clock := newTestClock()
	writes := httpapi.NewWriteLimit(3)
	writes.SetClock(clock.now)
	a := newAPI(t, apiOptions{writes: writes, webhooks: &webhookOptions{}, noProcessor: true})
	p := a.newPartner("P", 2)
	endpoints := "/webhooks/" + p[0].ClientID + "/endpoints"
	create := func(c tenant, i int) (*http.Response, []byte) {
		t.Helper()
		return a.partner("POST", "/webhooks/"+c.ClientID+"/endpoints", fmt.Sprintf(`{"url":"http://127.0.0.1:9/hook-%d"}`, i), c.APIKey)
	}
	wantHeaders := func(what string, resp *http.Response, policy, limit string) {
		t.Helper()
		if got := resp.Header.Get("RateLimit-Policy"); got != policy {
			t.Errorf("%s: RateLimit-Policy %q, want %q", what, got, policy)
		}
		if got := resp.Header.Get("RateLimit"); got != limit {
			t.Errorf("%s: RateLimit %q, want %q", what, got, limit)
		}
	}
	for i := range 3 {
		resp, body := create(p[0], i)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("write %d = %d %s", i+1, resp.StatusCode, body)
		}
		// r counts down; t is the time to refill what was taken, 20 s each.
		wantHeaders(fmt.Sprintf("write %d", i+1), resp, `"write";q=3;w=60`, fmt.Sprintf(`"write";r=%d;t=%d`, 2-i, 20*(i+1)))
		if i == 0 {
			conformAnswer(t, "POST", endpoints, resp, body)
		}
	}
	// Reads are not writes: the list is answered, without the headers.
	if n := len(partnerEndpoints(t, a, p[0])); n != 3 {
		t.Fatalf("%d endpoints after 3 creates", n)
	}

	// The fourth write, of any route, is refused and writes nothing.
	resp, body := create(p[0], 3)
	pr := problem(t, resp, body, http.StatusTooManyRequests)
	if pr.Type != "/problems/rate_limited" || resp.Header.Get("Retry-After") != "20" ||
		pr.Detail != "This client has used up its writes (3 a minute, refilled evenly); nothing was written. Retry after 20 seconds." {
		t.Fatalf("the fourth write: %+v, Retry-After %q", pr, resp.Header.Get("Retry-After"))
	}
	wantHeaders("the fourth write", resp, `"write";q=3;w=60`, `"write";r=0;t=60`)
	conformAnswer(t, "POST", endpoints, resp, body)
	eps := partnerEndpoints(t, a, p[0])
	if len(eps) != 3 {
		t.Fatalf("%d endpoints after a refused create, want 3", len(eps))
	}
	keys := func() int {
		var k struct {
			APIKeys []json.RawMessage `json:"api_keys"`
		}
		_ = json.Unmarshal(a.partnerOK(p[0], "GET", "/clients/"+p[0].ClientID+"/api-keys"), &k)
		return len(k.APIKeys)
	}
	keysBefore := keys()
	ep := eps[0].ID
	uploadID := p[0].uploadID("feed.csv", string(csvOf(2)))
	for _, w := range []struct{ method, path, body string }{
		{"PATCH", endpoints + "/" + ep, `{"enabled":false}`},
		{"DELETE", endpoints + "/" + ep, ""},
		{"POST", endpoints + "/" + ep + "/rotate-secret", ""},
		{"POST", endpoints + "/" + ep + "/recover", `{"since":"2026-01-01T00:00:00Z"}`},
		{"POST", endpoints + "/" + ep + "/test", ""},
		{"POST", "/webhooks/" + p[0].ClientID + "/deliveries/" + ep + "/redeliver", ""},
		{"POST", "/clients/" + p[0].ClientID + "/api-keys", ""},
		{"DELETE", "/clients/" + p[0].ClientID + "/api-keys/" + ep, ""},
		{"DELETE", "/stock/" + p[0].ClientID + "/uploads/" + uploadID, ""},
	} {
		resp, body := a.partner(w.method, w.path, w.body, p[0].APIKey)
		if pr := problem(t, resp, body, http.StatusTooManyRequests); pr.Type != "/problems/rate_limited" || resp.Header.Get("Retry-After") != "20" {
			t.Errorf("%s %s with no write left: %+v, Retry-After %q", w.method, w.path, pr, resp.Header.Get("Retry-After"))
		}
		if !strings.Contains(resp.Header.Get("RateLimit"), `"write";r=0;t=60`) {
			t.Errorf("%s %s with no write left: RateLimit %q", w.method, w.path, resp.Header.Get("RateLimit"))
		}
		conformAnswer(t, w.method, w.path, resp, body)
	}
	if got := partnerEndpoints(t, a, p[0]); len(got) != 3 || got[0].ID != ep || !got[0].Enabled || !got[0].UpdatedAt.Equal(eps[0].UpdatedAt) || got[0].PreviousSecretUntil != nil {
		t.Errorf("the endpoints after refused writes: %+v, want them as they were: %+v", got, eps)
	}
	if n := keys(); n != keysBefore {
		t.Errorf("%d API keys after refused writes, want %d", n, keysBefore)
	}
	if u := a.uploadStatus(p[0], uploadID); u != "accepted" {
		t.Errorf("the upload is %s after a refused cancel, want accepted", u)
	}

	// The partner's other client has its own bucket; the operator has none.
	resp, body = create(p[1], 0)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("the other client's write = %d %s", resp.StatusCode, body)
	}
	wantHeaders("the other client's write", resp, `"write";q=3;w=60`, `"write";r=2;t=20`)
	var e struct {
		ID string `json:"endpoint_id"`
	}
	a.admin("POST", "/admin/clients/"+p[0].ClientID+"/webhooks", `{"url":"http://127.0.0.1:9/operator"}`, 201, &e)
	resp, body = a.do("PATCH", "/admin/webhooks/"+e.ID, strings.NewReader(`{"enabled":false}`),
		map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit") != "" {
		t.Fatalf("the operator's write for the client with no write left = %d %s, RateLimit %q", resp.StatusCode, body, resp.Header.Get("RateLimit"))
	}

	// After 20 s one write fits again, and the bucket is empty once more;
	// 19 s later the next one still waits a second.
	clock.add(20 * time.Second)
	resp, body = a.partner("DELETE", "/stock/"+p[0].ClientID+"/uploads/"+uploadID, "", p[0].APIKey)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a cancel 20 s later = %d %s", resp.StatusCode, body)
	}
	// A cancel's answer carries both of its policies, the capacity first.
	if got := resp.Header.Get("RateLimit-Policy"); !strings.HasPrefix(got, `"upload";q=`) || !strings.HasSuffix(got, `, "write";q=3;w=60`) {
		t.Errorf("the cancel's RateLimit-Policy %q", got)
	}
	if got := resp.Header.Get("RateLimit"); !strings.HasPrefix(got, `"upload";r=`) || !strings.HasSuffix(got, `, "write";r=0;t=60`) {
		t.Errorf("the cancel's RateLimit %q", got)
	}
	conformAnswer(t, "DELETE", "/stock/"+p[0].ClientID+"/uploads/"+uploadID, resp, body)
	clock.add(19 * time.Second)
	resp, body = create(p[0], 4)
	if pr := problem(t, resp, body, http.StatusTooManyRequests); pr.Type != "/problems/rate_limited" || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("a write 19 s after the bucket emptied: %+v, Retry-After %q", pr, resp.Header.Get("Retry-After"))
	}
	wantHeaders("a write 19 s after the bucket emptied", resp, `"write";q=3;w=60`, `"write";r=0;t=41`)
}

// testClock is a clock the test moves.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock {
	return &testClock{t: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)}
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// partnerEndpoints is the client's endpoints as the partner API lists them.
func partnerEndpoints(t *testing.T, a *api, c tenant) []storelink.EndpointDetail {
	t.Helper()
	var l struct {
		Endpoints []storelink.EndpointDetail `json:"endpoints"`
	}
	if err := json.Unmarshal(a.partnerOK(c, "GET", "/webhooks/"+c.ClientID+"/endpoints"), &l); err != nil {
		t.Fatal(err)
	}
	return l.Endpoints
}

// partnerOK sends a partner read and returns its body; anything but 200,
// or RateLimit headers on it, fails the test.
func (a *api) partnerOK(c tenant, method, path string) []byte {
	a.t.Helper()
	resp, body := a.partner(method, path, "", c.APIKey)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit") != "" {
		a.t.Fatalf("%s %s = %d %s, RateLimit %q", method, path, resp.StatusCode, body, resp.Header.Get("RateLimit"))
	}
	return body
}

// uploadStatus is the status of one of the client's uploads.
func (a *api) uploadStatus(c tenant, id string) string {
	a.t.Helper()
	var u struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(a.partnerOK(c, "GET", "/stock/"+c.ClientID+"/uploads/"+id), &u)
	return u.Status
}
