package dashboard_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"storelink"
)

// usableJS tells what keeps the form sel from being used on a screen
// width px wide ("" when nothing does): the page scrolling sideways, or a
// field or button of the form not shown or lying outside the screen once
// scrolled to.
const usableJS = `((sel, width) => {
	const form = document.querySelector(sel);
	if (!form) return "there is no " + sel;
	if (document.documentElement.scrollWidth > width) return "the page is " + document.documentElement.scrollWidth + " px wide";
	for (const el of form.querySelectorAll('input:not([type="hidden"]), select, button:not([hidden]), textarea')) {
		el.scrollIntoView({block: "center", inline: "nearest"});
		const r = el.getBoundingClientRect();
		const name = el.name || el.value || el.textContent.trim();
		if (r.width === 0 || r.height === 0) return name + " is not shown";
		if (r.left < 0 || r.right > width) return name + " lies from " + r.left + " to " + r.right + " px";
	}
	return "";
})`

// checkUsable fails when the form sel cannot be used at the session's
// width.
func (s *session) checkUsable(sel string, width int) {
	s.t.Helper()
	if why := eval[string](s, fmt.Sprintf("%s(%q, %d)", usableJS, sel, width)); why != "" {
		s.t.Errorf("%s at %d px: %s", sel, width, why)
	}
}

// forgetConsole drops what the console said so far: the loads answered
// 4xx on purpose are logged as failed.
func (s *session) forgetConsole() {
	s.mu.Lock()
	s.console = nil
	s.mu.Unlock()
}

// TestPortalFormsBrowser drives every form of the portal in headless
// Chromium, on a screen 1280 px wide and on a phone's 390 px: each form
// is usable there (its fields shown, inside the screen, the page not
// scrolling sideways), a refusal is shown beside it with what was typed,
// and what it does shows on the page that follows. A secret or key is
// shown once with a copy button that copies it; a reload of that page
// shows the endpoints or keys without it and makes no second one.
func TestPortalFormsBrowser(t *testing.T) {
	for _, width := range []int{1280, 390} {
		t.Run(fmt.Sprint(width), func(t *testing.T) { portalForms(t, width) })
	}
}

func portalForms(t *testing.T, width int) {
	f := newFixture(t, fixtureOptions{})
	sd := f.seedData()
	f.startProcessor()
	s := newSession(t, f)
	if width < 1280 {
		s.narrow()
	}
	grantClipboard(t, s)
	s.open("/portal/login", `input[name="api_key"]`)
	s.do("sign in", chromedp.SendKeys(chromedp.CSS(`input[name="client_id"]`), sd.ClientID),
		chromedp.SendKeys(chromedp.CSS(`input[name="api_key"]`), sd.APIKey))
	s.submit(`form[action="/portal/login"] button`)

	// Upload: a file that is no CSV is refused beside the form; a CSV
	// leads to its upload's page, which follows it to its report.
	dir := t.TempDir()
	notes, feed := filepath.Join(dir, "notes.txt"), filepath.Join(dir, "browser-feed.csv")
	must(t, os.WriteFile(notes, []byte("not a feed"), 0o644))
	must(t, os.WriteFile(feed, []byte("store;ean;article_number;quantity;price\nS1;"+ean1+";SKU-1;4;19.99\nS2;"+ean2+";SKU-2;6;5.00\nS9;"+ean3+";SKU-3;1;1.00\n"), 0o644))
	s.open("/portal/uploads", "form.upload-form")
	s.checkUsable("form.upload-form", width)
	s.do("choose the notes", chromedp.SetUploadFiles(chromedp.CSS(`input[name="file"]`), []string{notes}))
	s.submitWant(`form.upload-form button`, http.StatusBadRequest)
	if got := s.text("#upload .error"); !strings.Contains(got, "notes.txt: The file name must end in .csv") {
		t.Errorf("the refused upload says %q", got)
	}
	s.checkUsable("form.upload-form", width)
	s.forgetConsole()
	s.do("choose the feed", chromedp.SetUploadFiles(chromedp.CSS(`input[name="file"]`), []string{feed}))
	s.submit(`form.upload-form button`)
	if p := eval[string](s, `location.pathname`); !strings.HasPrefix(p, "/portal/uploads/") {
		t.Fatalf("after the upload the browser is at %s", p)
	}
	s.waitJS("the upload is applied", `document.querySelector("#upload-status .status")?.dataset.status === "applied"`, 15*time.Second)
	s.do("the report", chromedp.WaitVisible(chromedp.CSS(".stats")))
	if got := s.text(".stats .good b"); got != "2" {
		t.Errorf("rows applied = %q, want 2", got)
	}
	s.screenshot(fmt.Sprintf("portal-upload-%d", width))

	// Register: a URL the API refuses comes back with the error and what
	// was typed; a good one shows its secret once, with a copy button.
	s.open("/portal/endpoints", "form.endpoint-form")
	s.checkUsable("form.endpoint-form", width)
	if got := strings.TrimSpace(s.text(`#register fieldset.other-events label`)); got != "Upload finished (stock_upload.finished)" {
		t.Errorf("the upload event's box is labelled %q", got)
	}
	s.do("type a bad URL", chromedp.SendKeys(chromedp.CSS(`#register input[name="url"]`), "ftp://hooks.example.com/x"),
		chromedp.Click(chromedp.CSS(`#register input[value="fulfilled"]`)),
		chromedp.Click(chromedp.CSS(`#register input[value="stock_upload.finished"]`)),
		chromedp.SendKeys(chromedp.CSS(`#register input[name="description"]`), "Warehouse system"))
	s.submitWant(`#register button[type="submit"]`, http.StatusUnprocessableEntity)
	if got := s.text("#register .error"); got != "url: the scheme must be http or https." {
		t.Errorf("the refused register says %q", got)
	}
	if got := eval[[]string](s, `[document.querySelector('#register input[name="url"]').value, document.querySelector('#register input[name="description"]').value,
		...[...document.querySelectorAll('#register input[name="states"]:checked')].map(c => c.value)]`); !slices.Equal(got, []string{"ftp://hooks.example.com/x", "Warehouse system", "fulfilled", "stock_upload.finished"}) {
		t.Errorf("the refused form holds %q", got)
	}
	s.checkUsable("form.endpoint-form", width)
	s.forgetConsole()
	s.do("fix the URL", chromedp.SetValue(chromedp.CSS(`#register input[name="url"]`), "https://hooks.example.com/warehouse/${eventId}"))
	s.submit(`#register button[type="submit"]`)
	secret := s.checkOnce("the new endpoint's secret", "/portal/endpoints")
	f.keep(secret)
	endpoints, err := f.services.Webhooks.Endpoints(s.ctx, sd.ClientID)
	must(t, err)
	ep := endpoints[len(endpoints)-1]
	if ep.URL != "https://hooks.example.com/warehouse/${eventId}" || ep.Description != "Warehouse system" ||
		!slices.Equal(ep.States, []storelink.OrderState{"fulfilled", storelink.EventUploadFinished}) {
		t.Errorf("the endpoint registered = %+v", ep)
	}
	s.screenshot(fmt.Sprintf("portal-secret-%d", width))
	s.do("reload", chromedp.Reload())
	s.do("the endpoints", chromedp.WaitVisible(chromedp.CSS("#register")))
	if eval[bool](s, `document.getElementById("once") !== null`) || strings.Contains(eval[string](s, `document.documentElement.outerHTML`), secret) {
		t.Error("the reloaded page shows the secret again")
	}
	if list, _ := f.services.Webhooks.Endpoints(s.ctx, sd.ClientID); len(list) != len(endpoints) {
		t.Errorf("the reload registered another endpoint: %d, want %d", len(list), len(endpoints))
	}

	// Change it: disable it and give it another description.
	card := `section[data-endpoint="` + ep.ID + `"]`
	s.submit(card + ` a.edit`)
	s.do("the change form", chromedp.WaitVisible(chromedp.CSS("#edit")))
	s.checkUsable("#edit", width)
	s.do("change it", chromedp.Click(chromedp.CSS(`#edit input[name="enabled"]`)),
		chromedp.SetValue(chromedp.CSS(`#edit input[name="description"]`), "Warehouse system (paused)"))
	s.submit(`#edit button[type="submit"]`)
	if got := s.text(".flash"); got != "The endpoint is changed." {
		t.Errorf("flash after the change = %q", got)
	}
	if got := s.text(card + " h2 .status"); got != "disabled" {
		t.Errorf("the changed endpoint is %q", got)
	}
	if got := s.text(card + " .description"); got != "Warehouse system (paused)" {
		t.Errorf("the changed description = %q", got)
	}

	// Rotate its secret with an hour's overlap: the new one is shown once,
	// and a reload neither shows it nor rotates again.
	s.checkUsable(card+" form.rotate-form", width)
	s.do("an hour's overlap", chromedp.SetValue(chromedp.CSS(card+` select[name="overlap"]`), "1h"))
	s.submit(card + ` form.rotate-form button`)
	rotated := s.checkOnce("the rotated secret", "/portal/endpoints")
	f.keep(rotated)
	if got := signingSecrets(t, f, sd.ClientID, ep.ID); len(got) != 2 || got[0] != rotated || got[1] != secret {
		t.Errorf("after the rotation the endpoint signs with %d secrets", len(got))
	}
	s.do("reload", chromedp.Reload())
	s.do("the endpoints", chromedp.WaitVisible(chromedp.CSS(card)))
	if eval[bool](s, `document.getElementById("once") !== null`) {
		t.Error("the reloaded page shows the rotated secret again")
	}
	if got := signingSecrets(t, f, sd.ClientID, ep.ID); got[0] != rotated {
		t.Error("the reload rotated the secret again")
	}

	// Recover the seed endpoint's failed deliveries since an hour ago: a
	// time the form cannot read is refused beside it.
	seedCard := `section[data-endpoint="` + sd.EndpointID + `"]`
	s.checkUsable(seedCard+" form.recover-form", width)
	s.do("no time", chromedp.SetValue(chromedp.CSS(seedCard+` input[name="since"]`), ""),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('`+seedCard+` input[name="since"]').required = false`))
	s.submitWant(seedCard+` form.recover-form button`, http.StatusBadRequest)
	if got := s.text(seedCard + " form.recover-form .error"); !strings.HasPrefix(got, "since is required") {
		t.Errorf("the refused recover says %q", got)
	}
	s.forgetConsole()
	s.do("an hour ago", chromedp.SetValue(chromedp.CSS(seedCard+` input[name="since"]`), time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04")))
	s.submit(seedCard + ` form.recover-form button`)
	if got := s.text(".flash"); !strings.HasPrefix(got, "Failed deliveries made pending again: 1.") {
		t.Errorf("flash after recover = %q", got)
	}
	checkDeliveryState(t, f, sd, storelink.DeliveryPending)

	// Delete the new endpoint, after the page that asks.
	s.submit(card + ` a.delete`)
	s.do("the delete page", chromedp.WaitVisible(chromedp.CSS("#delete")))
	s.checkUsable("#delete", width)
	s.submit(`#delete button`)
	if got := s.text(".flash"); !strings.HasPrefix(got, "The endpoint is deleted") {
		t.Errorf("flash after delete = %q", got)
	}
	if eval[bool](s, `document.querySelector('`+card+`') !== null`) {
		t.Error("the deleted endpoint is still listed")
	}

	// API keys: create one (shown once, copied), revoke it and the second,
	// and the last is refused with a message beside it.
	s.submit(`header.top nav a[href="/portal/api-keys"]`)
	s.do("the keys", chromedp.WaitVisible(chromedp.CSS("#create-key")))
	s.checkUsable("#create-key form", width)
	s.submit(`#create-key button`)
	key := s.checkOnce("the new key", "/portal/api-keys")
	f.keep(key)
	if got := apiStatus(t, f, sd.ClientID, key); got != http.StatusOK {
		t.Errorf("the new key at the API = %d", got)
	}
	s.do("reload", chromedp.Reload())
	s.do("the keys", chromedp.WaitVisible(chromedp.CSS("#create-key")))
	if eval[bool](s, `document.getElementById("once") !== null`) {
		t.Error("the reloaded keys page shows the key again")
	}
	keys, err := f.services.Partners.APIKeys(s.ctx, sd.ClientID)
	must(t, err)
	if len(keys) != 3 {
		t.Fatalf("%d keys after one create and a reload, want 3", len(keys))
	}
	// The key signed in with is revoked last: revoking it ends the session.
	// Keys made in one millisecond list in no set order, so it is found by
	// its prefix, not by its place.
	signedIn := slices.IndexFunc(keys, func(k storelink.APIKey) bool { return k.Prefix == storelink.KeyPrefix(sd.APIKey) })
	if signedIn < 0 {
		t.Fatalf("the key signed in with is not among %+v", keys)
	}
	for i, k := range keys {
		if i == signedIn {
			continue
		}
		sel := `article[data-key="` + k.ID + `"]`
		s.checkUsable(sel+" form", width)
		s.submit(sel + ` button`)
		if got := s.text(".flash"); !strings.HasPrefix(got, "The API key is revoked") {
			t.Errorf("flash after revoke = %q", got)
		}
	}
	last := `article[data-key="` + keys[signedIn].ID + `"]`
	s.submitWant(last+` button`, http.StatusConflict)
	if got := s.text(last + " .error"); !strings.Contains(got, "is the last key") {
		t.Errorf("revoking the last key says %q", got)
	}
	s.checkUsable(last+" form", width)
	s.forgetConsole()

	// Deliveries: filter by endpoint and status; the form keeps them.
	s.open("/portal/deliveries", "form.delivery-filters")
	s.checkUsable("form.delivery-filters", width)
	s.do("choose", chromedp.SetValue(chromedp.CSS(`select[name="endpoint_id"]`), sd.EndpointID),
		chromedp.SetValue(chromedp.CSS(`select[name="status"]`), "pending"),
		chromedp.SendKeys(chromedp.CSS(`input[name="order_number"]`), sd.OrderNumber))
	s.submit(`form.delivery-filters button`)
	if got := eval[string](s, `location.search`); got != "?endpoint_id="+sd.EndpointID+"&status=pending&order_number="+sd.OrderNumber+"&event_id=" {
		t.Errorf("the filtered page is at %s", got)
	}
	if got := eval[[]string](s, `[...document.querySelectorAll("article.delivery")].map(a => a.dataset.delivery)`); !slices.Equal(got, []string{sd.FailedDelivery}) {
		t.Errorf("the filtered deliveries = %v, want the recovered %s", got, sd.FailedDelivery)
	}
	if got := eval[[]string](s, `[...document.querySelectorAll("form.delivery-filters select, form.delivery-filters input")].map(e => e.value)`); !slices.Equal(got, []string{sd.EndpointID, "pending", sd.OrderNumber, ""}) {
		t.Errorf("the filter form holds %v", got)
	}
	s.checkUsable("form.delivery-filters", width)
	s.screenshot(fmt.Sprintf("portal-deliveries-filtered-%d", width))

	f.checkNoSecretLogged()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.console {
		t.Errorf("browser console: %s", m)
	}
}

// grantClipboard lets the pages of the fixture read and write the
// clipboard, as a user's click on "Allow" would.
func grantClipboard(t *testing.T, s *session) {
	t.Helper()
	ctx, cancel := s.limited(10 * time.Second)
	defer cancel()
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		_, err := chromedp.CallBrowser(ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
			Permission: &cdpbrowser.PermissionDescriptor{Name: name}, Setting: cdpbrowser.PermissionSettingGranted, Origin: s.f.URL,
			BrowserContextID: chromedp.FromContext(s.ctx).BrowserContextID,
		})
		must(t, err)
	}
}

// checkOnce checks the page the browser is on shows a secret once, with a
// copy button that copies it, and that its history entry is then the page
// then, and returns the secret.
func (s *session) checkOnce(what, then string) string {
	s.t.Helper()
	s.do(what, chromedp.WaitVisible(chromedp.CSS("#once button.copy")))
	value := eval[string](s, `document.getElementById("once-value").value`)
	if value == "" {
		s.t.Fatalf("%s: the page shows an empty secret", what)
	}
	s.checkUsable("#once", map[bool]int{true: 390, false: 1280}[eval[int](s, `innerWidth`) <= 390])
	s.do("copy", chromedp.Click(chromedp.CSS("#once button.copy")))
	s.waitJS("the copy button says it copied", `document.querySelector("#once button.copy").textContent === "Copied"`, 5*time.Second)
	if got := eval[string](s, `navigator.clipboard.readText()`); got != value {
		s.t.Errorf("%s: the clipboard holds %.8q…, want the secret shown", what, got)
	}
	if got := eval[string](s, `location.pathname + location.search`); got != then {
		s.t.Errorf("%s: the page's history entry is %s, want %s", what, got, then)
	}
	return value
}
