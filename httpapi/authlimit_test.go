package httpapi_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
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
