package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// authClient never follows redirects, so that a test sees the dashboard's
// redirect to the login form.
var authClient = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// authDo sends one request to a serve process and returns the answer with
// its body read.
func authDo(tb testing.TB, method, url string, body string, header ...string) (*http.Response, []byte) {
	tb.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := authClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// authProblem fails unless the answer is a problem of that status and type.
func authProblem(tb testing.TB, what string, resp *http.Response, body []byte, status int, typ string) {
	tb.Helper()
	var p struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/problem+json" ||
		json.Unmarshal(body, &p) != nil || p.Status != status || p.Type != typ || p.Detail == "" {
		tb.Fatalf("%s = %d %s %s, want a %d problem of type %s", what, resp.StatusCode, resp.Header.Get("Content-Type"), body, status, typ)
	}
}

// authLimited fails unless the answer is the 429 of an address over its
// failed-attempt limit, with a Retry-After of 1 to most seconds.
func authLimited(tb testing.TB, what string, resp *http.Response, body []byte, most int) {
	tb.Helper()
	authProblem(tb, what, resp, body, http.StatusTooManyRequests, "/problems/auth_limited")
	if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || n < 1 || n > most {
		tb.Fatalf("%s: Retry-After = %q, want 1 to %d seconds", what, resp.Header.Get("Retry-After"), most)
	}
}

// 21 wrong admin tokens from 127.0.0.1: the first 20 get 401, then the
// address gets 429 with Retry-After, on the operator API and on orders,
// even with the right token, and on partner calls too.
func TestAuthLimitAdminToken(t *testing.T) {
	p := startServe(t, t.TempDir(), "--demo")
	wrong := "Bearer " + strings.Repeat("0", 64)
	for i := range 20 {
		resp, b := authDo(t, "GET", p.URL+"/orders", "", "Authorization", wrong)
		authProblem(t, "wrong token "+strconv.Itoa(i+1), resp, b, 401, "/problems/unauthorized")
	}
	resp, b := authDo(t, "GET", p.URL+"/orders", "", "Authorization", wrong)
	authLimited(t, "wrong token 21", resp, b, 3)
	resp, b = authDo(t, "POST", p.URL+"/admin/partners", `{"name":"x"}`, "Authorization", "Bearer "+p.AdminToken)
	authLimited(t, "the right token after 20 wrong ones", resp, b, 3)
	resp, b = authDo(t, "GET", p.URL+"/stock/"+p.ClientID+"/uploads", "", "x-api-key", p.APIKey)
	authLimited(t, "the right API key from the same address", resp, b, 3)

	// The bucket refills one failure every 3 seconds: then the right token
	// is taken again.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, b = authDo(t, "GET", p.URL+"/orders", "", "Authorization", "Bearer "+p.AdminToken)
		if resp.StatusCode == http.StatusOK {
			break
		}
		authLimited(t, "waiting for the refill", resp, b, 3)
		if time.Now().After(deadline) {
			t.Fatal("the address is still refused 10 seconds later")
		}
		after, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		time.Sleep(time.Duration(after) * time.Second)
	}
}

// Wrong x-api-keys count the same way; --auth-failures-per-minute sets the
// limit (3 here, so one failure refills in 20 seconds).
func TestAuthLimitAPIKey(t *testing.T) {
	p := startServe(t, t.TempDir(), "--demo", "--auth-failures-per-minute", "3")
	path := p.URL + "/stock/" + p.ClientID + "/uploads"
	for i := range 3 {
		resp, b := authDo(t, "GET", path, "", "x-api-key", "slk_"+strings.Repeat("f", 64))
		authProblem(t, "wrong key "+strconv.Itoa(i+1), resp, b, 401, "/problems/unauthorized")
	}
	resp, b := authDo(t, "GET", path, "", "x-api-key", "slk_"+strings.Repeat("f", 64))
	authLimited(t, "wrong key 4", resp, b, 20)
	resp, b = authDo(t, "PUT", p.URL+"/stock/"+p.ClientID+"/feed.csv", "store;ean;article_number;quantity;price\n",
		"x-api-key", p.APIKey, "Content-Type", "text/csv")
	authLimited(t, "an upload with the right key", resp, b, 20)
	if resp.Header.Get("RateLimit") != "" {
		t.Errorf("the refusal carries RateLimit %q before any client is known", resp.Header.Get("RateLimit"))
	}
	resp, b = authDo(t, "GET", p.URL+"/events/"+p.ClientID, "", "x-api-key", p.APIKey)
	authLimited(t, "the event pull with the right key", resp, b, 20)
}

// authLoginForm posts the dashboard's login form.
func authLoginForm(tb testing.TB, base, token string) (*http.Response, []byte) {
	tb.Helper()
	return authDo(tb, "POST", base+"/dashboard/login", url.Values{"token": {token}, "next": {"/dashboard/"}}.Encode(),
		"Content-Type", "application/x-www-form-urlencoded")
}

// 21 wrong dashboard logins: the 21st is refused with 429 and Retry-After
// (an HTML login page that says why), even with the right token, and the
// API is refused to the address as well.
func TestAuthLimitDashboardLogin(t *testing.T) {
	p := startServe(t, t.TempDir())
	for i := range 20 {
		resp, b := authLoginForm(t, p.URL, "not-the-token-"+strconv.Itoa(i))
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong login %d = %d %s, want 401", i+1, resp.StatusCode, b)
		}
	}
	resp, b := authLoginForm(t, p.URL, "not-the-token-21")
	if resp.StatusCode != http.StatusTooManyRequests || !bytes.Contains(b, []byte("Too many failed attempts from this address")) {
		t.Fatalf("wrong login 21 = %d %s, want 429 saying why", resp.StatusCode, b)
	}
	if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || n < 1 || n > 3 {
		t.Fatalf("Retry-After = %q, want 1 to 3 seconds", resp.Header.Get("Retry-After"))
	}
	resp, _ = authLoginForm(t, p.URL, p.AdminToken)
	if resp.StatusCode != http.StatusTooManyRequests || len(resp.Cookies()) != 0 {
		t.Fatalf("the right token after 20 wrong ones = %d, cookies %v; want 429 and no session", resp.StatusCode, resp.Cookies())
	}
	resp, b = authDo(t, "GET", p.URL+"/orders", "", "Authorization", "Bearer "+p.AdminToken)
	authLimited(t, "the API after 20 failed logins", resp, b, 3)
}

// A short or spaced --admin-token (or STORELINK_ADMIN_TOKEN) is a usage
// error: exit 2, a message that states the rule and does not repeat the
// token, and nothing served.
func TestAdminTokenTooShort(t *testing.T) {
	bin := storelinkBinary(t)
	for _, c := range []struct {
		name, token string
		args        []string
		env         string
	}{
		{name: "flag", token: "short-admin-token", args: []string{"--admin-token", "short-admin-token"}},
		{name: "variable", token: "short-admin-token", env: "STORELINK_ADMIN_TOKEN=short-admin-token"},
		{name: "white space", token: "long enough but with spaces in it", args: []string{"--admin-token", "long enough but with spaces in it"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--data", t.TempDir()}, c.args...)...)
			cmd.Env = append(os.Environ(), "STORELINK_ADMIN_TOKEN=", c.env)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != 2 {
				t.Fatalf("exit %d (%v), want 2\n%s\n%s", code, err, stdout.String(), stderr.String())
			}
			if !strings.Contains(stderr.String(), "--admin-token (STORELINK_ADMIN_TOKEN) must be at least 32 characters with no white space") {
				t.Fatalf("stderr does not state the rule:\n%s", stderr.String())
			}
			if strings.Contains(stderr.String()+stdout.String(), c.token) {
				t.Fatalf("the output repeats the token:\n%s\n%s", stdout.String(), stderr.String())
			}
			if strings.Contains(stdout.String(), "listening") {
				t.Fatalf("serve listened:\n%s", stdout.String())
			}
		})
	}
}

var authCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// authSession logs in to the dashboard and returns the session cookie.
func authSession(tb testing.TB, p *proc) *http.Cookie {
	tb.Helper()
	resp, b := authLoginForm(tb, p.URL, p.AdminToken)
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		tb.Fatalf("login = %d %v %s", resp.StatusCode, resp.Cookies(), b)
	}
	return resp.Cookies()[0]
}

// authPage GETs a dashboard page with the cookie.
func authPage(tb testing.TB, p *proc, c *http.Cookie, path string) (*http.Response, []byte) {
	tb.Helper()
	return authDo(tb, "GET", p.URL+path, "", "Cookie", c.Name+"="+c.Value)
}

// authWantLoginRedirect fails unless the cookie opens nothing.
func authWantLoginRedirect(tb testing.TB, p *proc, c *http.Cookie, what string) {
	tb.Helper()
	for _, path := range []string{"/dashboard/", "/dashboard/deliveries"} {
		resp, b := authPage(tb, p, c, path)
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/dashboard/login") {
			tb.Fatalf("%s: GET %s = %d %q %s, want the login redirect", what, path, resp.StatusCode, resp.Header.Get("Location"), b)
		}
	}
}

// A session survives a restart of serve; logging out ends it for good: the
// old cookie, replayed, is sent to the login form, before and after another
// restart, while another session goes on.
func TestLogoutRevokesSession(t *testing.T) {
	data := t.TempDir()
	p := startServe(t, data)
	kept, other := authSession(t, p), authSession(t, p)
	if err := p.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	p = startServe(t, data)
	resp, page := authPage(t, p, kept, "/dashboard/")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after a restart the session = %d, want 200", resp.StatusCode)
	}
	m := authCSRF.FindSubmatch(page)
	if m == nil {
		t.Fatal("no CSRF token on the overview")
	}
	resp, b := authDo(t, "POST", p.URL+"/dashboard/logout", url.Values{"csrf": {string(m[1])}}.Encode(),
		"Content-Type", "application/x-www-form-urlencoded", "Cookie", kept.Name+"="+kept.Value)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/login" {
		t.Fatalf("logout = %d %q %s", resp.StatusCode, resp.Header.Get("Location"), b)
	}
	authWantLoginRedirect(t, p, kept, "the cookie replayed after logout")
	if resp, _ := authPage(t, p, other, "/dashboard/"); resp.StatusCode != http.StatusOK {
		t.Fatalf("another session after the logout = %d, want 200", resp.StatusCode)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	p = startServe(t, data)
	authWantLoginRedirect(t, p, kept, "the cookie replayed after logout and a restart")
	if resp, _ := authPage(t, p, other, "/dashboard/"); resp.StatusCode != http.StatusOK {
		t.Fatalf("another session after a restart = %d, want 200", resp.StatusCode)
	}
}

// The Authorization scheme is matched in any case (RFC 7235).
func TestBearerAnyCase(t *testing.T) {
	p := startServe(t, t.TempDir())
	for _, scheme := range []string{"Bearer", "bearer", "BEARER", "bEARER"} {
		resp, b := authDo(t, "GET", p.URL+"/orders", "", "Authorization", scheme+" "+p.AdminToken)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: GET /orders = %d %s, want 200", scheme, resp.StatusCode, b)
		}
	}
	resp, b := authDo(t, "GET", p.URL+"/orders", "", "Authorization", "Basic "+p.AdminToken)
	authProblem(t, "another scheme", resp, b, 401, "/problems/unauthorized")
}

// A partner's key on another partner's client is answered exactly as an
// unknown client: 401 with the same headers and body, byte for byte. Only
// the same partner's client for another country gives 403.
func TestCrossPartnerKey(t *testing.T) {
	p := startServe(t, t.TempDir(), "--demo")
	admin := func(method, path, body string, v any) {
		t.Helper()
		resp, b := authDo(t, method, p.URL+path, body, "Authorization", "Bearer "+p.AdminToken, "Content-Type", "application/json")
		if resp.StatusCode != http.StatusCreated || json.Unmarshal(b, v) != nil {
			t.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, b)
		}
	}
	var partner struct {
		ID string `json:"partner_id"`
	}
	admin("POST", "/admin/partners", `{"name":"Other partner"}`, &partner)
	var foreign, sibling struct {
		ID     string `json:"client_id"`
		APIKey string `json:"api_key"`
	}
	admin("POST", "/admin/partners/"+partner.ID+"/clients", `{"country_code":"FR","currency":"EUR"}`, &foreign)
	admin("POST", "/admin/partners/"+p.PartnerID+"/clients", `{"country_code":"AT","currency":"EUR"}`, &sibling)

	answer := func(path, key string) (*http.Response, []byte) {
		t.Helper()
		return authDo(t, "GET", p.URL+path, "", "x-api-key", key)
	}
	for _, path := range []string{"/stock/%s/uploads", "/stock/%s/stock", "/events/%s"} {
		at := func(client string) string { return strings.Replace(path, "%s", client, 1) }
		unknownResp, unknown := answer(at("no-such-client"), p.APIKey)
		authProblem(t, "unknown client", unknownResp, unknown, 401, "/problems/unauthorized")
		for name, got := range map[string]func() (*http.Response, []byte){
			"our key on the other partner's client": func() (*http.Response, []byte) { return answer(at(foreign.ID), p.APIKey) },
			"the other partner's key on our client": func() (*http.Response, []byte) { return answer(at(p.ClientID), foreign.APIKey) },
		} {
			resp, b := got()
			if resp.StatusCode != unknownResp.StatusCode || !bytes.Equal(b, unknown) ||
				resp.Header.Get("WWW-Authenticate") != unknownResp.Header.Get("WWW-Authenticate") ||
				resp.Header.Get("Content-Type") != unknownResp.Header.Get("Content-Type") {
				t.Fatalf("%s %s = %d %q %s; want exactly the unknown client's %d %q %s", name, path,
					resp.StatusCode, resp.Header.Get("WWW-Authenticate"), b,
					unknownResp.StatusCode, unknownResp.Header.Get("WWW-Authenticate"), unknown)
			}
		}
		resp, b := answer(at(sibling.ID), p.APIKey)
		authProblem(t, "the partner's key for its other country", resp, b, 403, "/problems/forbidden")
	}
}

// With --trusted-proxies, serve limits each forwarded client address on its
// own: wrong keys forwarded for one address lock that address out, not
// the client's right key forwarded for another, nor the operator.
func TestAuthLimitTrustedProxies(t *testing.T) {
	p := startServe(t, t.TempDir(), "--demo", "--trusted-proxies", "127.0.0.0/8,::1")
	path := p.URL + "/stock/" + p.ClientID + "/uploads"
	for i := range 21 {
		resp, b := authDo(t, "GET", path, "", "x-api-key", "slk_"+strings.Repeat("f", 64), "X-Forwarded-For", "203.0.113.1")
		if i < 20 {
			authProblem(t, "wrong key "+strconv.Itoa(i+1), resp, b, 401, "/problems/unauthorized")
		} else {
			authLimited(t, "wrong key 21", resp, b, 3)
		}
	}
	resp, b := authDo(t, "GET", path, "", "x-api-key", p.APIKey, "X-Forwarded-For", "203.0.113.1")
	authLimited(t, "the right key from the guessing address", resp, b, 3)
	if resp, b := authDo(t, "GET", path, "", "x-api-key", p.APIKey, "X-Forwarded-For", "203.0.113.2"); resp.StatusCode != http.StatusOK {
		t.Fatalf("the right key forwarded for another address = %d %s, want 200", resp.StatusCode, b)
	}
	if resp, b := authDo(t, "GET", p.URL+"/orders", "", "Authorization", "Bearer "+p.AdminToken, "X-Forwarded-For", "203.0.113.3"); resp.StatusCode != http.StatusOK {
		t.Fatalf("the admin token forwarded for another address = %d %s, want 200", resp.StatusCode, b)
	}
}

// TestAdminTokenFileChecked: the admin token kept in <data>/admin-token is
// held to the rule of --admin-token. A file with a short token, one with
// white space inside, and an empty or blank one each stop serve with exit
// 2 and a message that names the file and says what to do, never repeating
// the token; nothing is served and the file is left as it was. A file with
// a good token serves with it.
func TestAdminTokenFileChecked(t *testing.T) {
	t.Parallel()
	bin := storelinkBinary(t)
	for _, c := range []struct {
		name, content, want string
	}{
		{name: "short", content: "q7Zx9\n", want: "must be at least 32 characters with no white space (it has 5 characters): delete the file to have one generated"},
		{name: "white space", content: "a token with spaces that is long enough\n", want: "must be at least 32 characters with no white space"},
		{name: "empty", content: "", want: "is empty: delete it to have a token generated, or write a token of at least 32 characters"},
		{name: "blank", content: " \n\t\n", want: "is empty: delete it to have a token generated"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			data := t.TempDir()
			file := filepath.Join(data, "admin-token")
			if err := os.WriteFile(file, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "serve", "--addr", "127.0.0.1:0", "--data", data)
			cmd.Env = append(os.Environ(), "STORELINK_ADMIN_TOKEN=")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != 2 {
				t.Fatalf("exit %d (%v), want 2\n%s\n%s", code, err, stdout.String(), stderr.String())
			}
			if !strings.Contains(stderr.String(), file) || !strings.Contains(stderr.String(), c.want) {
				t.Fatalf("stderr does not name %s and say %q:\n%s", file, c.want, stderr.String())
			}
			if tok := strings.TrimSpace(c.content); tok != "" && strings.Contains(stderr.String()+stdout.String(), tok) {
				t.Fatalf("the output repeats the token:\n%s\n%s", stdout.String(), stderr.String())
			}
			if strings.Contains(stdout.String(), "listening") {
				t.Fatalf("serve listened:\n%s", stdout.String())
			}
			if b, _ := os.ReadFile(file); string(b) != c.content {
				t.Fatalf("the file now holds %q", b)
			}
		})
	}
	t.Run("good", func(t *testing.T) {
		t.Parallel()
		data := t.TempDir()
		if err := os.WriteFile(filepath.Join(data, "admin-token"), []byte(pressureToken+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		p := startServe(t, data)
		if a := call(t, http.MethodPost, p.URL+"/admin/partners", pressureToken, "", []byte(`{"name":"File token"}`)); a.code != http.StatusCreated {
			t.Fatalf("operator call with the file's token: %d %v", a.code, a.body)
		}
	})
	// --admin-token-file: serve takes the token from the file, generates
	// none, and warns of nothing; --admin-token on the command line works
	// but warns, without the token, that ps shows it.
	t.Run("token file flag", func(t *testing.T) {
		t.Parallel()
		data, secrets := t.TempDir(), t.TempDir()
		file := filepath.Join(secrets, "token")
		if err := os.WriteFile(file, []byte(pressureToken+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		p := startServe(t, data, "--admin-token-file", file)
		if a := call(t, http.MethodPost, p.URL+"/admin/partners", pressureToken, "", []byte(`{"name":"File token"}`)); a.code != http.StatusCreated {
			t.Fatalf("operator call with the token file's token: %d %v", a.code, a.body)
		}
		if _, err := os.Stat(filepath.Join(data, "admin-token")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a token was generated into the data folder too: %v", err)
		}
		if strings.Contains(p.stderr.String(), "warning") || strings.Contains(p.stderr.String()+p.stdout.String(), pressureToken) {
			t.Errorf("serve warned or showed the token:\n%s\n%s", p.stdout, p.stderr)
		}
	})
	t.Run("token on the command line", func(t *testing.T) {
		t.Parallel()
		p := startServe(t, t.TempDir(), "--admin-token", pressureToken)
		if a := call(t, http.MethodPost, p.URL+"/admin/partners", pressureToken, "", []byte(`{"name":"Flag token"}`)); a.code != http.StatusCreated {
			t.Fatalf("operator call with the flag's token: %d %v", a.code, a.body)
		}
		if !strings.Contains(p.stderr.String(), "warning: the admin token given with --admin-token on the command line can be read by every user") ||
			strings.Contains(p.stderr.String()+p.stdout.String(), pressureToken) {
			t.Errorf("stderr does not warn of ps, or shows the token:\n%s\n%s", p.stdout, p.stderr)
		}
	})
}
