package dashboard_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"storelink"
)

// TestConsoleFormsBrowser drives every form of the operator's console in
// headless Chromium, on a screen 1280 px wide and on a phone's 390 px:
// each form is usable there (its fields shown, inside the screen, the page
// not scrolling sideways), a refusal is shown beside it with what was
// typed, and what it does shows on the page that follows. A new key or
// secret is shown once with a copy button that copies it; a reload of that
// page shows the page it belongs to without it.
func TestConsoleFormsBrowser(t *testing.T) {
	for _, width := range []int{1280, 390} {
		t.Run(fmt.Sprint(width), func(t *testing.T) { consoleForms(t, width) })
	}
}

func consoleForms(t *testing.T, width int) {
	f := newFixture(t, fixtureOptions{})
	f.seedData()
	s := newSession(t, f)
	if width < 1280 {
		s.narrow()
	}
	grantClipboard(t, s)
	s.open("/dashboard/login", `input[name="token"]`)
	s.do("type the token", chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), f.Token))
	s.submit(`form[action="/dashboard/login"] button`)

	// A partner: a name of spaces is refused beside the form; a name
	// creates it, chosen then in the client form.
	s.submit(`header.top nav a[href="/dashboard/partners"]`)
	s.do("the partners page", chromedp.WaitVisible(chromedp.CSS("#create-partner")))
	s.checkUsable("#create-partner form", width)
	s.do("a name of spaces", chromedp.SendKeys(chromedp.CSS(`#create-partner input[name="name"]`), "   "))
	s.submitWant(`#create-partner button`, http.StatusBadRequest)
	if got := s.text("#create-partner .error"); got != "name is required." {
		t.Errorf("the refused partner says %q", got)
	}
	s.checkUsable("#create-partner form", width)
	s.forgetConsole()
	s.do("a name", chromedp.SetValue(chromedp.CSS(`#create-partner input[name="name"]`), "Gamma Sports"))
	s.submit(`#create-partner button`)
	if got := s.text(".flash"); !strings.HasPrefix(got, "The partner is created") {
		t.Errorf("flash after creating the partner = %q", got)
	}
	if got := eval[string](s, `document.querySelector('#create-client select[name="partner_id"]').selectedOptions[0].textContent`); got != "Gamma Sports" {
		t.Errorf("the client form has %q chosen, want the new partner", got)
	}

	// A client of it: a currency that is none is refused beside the form
	// with what was typed; then its first key is shown once.
	s.checkUsable("#create-client form", width)
	s.do("a bad currency", chromedp.SendKeys(chromedp.CSS(`#create-client input[name="country_code"]`), "NL"),
		chromedp.SendKeys(chromedp.CSS(`#create-client input[name="currency"]`), "EU"))
	s.submitWant(`#create-client button`, http.StatusBadRequest)
	if got := s.text("#create-client .error"); !strings.HasPrefix(got, "currency must be an ISO 4217 code") {
		t.Errorf("the refused client says %q", got)
	}
	if got := eval[[]string](s, `[...document.querySelectorAll('#create-client input[type="text"], #create-client select')].map(e => e.selectedOptions ? e.selectedOptions[0].textContent : e.value)`); !slices.Equal(got, []string{"Gamma Sports", "NL", "EU"}) {
		t.Errorf("the refused client form holds %q", got)
	}
	s.checkUsable("#create-client form", width)
	s.forgetConsole()
	s.do("the currency", chromedp.SetValue(chromedp.CSS(`#create-client input[name="currency"]`), "EUR"))
	s.submit(`#create-client button`)
	s.do("the new client's link", chromedp.WaitVisible(chromedp.CSS("#new-client")))
	clientPage := eval[string](s, `document.getElementById("new-client").getAttribute("href")`)
	clientID := strings.TrimPrefix(clientPage, "/dashboard/clients/")
	key := s.checkOnce("the new client's key", clientPage)
	f.keep(key)
	if got := apiStatus(t, f, clientID, key); got != http.StatusOK {
		t.Errorf("the new client's key at the API = %d, want 200", got)
	}
	s.screenshot(fmt.Sprintf("console-client-key-%d", width))
	s.do("reload", chromedp.Reload())
	s.do("the client's page", chromedp.WaitVisible(chromedp.CSS("#add-store")))
	if eval[bool](s, `document.getElementById("once") !== null`) || strings.Contains(eval[string](s, `document.documentElement.outerHTML`), key) {
		t.Error("the reloaded page shows the key again")
	}

	// Stores: an id with a slash is refused beside the form with what was
	// typed; a store is added, then removed after the page that asks.
	s.checkUsable("#add-store", width)
	s.do("a store id with a slash", chromedp.SendKeys(chromedp.CSS(`#add-store input[name="store_id"]`), "S/1"),
		chromedp.SendKeys(chromedp.CSS(`#add-store input[name="name"]`), "Amsterdam"))
	s.submitWant(`#add-store button`, http.StatusBadRequest)
	if got := s.text("#add-store .error"); got != "store_id must not contain control characters or '/'." {
		t.Errorf("the refused store says %q", got)
	}
	if got := eval[[]string](s, `[...document.querySelectorAll('#add-store input[type="text"]')].map(e => e.value)`); !slices.Equal(got, []string{"S/1", "Amsterdam"}) {
		t.Errorf("the refused store form holds %q", got)
	}
	s.checkUsable("#add-store", width)
	s.forgetConsole()
	s.do("a good id", chromedp.SetValue(chromedp.CSS(`#add-store input[name="store_id"]`), "NL-1"))
	s.submit(`#add-store button`)
	if got := s.text(".flash"); !strings.HasPrefix(got, "The store is added") {
		t.Errorf("flash after adding the store = %q", got)
	}
	if got := s.text(`tr[data-store="NL-1"] td:nth-child(2)`); got != "Amsterdam" {
		t.Errorf("the store added is named %q", got)
	}
	s.submit(`tr[data-store="NL-1"] a.delete`)
	s.do("the page that asks", chromedp.WaitVisible(chromedp.CSS("#delete-store")))
	s.checkUsable("#delete-store", width)
	s.submit(`#delete-store button`)
	if got := s.text(".flash"); !strings.HasPrefix(got, "The store is removed") {
		t.Errorf("flash after removing the store = %q", got)
	}
	if eval[bool](s, `document.querySelector('tr[data-store="NL-1"]') !== null`) {
		t.Error("the removed store is still listed")
	}

	// Register an endpoint: a URL the API refuses comes back with the
	// error and what was typed; a good one shows its secret once.
	s.checkUsable("#register form", width)
	if got := strings.TrimSpace(s.text(`#register fieldset.other-events label`)); got != "Upload finished (stock_upload.finished)" {
		t.Errorf("the upload event's box is labelled %q", got)
	}
	s.do("type a bad URL", chromedp.SendKeys(chromedp.CSS(`#register input[name="url"]`), "ftp://hooks.example.com/x"),
		chromedp.Click(chromedp.CSS(`#register input[value="fulfilled"]`)),
		chromedp.Click(chromedp.CSS(`#register input[value="stock_upload.finished"]`)),
		chromedp.SendKeys(chromedp.CSS(`#register input[name="description"]`), "Shop system"))
	s.submitWant(`#register button[type="submit"]`, http.StatusUnprocessableEntity)
	if got := s.text("#register .error"); got != "url: the scheme must be http or https." {
		t.Errorf("the refused register says %q", got)
	}
	if got := eval[[]string](s, `[document.querySelector('#register input[name="url"]').value, document.querySelector('#register input[name="description"]').value,
		...[...document.querySelectorAll('#register input[name="states"]:checked')].map(c => c.value)]`); !slices.Equal(got, []string{"ftp://hooks.example.com/x", "Shop system", "fulfilled", "stock_upload.finished"}) {
		t.Errorf("the refused form holds %q", got)
	}
	s.checkUsable("#register form", width)
	s.forgetConsole()
	s.do("fix the URL", chromedp.SetValue(chromedp.CSS(`#register input[name="url"]`), "https://hooks.example.com/shop/${eventId}"))
	s.submit(`#register button[type="submit"]`)
	secret := s.checkOnce("the new endpoint's secret", clientPage)
	f.keep(secret)
	endpoints, err := f.services.Webhooks.Endpoints(s.ctx, clientID)
	must(t, err)
	if len(endpoints) != 1 || endpoints[0].URL != "https://hooks.example.com/shop/${eventId}" || endpoints[0].Description != "Shop system" ||
		!slices.Equal(endpoints[0].States, []storelink.OrderState{"fulfilled", storelink.EventUploadFinished}) {
		t.Fatalf("the endpoints after registering = %+v", endpoints)
	}
	ep := endpoints[0]
	s.do("reload", chromedp.Reload())
	s.do("the client's page", chromedp.WaitVisible(chromedp.CSS("#register")))
	if eval[bool](s, `document.getElementById("once") !== null`) {
		t.Error("the reloaded page shows the secret again")
	}

	// Disable it from the list, then change it on its form: enabled
	// again, another description, one more state.
	row := `tr[data-endpoint="` + ep.ID + `"]`
	s.checkUsable(row+` form`, width)
	s.submit(row + ` form button`)
	if got := s.text(".flash"); !strings.HasPrefix(got, "The endpoint is disabled") || s.text(row+" .status") != "disabled" {
		t.Errorf("after disabling: flash %q, status %q", got, s.text(row+" .status"))
	}
	s.submit(row + ` a.edit`)
	s.do("the change form", chromedp.WaitVisible(chromedp.CSS("#edit")))
	s.checkUsable("#edit", width)
	s.do("change it", chromedp.Click(chromedp.CSS(`#edit input[name="enabled"]`)), chromedp.Click(chromedp.CSS(`#edit input[value="returned"]`)),
		chromedp.SetValue(chromedp.CSS(`#edit input[name="description"]`), "Shop system (v2)"))
	s.submit(`#edit button[type="submit"]`)
	if got := s.text(".flash"); got != "The endpoint is changed." {
		t.Errorf("flash after the change = %q", got)
	}
	if got := s.text("#endpoint-state"); got != "enabled" {
		t.Errorf("the changed endpoint is %q", got)
	}
	if got := s.text("dd.description"); got != "Shop system (v2)" {
		t.Errorf("the changed description = %q", got)
	}

	// Rotate its secret: shown once; a reload neither shows it nor
	// rotates again.
	endpointPage := "/dashboard/endpoints/" + ep.ID
	s.checkUsable("#rotate", width)
	s.do("an hour's overlap", chromedp.SetValue(chromedp.CSS(`#rotate select[name="overlap"]`), "1h"))
	s.submit(`#rotate button`)
	rotated := s.checkOnce("the rotated secret", endpointPage)
	f.keep(rotated)
	if got := signingSecrets(t, f, clientID, ep.ID); len(got) != 2 || got[0] != rotated || got[1] != secret {
		t.Errorf("after the rotation the endpoint signs with %d secrets", len(got))
	}
	s.do("reload", chromedp.Reload())
	s.do("the endpoint's page", chromedp.WaitVisible(chromedp.CSS("#rotate")))
	if eval[bool](s, `document.getElementById("once") !== null`) || signingSecrets(t, f, clientID, ep.ID)[0] != rotated {
		t.Error("the reload showed or rotated the secret again")
	}

	// Delete it, the box ticked.
	s.checkUsable("#delete", width)
	s.do("tick the box", chromedp.Click(chromedp.CSS(`#delete input[name="confirm"]`)))
	s.submit(`#delete button`)
	if got := s.text(".flash"); !strings.HasPrefix(got, "The endpoint is deleted") || s.text("#endpoint-state") != "deleted" {
		t.Errorf("after deleting: flash %q, state %q", got, s.text("#endpoint-state"))
	}

	// API keys: create one (shown once), then revoke the first.
	s.open(clientPage, "#create-key")
	s.checkUsable("#create-key form", width)
	s.submit(`#create-key button`)
	second := s.checkOnce("the new key", clientPage)
	f.keep(second)
	if got := apiStatus(t, f, clientID, second); got != http.StatusOK {
		t.Errorf("the new key at the API = %d", got)
	}
	s.do("reload", chromedp.Reload())
	s.do("the client's page", chromedp.WaitVisible(chromedp.CSS("#create-key")))
	keys, err := f.services.Partners.APIKeys(s.ctx, clientID)
	must(t, err)
	if len(keys) != 2 || eval[bool](s, `document.getElementById("once") !== null`) {
		t.Fatalf("%d keys after one create and a reload, want 2, the key not shown again", len(keys))
	}
	first := `tr[data-key="` + keys[0].ID + `"]`
	s.checkUsable(first+" form", width)
	s.submit(first + ` button`)
	if got := s.text(".flash"); !strings.HasPrefix(got, "The API key is revoked") {
		t.Errorf("flash after revoke = %q", got)
	}
	if got := apiStatus(t, f, clientID, key); got != http.StatusUnauthorized {
		t.Errorf("the revoked key at the API = %d, want 401", got)
	}
	s.checkPage("the client's page")
	s.screenshot(fmt.Sprintf("console-client-%d", width))

	f.checkNoSecretLogged()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.console {
		t.Errorf("browser console: %s", m)
	}
}
