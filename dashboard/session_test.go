package dashboard_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"storelink/dashboard"
)

// withCookie GETs a dashboard path on base with just the session cookie
// value given, as a replayed or copied cookie would come.
func withCookie(t *testing.T, base, path, value string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", base+path, nil)
	must(t, err)
	req.AddCookie(&http.Cookie{Name: "storelink_session", Value: value})
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	must(t, err)
	resp.Body.Close()
	return resp
}

// sessionCookie logs b in and returns the session cookie's value.
func sessionCookie(t *testing.T, b *browser) string {
	t.Helper()
	resp, body := b.post("/dashboard/login", url.Values{"token": {b.f.Token}})
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("login = %d %v %s", resp.StatusCode, resp.Cookies(), body)
	}
	return resp.Cookies()[0].Value
}

// A logout ends the session in the database: its cookie, replayed, opens
// nothing, here or in another dashboard on the same database (another serve
// process); other sessions go on.
func TestLogoutEndsSessionEverywhere(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	second := httptest.NewServer(dashboard.New(dashboard.Deps{
		Admin: f.services.Partners, Uploads: f.services.Uploads, Stock: f.services.Uploads, Orders: f.services.Orders, Webhooks: f.services.Webhooks, Sessions: f.services.Partners,
		AdminToken: f.Token, Capacity: capacity,
	}))
	t.Cleanup(second.Close)

	b, other := f.browser(), f.browser()
	kept := sessionCookie(t, b)
	otherCookie := sessionCookie(t, other)
	for _, base := range []string{f.URL, second.URL} {
		if resp := withCookie(t, base, "/dashboard/", kept); resp.StatusCode != http.StatusOK {
			t.Fatalf("before logout, the cookie on %s = %d, want 200", base, resp.StatusCode)
		}
	}
	resp, _ := b.post("/dashboard/logout", url.Values{"csrf": {b.csrf()}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/login" {
		t.Fatalf("logout = %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, base := range []string{f.URL, second.URL} {
		resp := withCookie(t, base, "/dashboard/deliveries", kept)
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/dashboard/login") {
			t.Errorf("the replayed cookie on %s = %d %q, want the login redirect", base, resp.StatusCode, resp.Header.Get("Location"))
		}
		if resp := withCookie(t, base, "/dashboard/", otherCookie); resp.StatusCode != http.StatusOK {
			t.Errorf("another session on %s after the logout = %d, want 200", base, resp.StatusCode)
		}
	}
	// An action with the replayed cookie and its CSRF token is refused too.
	req, _ := http.NewRequest("POST", f.URL+"/dashboard/logout", strings.NewReader("csrf=x"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: "storelink_session", Value: kept})
	resp, _ = f.browser().do(req)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/login" {
		t.Errorf("an action with the replayed cookie = %d %q, want the login redirect", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// Behind a trusted proxy each client address counts on its own: after
// twenty wrong tokens and twenty wrong keys from one address, that address
// is refused even with the right ones, while the operator and the partner
// log in from another address; the login and the API share the limit.
func TestLoginLimitPerClientAddress(t *testing.T) {
	f := newFixture(t, fixtureOptions{trustedProxies: "127.0.0.0/8,::1"})
	s := f.seedData()
	b := f.browser()
	guesser, keyGuesser := []string{"X-Forwarded-For", "203.0.113.1"}, []string{"X-Forwarded-For", "203.0.113.4"}
	operator := []string{"X-Forwarded-For", "203.0.113.2"}
	for i := range 20 {
		if resp, _ := b.post("/dashboard/login", url.Values{"token": {"wrong-" + strconv.Itoa(i)}}, guesser...); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong login %d = %d, want 401", i, resp.StatusCode)
		}
		if resp, _ := b.post("/portal/login", url.Values{"client_id": {s.ClientID}, "api_key": {"slk_wrong_" + strconv.Itoa(i)}}, keyGuesser...); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong sign-in %d = %d, want 401", i, resp.StatusCode)
		}
	}
	if resp, _ := b.post("/dashboard/login", url.Values{"token": {f.Token}}, guesser...); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the right token from the guessing address = %d, want 429", resp.StatusCode)
	}
	if resp, _ := b.post("/portal/login", url.Values{"client_id": {s.ClientID}, "api_key": {s.APIKey}}, keyGuesser...); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the right key from the guessing address = %d, want 429", resp.StatusCode)
	}
	for range 3 {
		if resp, body := f.browser().post("/dashboard/login", url.Values{"token": {f.Token}}, operator...); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("the operator's login from another address = %d, want 303: %s", resp.StatusCode, body)
		}
		if resp, body := f.browser().post("/portal/login", url.Values{"client_id": {s.ClientID}, "api_key": {s.APIKey}}, operator...); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("the partner's sign-in from another address = %d, want 303: %s", resp.StatusCode, body)
		}
	}
	req, _ := http.NewRequest("GET", f.URL+"/orders", nil)
	req.Header.Set("Authorization", "Bearer "+f.Token)
	req.Header.Set("X-Forwarded-For", "203.0.113.1")
	if resp, _ := b.do(req); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("the API from the guessing address = %d, want 429", resp.StatusCode)
	}
}

// Twenty wrong tokens from one address: the next login is refused with 429
// and Retry-After, even with the right token, and so is the API, which
// shares the limit. Empty submissions guess nothing and do not count.
func TestLoginLimited(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	b := f.browser()
	for range 25 {
		if resp, _ := b.post("/dashboard/login", url.Values{"token": {""}}); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("empty login = %d, want 401", resp.StatusCode)
		}
	}
	for i := range 20 {
		if resp, _ := b.post("/dashboard/login", url.Values{"token": {"wrong-" + strconv.Itoa(i)}}); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong login %d = %d, want 401", i, resp.StatusCode)
		}
	}
	resp, body := b.post("/dashboard/login", url.Values{"token": {f.Token}})
	if resp.StatusCode != http.StatusTooManyRequests || len(resp.Cookies()) != 0 {
		t.Fatalf("login after 20 failures = %d, cookies %v; want 429 and none", resp.StatusCode, resp.Cookies())
	}
	if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || n < 1 || n > 3 {
		t.Errorf("Retry-After = %q, want 1 to 3 seconds", resp.Header.Get("Retry-After"))
	}
	wantContains(t, "the refused login", body, "Too many failed attempts from this address")
	req, _ := http.NewRequest("GET", f.URL+"/orders", nil)
	req.Header.Set("Authorization", "Bearer "+f.Token)
	if resp, _ := b.do(req); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("the API after 20 failed logins = %d, want 429", resp.StatusCode)
	}
}

// successes is a login limit that notes the successes reported to it.
type successes struct {
	dashboard.LoginLimit
	mu  sync.Mutex
	got []string
}

func (s *successes) Succeeded(addr netip.Addr, clientID string) {
	s.mu.Lock()
	s.got = append(s.got, addr.String()+" "+clientID)
	s.mu.Unlock()
	s.LoginLimit.Succeeded(addr, clientID)
}

// The login and the portal's sign-in report their successes to the limit,
// which keeps the address known while a flood fills its table; a wrong
// token or key, and the right one refused after twenty wrong ones, are no
// success.
func TestLoginSuccessReported(t *testing.T) {
	rec := &successes{}
	f := newFixture(t, fixtureOptions{trustedProxies: "127.0.0.0/8,::1",
		loginLimit: func(l dashboard.LoginLimit) dashboard.LoginLimit { rec.LoginLimit = l; return rec }})
	s := f.seedData()
	guesser := []string{"X-Forwarded-For", "203.0.113.1"}
	for i := range 20 {
		if resp, _ := f.browser().post("/dashboard/login", url.Values{"token": {"wrong-" + strconv.Itoa(i)}}, guesser...); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong login %d = %d, want 401", i, resp.StatusCode)
		}
	}
	if resp, _ := f.browser().post("/dashboard/login", url.Values{"token": {f.Token}}, guesser...); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the right token from the guessing address = %d, want 429", resp.StatusCode)
	}
	if resp, _ := f.browser().post("/portal/login", url.Values{"client_id": {s.ClientID}, "api_key": {s.APIKey}}, guesser...); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the right key from the guessing address = %d, want 429", resp.StatusCode)
	}
	if resp, _ := f.browser().post("/portal/login", url.Values{"client_id": {s.ClientID}, "api_key": {"slk_wrong"}}, "X-Forwarded-For", "203.0.113.4"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong key = %d, want 401", resp.StatusCode)
	}
	if resp, body := f.browser().post("/dashboard/login", url.Values{"token": {f.Token}}, "X-Forwarded-For", "203.0.113.2"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the operator's login = %d, want 303: %s", resp.StatusCode, body)
	}
	if resp, body := f.browser().post("/portal/login", url.Values{"client_id": {s.ClientID}, "api_key": {s.APIKey}}, "X-Forwarded-For", "2001:db8::3"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the partner's sign-in = %d, want 303: %s", resp.StatusCode, body)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if want := []string{"203.0.113.2 ", "2001:db8::3 " + s.ClientID}; !slices.Equal(rec.got, want) {
		t.Fatalf("successes reported %q, want %q", rec.got, want)
	}
}
