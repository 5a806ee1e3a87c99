package storelink_test

import (
	"testing"
	"time"

	"storelink"
)

// An endpoint's version is the same however the database gives its times
// back (another zone, finer than the millisecond answers show), and
// changes with each field it shows.
func TestEndpointVersion(t *testing.T) {
	at := time.Date(2026, 11, 21, 9, 0, 0, 123_000_000, time.UTC)
	base := func() storelink.Endpoint {
		return storelink.Endpoint{ID: "e1", ClientID: "c1", URL: "https://partner.example/hooks", Enabled: true,
			CreatedAt: at, UpdatedAt: at}
	}
	e := base()
	v := e.Version()
	same := base()
	same.CreatedAt = at.In(time.FixedZone("CET", 3600)).Add(456 * time.Microsecond)
	same.States = []storelink.OrderState{} // none, as nil
	if got := same.Version(); got != v {
		t.Errorf("the same endpoint in another zone, with microseconds and an empty states list: version %s, want %s", got, v)
	}
	later := at.Add(time.Millisecond)
	for name, change := range map[string]func(*storelink.Endpoint){
		"url":                   func(e *storelink.Endpoint) { e.URL += "/x" },
		"states":                func(e *storelink.Endpoint) { e.States = []storelink.OrderState{storelink.StateFulfilled} },
		"enabled":               func(e *storelink.Endpoint) { e.Enabled = false },
		"description":           func(e *storelink.Endpoint) { e.Description = "ERP" },
		"has_api_key":           func(e *storelink.Endpoint) { e.HasAPIKey = true },
		"disabled_reason":       func(e *storelink.Endpoint) { e.DisabledReason = "410 Gone" },
		"previous_secret_until": func(e *storelink.Endpoint) { e.PreviousSecretUntil = &later },
		"deleted_at":            func(e *storelink.Endpoint) { e.DeletedAt = &later },
		"updated_at":            func(e *storelink.Endpoint) { e.UpdatedAt = later },
	} {
		c := base()
		change(&c)
		if c.Version() == v {
			t.Errorf("a change of %s leaves the version %s", name, v)
		}
	}
	d := storelink.EndpointDetail{Endpoint: base(), Stats: storelink.EndpointStats{Since: later, Attempts: 3}}
	if got := d.Version(); got != v {
		t.Errorf("the endpoint with stats: version %s, want the endpoint's %s", got, v)
	}
}

// A client's version changes with its stores, keys and endpoints, not with
// its capacity nor with when a key was last used.
func TestClientVersion(t *testing.T) {
	at := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	base := func() storelink.ClientDetail {
		return storelink.ClientDetail{
			Client:  storelink.Client{ID: "c1", PartnerID: "p1", CountryCode: "DE", Currency: "EUR", CreatedAt: at},
			Stores:  []storelink.Store{{ClientID: "c1", ID: "S1", Name: "Berlin", CreatedAt: at}},
			APIKeys: []storelink.APIKey{{ID: "k1", ClientID: "c1", Prefix: "slk_3c70", CreatedAt: at}},
		}
	}
	c := base()
	v := c.Version()
	used := base()
	used.APIKeys[0].LastUsedAt = &at
	used.Capacity = storelink.Capacity{BytesPerWindow: 100, BytesLeft: 50}
	if got := used.Version(); got != v {
		t.Errorf("after a key was used and capacity taken: version %s, want %s", got, v)
	}
	for name, change := range map[string]func(*storelink.ClientDetail){
		"a store renamed": func(c *storelink.ClientDetail) { c.Stores[0].Name = "Berlin Mitte" },
		"a store added":   func(c *storelink.ClientDetail) { c.Stores = append(c.Stores, storelink.Store{ID: "S2"}) },
		"a key added":     func(c *storelink.ClientDetail) { c.APIKeys = append(c.APIKeys, storelink.APIKey{ID: "k2"}) },
		"a key deleted":   func(c *storelink.ClientDetail) { c.APIKeys = nil },
		"an endpoint":     func(c *storelink.ClientDetail) { c.Endpoints = []storelink.Endpoint{{ID: "e1"}} },
	} {
		c := base()
		change(&c)
		if c.Version() == v {
			t.Errorf("%s leaves the version %s", name, v)
		}
	}
}

// If-Match holds for "*", for a list that names the version, and for no
// condition at all; a list without it, or of weak tags only (no versions),
// is EPRECONDITION.
func TestIfMatchCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		m    *storelink.IfMatch
		ok   bool
	}{
		{"none", nil, true},
		{"*", &storelink.IfMatch{Any: true}, true},
		{"the version", &storelink.IfMatch{Versions: []string{"a", "v1"}}, true},
		{"another version", &storelink.IfMatch{Versions: []string{"v0"}}, false},
		{"weak tags only", &storelink.IfMatch{}, false},
	} {
		err := c.m.Check("endpoint", "v1")
		if (err == nil) != c.ok || err != nil && storelink.ErrorCode(err) != storelink.EPRECONDITION {
			t.Errorf("%s: Check = %v, want ok %v", c.name, err, c.ok)
		}
	}
}

// An upload's error file is named after its file.
func TestErrorFileName(t *testing.T) {
	for name, want := range map[string]string{
		"stock.csv": "stock-errors.csv", "STOCK.CSV": "STOCK-errors.csv", "Bestand Köln.csv": "Bestand Köln-errors.csv",
		"a.b.csv": "a.b-errors.csv",
	} {
		if got := (storelink.Upload{FileName: name}).ErrorFileName(); got != want {
			t.Errorf("ErrorFileName of %q = %q, want %q", name, got, want)
		}
	}
}
