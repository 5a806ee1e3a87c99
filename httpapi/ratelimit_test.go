package httpapi_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"
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
