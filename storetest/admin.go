package storetest

import (
	"crypto/sha256"
	"slices"
	"sync"
	"time"

	"storelink"
)

func testPartnersAndClients(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	_, err := s.Partners.CreatePartner(ctx, "  ")
	wantCode(t, err, storelink.EINVALID)
	// Text no store could hold alike (NUL, bytes that are not UTF-8) or
	// that no name holds (control characters) is refused before the store.
	for _, bad := range []string{"A\x00B", "A\xffB", "A\x01B", "A\nB", "A\u0085B"} {
		_, err = s.Partners.CreatePartner(ctx, bad)
		wantCode(t, err, storelink.EUNPROCESSABLE)
	}

	p, err := s.Partners.CreatePartner(ctx, "Beta")
	must(t, err)
	if p.ID == "" || p.Name != "Beta" {
		t.Fatalf("partner = %+v", p)
	}
	c, err := s.Partners.CreateClient(ctx, p.ID, "at", "eur")
	must(t, err)
	if c.CountryCode != "AT" || c.Currency != "EUR" || c.PartnerID != p.ID || c.APIKey == "" || c.KeyID == "" {
		t.Fatalf("client = %+v", c)
	}
	// The new key's id is the one the client's keys are listed and revoked by.
	if cd, err := s.Partners.Client(ctx, c.ID); err != nil || len(cd.APIKeys) != 1 || cd.APIKeys[0].ID != c.KeyID {
		t.Fatalf("client %s: keys %+v (%v), want the one key %s its creation named", c.ID, cd, err, c.KeyID)
	}
	_, err = s.Partners.CreateClient(ctx, p.ID, "AT", "EUR")
	wantCode(t, err, storelink.ECONFLICT)
	_, err = s.Partners.CreateClient(ctx, p.ID, "Austria", "EUR")
	wantCode(t, err, storelink.EINVALID)
	_, err = s.Partners.CreateClient(ctx, p.ID, "CH", "Franc")
	wantCode(t, err, storelink.EINVALID)
	_, err = s.Partners.CreateClient(ctx, "no-such-partner", "CH", "CHF")
	wantCode(t, err, storelink.ENOTFOUND)
	// The same partner in another country is another client with its own key.
	ch, err := s.Partners.CreateClient(ctx, p.ID, "CH", "CHF")
	must(t, err)
	if ch.ID == c.ID || ch.APIKey == c.APIKey {
		t.Fatal("a second country must get its own client id and key")
	}

	d, err := s.Partners.Client(ctx, e.client.ID)
	must(t, err)
	if len(d.Stores) != 2 || d.Stores[0].ID != "S1" || d.Stores[1].ID != "S2" || len(d.APIKeys) != 1 {
		t.Fatalf("client detail = %+v", d)
	}
	if d.APIKeys[0].Prefix == "" || len(d.APIKeys[0].Prefix) >= len(e.client.APIKey) {
		t.Fatalf("key prefix %q must identify the key without revealing it", d.APIKeys[0].Prefix)
	}
	_, err = s.Partners.Client(ctx, "nope")
	wantCode(t, err, storelink.ENOTFOUND)
	n, err := s.Partners.PartnerCount(ctx)
	must(t, err)
	if n != 2 {
		t.Fatalf("PartnerCount = %d, want 2", n)
	}
}

func testAuthentication(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	id, key := e.client.ID, e.client.APIKey
	c, err := s.Partners.Authenticate(ctx, id, key)
	must(t, err)
	if c.ID != id {
		t.Fatalf("authenticated as %s, want %s", c.ID, id)
	}
	_, err = s.Partners.Authenticate(ctx, id, "")
	wantCode(t, err, storelink.EUNAUTHORIZED)
	_, err = s.Partners.Authenticate(ctx, id, key+"x")
	wantCode(t, err, storelink.EUNAUTHORIZED)
	_, err = s.Partners.Authenticate(ctx, "unknown-client", key)
	wantCode(t, err, storelink.EUNAUTHORIZED)

	// The same partner's client for another country: the key is valid,
	// for another client.
	other, err := s.Partners.CreateClient(ctx, e.client.PartnerID, "FR", "EUR")
	must(t, err)
	_, err = s.Partners.Authenticate(ctx, other.ID, key)
	wantCode(t, err, storelink.EFORBIDDEN)

	// Rotation: a second key works alongside the first until that is deleted.
	k2, err := s.Partners.CreateAPIKey(ctx, id)
	must(t, err)
	_, err = s.Partners.Authenticate(ctx, id, k2.APIKey)
	must(t, err)
	_, err = s.Partners.Authenticate(ctx, id, key)
	must(t, err)
	d, err := s.Partners.Client(ctx, id)
	must(t, err)
	first := d.APIKeys[0].ID
	if first == k2.KeyID {
		first = d.APIKeys[1].ID
	}
	must(t, s.Partners.DeleteAPIKey(ctx, id, first))
	_, err = s.Partners.Authenticate(ctx, id, key)
	wantCode(t, err, storelink.EUNAUTHORIZED)
	_, err = s.Partners.Authenticate(ctx, id, k2.APIKey)
	must(t, err)
	wantCode(t, s.Partners.DeleteAPIKey(ctx, id, first), storelink.ENOTFOUND)
	wantCode(t, s.Partners.DeleteAPIKey(ctx, other.ID, k2.KeyID), storelink.ENOTFOUND)
	_, err = s.Partners.CreateAPIKey(ctx, "nope")
	wantCode(t, err, storelink.ENOTFOUND)

	// A client holds at most MaxAPIKeys keys, and cannot revoke its last.
	for range storelink.MaxAPIKeys - 1 {
		_, err := s.Partners.CreateAPIKey(ctx, id)
		must(t, err)
	}
	_, err = s.Partners.CreateAPIKey(ctx, id)
	wantCode(t, err, storelink.ECONFLICT)
	keys, err := s.Partners.APIKeys(ctx, id)
	must(t, err)
	if len(keys) != storelink.MaxAPIKeys || !slices.ContainsFunc(keys, func(k storelink.APIKey) bool { return k.ID == k2.KeyID }) {
		t.Fatalf("keys = %+v; want %d, %s among them", keys, storelink.MaxAPIKeys, k2.KeyID)
	}
	wantCode(t, s.Partners.RevokeOwnAPIKey(ctx, other.ID, keys[0].ID), storelink.ENOTFOUND)
	for _, k := range keys[:len(keys)-1] {
		must(t, s.Partners.RevokeOwnAPIKey(ctx, id, k.ID))
	}
	last := keys[len(keys)-1].ID
	wantCode(t, s.Partners.RevokeOwnAPIKey(ctx, id, last), storelink.ECONFLICT)
	if keys, err := s.Partners.APIKeys(ctx, id); err != nil || len(keys) != 1 || keys[0].ID != last {
		t.Fatalf("after revoking all but the last, keys = %+v, %v; want %s alone", keys, err, last)
	}
	wantCode(t, s.Partners.RevokeOwnAPIKey(ctx, "nope", last), storelink.ENOTFOUND)
}

func testAPIKeyRace(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	have, err := s.Partners.APIKeys(ctx, id)
	must(t, err)
	const racers = 8
	var wg sync.WaitGroup
	errs := make(chan error, racers)
	for range racers {
		wg.Go(func() {
			_, err := s.Partners.CreateAPIKey(ctx, id)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	made := 0
	for err := range errs {
		switch storelink.ErrorCode(err) {
		case "":
			made++
		case storelink.ECONFLICT:
		default:
			t.Fatalf("CreateAPIKey racing: %v", err)
		}
	}
	keys, err := s.Partners.APIKeys(ctx, id)
	must(t, err)
	if want := storelink.MaxAPIKeys - len(have); made != want || len(keys) != storelink.MaxAPIKeys {
		t.Fatalf("%d racers made %d keys, the client holds %d; want %d made, %d held", racers, made, len(keys), want, storelink.MaxAPIKeys)
	}
}

func testStores(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	st, created, err := s.Partners.PutStore(ctx, id, "S3", "Third")
	must(t, err)
	if !created || st.ID != "S3" || st.Name != "Third" {
		t.Fatalf("PutStore = %+v, %v", st, created)
	}
	st, created, err = s.Partners.PutStore(ctx, id, "S3", "Renamed")
	must(t, err)
	if created || st.Name != "Renamed" {
		t.Fatalf("second PutStore = %+v, %v; want a rename", st, created)
	}
	for _, bad := range []string{"", " S4", "S/4", "S\x014", "S\x004", "S\xff4", "S\t4", "S\u00854"} {
		_, _, err := s.Partners.PutStore(ctx, id, bad, "x")
		wantCode(t, err, storelink.EINVALID)
	}
	for _, bad := range []string{"Third\x00", "Third\xff", "Thi\rrd"} {
		_, _, err := s.Partners.PutStore(ctx, id, "S3", bad)
		wantCode(t, err, storelink.EUNPROCESSABLE)
	}
	if st, _, err := s.Partners.PutStore(ctx, id, "S3", "Renamed\tagain"); err != nil || st.Name != "Renamed\tagain" {
		t.Fatalf("PutStore with a tab in the name = %+v, %v; want it kept", st, err)
	}
	_, _, err = s.Partners.PutStore(ctx, "nope", "S9", "x")
	wantCode(t, err, storelink.ENOTFOUND)
	must(t, s.Partners.DeleteStore(ctx, id, "S3"))
	wantCode(t, s.Partners.DeleteStore(ctx, id, "S3"), storelink.ENOTFOUND)
	list, err := s.Partners.Stores(ctx, id)
	must(t, err)
	if len(list) != 2 {
		t.Fatalf("stores = %+v, want S1 and S2", list)
	}
}

func testPartnerAndClientListing(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	// The suite's env made partner "Acme" with one client in DE.
	zed, err := s.Partners.CreatePartner(ctx, "Zed")
	must(t, err)
	beta, err := s.Partners.CreatePartner(ctx, "Beta")
	must(t, err)
	zedFR, err := s.Partners.CreateClient(ctx, zed.ID, "FR", "EUR")
	must(t, err)
	zedAT, err := s.Partners.CreateClient(ctx, zed.ID, "AT", "EUR")
	must(t, err)

	partners, err := s.Partners.Partners(ctx)
	must(t, err)
	var names []string
	for _, p := range partners {
		names = append(names, p.Name)
	}
	if len(partners) != 3 || names[0] != "Acme" || names[1] != "Beta" || names[2] != "Zed" || partners[1].ID != beta.ID {
		t.Fatalf("Partners = %+v, want Acme, Beta, Zed by name", partners)
	}
	if partners[2].CreatedAt.IsZero() {
		t.Fatalf("partner without created_at: %+v", partners[2])
	}

	clients, err := s.Partners.Clients(ctx)
	must(t, err)
	if len(clients) != 3 {
		t.Fatalf("Clients = %+v, want 3", clients)
	}
	byID := map[string]int{}
	for i, c := range clients {
		byID[c.ID] = i
		if i > 0 {
			prev := clients[i-1]
			if prev.PartnerID > c.PartnerID || prev.PartnerID == c.PartnerID && prev.CountryCode >= c.CountryCode {
				t.Fatalf("Clients not ordered by partner and country: %+v", clients)
			}
		}
	}
	if i, ok := byID[zedAT.ID]; !ok || clients[i].CountryCode != "AT" || clients[i].Currency != "EUR" || clients[i].PartnerID != zed.ID {
		t.Fatalf("Clients = %+v, want %s (AT of Zed)", clients, zedAT.ID)
	}
	if byID[zedAT.ID] > byID[zedFR.ID] {
		t.Fatalf("Clients: AT must come before FR within a partner: %+v", clients)
	}
	if _, ok := byID[e.client.ID]; !ok {
		t.Fatalf("Clients = %+v, want the env's client %s", clients, e.client.ID)
	}
}

// testAuthenticationAcrossPartners: a key used on another partner's client
// gets exactly the error of an unknown client or a wrong key, so that it
// tells nothing about which client ids exist or whose they are.
func testAuthenticationAcrossPartners(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	key := e.client.APIKey
	p, err := s.Partners.CreatePartner(ctx, "Other")
	must(t, err)
	foreign, err := s.Partners.CreateClient(ctx, p.ID, "FR", "EUR")
	must(t, err)
	// The other partner's own client of the same country as e.client.
	foreignDE, err := s.Partners.CreateClient(ctx, p.ID, "DE", "EUR")
	must(t, err)

	_, unknown := s.Partners.Authenticate(ctx, "unknown-client", key)
	_, wrongKey := s.Partners.Authenticate(ctx, e.client.ID, key+"x")
	wantCode(t, unknown, storelink.EUNAUTHORIZED)
	for name, err := range map[string]error{
		"wrong key":                           wrongKey,
		"another partner's client":            authErr(s.Partners.Authenticate(ctx, foreign.ID, key)),
		"another partner's, same country":     authErr(s.Partners.Authenticate(ctx, foreignDE.ID, key)),
		"the other partner's key on ours":     authErr(s.Partners.Authenticate(ctx, e.client.ID, foreign.APIKey)),
		"the other partner's key, unknown id": authErr(s.Partners.Authenticate(ctx, "unknown-client", foreign.APIKey)),
	} {
		if asError(err) == nil || *asError(err) != *asError(unknown) {
			t.Errorf("%s: %v, want exactly %v", name, err, unknown)
		}
	}
	// Within one partner, a key of the one country on the other is 403.
	_, err = s.Partners.Authenticate(ctx, foreign.ID, foreignDE.APIKey)
	wantCode(t, err, storelink.EFORBIDDEN)
	_, err = s.Partners.Authenticate(ctx, foreignDE.ID, foreignDE.APIKey)
	must(t, err)
}

func authErr(_ *storelink.Client, err error) error { return err }

// testSessions: a session is active from its creation until it expires or
// is deleted, and deleting it again is no error; a partner's session is its
// client's, needs the key it was opened with, and ends when that key is
// deleted.
func testSessions(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	a, b := sha256.Sum256([]byte("session a")), sha256.Sum256([]byte("session b"))
	session := func(id [32]byte) (string, bool) {
		t.Helper()
		client, ok, err := s.Partners.Session(ctx, id[:])
		must(t, err)
		return client, ok
	}
	active := func(id [32]byte) bool {
		t.Helper()
		_, ok := session(id)
		return ok
	}
	operator := func(id [32]byte, expires time.Time) storelink.NewSession {
		return storelink.NewSession{IDHash: id[:], Expires: expires}
	}
	if active(a) {
		t.Fatal("a session that was never created is active")
	}
	must(t, s.Partners.CreateSession(ctx, operator(a, e.clock.Now().Add(time.Hour))))
	must(t, s.Partners.CreateSession(ctx, operator(b, e.clock.Now().Add(2*time.Hour))))
	if !active(a) || !active(b) {
		t.Fatal("new sessions are not active")
	}
	if client, _ := session(a); client != "" {
		t.Fatalf("the operator's session is of client %q", client)
	}
	must(t, s.Partners.DeleteSession(ctx, a[:]))
	if active(a) || !active(b) {
		t.Fatalf("after deleting a: a active %v, b active %v; want false, true", active(a), active(b))
	}
	must(t, s.Partners.DeleteSession(ctx, a[:]))

	// b expires with the clock; a later login's clean-up removes it, and
	// a new session lives on.
	e.clock.Advance(2 * time.Hour)
	if active(b) {
		t.Fatal("an expired session is active")
	}
	c := sha256.Sum256([]byte("session c"))
	must(t, s.Partners.CreateSession(ctx, operator(c, e.clock.Now().Add(time.Hour))))
	if !active(c) || active(b) {
		t.Fatal("after a new login: c must be active, b not")
	}
	// A session id can be recorded only once.
	if err := s.Partners.CreateSession(ctx, operator(c, e.clock.Now().Add(time.Hour))); err == nil {
		t.Fatal("creating the same session twice succeeded")
	}

	// A partner's session, opened with its second key, and one with the
	// first: deleting the second key ends the first session only.
	key, err := s.Partners.CreateAPIKey(ctx, e.client.ID)
	must(t, err)
	p1, p2 := sha256.Sum256([]byte("partner 1")), sha256.Sum256([]byte("partner 2"))
	must(t, s.Partners.CreateSession(ctx, storelink.NewSession{IDHash: p1[:], ClientID: e.client.ID, APIKey: key.APIKey, Expires: e.clock.Now().Add(time.Hour)}))
	must(t, s.Partners.CreateSession(ctx, storelink.NewSession{IDHash: p2[:], ClientID: e.client.ID, APIKey: e.client.APIKey, Expires: e.clock.Now().Add(time.Hour)}))
	for _, id := range [][32]byte{p1, p2} {
		if client, ok := session(id); !ok || client != e.client.ID {
			t.Fatalf("a partner's session = %q, %v; want its client, active", client, ok)
		}
	}
	err = s.Partners.CreateSession(ctx, storelink.NewSession{IDHash: a[:], ClientID: e.client.ID, Expires: e.clock.Now().Add(time.Hour)})
	wantCode(t, err, storelink.EINVALID)
	must(t, s.Partners.DeleteAPIKey(ctx, e.client.ID, key.KeyID))
	if active(p1) || !active(p2) {
		t.Fatalf("after deleting the key: its session active %v, the other %v; want false, true", active(p1), active(p2))
	}
}
