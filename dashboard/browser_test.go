package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"storelink"
)

var screenshots = flag.Bool("screenshots", false, "save PNGs of the dashboard pages under testdata/screenshots/ (browser test)")

// chromiumPath finds Debian's chromium, or another Chromium-based browser on
// PATH.
func chromiumPath() string {
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// session is a headless browser tab on the fixture's server.
type session struct {
	t    *testing.T
	f    *fixture
	ctx  context.Context
	shot int
	// console collects what the pages wrote to the console: errors there
	// (a CSP violation, a failed load) fail the test.
	mu      sync.Mutex
	console []string
}

// chromium is the one browser the browser tests share, started by the
// first of them and stopped by TestMain: each test has a browser context of
// its own (cookies, storage), which costs a tab, not a start.
var chromium struct {
	once sync.Once
	ctx  context.Context
	stop func()
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if chromium.stop != nil {
		chromium.stop()
	}
	os.Exit(code)
}

// startChromium starts the shared browser.
func startChromium(path string) {
	dir, err := os.MkdirTemp("", "storelink-chromium-")
	if err != nil {
		chromium.err = err
		return
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	chromium.ctx = ctx
	chromium.stop = func() { cancelCtx(); cancelAlloc(); _ = os.RemoveAll(dir) }
	// The first Run starts the browser; it must not have a timeout.
	if err := chromedp.Do(ctx); err != nil {
		chromium.err = fmt.Errorf("start chromium %s: %w", path, err)
	}
}

func newSession(t *testing.T, f *fixture) *session {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		t.Skip("no chromium at /usr/bin/chromium or on PATH: the browser tests are skipped " +
			"(apt-get install chromium; .ci/run installs it)")
	}
	chromium.once.Do(func() { startChromium(path) })
	if chromium.err != nil {
		t.Fatal(chromium.err)
	}
	ctx, cancel := chromedp.NewContext(chromium.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	s := &session{t: t, f: f, ctx: ctx}
	// The first Run opens the tab, which lives as long as the context it
	// runs with: it must not have a timeout.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				s.mu.Lock()
				s.console = append(s.console, m.String())
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// limited returns the tab's context with a deadline for one step.
func (s *session) limited(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, d)
}

// do runs actions that must finish within 20s.
func (s *session) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	s.t.Helper()
	ctx, cancel := s.limited(20 * time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		s.t.Fatalf("%s: %v", what, err)
	}
}

// open navigates to a dashboard path and waits for sel.
func (s *session) open(path, sel string) {
	s.t.Helper()
	s.do("open "+path, chromedp.Navigate(s.f.URL+path), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// submit clicks a button that sends a form (or a link) and waits for the
// page it leads to, which must answer 200.
func (s *session) submit(sel string) {
	s.t.Helper()
	s.submitWant(sel, http.StatusOK)
}

func (s *session) submitWant(sel string, want int64) {
	s.t.Helper()
	ctx, cancel := s.limited(20 * time.Second)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel)))
	if err != nil {
		s.t.Fatalf("click %s: %v", sel, err)
	}
	if resp.Status != want {
		s.t.Fatalf("click %s: the page answered %d, want %d", sel, resp.Status, want)
	}
}

// eval evaluates JavaScript in the page; a promise is waited for.
func eval[T any](s *session, js string) T {
	s.t.Helper()
	ctx, cancel := s.limited(10 * time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		s.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// waitJS waits until the expression is true. It survives reloads: an
// evaluation that a navigation interrupts is tried again.
func (s *session) waitJS(what, js string, limit time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := s.limited(2 * time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: not so after %s (%s; last error %v)", what, limit, js, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *session) text(sel string) string {
	s.t.Helper()
	return eval[string](s, fmt.Sprintf(`document.querySelector(%q)?.innerText ?? ""`, sel))
}

// screenshot saves the page as testdata/screenshots/NN-name.png when the
// test runs with -screenshots.
func (s *session) screenshot(name string) {
	s.t.Helper()
	s.shot++
	if !*screenshots {
		return
	}
	ctx, cancel := s.limited(20 * time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		s.t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := filepath.Join("testdata", "screenshots")
	must(s.t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, fmt.Sprintf("%02d-%s.png", s.shot, name))
	must(s.t, os.WriteFile(path, png, 0o644))
	s.t.Logf("screenshot %s", path)
}

// fetchWithCookies GETs a URL of the fixture with the cookies the browser
// holds for it.
func (s *session) fetchWithCookies(u string) (*http.Response, string) {
	s.t.Helper()
	ctx, cancel := s.limited(10 * time.Second)
	cookies, err := chromedp.Run(ctx, func(ctx context.Context, tg *chromedp.Target) (network.GetCookiesResult, error) {
		return cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{u}})
	})
	cancel()
	must(s.t, err)
	req, err := http.NewRequest("GET", u, nil)
	must(s.t, err)
	for _, c := range cookies.Cookies {
		req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	}
	return s.f.browser().do(req)
}

// narrow makes the tab a phone's screen, 390 px wide in portrait.
func (s *session) narrow() {
	s.t.Helper()
	s.do("a 390 px wide screen", chromedp.EmulateViewport(390, 844, chromedp.EmulatePortrait, chromedp.EmulateMobile))
}

// narrowJS is true when the page is no wider than the screen and every
// part of the menu and the sign-out button lies inside the header bar.
const narrowJS = `(() => {
	if (document.documentElement.scrollWidth > 390) return false;
	const bar = document.querySelector("header.top").getBoundingClientRect();
	for (const el of document.querySelectorAll("header.top nav a, header.top .logout button, header.top .brand")) {
		const r = el.getBoundingClientRect();
		if (r.width === 0) continue;
		if (r.left < bar.left || r.right > bar.right || r.top < bar.top || r.bottom > bar.bottom) return false;
	}
	return true;
})()`

// checkNarrow opens each path on the narrow screen and fails when the page
// scrolls sideways or the menu leaves its bar.
func (s *session) checkNarrow(paths ...string) {
	s.t.Helper()
	for _, p := range paths {
		s.open(p, "main")
		if !eval[bool](s, narrowJS) {
			s.t.Errorf("%s at 390 px: scrollWidth %d, or the menu is outside its bar", p,
				eval[int](s, `document.documentElement.scrollWidth`))
		}
	}
}

// rejectedJS describes the rejected-rows badge of the page's first upload
// with one, and how it stands to its status badge: its count, its colour,
// whether it lies inside the screen once scrolled to (a table at 390 px
// scrolls sideways within itself: scrolled tells it had to), on the status
// badge's line to its right (beside), and clear of it.
const rejectedJS = `(() => {
	const b = document.querySelector(".s-haserrors");
	if (!b) return {found: false};
	b.scrollIntoView({block: "center", inline: "nearest"});
	const table = b.closest("table");
	const st = b.parentElement.querySelector(".status:not(.s-haserrors)").getBoundingClientRect();
	const r = b.getBoundingClientRect();
	return {
		found: true, count: b.dataset.rejected, text: b.textContent, color: getComputedStyle(b).color,
		statusColor: getComputedStyle(b.parentElement.querySelector(".status:not(.s-haserrors)")).color,
		inside: r.left >= 0 && r.right <= innerWidth && r.width > 0,
		scrolled: table !== null && table.scrollLeft > 0,
		beside: r.left >= st.right && Math.abs(r.top - st.top) < st.height,
		clear: r.left >= st.right || r.top >= st.bottom,
	};
})()`

// checkRejected opens path and checks its upload's rejected-rows badge:
// amber, with the count, inside the screen and clear of the (green)
// status badge. With wide set (1280 px) it is beside the status badge on
// its line, and seen without scrolling a table sideways.
func (s *session) checkRejected(path, count string, wide bool) {
	s.t.Helper()
	s.open(path, "main")
	type badge struct {
		Found                 bool
		Count, Text, Color    string
		StatusColor           string
		Inside, Beside, Clear bool
		Scrolled              bool
	}
	got := eval[badge](s, rejectedJS)
	switch {
	case !got.Found:
		s.t.Errorf("%s: no rejected-rows badge", path)
	case got.Count != count || got.Text != count+" rejected":
		s.t.Errorf("%s: the badge says %q (data-rejected %q), want %s rejected", path, got.Text, got.Count, count)
	case got.Color != "rgb(168, 100, 0)" || got.StatusColor == got.Color:
		s.t.Errorf("%s: the badge is %s beside a status of %s, want amber rgb(168, 100, 0)", path, got.Color, got.StatusColor)
	case !got.Inside || !got.Clear || wide && (!got.Beside || got.Scrolled):
		s.t.Errorf("%s: the badge is inside the screen %v, clear of the status %v, beside it %v, its table scrolled sideways %v",
			path, got.Inside, got.Clear, got.Beside, got.Scrolled)
	}
}

// checkValues opens path, an upload's report, and checks that its rejected
// lines show these values, as text, each inside the screen.
func (s *session) checkValues(path string, values ...string) {
	s.t.Helper()
	s.open(path, ".problem-group")
	type cell struct {
		Text   string
		Inside bool
	}
	cells := eval[[]cell](s, `[...document.querySelectorAll(".report.errors td.value")].map(td => {
		td.closest("details").open = true;
		const r = td.getBoundingClientRect();
		return {text: td.textContent, inside: r.left >= 0 && r.right <= innerWidth};
	})`)
	for _, v := range values {
		found := false
		for _, c := range cells {
			if c.Text == v {
				found = true
				if !c.Inside {
					s.t.Errorf("%s: the value %q lies outside the screen", path, v)
				}
			}
		}
		if !found {
			s.t.Errorf("%s: no rejected line shows the value %q (values: %+v)", path, v, cells)
		}
	}
}

// checkNarrowShot takes a full-page screenshot of the page open now (the
// last one checkNarrow opened) and fails unless it is 390 px wide: a page
// that overflowed would come out wider. With -screenshots it is kept.
func (s *session) checkNarrowShot(name string) {
	s.t.Helper()
	ctx, cancel := s.limited(20 * time.Second)
	defer cancel()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		s.t.Fatalf("screenshot %s: %v", name, err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		s.t.Fatalf("screenshot %s: %v", name, err)
	}
	if w := img.Bounds().Dx(); w != 390 {
		s.t.Errorf("the 390 px screenshot of %s is %d px wide", name, w)
	}
	s.shot++
	if *screenshots {
		dir := filepath.Join("testdata", "screenshots")
		must(s.t, os.MkdirAll(dir, 0o755))
		must(s.t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("%02d-%s.png", s.shot, name)), shot, 0o644))
	}
}

// checkPage checks that what the browser shows has no secret in it.
func (s *session) checkPage(where string) {
	s.t.Helper()
	s.f.checkNoSecret(where, eval[string](s, `document.documentElement.outerHTML`))
}

// api calls the HTTP API of the fixture and decodes the answer.
func (f *fixture) api(method, path string, header map[string]string, body []byte, want int, v any) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.URL+path, bytes.NewReader(body))
	must(f.t, err)
	for k, val := range header {
		req.Header.Set(k, val)
	}
	resp, err := http.DefaultClient.Do(req)
	must(f.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		f.t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	if v != nil {
		must(f.t, json.Unmarshal(b, v))
	}
}

func (f *fixture) admin(method, path, body string, want int, v any) {
	f.t.Helper()
	f.api(method, path, map[string]string{"Authorization": "Bearer " + f.Token, "Content-Type": "application/json"}, []byte(body), want, v)
}

// TestBrowser drives the dashboard in headless Chromium against a real
// server: log in, follow an upload from accepted to applied, read the
// report of a bad file, open every page, disable and enable an endpoint,
// and redeliver a failed delivery.
func TestBrowser(t *testing.T) {
	f := newFixture(t, fixtureOptions{deliver: true})
	s := newSession(t, f)

	// A partner with two stores and a webhook endpoint that fails until
	// told otherwise, all through the API as an operator would.
	var p storelink.Partner
	f.admin("POST", "/admin/partners", `{"name":"Acme Retail"}`, 201, &p)
	var c storelink.NewClient
	f.admin("POST", "/admin/partners/"+p.ID+"/clients", `{"country_code":"DE","currency":"EUR"}`, 201, &c)
	f.keep(c.APIKey)
	for _, id := range []string{"S1", "S2"} {
		f.admin("PUT", "/admin/clients/"+c.ID+"/stores/"+id, `{"name":"Store `+id+` Berlin"}`, 201, nil)
	}
	var receiverOK atomic.Bool
	var hits atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if receiverOK.Load() {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":"order service down"}`))
	}))
	t.Cleanup(receiver.Close)
	var ep storelink.EndpointSecret
	f.admin("POST", "/admin/clients/"+c.ID+"/webhooks", `{"url":"`+receiver.URL+`/orders/${eventId}","api_key":"receiver-key-42"}`, 201, &ep)
	f.keep(ep.Secret)
	f.keep("receiver-key-42")
	var ep2 storelink.EndpointSecret
	f.admin("POST", "/admin/clients/"+c.ID+"/webhooks", `{"url":"http://127.0.0.1:9/acme","states":["returned"]}`, 201, &ep2)
	f.keep(ep2.Secret)

	// Log in: a page without a session goes to the login form, a wrong
	// token is refused, the right one comes back to the page asked for.
	s.open("/dashboard/orders", `input[name="token"]`)
	if loc := eval[string](s, `location.pathname + location.search`); loc != "/dashboard/login?next=%2Fdashboard%2Forders" {
		t.Errorf("without a session the browser is at %s", loc)
	}
	s.screenshot("login")
	s.do("type a wrong token", chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), "not-the-token"))
	s.submitWant(`form[action="/dashboard/login"] button`, http.StatusUnauthorized)
	if got := s.text(".error"); got != "That is not the admin token." {
		t.Errorf("wrong token: error %q", got)
	}
	s.screenshot("login-refused")
	s.do("type the token", chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), f.Token))
	s.submit(`form[action="/dashboard/login"] button`)
	if loc := eval[string](s, `location.pathname`); loc != "/dashboard/orders" {
		t.Fatalf("after login the browser is at %s, want /dashboard/orders", loc)
	}
	s.mu.Lock()
	s.console = nil // the refused login's 401 is logged as a failed load
	s.mu.Unlock()
	// The session cookie is out of the page's reach and not sent cross-site.
	if got := eval[string](s, `document.cookie`); got != "" {
		t.Errorf("document.cookie = %q, want the session cookie hidden (HttpOnly)", got)
	}
	ctx, cancel := s.limited(10 * time.Second)
	cookies, err := chromedp.Run(ctx, func(ctx context.Context, tg *chromedp.Target) (network.GetCookiesResult, error) {
		return cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{f.URL + "/dashboard/"}})
	})
	cancel()
	must(t, err)
	if len(cookies.Cookies) != 1 || !cookies.Cookies[0].HTTPOnly || cookies.Cookies[0].SameSite != network.CookieSameSiteStrict ||
		cookies.Cookies[0].Path != "/dashboard/" || strings.Contains(cookies.Cookies[0].Value, f.Token) {
		t.Errorf("session cookie in the browser = %+v", cookies.Cookies)
	}

	// An upload, followed from accepted to applied. The processor is not
	// running yet, so the page first shows it accepted; then the page
	// reloads by itself until it is applied.
	feed := "store;ean;article_number;quantity;price;retail_price;product_name;article_color;article_size\n"
	for i := range 30 {
		store := []string{"S1", "S2"}[i%2]
		feed += fmt.Sprintf("%s;%s;SKU-%03d;%d;%d.99;%d.99;Trail runner %d;blue;%d\n", store, ean13(fmt.Sprintf("4006381%05d", i)), i, 5+i, 20+i, 30+i, i, 38+i%8)
	}
	var up storelink.Upload
	f.api("PUT", "/stock/"+c.ID+"/stock-2026-11-21.csv", map[string]string{"x-api-key": c.APIKey, "Content-Type": "text/csv"}, []byte(feed), 200, &up)
	uploadPage := "/dashboard/clients/" + c.ID + "/uploads/" + up.ID
	s.open(uploadPage, "#upload-status .status")
	if st := eval[string](s, `document.querySelector("#upload-status .status").dataset.status`); st != "accepted" {
		t.Fatalf("the new upload shows %q, want accepted", st)
	}
	s.screenshot("upload-accepted")
	f.startProcessor()
	f.proc.Wake()
	s.waitJS("the upload page shows applied", `document.querySelector("#upload-status .status")?.dataset.status === "applied"`, 15*time.Second)
	s.do("wait for the report", chromedp.WaitVisible(chromedp.CSS(".stats")))
	if got := s.text(".stats .good b"); got != "30" {
		t.Errorf("rows applied = %q, want 30", got)
	}
	if eval[bool](s, `document.querySelector('meta[http-equiv="refresh"]') !== null`) {
		t.Error("an applied upload still reloads")
	}
	s.checkPage("the applied upload")
	s.screenshot("upload-applied")

	// A file with problems: the report groups them by type with lines.
	bad := "store;ean;article_number;quantity;price;colour\n" +
		"S1;" + ean1 + ";SKU-1;4;9.99;red\n" +
		"S9;" + ean2 + ";SKU-2;4;9.99;red\n" +
		"S1;4006381333932;SKU-3;4;9.99;red\n" +
		"S1;" + ean3 + ";SKU-4;-1;9.99;red\n" +
		"S2;" + ean2 + ";SKU-2;1;;red\n" +
		"S2;" + ean3 + ";SKU-4;1;5.00;4.00\n" +
		"S1;" + ean1 + ";SKU-1;6;9.99;red\n"
	var badUp storelink.Upload
	f.api("PUT", "/stock/"+c.ID+"/stock-broken.csv", map[string]string{"x-api-key": c.APIKey}, []byte(bad), 200, &badUp)
	s.open("/dashboard/clients/"+c.ID+"/uploads/"+badUp.ID, "#upload-status .status")
	s.waitJS("the bad upload is processed", `["applied","rejected"].includes(document.querySelector("#upload-status .status")?.dataset.status)`, 15*time.Second)
	s.do("wait for the problems", chromedp.WaitVisible(chromedp.CSS(".problem-group")))
	report := s.text("main")
	for _, want := range []string{storelink.ProblemUnknownStore, storelink.ProblemInvalidValue, storelink.ProblemMissingValues,
		storelink.ProblemUnknownColumns, storelink.ProblemDuplicated, "S9", "4006381333932"} {
		if !strings.Contains(report, want) {
			t.Errorf("the report does not show %q", want)
		}
	}
	s.screenshot("upload-report")
	// It applied some rows and rejected 4: an amber badge says so beside
	// the green "applied", and each rejected line shows its value.
	badPage := "/dashboard/clients/" + c.ID + "/uploads/" + badUp.ID
	s.checkRejected(badPage, "4", true)
	s.checkValues(badPage, "S9", "4006381333932", "-1")
	s.open("/dashboard/uploads?has_errors=true", "main")
	if got := eval[[]string](s, `[...document.querySelectorAll("tr[data-upload]")].map(r => r.dataset.upload)`); len(got) != 1 || got[0] != badUp.ID {
		t.Errorf("uploads with has_errors=true = %v, want only %s", got, badUp.ID)
	}
	s.checkRejected("/dashboard/uploads?has_errors=true", "4", true)

	// An order, and its event delivered to the failing endpoint until the
	// schedule is spent.
	var o storelink.Order
	f.admin("POST", "/orders", fmt.Sprintf(`{"order_number":"MP-77","client_id":%q,"items":[{"ean":%q,"marketplace_article_number":"MA-1"},{"ean":%q,"marketplace_article_number":"MA-2"}],
		"customer_billing_address":{"first_name":"Erika","last_name":"Mustermann","address_line_1":"Hauptstr. 1","zip_code":"10115","city":"Berlin","country_code":"DE"}}`,
		c.ID, ean13("400638100001"), ean13("400638100003")), 201, &o)
	f.admin("POST", "/orders/"+o.ID+"/fulfil", `{"delivery_details":{"delivery_carrier_name":"DHL","delivery_tracking_number":"003404341234"}}`, 200, nil)
	var o2 storelink.Order
	f.admin("POST", "/orders", fmt.Sprintf(`{"order_number":"MP-78","client_id":%q,"items":[{"ean":%q,"marketplace_article_number":"MA-9"}]}`,
		c.ID, ean13("400638100002")), 201, &o2)
	f.admin("POST", "/orders/"+o2.ID+"/cancel", `{"items":[{"item_id":"`+o2.Items[0].ItemID+`","cancellation_reason":"OUT_OF_STOCK"}]}`, 200, nil)
	failed := f.waitDeliveries(c.ID, func(ds []storelink.Delivery) bool {
		n := 0
		for _, d := range ds {
			if d.EndpointID == ep.ID && d.State == storelink.DeliveryFailed {
				n++
			}
		}
		return n == 4
	})
	var target storelink.Delivery
	for _, d := range failed {
		if d.OrderID == o.ID && d.EventState == storelink.StateAssigned {
			target = d
		}
	}
	if target.ID == "" || len(target.Attempts) != 3 {
		t.Fatalf("the assigned event's delivery = %+v, want failed after 3 attempts", target)
	}

	// Every page, as an operator clicks through them.
	s.open("/dashboard/", ".client")
	if got := s.text(".client h2"); got != "Acme Retail · DE" {
		t.Errorf("overview client = %q", got)
	}
	if got := s.text(".client .problems"); !strings.Contains(got, "4 failed deliveries") {
		t.Errorf("the overview's problems = %q, want the 4 failed deliveries", got)
	}
	// The bucket refills 24 MiB an hour, so two small files are back in it
	// within a second: the gauge reads a percentage, whatever it is.
	if got := eval[string](s, `document.querySelector(".client svg.gauge .pct").textContent`); !strings.HasSuffix(got, "%") {
		t.Errorf("the gauge reads %q", got)
	}
	s.checkPage("the overview")
	s.screenshot("overview")
	s.submit(`.client h2 a`)
	s.do("client page", chromedp.WaitVisible(chromedp.CSS("table.endpoints")))
	s.checkPage("the client page")
	s.screenshot("client")
	s.open("/dashboard/uploads", "table.uploads")
	s.screenshot("uploads")
	s.open("/dashboard/uploads?status=applied&client="+c.ID, "table.uploads")
	if n := eval[int](s, `document.querySelectorAll("table.uploads tbody tr").length`); n != 2 {
		t.Errorf("applied uploads listed: %d, want 2", n)
	}
	s.open("/dashboard/stock?client="+c.ID+"&store=S2", "table.stock")
	if n := eval[int](s, `document.querySelectorAll("table.stock tbody tr").length`); n != 16 {
		t.Errorf("stock rows at S2: %d, want 16", n)
	}
	s.checkPage("the stock")
	s.screenshot("stock")
	s.open("/dashboard/orders", "table.orders")
	s.screenshot("orders")
	s.submit(`tr[data-order="` + o.ID + `"] a`)
	s.do("order page", chromedp.WaitVisible(chromedp.CSS("ol.timeline")))
	if n := eval[int](s, `document.querySelectorAll("ol.timeline > li").length`); n != 2 {
		t.Errorf("timeline events: %d, want 2 (assigned, fulfilled)", n)
	}
	s.checkPage("the order")
	s.screenshot("order")

	// Disable and enable an endpoint.
	clientPage := "/dashboard/clients/" + c.ID
	row := `tr[data-endpoint="` + ep2.ID + `"]`
	s.open(clientPage, row)
	s.submit(row + ` button`)
	if got := s.text(row + ` .status`); got != "disabled" {
		t.Errorf("after Disable the endpoint is %q", got)
	}
	if !strings.Contains(s.text(".flash"), "disabled") {
		t.Errorf("flash after disable = %q", s.text(".flash"))
	}
	s.submit(row + ` button`)
	if got := s.text(row + ` .status`); got != "enabled" {
		t.Errorf("after Enable the endpoint is %q", got)
	}

	// Deliveries: failed first, every attempt; redeliver one and watch its
	// attempts grow.
	card := `article[data-delivery="` + target.ID + `"]`
	s.open("/dashboard/deliveries", card)
	if first := eval[string](s, `document.querySelector("section.deliveries").className`); !strings.Contains(first, "g-failed") {
		t.Errorf("the first group is %q, want the failed deliveries", first)
	}
	if got := eval[string](s, `document.querySelector('`+card+`').dataset.attempts`); got != "3" {
		t.Errorf("attempts shown before redeliver = %s, want 3", got)
	}
	if n := eval[int](s, `document.querySelectorAll('`+card+` table.attempts tbody tr').length`); n != 3 {
		t.Errorf("attempt rows = %d, want 3", n)
	}
	s.checkPage("the deliveries")
	s.screenshot("deliveries-failed")
	receiverOK.Store(true)
	before := hits.Load()
	s.submit(card + ` button.redeliver`)
	if !strings.Contains(s.text(".flash"), "pending again") {
		t.Errorf("flash after redeliver = %q", s.text(".flash"))
	}
	f.waitDeliveries(c.ID, func(ds []storelink.Delivery) bool {
		for _, d := range ds {
			if d.ID == target.ID {
				return d.State == storelink.DeliverySucceeded
			}
		}
		return false
	})
	if hits.Load() <= before {
		t.Error("the receiver got nothing after the redeliver")
	}
	s.open("/dashboard/deliveries?client="+c.ID, card)
	if got := eval[string](s, `document.querySelector('`+card+`').dataset.attempts`); got != "4" {
		t.Errorf("attempts shown after redeliver = %s, want 4", got)
	}
	if got := eval[string](s, `document.querySelector('`+card+`').dataset.state`); got != "succeeded" {
		t.Errorf("state after redeliver = %s, want succeeded", got)
	}
	// Each attempt shows where it went: the URL with the event id.
	if got := s.text(card + " td.attempt-url"); got != receiver.URL+"/orders/"+target.EventID {
		t.Errorf("the attempt's url = %q, want %s/orders/%s", got, receiver.URL, target.EventID)
	}
	s.screenshot("deliveries-redelivered")

	// The endpoint's page: its stats; recover its three other failed
	// deliveries, which now go through; a test send; delete the other
	// endpoint.
	s.submit(card + ` a.url`)
	s.do("endpoint page", chromedp.WaitVisible(chromedp.CSS("#recover")))
	if got := s.text(".failed-deliveries"); got != "3" {
		t.Errorf("the endpoint's failed deliveries = %q, want 3", got)
	}
	s.screenshot("endpoint")
	s.submit(`#recover button`)
	if got := s.text(".flash"); !strings.Contains(got, "made pending again: 3") {
		t.Errorf("flash after recover = %q", got)
	}
	f.waitDeliveries(c.ID, func(ds []storelink.Delivery) bool {
		for _, d := range ds {
			if d.EndpointID == ep.ID && d.State != storelink.DeliverySucceeded {
				return false
			}
		}
		return true
	})
	s.do("choose a state", chromedp.SetValue(chromedp.CSS(`#test select[name="state"]`), "returned"))
	s.submit(`#test button`)
	if got := s.text(".test-outcome"); !strings.HasPrefix(got, "HTTP 204") {
		t.Errorf("the test send's outcome = %q, want HTTP 204", got)
	}
	s.checkPage("the test result")
	s.open("/dashboard/endpoints/"+ep2.ID, "#delete")
	s.do("tick the box", chromedp.Click(chromedp.CSS(`#delete input[name="confirm"]`)))
	s.submit(`#delete button`)
	if got := s.text("#endpoint-state"); got != "deleted" {
		t.Errorf("after delete the endpoint is %q", got)
	}

	// At 390 px wide, no page scrolls sideways and the menu stays in its
	// bar.
	s.narrow()
	s.checkNarrow("/dashboard/", clientPage, "/dashboard/uploads", uploadPage, "/dashboard/stock?client="+c.ID, "/dashboard/orders",
		"/dashboard/orders/"+o.ID, "/dashboard/endpoints/"+ep.ID, "/dashboard/deliveries", badPage, "/dashboard/uploads?has_errors=true")
	s.checkRejected(badPage, "4", false)
	s.checkValues(badPage, "S9", "4006381333932", "-1")
	s.checkRejected("/dashboard/uploads?has_errors=true", "4", false)
	s.checkNarrowShot("deliveries-390") // the widest: tables of attempts

	// Log out: the pages need a login again.
	s.submit(`form.logout button`)
	if loc := eval[string](s, `location.pathname`); loc != "/dashboard/login" {
		t.Errorf("after logout the browser is at %s", loc)
	}
	s.open("/dashboard/deliveries", `input[name="token"]`)

	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.console {
		t.Errorf("browser console: %s", m)
	}
}

// waitDeliveries polls the client's deliveries until ok, for at most 15s.
func (f *fixture) waitDeliveries(clientID string, ok func([]storelink.Delivery) bool) []storelink.Delivery {
	f.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ds, err := f.services.Webhooks.Deliveries(context.Background(), storelink.DeliveryFilter{ClientID: clientID, Limit: 100})
		must(f.t, err)
		if ok(ds) {
			return ds
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(ds, "", "  ")
			f.t.Fatalf("deliveries not as wanted after 15s: %s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPortalBrowser drives the partners' portal in headless Chromium: sign
// in with a client's key (a key of another client is refused), read the
// home, an upload's report and its error file, find that another client's
// upload and order are not there, redeliver a failed delivery, send a test
// event, check every page at 390 px wide, and sign out.
func TestPortalBrowser(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	sd := f.seedData()
	o := f.seedOther(sd)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(receiver.Close)
	ep, err := f.services.Webhooks.CreateEndpoint(context.Background(), sd.ClientID, storelink.NewEndpoint{URL: receiver.URL + "/partner-hook"},
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	must(t, err)
	s := newSession(t, f)

	// Sign in: the other client's key does not open this client.
	s.open("/portal/", `input[name="api_key"]`)
	if loc := eval[string](s, `location.pathname + location.search`); loc != "/portal/login?next=%2Fportal%2F" {
		t.Errorf("without a session the browser is at %s", loc)
	}
	s.do("type a wrong pair", chromedp.SendKeys(chromedp.CSS(`input[name="client_id"]`), sd.ClientID),
		chromedp.SendKeys(chromedp.CSS(`input[name="api_key"]`), sd.OtherAPIKey))
	s.submitWant(`form[action="/portal/login"] button`, http.StatusUnauthorized)
	if got := s.text(".error"); got != "That client id and API key do not go together." {
		t.Errorf("wrong pair: error %q", got)
	}
	if got := eval[string](s, `document.querySelector('input[name="api_key"]').value`); got != "" {
		t.Error("the refused form gives the key back")
	}
	s.do("type the key", chromedp.SendKeys(chromedp.CSS(`input[name="api_key"]`), sd.APIKey))
	s.submit(`form[action="/portal/login"] button`)
	if loc := eval[string](s, `location.pathname`); loc != "/portal/" {
		t.Fatalf("after sign-in the browser is at %s", loc)
	}
	s.mu.Lock()
	s.console = nil // the refused sign-in's 401 is logged as a failed load
	s.mu.Unlock()
	if got := eval[string](s, `document.cookie`); got != "" {
		t.Errorf("document.cookie = %q, want the session cookie hidden (HttpOnly)", got)
	}
	if got := s.text("h1"); got != "Acme Retail · DE" {
		t.Errorf("the portal's home is titled %q", got)
	}
	if got := s.text("#failed-count"); got != "2" {
		t.Errorf("failed deliveries on the home = %q, want 2", got)
	}
	s.checkPage("the portal's home")
	s.screenshot("portal-home")

	// An upload's report, and its error file fetched with the session.
	s.open("/portal/uploads", "table.uploads")
	s.submit(`tr[data-upload="` + sd.Bad.ID + `"] a`)
	s.do("the report", chromedp.WaitVisible(chromedp.CSS(".problem-group")))
	// The page's policy lets no script fetch; the link is followed with
	// the browser's cookie instead.
	href := eval[string](s, `document.querySelector('a[href$="/errors.csv"]').href`)
	resp, body := s.fetchWithCookies(href)
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Disposition"), "-errors.csv") || !strings.Contains(body, "problem_type") {
		t.Errorf("the error file from the report's link = %d %q %q", resp.StatusCode, resp.Header.Get("Content-Disposition"), body)
	}
	s.screenshot("portal-upload")
	badPage := "/portal/uploads/" + sd.Bad.ID
	s.checkRejected(badPage, "4", true)
	s.checkValues(badPage, "S9", "4006381333932", "<b>-3</b>")
	s.checkRejected("/portal/uploads?has_errors=true", "4", true)

	// The other client's upload, file and order are not found.
	for _, p := range []string{"/portal/uploads/" + o.Upload.ID, "/portal/orders/" + o.OrderID} {
		ctx, cancel := s.limited(20 * time.Second)
		resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(f.URL+p))
		cancel()
		must(t, err)
		if page := s.text("main"); resp.Status != http.StatusNotFound || strings.Contains(page, o.Upload.FileName) || strings.Contains(page, o.OrderNumber) {
			t.Errorf("%s of the other client = %d %q, want 404 without its data", p, resp.Status, page)
		}
	}
	if resp, _ := s.fetchWithCookies(f.URL + "/portal/uploads/" + o.Upload.ID + "/file"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the other client's file = %d, want 404", resp.StatusCode)
	}

	// Redeliver a failed delivery.
	card := `article[data-delivery="` + sd.FailedDelivery + `"]`
	s.open("/portal/deliveries", card)
	s.mu.Lock()
	s.console = nil // the 404s are logged as failed loads, by now
	s.mu.Unlock()
	if got := eval[string](s, `document.querySelector('`+card+`').dataset.state`); got != "failed" {
		t.Errorf("the delivery shows %q, want failed", got)
	}
	s.screenshot("portal-deliveries")
	s.submit(card + ` button.redeliver`)
	if !strings.Contains(s.text(".flash"), "pending again") {
		t.Errorf("flash after redeliver = %q", s.text(".flash"))
	}
	if got := eval[string](s, `document.querySelector('`+card+`').dataset.state`); got != "pending" {
		t.Errorf("after redeliver the delivery shows %q, want pending", got)
	}

	// A test event to the partner's own endpoint.
	section := `section[data-endpoint="` + ep.ID + `"]`
	s.open("/portal/endpoints", section)
	s.submit(section + ` .test-form button`)
	if got := s.text(section + ` .test-outcome`); !strings.HasPrefix(got, "HTTP 202") {
		t.Errorf("the test send's outcome = %q, want HTTP 202", got)
	}
	s.checkPage("the portal's endpoints")
	s.screenshot("portal-endpoints")

	// At 390 px wide.
	s.narrow()
	s.checkNarrow("/portal/", "/portal/uploads", "/portal/uploads/"+sd.Bad.ID, "/portal/stock", "/portal/orders",
		"/portal/orders/"+sd.OrderID, "/portal/endpoints", "/portal/deliveries", "/portal/uploads?has_errors=true")
	s.checkRejected(badPage, "4", false)
	s.checkValues(badPage, "S9", "4006381333932", "<b>-3</b>")
	s.checkRejected("/portal/uploads?has_errors=true", "4", false)
	s.checkNarrowShot("portal-deliveries-390")

	// Sign out: the pages need a sign-in again.
	s.submit(`form.logout button`)
	if loc := eval[string](s, `location.pathname`); loc != "/portal/login" {
		t.Errorf("after sign-out the browser is at %s", loc)
	}
	s.open("/portal/deliveries", `input[name="api_key"]`)

	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.console {
		t.Errorf("browser console: %s", m)
	}
}
