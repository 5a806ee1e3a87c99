package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"storelink"
)

// get fetches a path and returns the answer with its body.
func (b *browser) get(path string, header ...string) (*http.Response, string) {
	b.f.t.Helper()
	req, err := http.NewRequest("GET", b.f.URL+path, nil)
	must(b.f.t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return b.do(req)
}

// post sends a form.
func (b *browser) post(path string, form url.Values, header ...string) (*http.Response, string) {
	b.f.t.Helper()
	req, err := http.NewRequest("POST", b.f.URL+path, strings.NewReader(form.Encode()))
	must(b.f.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return b.do(req)
}

func (b *browser) do(req *http.Request) (*http.Response, string) {
	b.f.t.Helper()
	resp, err := b.c.Do(req)
	must(b.f.t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// login logs in with the admin token and returns the page it lands on.
func (b *browser) login() {
	b.f.t.Helper()
	resp, body := b.post("/dashboard/login", url.Values{"token": {b.f.Token}, "next": {"/dashboard/"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/" {
		b.f.t.Fatalf("login = %d %s %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
}

// page fetches a page that must answer 200 and checks it shows no secret.
func (b *browser) page(path string) string {
	b.f.t.Helper()
	resp, body := b.get(path)
	if resp.StatusCode != http.StatusOK {
		b.f.t.Fatalf("GET %s = %d, want 200: %s", path, resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		b.f.t.Errorf("GET %s: Content-Type %q", path, ct)
	}
	b.f.checkNoSecret("GET "+path, body)
	return body
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the CSRF token from a page.
func (b *browser) csrf() string {
	b.f.t.Helper()
	m := csrfRE.FindStringSubmatch(b.page("/dashboard/"))
	if m == nil {
		b.f.t.Fatal("no CSRF token on the overview")
	}
	return m[1]
}

func wantContains(t *testing.T, where, body string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(body, p) {
			t.Errorf("%s does not show %q", where, p)
		}
	}
}

func pagePaths(s seed) []string {
	return []string{
		"/dashboard/",
		"/dashboard/clients/" + s.ClientID,
		"/dashboard/clients/" + s.OtherClientID,
		"/dashboard/uploads",
		"/dashboard/uploads?client=" + s.ClientID + "&status=rejected",
		"/dashboard/clients/" + s.ClientID + "/uploads/" + s.Good.ID,
		"/dashboard/clients/" + s.ClientID + "/uploads/" + s.Bad.ID,
		"/dashboard/clients/" + s.ClientID + "/uploads/" + s.Waiting.ID,
		"/dashboard/stock",
		"/dashboard/stock?client=" + s.ClientID + "&store=S2",
		"/dashboard/orders",
		"/dashboard/orders/" + s.OrderID,
		"/dashboard/deliveries",
		"/dashboard/deliveries?state=failed&client=" + s.ClientID,
		"/dashboard/endpoints/" + s.EndpointID,
		"/dashboard/?q=acme&sort=failed&page=1",
	}
}

func TestLoginRequired(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	s := f.seedData()
	b := f.browser()
	for _, p := range pagePaths(s) {
		resp, _ := b.get(p)
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/dashboard/login?next=") {
			t.Errorf("GET %s without a session = %d %q, want a redirect to the login", p, resp.StatusCode, loc)
		}
		if next, _ := url.Parse(loc); next.Query().Get("next") != p {
			t.Errorf("GET %s: login next = %q, want the page", p, next.Query().Get("next"))
		}
	}
	// The root sends to the dashboard, which sends to the login.
	if resp, _ := b.get("/"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/" {
		t.Errorf("GET / = %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Actions without a session do nothing.
	for _, p := range []string{"/dashboard/deliveries/" + s.FailedDelivery + "/redeliver", "/dashboard/endpoints/" + s.OffEndpointID + "/enabled"} {
		resp, _ := b.post(p, url.Values{"enabled": {"true"}, "csrf": {"x"}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/login" {
			t.Errorf("POST %s without a session = %d %q", p, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	checkDeliveryState(t, f, s, storelink.DeliveryFailed)
	checkEndpointEnabled(t, f, s.ClientID, s.OffEndpointID, false)
	if f.woken.Load() != 0 {
		t.Error("an action without a session woke the deliverer")
	}
	// The login page and the stylesheet need no session.
	resp, body := b.get("/dashboard/login")
	if resp.StatusCode != 200 || !strings.Contains(body, `name="token"`) {
		t.Errorf("login page = %d %s", resp.StatusCode, body)
	}
	if resp, _ := b.get("/dashboard/static/style.css"); resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/css; charset=utf-8" {
		t.Errorf("style.css = %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

func TestLoginRefusesBadToken(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	b := f.browser()
	for _, token := range []string{"", "wrong", f.Token + "x", f.Token[:len(f.Token)-1], strings.ToUpper(f.Token)} {
		resp, body := b.post("/dashboard/login", url.Values{"token": {token}})
		if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
			t.Errorf("login with %q = %d, cookies %v; want 401 and none", token, resp.StatusCode, resp.Cookies())
		}
		wantContains(t, "the refused login", body, "That is not the admin token.")
		if token != "" && strings.Contains(body, token) {
			t.Errorf("the refused login echoes the token %q", token)
		}
	}
	if resp, _ := b.get("/dashboard/"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("after refused logins, GET /dashboard/ = %d, want the login redirect", resp.StatusCode)
	}
}

func TestSessionCookie(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	b := f.browser()
	resp, _ := b.post("/dashboard/login", url.Values{"token": {" " + f.Token + "\n"}, "next": {"/dashboard/orders?state=assigned"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/orders?state=assigned" {
		t.Fatalf("login = %d %q, want a redirect to next", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("login set %d cookies", len(cookies))
	}
	c := cookies[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.Path != "/dashboard/" || c.MaxAge <= 0 {
		t.Errorf("cookie over plain HTTP = %+v; want HttpOnly, SameSite=Strict, not Secure, Path=/dashboard/", c)
	}
	if strings.Contains(c.Value, f.Token) || strings.Contains(resp.Header.Get("Set-Cookie"), f.Token) {
		t.Error("the cookie holds the admin token")
	}
	b.page("/dashboard/")

	// Behind a TLS proxy the cookie is Secure.
	resp, _ = f.browser().post("/dashboard/login", url.Values{"token": {f.Token}}, "X-Forwarded-Proto", "https")
	if cs := resp.Cookies(); len(cs) != 1 || !cs[0].Secure || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode {
		t.Errorf("cookie behind https = %+v, want Secure too", cs)
	}

	// A changed cookie is refused.
	for _, v := range []string{c.Value + "x", "x" + c.Value, strings.Replace(c.Value, ".", ".A", 1), "", "a.b", f.Token} {
		req, _ := http.NewRequest("GET", f.URL+"/dashboard/", nil)
		req.AddCookie(&http.Cookie{Name: c.Name, Value: v})
		resp, _ := f.browser().do(req)
		if resp.StatusCode != http.StatusSeeOther {
			t.Errorf("GET with cookie %q = %d, want the login redirect", v, resp.StatusCode)
		}
	}

	// Open redirects are refused: next stays on the dashboard.
	for _, next := range []string{"https://evil.example/", "//evil.example/x", "/admin/partners", "javascript:alert(1)", "/\\evil.example"} {
		resp, _ := f.browser().post("/dashboard/login", url.Values{"token": {f.Token}, "next": {next}})
		if loc := resp.Header.Get("Location"); loc != "/dashboard/" {
			t.Errorf("login with next=%q goes to %q, want /dashboard/", next, loc)
		}
	}

	// The session ends after 12 hours.
	f.offset.Store(int64(13 * time.Hour))
	if resp, _ := b.get("/dashboard/"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a 13-hour-old session = %d, want the login redirect", resp.StatusCode)
	}
	f.offset.Store(0)
	b.page("/dashboard/")

	// Logging out clears the cookie.
	resp, _ = b.post("/dashboard/logout", url.Values{"csrf": {b.csrf()}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/login" {
		t.Fatalf("logout = %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if cs := resp.Cookies(); len(cs) != 1 || cs[0].MaxAge >= 0 || cs[0].Value != "" {
		t.Errorf("logout cookies = %+v, want the session cookie deleted", cs)
	}
	if resp, _ := b.get("/dashboard/"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("after logout GET /dashboard/ = %d", resp.StatusCode)
	}
}

func TestSecurityHeaders(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	b := f.browser()
	b.login()
	for _, p := range []string{"/dashboard/", "/dashboard/login"} {
		resp, _ := b.get(p)
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'", "form-action 'self'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", p, csp, want)
			}
		}
		if resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("X-Content-Type-Options") != "nosniff" ||
			resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: headers %v", p, resp.Header)
		}
	}
}

func TestCSRF(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	s := f.seedData()
	b := f.browser()
	b.login()
	token := b.csrf()
	redeliver := "/dashboard/deliveries/" + s.FailedDelivery + "/redeliver"
	back := "/dashboard/deliveries?client=" + s.ClientID

	// Another session's token is not this session's.
	other := f.browser()
	other.login()
	otherToken := other.csrf()
	if otherToken == token {
		t.Fatal("two sessions share a CSRF token")
	}
	for name, form := range map[string]url.Values{
		"no token":              {"back": {back}},
		"empty token":           {"csrf": {""}},
		"wrong token":           {"csrf": {token + "x"}},
		"another session token": {"csrf": {otherToken}},
	} {
		resp, _ := b.post(redeliver, form)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("redeliver with %s = %d, want 403", name, resp.StatusCode)
		}
	}
	// A browser that says the form comes from another site is refused even
	// with the right token.
	resp, _ := b.post(redeliver, url.Values{"csrf": {token}}, "Sec-Fetch-Site", "cross-site")
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site redeliver = %d, want 403", resp.StatusCode)
	}
	resp, _ = b.post(redeliver, url.Values{"csrf": {token}}, "Origin", "https://evil.example")
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("redeliver from another origin = %d, want 403", resp.StatusCode)
	}
	checkDeliveryState(t, f, s, storelink.DeliveryFailed)
	if f.woken.Load() != 0 {
		t.Error("a refused action woke the deliverer")
	}

	// With the token: done, and back to where the operator was.
	resp, _ = b.post(redeliver, url.Values{"csrf": {token}, "back": {back}}, "Sec-Fetch-Site", "same-origin")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != back+"&done=redelivered" {
		t.Fatalf("redeliver = %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	checkDeliveryState(t, f, s, storelink.DeliveryPending)
	if f.woken.Load() != 1 {
		t.Errorf("redeliver woke the deliverer %d times, want 1", f.woken.Load())
	}
	body := b.page(resp.Header.Get("Location"))
	wantContains(t, "the page after redeliver", body, "The delivery is pending again")
	// back must stay on the dashboard.
	resp, _ = b.post(redeliver, url.Values{"csrf": {token}, "back": {"https://evil.example/"}})
	if loc := resp.Header.Get("Location"); loc != "/dashboard/?done=redelivered" {
		t.Errorf("redeliver with a foreign back goes to %q", loc)
	}

	// Endpoints: enable, disable, and a bad value.
	toggle := "/dashboard/endpoints/" + s.OffEndpointID + "/enabled"
	resp, _ = b.post(toggle, url.Values{"enabled": {"true"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("enable without a token = %d", resp.StatusCode)
	}
	checkEndpointEnabled(t, f, s.ClientID, s.OffEndpointID, false)
	resp, _ = b.post(toggle, url.Values{"enabled": {"true"}, "csrf": {token}, "back": {"/dashboard/clients/" + s.ClientID}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/clients/"+s.ClientID+"?done=enabled" {
		t.Errorf("enable = %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	checkEndpointEnabled(t, f, s.ClientID, s.OffEndpointID, true)
	resp, _ = b.post(toggle, url.Values{"enabled": {"false"}, "csrf": {token}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("disable = %d", resp.StatusCode)
	}
	checkEndpointEnabled(t, f, s.ClientID, s.OffEndpointID, false)
	if resp, _ := b.post(toggle, url.Values{"enabled": {"maybe"}, "csrf": {token}}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("enabled=maybe = %d, want 400", resp.StatusCode)
	}
	if resp, _ := b.post("/dashboard/endpoints/nope/enabled", url.Values{"enabled": {"true"}, "csrf": {token}}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown endpoint = %d, want 404", resp.StatusCode)
	}
	if resp, _ := b.post("/dashboard/deliveries/nope/redeliver", url.Values{"csrf": {token}}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown delivery = %d, want 404", resp.StatusCode)
	}
	// A GET never acts.
	if resp, _ := b.get(redeliver); resp.StatusCode != http.StatusMethodNotAllowed && resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET redeliver = %d", resp.StatusCode)
	}
}

func checkDeliveryState(t *testing.T, f *fixture, s seed, want storelink.DeliveryState) {
	t.Helper()
	list, err := f.services.Webhooks.Deliveries(context.Background(), storelink.DeliveryFilter{ClientID: s.ClientID, Limit: 100})
	must(t, err)
	for _, d := range list {
		if d.ID == s.FailedDelivery {
			if d.State != want {
				t.Errorf("delivery %s is %s, want %s", d.ID, d.State, want)
			}
			return
		}
	}
	t.Fatalf("delivery %s not found", s.FailedDelivery)
}

func checkEndpointEnabled(t *testing.T, f *fixture, clientID, id string, want bool) {
	t.Helper()
	list, err := f.services.Webhooks.Endpoints(context.Background(), clientID)
	must(t, err)
	for _, e := range list {
		if e.ID == id {
			if e.Enabled != want {
				t.Errorf("endpoint %s enabled = %v, want %v", id, e.Enabled, want)
			}
			return
		}
	}
	t.Fatalf("endpoint %s not found", id)
}

func TestPages(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	s := f.seedData()
	b := f.browser()
	b.login()
	cl := "/dashboard/clients/" + s.ClientID

	t.Run("overview", func(t *testing.T) {
		body := b.page("/dashboard/")
		wantContains(t, "the overview", body, "Acme Retail · DE", "Beta Shoes · AT", s.ClientID, s.OtherClientID,
			`<svg class="gauge"`, "of the upload capacity used", "stock-later.csv",
			"1 disabled", "2 failed deliveries", "uploads waiting", `data-client="`+s.ClientID+`" data-problems="1"`)
		// Acme has failed deliveries: it comes first, though B comes
		// before A in every other order.
		if a, b := strings.Index(body, `data-client="`+s.ClientID), strings.Index(body, `data-client="`+s.OtherClientID); a < 0 || b < a {
			t.Error("the client with failed deliveries is not listed first")
		}
	})
	t.Run("client", func(t *testing.T) {
		body := b.page(cl)
		wantContains(t, "the client page", body, "Store S1", "Store S2", "slk_", "…", "http://127.0.0.1:1/hooks/${eventId}",
			"https://ops:xxxxx@hooks.example.com/storelink", "disabled", "Enable", "Disable", "stock-full.csv", "MP-1001",
			"used of 24 MiB per 1h", "Bytes received")
	})
	t.Run("uploads filtered", func(t *testing.T) {
		body := b.page("/dashboard/uploads")
		wantContains(t, "the uploads", body, "stock-full.csv", "stock-bad.csv", "stock-later.csv", "Beta Shoes · AT")
		body = b.page("/dashboard/uploads?status=accepted")
		wantContains(t, "accepted uploads", body, "stock-later.csv")
		if strings.Contains(body, "stock-full.csv") {
			t.Error("status=accepted lists an applied upload")
		}
		body = b.page("/dashboard/uploads?client=" + s.OtherClientID)
		if !strings.Contains(body, "No uploads match") {
			t.Error("the other client's uploads are not empty")
		}
		if resp, _ := b.get("/dashboard/uploads?status=lost"); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("status=lost = %d, want 400", resp.StatusCode)
		}
	})
	t.Run("uploads with rejected rows", func(t *testing.T) {
		// stock-bad.csv applied 1 row of 5: beside its green "applied",
		// an amber badge counts the 4 lines rejected; the others have none.
		body := b.page("/dashboard/uploads")
		wantContains(t, "the uploads", body, `<span class="status s-haserrors" data-rejected="4" title="4 rows rejected">4 rejected</span>`,
			`<option value="true">some rejected</option>`)
		if n := strings.Count(body, "s-haserrors"); n != 1 {
			t.Errorf("%d uploads have the rejected badge, want 1", n)
		}
		body = b.page("/dashboard/uploads?has_errors=true")
		wantContains(t, "uploads with rejected rows", body, "stock-bad.csv", `<option value="true" selected>`)
		if strings.Contains(body, "stock-full.csv") || strings.Contains(body, "stock-later.csv") {
			t.Error("has_errors=true lists an upload without rejected rows")
		}
		body = b.page("/dashboard/uploads?has_errors=false&client=" + s.ClientID + "&status=applied")
		wantContains(t, "applied uploads without rejected rows", body, "stock-full.csv")
		if strings.Contains(body, "stock-bad.csv") || strings.Contains(body, "s-haserrors") {
			t.Error("has_errors=false lists the upload with rejected rows")
		}
		if resp, _ := b.get("/dashboard/uploads?has_errors=maybe"); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("has_errors=maybe = %d, want 400", resp.StatusCode)
		}
		// The page after the first keeps the filter.
		body = b.page("/dashboard/uploads?has_errors=false&client=" + s.ClientID + "&limit=1")
		wantContains(t, "the first page", body, "has_errors=false")
	})
	t.Run("upload report", func(t *testing.T) {
		body := b.page(cl + "/uploads/" + s.Bad.ID)
		wantContains(t, "the upload report", body, `data-status="applied"`, s.Bad.SHA256,
			storelink.ProblemUnknownStore, storelink.ProblemInvalidValue, storelink.ProblemMissingValues, storelink.ProblemUnknownColumns,
			"<td class=\"num\">3</td><td>S9</td>", "4006381333932", "colour",
			// Each rejected line shows the value that was wrong, escaped.
			`<td class="mono value">S9</td>`, `<td class="mono value">4006381333932</td>`, `<td class="mono value">&lt;b&gt;-3&lt;/b&gt;</td>`,
			`<span class="status s-haserrors" data-rejected="4"`)
		if strings.Contains(body, "<b>-3</b>") {
			t.Error("the value of a rejected line is not escaped")
		}
		if strings.Contains(body, `http-equiv="refresh"`) {
			t.Error("a finished upload reloads")
		}
		body = b.page(cl + "/uploads/" + s.Waiting.ID)
		wantContains(t, "a waiting upload", body, `data-status="accepted"`, `http-equiv="refresh"`, "Not processed yet.")
		if resp, _ := b.get(cl + "/uploads/nope"); resp.StatusCode != http.StatusNotFound {
			t.Errorf("unknown upload = %d", resp.StatusCode)
		}
		if resp, _ := b.get("/dashboard/clients/" + s.OtherClientID + "/uploads/" + s.Bad.ID); resp.StatusCode != http.StatusNotFound {
			t.Errorf("an upload under another client = %d, want 404", resp.StatusCode)
		}
		// Its files, with the session.
		resp, file := b.get(cl + "/uploads/" + s.Bad.ID + "/errors.csv")
		if resp.StatusCode != 200 || !strings.Contains(file, storelink.ProblemUnknownStore) || !strings.Contains(resp.Header.Get("Content-Disposition"), "attachment") {
			t.Errorf("the operator's errors.csv = %d %q", resp.StatusCode, file)
		}
		if resp, file := b.get(cl + "/uploads/" + s.Good.ID + "/file"); resp.StatusCode != 200 || !strings.HasPrefix(file, "store;ean;") {
			t.Errorf("the operator's file = %d %q", resp.StatusCode, file)
		}
		if resp, _ := f.browser().get(cl + "/uploads/" + s.Good.ID + "/file"); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("the file without a session = %d, want the login redirect", resp.StatusCode)
		}
	})
	t.Run("stock", func(t *testing.T) {
		body := b.page("/dashboard/stock?client=" + s.ClientID + "&store=S1")
		// Two units of ean1 at S1 are reserved by the order.
		wantContains(t, "the stock", body, ean1, ean2, ean3, "Trail shoe",
			`<td class="num">5</td><td class="num">2</td>`+"\n      "+`<td class="num">3</td>`, "19.99", "29.99")
		if strings.Contains(body, "<td>S2</td>") {
			t.Error("store=S1 lists S2")
		}
		body = b.page("/dashboard/stock?client=" + s.ClientID + "&limit=1")
		wantContains(t, "the first stock page", body, "Next page")
	})
	t.Run("orders", func(t *testing.T) {
		body := b.page("/dashboard/orders")
		wantContains(t, "the orders", body, "MP-1001", "assigned", "Acme Retail · DE")
		body = b.page("/dashboard/orders?state=cancelled")
		wantContains(t, "cancelled orders", body, "No orders match")
		body = b.page("/dashboard/orders/" + s.OrderID)
		wantContains(t, "the order", body, "Order MP-1001", "Erika Mustermann", "MA-1", "SKU-1", "19.99 EUR",
			"Timeline", `class="t-assigned"`, "Event JSON", "&#34;order_number&#34;: &#34;MP-1001&#34;", "HTTP 503")
	})
	t.Run("deliveries", func(t *testing.T) {
		body := b.page("/dashboard/deliveries")
		failed, pending := strings.Index(body, "g-failed"), strings.Index(body, "g-pending")
		if failed < 0 || pending < 0 || failed > pending {
			t.Error("failed deliveries are not listed first")
		}
		wantContains(t, "the deliveries", body, `data-delivery="`+s.FailedDelivery+`" data-state="failed" data-attempts="1"`,
			"HTTP 503", "upstream unavailable", "Redeliver", "http://127.0.0.1:1/hooks/${eventId}", "g-cancelled", "Sent to",
			`href="/dashboard/endpoints/`+s.EndpointID+`"`)
		if resp, _ := b.get("/dashboard/deliveries?state=lost"); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("state=lost = %d, want 400", resp.StatusCode)
		}
	})
	t.Run("not found", func(t *testing.T) {
		for _, p := range []string{"/dashboard/nope", "/dashboard/orders/nope", "/dashboard/clients/nope"} {
			resp, body := b.get(p)
			if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "Back to the overview") {
				t.Errorf("GET %s = %d", p, resp.StatusCode)
			}
		}
	})
}

// TestNoSecretInPages: no page, logged in or not, shows the admin token,
// an API key, a webhook secret, an endpoint's x-api-key or a password.
func TestNoSecretInPages(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	s := f.seedData()
	b := f.browser()
	_, body := b.get("/dashboard/login")
	f.checkNoSecret("the login page", body)
	b.login()
	for _, p := range pagePaths(s) {
		b.page(p)
	}
	_, body = b.post("/dashboard/login", url.Values{"token": {"wrong"}})
	f.checkNoSecret("a refused login", body)
}

func TestEmptyDatabase(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	b := f.browser()
	b.login()
	for _, p := range []string{"/dashboard/", "/dashboard/uploads", "/dashboard/stock", "/dashboard/orders", "/dashboard/deliveries"} {
		b.page(p)
	}
	wantContains(t, "the empty overview", b.page("/dashboard/"), "No clients yet.")
}

func TestPagerLinks(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	s := f.seedData()
	b := f.browser()
	b.login()
	body := b.page("/dashboard/stock?client=" + s.ClientID + "&store=S1&limit=1")
	m := regexp.MustCompile(`href="(/dashboard/stock\?[^"]*after=[^"]*)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no next-page link on the first stock page")
	}
	next := strings.ReplaceAll(m[1], "&amp;", "&")
	u, err := url.Parse(next)
	must(t, err)
	if q := u.Query(); q.Get("client") != s.ClientID || q.Get("store") != "S1" || q.Get("after") == "" {
		t.Fatalf("next-page link %q lost the filter", next)
	}
	second := b.page(next)
	if !strings.Contains(second, ean2) || !strings.Contains(second, "First page") {
		t.Errorf("the second stock page does not show the next row")
	}
	// /dashboard without the slash still gets there.
	resp, _ := b.get("/dashboard")
	if loc := resp.Header.Get("Location"); resp.StatusCode/100 != 3 || loc != "/dashboard/" {
		t.Errorf("GET /dashboard = %d %q", resp.StatusCode, loc)
	}
}
