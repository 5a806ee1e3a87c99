package dashboard_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"storelink"
	"storelink/dashboard"
	"storelink/httpapi"
	"storelink/internal/dbtest"
)

// portalLogin signs b in to the portal and returns the session cookie's
// value.
func (b *browser) portalLogin(clientID, key string) string {
	b.f.t.Helper()
	resp, body := b.post("/portal/login", url.Values{"client_id": {clientID}, "api_key": {key}, "next": {"/portal/"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/portal/" || len(resp.Cookies()) != 1 {
		b.f.t.Fatalf("portal sign-in = %d %q %v: %s", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies(), body)
	}
	return resp.Cookies()[0].Value
}

// portalCSRF reads the CSRF token from the portal's home.
func (b *browser) portalCSRF() string {
	b.f.t.Helper()
	m := csrfRE.FindStringSubmatch(b.page("/portal/"))
	if m == nil {
		b.f.t.Fatal("no CSRF token on the portal's home")
	}
	return m[1]
}

// other is what seedOther made for the other client: a store, an applied
// upload, an order, an endpoint whose receiver counts what it gets, and a
// failed delivery.
type other struct {
	Upload        *storelink.Upload
	OrderID       string
	OrderNumber   string
	EndpointID    string
	EndpointURL   string
	DeliveryID    string
	ProductName   string
	ReceiverCalls *atomic.Int32
}

// seedOther gives the other client of s data of its own, each item named
// so that a page showing it is caught.
func (f *fixture) seedOther(s seed) other {
	t, ctx := f.t, context.Background()
	o := other{ProductName: "Beta-only boot", OrderNumber: "BETA-ORDER-9", ReceiverCalls: &atomic.Int32{}}
	_, _, err := f.services.Partners.PutStore(ctx, s.OtherClientID, "B1", "Beta store")
	must(t, err)
	o.Upload = f.accept(s.OtherClientID, "beta-only-feed.csv", "store;ean;article_number;quantity;price;product_name\nB1;"+ean1+";B-SKU;9;49.00;"+o.ProductName+"\n")
	f.processAll()
	calls := o.ReceiverCalls
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(receiver.Close)
	o.EndpointURL = receiver.URL + "/beta-only-hook"
	ep, err := f.services.Webhooks.CreateEndpoint(ctx, s.OtherClientID, storelink.NewEndpoint{URL: o.EndpointURL}, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	must(t, err)
	o.EndpointID = ep.ID
	ord, err := f.services.Orders.CreateOrder(ctx, storelink.NewOrder{OrderNumber: o.OrderNumber, ClientID: s.OtherClientID, StoreID: "B1",
		Items: []storelink.NewItem{{EAN: ean1, MarketplaceArticleNumber: "MB-1"}}})
	must(t, err)
	o.OrderID = ord.ID
	o.DeliveryID = f.failDeliveries()
	return o
}

// TestPortalSignIn: the portal needs a sign-in with a client id and one of
// its API keys; a wrong pair is refused without a cookie, another client's
// key of the same partner is told apart (403), and the session cookie is
// HttpOnly, SameSite=Strict, scoped to /portal/, and holds no key. The
// database keeps neither the key nor the session id, only their hashes. A
// portal cookie is no dashboard cookie and the other way round.
func TestPortalSignIn(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	s := f.seedData()
	b := f.browser()
	resp, _ := b.get("/portal/uploads?status=applied")
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/portal/login?next=%2Fportal%2Fuploads%3Fstatus%3Dapplied" {
		t.Errorf("GET /portal/uploads without a session = %d %q, want the sign-in", resp.StatusCode, loc)
	}
	if resp, _ := b.get("/portal"); resp.StatusCode/100 != 3 || resp.Header.Get("Location") != "/portal/" {
		t.Errorf("GET /portal = %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, form := b.get("/portal/login")
	wantContains(t, "the sign-in form", form, `name="client_id"`, `name="api_key"`, `type="password"`)

	acme, err := f.services.Partners.Client(context.Background(), s.ClientID)
	must(t, err)
	fr, err := f.services.Partners.CreateClient(context.Background(), acme.PartnerID, "FR", "EUR")
	must(t, err)
	f.keep(fr.APIKey)
	for _, c := range []struct {
		name, client, key string
		status            int
		says              string
	}{
		{"a wrong key", s.ClientID, "slk_wrong", 401, "That client id and API key do not go together."},
		{"another partner's key", s.ClientID, s.OtherAPIKey, 401, "That client id and API key do not go together."},
		{"an unknown client", "no-such-client", s.APIKey, 401, "That client id and API key do not go together."},
		{"no key", s.ClientID, "", 401, "Enter your client id"},
		{"the partner's key of another country", s.ClientID, fr.APIKey, 403, "another client of your partner account"},
	} {
		resp, body := b.post("/portal/login", url.Values{"client_id": {c.client}, "api_key": {c.key}})
		if resp.StatusCode != c.status || len(resp.Cookies()) != 0 || !strings.Contains(body, c.says) {
			t.Errorf("sign-in with %s = %d, cookies %v; want %d saying %q", c.name, resp.StatusCode, resp.Cookies(), c.status, c.says)
		}
		f.checkNoSecret("a refused sign-in", body)
	}

	resp, _ = b.post("/portal/login", url.Values{"client_id": {" " + s.ClientID + " "}, "api_key": {s.APIKey + "\n"},
		"next": {"/portal/orders?state=assigned"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/portal/orders?state=assigned" || len(resp.Cookies()) != 1 {
		t.Fatalf("sign-in = %d %q %v", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	c := resp.Cookies()[0]
	if c.Name != "storelink_portal" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/portal/" || c.MaxAge <= 0 ||
		strings.Contains(c.Value, s.APIKey) {
		t.Errorf("portal cookie = %+v; want storelink_portal, HttpOnly, SameSite=Strict, Path=/portal/, no key", c)
	}
	wantContains(t, "the portal's home", b.page("/portal/"), "Acme Retail · DE", s.ClientID)
	for _, next := range []string{"https://evil.example/", "//evil.example/", "/dashboard/", "/portal/../dashboard/"} {
		resp, _ := f.browser().post("/portal/login", url.Values{"client_id": {s.ClientID}, "api_key": {s.APIKey}, "next": {next}})
		if loc := resp.Header.Get("Location"); loc != "/portal/" {
			t.Errorf("sign-in with next=%q goes to %q, want /portal/", next, loc)
		}
	}

	// The database has the hashes of the session id and of the key.
	raw, err := base64.RawURLEncoding.DecodeString(strings.SplitN(c.Value, ".", 2)[0])
	if err != nil || len(raw) != 24 {
		t.Fatalf("cookie payload %q: %v", c.Value, err)
	}
	id := hex.EncodeToString(raw[:16])
	idHash := sha256.Sum256([]byte(id))
	rows, err := dbtest.OnSQLite(f.db).Query(context.Background(), `SELECT hex(id_hash) AS id_hash, coalesce(client_id, '') AS client_id, coalesce(key_hash, '') AS key_hash FROM dashboard_sessions`)
	must(t, err)
	found := false
	for _, r := range rows {
		if strings.EqualFold(r["id_hash"], hex.EncodeToString(idHash[:])) {
			found = r["client_id"] == s.ClientID && r["key_hash"] == storelink.HashAPIKey(s.APIKey)
		}
	}
	if !found {
		t.Errorf("sessions stored = %v; want the session's hash with its client and its key's hash", rows)
	}
	f.checkNotStored(s.APIKey, id, string(raw[:16]))

	// Cookies of one realm open nothing in the other.
	op := f.browser()
	opCookie := sessionCookie(t, op)
	for _, x := range []struct{ name, value, path string }{
		{"storelink_session", c.Value, "/dashboard/"},
		{"storelink_portal", opCookie, "/portal/"},
	} {
		req, _ := http.NewRequest("GET", f.URL+x.path, nil)
		req.AddCookie(&http.Cookie{Name: x.name, Value: x.value})
		if resp, _ := f.browser().do(req); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("GET %s with the other realm's session as %s = %d, want the login redirect", x.path, x.name, resp.StatusCode)
		}
	}
	// And the operator's session gives no portal page.
	if resp, _ := op.get("/portal/"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the operator's session on the portal = %d, want the sign-in redirect", resp.StatusCode)
	}
}

// checkNotStored fails when the database files hold any of the values.
func (f *fixture) checkNotStored(values ...string) {
	f.t.Helper()
	paths, _ := filepath.Glob(filepath.Join(filepath.Dir(f.dbPath), "*"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		must(f.t, err)
		for _, v := range values {
			if bytes.Contains(b, []byte(v)) {
				f.t.Errorf("%s holds %.8q… in clear", filepath.Base(p), v)
			}
		}
	}
}

// TestPortalScope: signed in with client A's key, every page shows A's data
// only, and every id of client B's, on any page or action, is not found:
// its upload, file, error file, order, delivery (to redeliver or page from)
// and endpoint (to test). B's delivery stays failed and B's endpoint gets
// nothing.
func TestPortalScope(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	s := f.seedData()
	o := f.seedOther(s)
	b := f.browser()
	b.portalLogin(s.ClientID, s.APIKey)
	token := b.portalCSRF()
	// The other client's data; its ids too, except on the answers to a
	// request that names one (whose error repeats the id asked for).
	data := []string{o.Upload.FileName, o.OrderNumber, "beta-only-hook", o.ProductName, s.OtherClientID, "Beta Shoes"}
	foreign := append([]string{o.OrderID, o.DeliveryID, o.EndpointID, o.Upload.ID}, data...)
	noForeign := func(where, body string) {
		t.Helper()
		for _, x := range foreign {
			if strings.Contains(body, x) {
				t.Errorf("%s shows %q of the other client", where, x)
			}
		}
	}
	for path, want := range map[string][]string{
		"/portal/":        {"Acme Retail · DE", "stock-full.csv", "MP-1001", `data-rejected="4"`},
		"/portal/uploads": {"stock-full.csv", "stock-bad.csv", "stock-later.csv", `<select name="has_errors">`},
		"/portal/uploads?client=" + s.OtherClientID: {"stock-full.csv"},
		"/portal/uploads/" + s.Bad.ID:               {"stock-bad.csv", storelink.ProblemUnknownStore, "errors.csv", `data-rejected="4"`, `<td class="mono value">&lt;b&gt;-3&lt;/b&gt;</td>`},
		"/portal/uploads?has_errors=true":           {"stock-bad.csv", `data-rejected="4" title="4 rows rejected">4 rejected</span>`},
		"/portal/stock":                             {"Trail shoe", ean1},
		"/portal/stock?store=S2":                    {"Trail shoe"},
		"/portal/orders":                            {"MP-1001"},
		"/portal/orders/" + s.OrderID:               {"Order MP-1001", "Timeline", "HTTP 503"},
		"/portal/deliveries":                        {s.FailedDelivery, "HTTP 503", "upstream unavailable", "Redeliver"},
		"/portal/deliveries?state=failed":           {s.FailedDelivery},
		"/portal/endpoints":                         {"http://127.0.0.1:1/hooks/${eventId}", "https://ops:xxxxx@hooks.example.com/storelink", "Send test event"},
	} {
		body := b.page(path)
		wantContains(t, path, body, want...)
		noForeign(path, body)
	}
	// B's own ids, each on the page or action that takes it.
	for _, c := range []struct{ method, path string }{
		{"GET", "/portal/uploads/" + o.Upload.ID},
		{"GET", "/portal/uploads/" + o.Upload.ID + "/file"},
		{"GET", "/portal/uploads/" + o.Upload.ID + "/errors.csv"},
		{"GET", "/portal/orders/" + o.OrderID},
		{"POST", "/portal/deliveries/" + o.DeliveryID + "/redeliver"},
		{"POST", "/portal/endpoints/" + o.EndpointID + "/test"},
	} {
		var resp *http.Response
		var body string
		if c.method == "GET" {
			resp, body = b.get(c.path)
		} else {
			resp, body = b.post(c.path, url.Values{"csrf": {token}, "back": {"/portal/deliveries"}})
		}
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "not found") {
			t.Errorf("%s %s of the other client = %d, want 404 not found", c.method, c.path, resp.StatusCode)
		}
		noData(t, c.method+" "+c.path, body, data)
	}
	resp, body := b.get("/portal/deliveries?before=" + o.DeliveryID)
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("paging from the other client's delivery = %d, want 400", resp.StatusCode)
	}
	noData(t, "paging from the other client's delivery", body, data)
	// Paging orders from the other client's order is the answer to an id
	// that no order has, word for word but the id.
	resp, body = b.get("/portal/orders?before=" + o.OrderID)
	unknown := storelink.NewID(time.Now())
	resp2, body2 := b.get("/portal/orders?before=" + unknown)
	if resp.StatusCode != http.StatusBadRequest || resp2.StatusCode != http.StatusBadRequest ||
		strings.ReplaceAll(body, o.OrderID, "ID") != strings.ReplaceAll(body2, unknown, "ID") || !strings.Contains(body, "is not a cursor") {
		t.Errorf("paging from the other client's order = %d, from an unknown id = %d; want the same 400:\n%s\n%s", resp.StatusCode, resp2.StatusCode, body, body2)
	}
	noData(t, "paging from the other client's order", body, data)
	if resp, body := b.get("/portal/orders?before=" + s.OrderID); resp.StatusCode != http.StatusOK || strings.Contains(body, "is not a cursor") {
		t.Errorf("paging from the client's own order = %d, want 200", resp.StatusCode)
	}
	if resp, body := b.get("/portal/orders?state=assigned&state=new"); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `Query parameter \"state\" is given 2 times`) {
		t.Errorf("a filter given twice = %d %q, want 400 naming it", resp.StatusCode, body)
	}
	list, err := f.services.Webhooks.Deliveries(context.Background(), storelink.DeliveryFilter{ClientID: s.OtherClientID, Limit: 10})
	must(t, err)
	if len(list) != 1 || list[0].ID != o.DeliveryID || list[0].State != storelink.DeliveryFailed {
		t.Errorf("the other client's deliveries = %+v, want its one delivery still failed", list)
	}
	if n := o.ReceiverCalls.Load(); n != 0 {
		t.Errorf("the other client's endpoint got %d calls, want none", n)
	}
	// The other way round: B signed in sees its own and not A's.
	bb := f.browser()
	bb.portalLogin(s.OtherClientID, s.OtherAPIKey)
	wantContains(t, "B's uploads", bb.page("/portal/uploads"), o.Upload.FileName)
	if resp, _ := bb.get("/portal/uploads/" + s.Good.ID); resp.StatusCode != http.StatusNotFound {
		t.Errorf("B asking for A's upload = %d, want 404", resp.StatusCode)
	}
}

// noData fails when body shows any of data.
func noData(t *testing.T, where, body string, data []string) {
	t.Helper()
	for _, x := range data {
		if strings.Contains(body, x) {
			t.Errorf("%s shows %q of the other client", where, x)
		}
	}
}

// TestPortalActions: the portal's downloads, redeliver and test send, each
// a POST with the session's CSRF token; logging out deletes the session,
// and deleting the API key a session was opened with ends it.
func TestPortalActions(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	s := f.seedData()
	var got atomic.Value
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got.Store(r.Header.Get("webhook-test") + " " + string(body))
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte("test received"))
	}))
	t.Cleanup(receiver.Close)
	ep, err := f.services.Webhooks.CreateEndpoint(context.Background(), s.ClientID, storelink.NewEndpoint{URL: receiver.URL + "/partner-hook"}, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	must(t, err)
	b := f.browser()
	cookie := b.portalLogin(s.ClientID, s.APIKey)
	token := b.portalCSRF()

	// Downloads: the file as received, and the error file.
	resp, body := b.get("/portal/uploads/" + s.Good.ID + "/file")
	if resp.StatusCode != 200 || !strings.HasPrefix(body, "store;ean;article_number") || !strings.Contains(resp.Header.Get("Content-Disposition"), "stock-full.csv") ||
		resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("the file = %d %q %q", resp.StatusCode, resp.Header.Get("Content-Disposition"), body)
	}
	resp, body = b.get("/portal/uploads/" + s.Bad.ID + "/errors.csv")
	if resp.StatusCode != 200 || !strings.Contains(body, "problem_type") || !strings.Contains(body, storelink.ProblemUnknownStore) ||
		resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("errors.csv = %d %q", resp.StatusCode, body)
	}
	if resp, _ := b.get("/portal/uploads/" + s.Waiting.ID + "/errors.csv"); resp.StatusCode != http.StatusConflict {
		t.Errorf("errors.csv of a waiting upload = %d, want 409", resp.StatusCode)
	}
	// The portal's downloads share the process's places with the API's,
	// divided per partner: with the partner's share taken, its file is a
	// 429 with Retry-After, while the operator's download of the same file
	// draws on the operator's own share; with every place taken, a 503.
	partner := partnerOf(t, f, s.ClientID)
	op := f.browser()
	op.login()
	var releases []func()
	take := func(share string) {
		t.Helper()
		release, err := f.downloads.Take(deadlineRecorder{httptest.NewRecorder()}, share)
		must(t, err)
		releases = append(releases, release)
	}
	take(partner)
	take(partner)
	if resp, _ := b.get("/portal/uploads/" + s.Good.ID + "/file"); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("the file with the partner's download places taken = %d, Retry-After %q; want 429, 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp, _ := op.get("/dashboard/clients/" + s.ClientID + "/uploads/" + s.Good.ID + "/file"); resp.StatusCode != 200 {
		t.Errorf("the operator's download of the file with the partner's places taken = %d, want 200", resp.StatusCode)
	}
	for i := range httpapi.DefaultMaxDownloads/httpapi.DefaultMaxDownloadsPerPartner - 1 {
		take(fmt.Sprintf("other-partner-%d", i))
		take(fmt.Sprintf("other-partner-%d", i))
	}
	if resp, _ := op.get("/dashboard/clients/" + s.ClientID + "/uploads/" + s.Good.ID + "/file"); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("the operator's download with every place taken = %d, Retry-After %q; want 503, 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	for _, release := range releases {
		release()
	}

	// Redeliver: refused without the token, done with it.
	redeliver := "/portal/deliveries/" + s.FailedDelivery + "/redeliver"
	if resp, _ := b.post(redeliver, url.Values{"csrf": {"x"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("redeliver with a wrong token = %d, want 403", resp.StatusCode)
	}
	checkDeliveryState(t, f, s, storelink.DeliveryFailed)
	resp, _ = b.post(redeliver, url.Values{"csrf": {token}, "back": {"/portal/deliveries?state=failed"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/portal/deliveries?done=redelivered&state=failed" {
		t.Errorf("redeliver = %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	checkDeliveryState(t, f, s, storelink.DeliveryPending)
	if resp, _ := b.post(redeliver, url.Values{"csrf": {token}, "back": {"https://evil.example/"}}); resp.Header.Get("Location") != "/portal/?done=redelivered" {
		t.Errorf("redeliver with a foreign back goes to %q", resp.Header.Get("Location"))
	}

	// A test send reaches the endpoint marked as a test; the page says
	// what came back.
	resp, body = b.post("/portal/endpoints/"+ep.ID+"/test", url.Values{"csrf": {token}, "state": {"fulfilled"}})
	if resp.StatusCode != 200 {
		t.Fatalf("test send = %d: %s", resp.StatusCode, body)
	}
	wantContains(t, "the test result", body, "HTTP 202", "test received", `<option value="fulfilled" selected>`)
	if g, _ := got.Load().(string); !strings.HasPrefix(g, "true ") || !strings.Contains(g, `"state":"fulfilled"`) {
		t.Errorf("the endpoint got %q, want a test event of state fulfilled", g)
	}
	if resp, body := b.post("/portal/endpoints/"+ep.ID+"/test", url.Values{"csrf": {token}, "state": {"lost"}}); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("test send of state lost = %d: %s", resp.StatusCode, body)
	}

	// Logging out deletes the session: the cookie, replayed, opens nothing.
	resp, _ = b.post("/portal/logout", url.Values{"csrf": {token}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/portal/login" {
		t.Fatalf("logout = %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	req, _ := http.NewRequest("GET", f.URL+"/portal/", nil)
	req.AddCookie(&http.Cookie{Name: "storelink_portal", Value: cookie})
	if resp, _ := f.browser().do(req); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the replayed cookie after logout = %d, want the sign-in redirect", resp.StatusCode)
	}
	rows, err := dbtest.OnSQLite(f.db).Query(context.Background(), `SELECT count(*) AS n FROM dashboard_sessions WHERE client_id IS NOT NULL`)
	must(t, err)
	if rows[0]["n"] != "0" {
		t.Errorf("partner sessions after logout: %s, want none", rows[0]["n"])
	}

	// A session opened with the second key ends when that key is deleted;
	// one opened with the first goes on.
	second, first := f.browser(), f.browser()
	second.portalLogin(s.ClientID, s.SecondKey)
	first.portalLogin(s.ClientID, s.APIKey)
	second.page("/portal/orders")
	must(t, f.services.Partners.DeleteAPIKey(context.Background(), s.ClientID, s.SecondKeyID))
	if resp, _ := second.get("/portal/orders"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a session whose key was deleted = %d, want the sign-in redirect", resp.StatusCode)
	}
	first.page("/portal/orders")
}

// TestPortalSignInLimited: wrong API keys at the portal count toward the
// address's failed authentications, with the API's: after twenty the right
// key is refused too (429, Retry-After), and so is the API.
func TestPortalSignInLimited(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	s := f.seedData()
	b := f.browser()
	for range 5 {
		if resp, _ := b.post("/portal/login", url.Values{"client_id": {s.ClientID}}); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("sign-in without a key = %d, want 401", resp.StatusCode)
		}
	}
	for i := range 20 {
		if resp, _ := b.post("/portal/login", url.Values{"client_id": {s.ClientID}, "api_key": {"slk_wrong_" + strconv.Itoa(i)}}); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong key %d = %d, want 401", i, resp.StatusCode)
		}
	}
	resp, body := b.post("/portal/login", url.Values{"client_id": {s.ClientID}, "api_key": {s.APIKey}})
	if resp.StatusCode != http.StatusTooManyRequests || len(resp.Cookies()) != 0 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("sign-in after 20 failures = %d, cookies %v, Retry-After %q; want 429", resp.StatusCode, resp.Cookies(), resp.Header.Get("Retry-After"))
	}
	wantContains(t, "the refused sign-in", body, "Too many failed attempts from this address")
	req, _ := http.NewRequest("GET", f.URL+"/stock/"+s.ClientID+"/uploads", nil)
	req.Header.Set("x-api-key", s.APIKey)
	if resp, _ := b.do(req); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("the API after 20 failed sign-ins = %d, want 429", resp.StatusCode)
	}
}

// TestSessionKinds: a session is taken only by its own realm, even with a
// cookie signed for the other: an operator's session under a portal cookie
// opens no portal page, and a partner's under a dashboard cookie no
// dashboard page.
func TestSessionKinds(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	s := f.seedData()
	h := dashboard.New(dashboard.Deps{Admin: f.services.Partners, Sessions: f.services.Partners, AdminToken: f.Token})
	for _, c := range []struct {
		portal        bool
		client, key   string
		cookie, path  string
		wantSignedOut bool
	}{
		{portal: true, cookie: "storelink_portal", path: "/portal/", wantSignedOut: true},
		{portal: false, client: s.ClientID, key: s.APIKey, cookie: "storelink_session", path: "/dashboard/", wantSignedOut: true},
		{portal: true, client: s.ClientID, key: s.APIKey, cookie: "storelink_portal", path: "/portal/"},
		{portal: false, cookie: "storelink_session", path: "/dashboard/"},
	} {
		value, id := h.SessionCookie(c.portal)
		hash := sha256.Sum256([]byte(id))
		must(t, f.services.Partners.CreateSession(context.Background(), storelink.NewSession{IDHash: hash[:], ClientID: c.client, APIKey: c.key,
			Expires: time.Now().Add(time.Hour)}))
		req, _ := http.NewRequest("GET", f.URL+c.path, nil)
		req.AddCookie(&http.Cookie{Name: c.cookie, Value: value})
		resp, _ := f.browser().do(req)
		if signedOut := resp.StatusCode == http.StatusSeeOther; signedOut != c.wantSignedOut {
			t.Errorf("%s with a session of client %q = %d, want signed out %v", c.path, c.client, resp.StatusCode, c.wantSignedOut)
		}
	}
}

// deadlineRecorder is a recorder that takes a write deadline, as a real
// answer does, so that it can hold a download place.
type deadlineRecorder struct{ *httptest.ResponseRecorder }

func (deadlineRecorder) SetWriteDeadline(time.Time) error { return nil }

// partnerOf is the partner of a client.
func partnerOf(t *testing.T, f *fixture, clientID string) string {
	t.Helper()
	c, err := f.services.Partners.Client(context.Background(), clientID)
	must(t, err)
	return c.PartnerID
}
