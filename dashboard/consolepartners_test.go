package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"storelink"
)

// TestConsolePartners: the partners page lists the partners and creates
// one (the token needed, an empty name refused beside the form); the new
// partner is then chosen in the client form.
func TestConsolePartners(t *testing.T) {
	eachDatabase(t, fixtureOptions{}, func(t *testing.T, f *fixture) {
		s := f.seedData()
		b := f.browser()
		b.login()
		page := b.page("/dashboard/partners")
		acme := partnerOf(t, f, s.ClientID)
		wantContains(t, "the partners page", page, "Acme Retail", "Beta Shoes", `data-partner="`+acme+`"`, `href="/dashboard/?q=`+acme+`"`)
		token := formValue(t, page, "/dashboard/partners", "csrf")

		if resp, _ := b.post("/dashboard/partners", url.Values{"name": {"Gamma Sports"}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("create without the token = %d, want 403", resp.StatusCode)
		}
		resp, body := b.post("/dashboard/partners", url.Values{"csrf": {token}, "name": {"  "}})
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `<p class="error" role="alert">name is required.`) {
			t.Errorf("create with no name = %d, want 400 saying so beside the form", resp.StatusCode)
		}
		resp, body = b.post("/dashboard/partners", url.Values{"csrf": {token}, "name": {"Gamma\x07Sports"}})
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `name="name" value="Gamma`) {
			t.Errorf("create with a control character = %d, want 422 with the name kept", resp.StatusCode)
		}
		resp, _ = b.post("/dashboard/partners", url.Values{"csrf": {token}, "name": {"Gamma Sports"}})
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/dashboard/partners?") {
			t.Fatalf("create = %d %q", resp.StatusCode, loc)
		}
		page = b.page(loc)
		list, err := f.services.Partners.ListPartners(context.Background(), storelink.PartnerFilter{Q: "gamma", Limit: 10})
		must(t, err)
		if len(list.Partners) != 1 || list.Partners[0].Name != "Gamma Sports" {
			t.Fatalf("partners named gamma = %+v, want the one created", list.Partners)
		}
		wantContains(t, "the page after creating", page, "The partner is created", `<option value="`+list.Partners[0].ID+`" selected>Gamma Sports</option>`)
	})
}

// TestConsoleCreateClient: the client form creates a client of the chosen
// partner and shows its first API key once, which opens the API; a refusal
// (a country the partner has a client in, a currency that is none) is
// shown beside the form with what was chosen and typed, and makes no
// client.
func TestConsoleCreateClient(t *testing.T) {
	eachDatabase(t, fixtureOptions{}, func(t *testing.T, f *fixture) {
		s := f.seedData()
		b := f.browser()
		b.login()
		token := formValue(t, b.page("/dashboard/partners"), "/dashboard/clients", "csrf")
		acme := partnerOf(t, f, s.ClientID)
		form := func(country, currency string) url.Values {
			return url.Values{"csrf": {token}, "partner_id": {acme}, "country_code": {country}, "currency": {currency}}
		}
		clients := func() int {
			p, err := f.services.Partners.ListClients(context.Background(), storelink.ClientFilter{PartnerID: acme, Limit: 10})
			must(t, err)
			return len(p.Clients)
		}
		before := clients()
		if resp, _ := b.post("/dashboard/clients", url.Values{"partner_id": {acme}, "country_code": {"FR"}, "currency": {"EUR"}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("create without the token = %d, want 403", resp.StatusCode)
		}
		for _, c := range []struct {
			name, country, currency string
			status                  int
			says                    string
		}{
			{"a country it has", "DE", "EUR", http.StatusConflict, "already has a client for country DE"},
			{"a currency that is none", "FR", "EURO", http.StatusBadRequest, "currency must be an ISO 4217 code"},
		} {
			resp, body := b.post("/dashboard/clients", form(c.country, c.currency))
			if resp.StatusCode != c.status || !strings.Contains(body, `<p class="error" role="alert">`) || !strings.Contains(body, c.says) {
				t.Errorf("create with %s = %d, want %d saying %q beside the form", c.name, resp.StatusCode, c.status, c.says)
			}
			wantContains(t, "the refused form of "+c.name, body, `name="country_code" value="`+c.country+`"`, `name="currency" value="`+c.currency+`"`,
				`<option value="`+acme+`" selected>`)
			if onceRE.MatchString(body) {
				t.Errorf("the refused form of %s shows a key", c.name)
			}
		}
		if n := clients(); n != before {
			t.Fatalf("refused forms created %d clients", n-before)
		}

		resp, body := b.post("/dashboard/clients", form("fr", "eur"))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("Location") != "" {
			t.Fatalf("create = %d: %s", resp.StatusCode, body)
		}
		key := shownOnce(t, "the page after creating a client", body)
		f.keep(key)
		p, err := f.services.Partners.ListClients(context.Background(), storelink.ClientFilter{PartnerID: acme, Q: "fr", Limit: 10})
		must(t, err)
		if len(p.Clients) != 1 || p.Clients[0].CountryCode != "FR" || p.Clients[0].Currency != "EUR" || clients() != before+1 {
			t.Fatalf("clients of the partner in FR = %+v", p.Clients)
		}
		id := p.Clients[0].ID
		wantContains(t, "the page after creating a client", body, `data-then="/dashboard/clients/`+id+`"`, `href="/dashboard/clients/`+id+`"`, id)
		if got := apiStatus(t, f, id, key); got != http.StatusOK {
			t.Errorf("the new client's key at the API = %d, want 200", got)
		}
		b.page("/dashboard/clients/" + id)
		f.checkNoSecretLogged()
	})
}
