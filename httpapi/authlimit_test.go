package httpapi_test

import (
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"storelink/httpapi"
)

// After twenty wrong admin tokens from one address, every call from it is
// refused with 429, Retry-After and a problem, even with the right token and
// on partner calls; the answers conform to the spec. A call with no
// credentials at all counts for nothing.
func TestAuthFailuresLimited(t *testing.T) {
	a := newAPI(t, apiOptions{})
	router := specRouter(t)
	for range 30 {
		resp, b := a.do("GET", "/orders", nil, nil)
		problem(t, resp, b, 401)
	}
	wrong := map[string]string{"Authorization": "Bearer " + strings.Repeat("w", 40)}
	for range 20 {
		resp, b := a.do("GET", "/orders", nil, wrong)
		problem(t, resp, b, 401)
	}
	for _, c := range []call{
		{"GET", "/orders", "", wrong, 429},
		{"GET", "/orders", "", map[string]string{"Authorization": "Bearer " + adminToken}, 429},
		{"POST", "/admin/partners", `{"name":"x"}`, map[string]string{"Authorization": "Bearer " + adminToken}, 429},
		{"GET", "/stock/" + a.ClientID + "/uploads", "", map[string]string{"x-api-key": a.APIKey}, 429},
		{"PUT", "/stock/" + a.ClientID + "/feed.csv", feed, map[string]string{"x-api-key": a.APIKey, "Content-Type": "text/csv"}, 429},
	} {
		conform(t, a, router, c)
	}
	resp, b := a.do("GET", "/events/"+a.ClientID, nil, map[string]string{"x-api-key": a.APIKey})
	p := problem(t, resp, b, 429)
	if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || n < 1 || n > 3 {
		t.Fatalf("Retry-After = %q, want 1 to 3 seconds", resp.Header.Get("Retry-After"))
	}
	if p.Type != "/problems/auth_limited" || !strings.Contains(p.Detail, "failed authentication attempts from this address") {
		t.Fatalf("problem = %+v", p)
	}
	if resp.Header.Get("RateLimit") != "" || resp.Header.Get("WWW-Authenticate") != "" {
		t.Fatalf("a refusal before authentication carries RateLimit %q, WWW-Authenticate %q",
			resp.Header.Get("RateLimit"), resp.Header.Get("WWW-Authenticate"))
	}
	resp, b = a.do("GET", "/problems/auth_limited", nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "Retry-After") {
		t.Fatalf("GET /problems/auth_limited = %d %s", resp.StatusCode, b)
	}
}

// Wrong API keys count too; a key of the same partner's other client (403)
// does not, since it guesses nothing.
func TestAuthFailuresLimitedPartnerKeys(t *testing.T) {
	a := newAPI(t, apiOptions{})
	var other struct {
		ID     string `json:"client_id"`
		APIKey string `json:"api_key"`
	}
	a.admin("POST", "/admin/partners/"+a.PartnerID+"/clients", `{"country_code":"FR","currency":"EUR"}`, 201, &other)
	for range 30 {
		resp, b := a.do("GET", "/stock/"+other.ID+"/uploads", nil, map[string]string{"x-api-key": a.APIKey})
		problem(t, resp, b, 403)
	}
	for range 20 {
		resp, b := a.do("GET", "/stock/"+a.ClientID+"/uploads", nil, map[string]string{"x-api-key": "slk_wrong"})
		problem(t, resp, b, 401)
	}
	resp, b := a.do("GET", "/stock/"+a.ClientID+"/uploads", nil, map[string]string{"x-api-key": a.APIKey})
	problem(t, resp, b, 429)
	resp, b = a.do("GET", "/orders", nil, map[string]string{"Authorization": "Bearer " + adminToken})
	problem(t, resp, b, 429)
}

// The Authorization scheme is matched in any case (RFC 7235), with any
// spaces before the token; another scheme is refused.
func TestBearerSchemeAnyCase(t *testing.T) {
	a := newAPI(t, apiOptions{})
	for _, h := range []string{"Bearer " + adminToken, "bearer " + adminToken, "BEARER " + adminToken, "bEaReR   " + adminToken} {
		resp, b := a.do("GET", "/orders", nil, map[string]string{"Authorization": h})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("Authorization %q... = %d %s, want 200", h[:8], resp.StatusCode, b)
		}
	}
	for _, h := range []string{"Basic " + adminToken, "Bearer", adminToken, "Bearer" + adminToken} {
		resp, b := a.do("GET", "/orders", nil, map[string]string{"Authorization": h})
		problem(t, resp, b, 401)
	}
}

// behindProxy is an API whose every connection (loopback) is a trusted
// proxy: the client address is the X-Forwarded-For the test sends.
func behindProxy(t *testing.T, limit *httpapi.AuthLimiter) *api {
	t.Helper()
	tp, err := httpapi.ParseTrustedProxies("127.0.0.0/8,::1")
	if err != nil {
		t.Fatal(err)
	}
	return newAPI(t, apiOptions{trustedProxies: tp, authLimit: limit})
}

// from is the header of a call with key (an API key, or "Bearer …" for the
// admin token) forwarded for client address addr.
func from(addr, key string) map[string]string {
	h := map[string]string{"X-Forwarded-For": "198.51.100.250, " + addr}
	if strings.HasPrefix(key, "Bearer ") {
		h["Authorization"] = key
	} else {
		h["x-api-key"] = key
	}
	return h
}

// fresh is the ith of a run of distinct made-up client addresses.
func fresh(i int) string {
	return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String()
}

// Behind a trusted proxy, wrong keys from one client address lock out that
// address only, even with the right key, while the right key of the same
// client and the admin token from another address are taken.
func TestAuthLimitBehindProxy(t *testing.T) {
	a := behindProxy(t, nil)
	path := "/stock/" + a.ClientID + "/uploads"
	for i := range 25 {
		resp, b := a.do("GET", path, nil, from("203.0.113.1", "slk_wrong"))
		want := 401
		if i >= 20 {
			want = 429
		}
		problem(t, resp, b, want)
	}
	resp, b := a.do("GET", path, nil, from("203.0.113.1", a.APIKey))
	problem(t, resp, b, 429)
	resp, b = a.do("GET", "/orders", nil, from("203.0.113.1", "Bearer "+adminToken))
	problem(t, resp, b, 429)
	for range 30 {
		if resp, b := a.do("GET", path, nil, from("203.0.113.2", a.APIKey)); resp.StatusCode != 200 {
			t.Fatalf("the client's right key from another address = %d %s, want 200", resp.StatusCode, b)
		}
		if resp, b := a.do("GET", "/orders", nil, from("203.0.113.2", "Bearer "+adminToken)); resp.StatusCode != 200 {
			t.Fatalf("the admin token from another address = %d %s, want 200", resp.StatusCode, b)
		}
	}
}

// From a peer that is not a trusted proxy, X-Forwarded-For is ignored:
// a new made-up address on each guess does not buy a new bucket.
func TestAuthLimitUntrustedForwardedFor(t *testing.T) {
	tp, err := httpapi.ParseTrustedProxies("192.0.2.0/24")
	if err != nil {
		t.Fatal(err)
	}
	a := newAPI(t, apiOptions{trustedProxies: tp})
	path := "/stock/" + a.ClientID + "/uploads"
	for i := range 20 {
		resp, b := a.do("GET", path, nil, from(fresh(i), "slk_wrong"))
		problem(t, resp, b, 401)
	}
	resp, b := a.do("GET", path, nil, from(fresh(99), a.APIKey))
	problem(t, resp, b, 429)
}

// A flood of 10,001 client addresses, each guessing once at one client's
// key, neither fills the table nor locks the client out: its right key
// from an address that has not failed is taken 30 times out of 30, and so
// is the admin token. The flood's addresses get no second guess at the
// client while it is under attack.
func TestAuthLimitFloodOfAddresses(t *testing.T) {
	a := behindProxy(t, nil)
	path := "/stock/" + a.ClientID + "/uploads"
	const flood = 10001
	var wg sync.WaitGroup
	var unauthorized atomic.Int64
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < flood; i += 4 {
				if resp, _ := a.do("GET", path, nil, from(fresh(i), "slk_wrong")); resp.StatusCode == 401 {
					unauthorized.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if unauthorized.Load() != flood {
		t.Fatalf("%d of %d fresh addresses got their one guess (401)", unauthorized.Load(), flood)
	}
	for i := range 30 {
		if resp, b := a.do("GET", path, nil, from("203.0.113.2", a.APIKey)); resp.StatusCode != 200 {
			t.Fatalf("the client's right key from a clean address, try %d = %d %s, want 200", i, resp.StatusCode, b)
		}
		if resp, b := a.do("GET", "/orders", nil, from("203.0.113.3", "Bearer "+adminToken)); resp.StatusCode != 200 {
			t.Fatalf("the admin token from a clean address, try %d = %d %s, want 200", i, resp.StatusCode, b)
		}
	}
	for i := range 100 {
		resp, b := a.do("GET", path, nil, from(fresh(i), "slk_wrong"))
		problem(t, resp, b, 429)
	}
}

// When the table is full of addresses that failed lately, a newcomer's
// failure is answered 429 with Retry-After, not 401, and is not counted;
// a clean address with the right key is taken 30 times out of 30 at a
// client not under attack. At the credential the flood guessed at (here the
// admin token), an address the full table cannot know waits like the
// flood's newcomers, or they could guess without limit.
func TestAuthLimitFullTable(t *testing.T) {
	limit := httpapi.NewAuthLimiter(httpapi.DefaultAuthFailuresPerMinute)
	limit.SetMaxTrackedAddresses(300)
	a := behindProxy(t, limit)
	for i := range 300 {
		resp, b := a.do("GET", "/orders", nil, from(fresh(i), "Bearer wrong-token"))
		problem(t, resp, b, 401)
	}
	for i := range 20 {
		resp, b := a.do("GET", "/stock/made-up-client/uploads", nil, from(fresh(1000+i), "slk_wrong"))
		p := problem(t, resp, b, 429)
		if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || n < 1 || p.Type != "/problems/auth_limited" {
			t.Fatalf("a newcomer's failure in a full table: Retry-After %q, %+v", resp.Header.Get("Retry-After"), p)
		}
	}
	for i := range 30 {
		if resp, b := a.do("GET", "/stock/"+a.ClientID+"/uploads", nil, from("203.0.113.2", a.APIKey)); resp.StatusCode != 200 {
			t.Fatalf("the client's right key from a clean address, try %d = %d %s, want 200", i, resp.StatusCode, b)
		}
	}
	resp, b := a.do("GET", "/orders", nil, from("203.0.113.3", "Bearer "+adminToken))
	problem(t, resp, b, 429)
}

// A partner that signed in from an address before a flood filled the
// table with addresses guessing at its client is taken from there 30 times
// out of 30 with its right key; an address the table and the signed-in
// addresses do not know waits with 429, even with the right key.
func TestAuthLimitFullTableKnownGood(t *testing.T) {
	limit := httpapi.NewAuthLimiter(httpapi.DefaultAuthFailuresPerMinute)
	limit.SetMaxTrackedAddresses(300)
	a := behindProxy(t, limit)
	path := "/stock/" + a.ClientID + "/uploads"
	if resp, b := a.do("GET", path, nil, from("203.0.113.2", a.APIKey)); resp.StatusCode != 200 {
		t.Fatalf("the client's right key before the flood = %d %s, want 200", resp.StatusCode, b)
	}
	for i := range 320 {
		resp, b := a.do("GET", path, nil, from(fresh(i), "slk_wrong"))
		want := 401
		if i >= 300 {
			want = 429 // the table is full and the client under attack
		}
		problem(t, resp, b, want)
	}
	for i := range 30 {
		if resp, b := a.do("GET", path, nil, from("203.0.113.2", a.APIKey)); resp.StatusCode != 200 {
			t.Fatalf("the client's right key from the address it signed in from, try %d = %d %s, want 200", i, resp.StatusCode, b)
		}
	}
	resp, b := a.do("GET", path, nil, from("203.0.113.3", a.APIKey))
	problem(t, resp, b, 429)
}
