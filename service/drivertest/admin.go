package drivertest

import (
	"context"
	"errors"
	"time"

	"storelink"
	"storelink/service"
)

func testPartnerAndClientRows(e *env) {
	cancelledBeginFails(e, "Partners", func(ctx context.Context) error {
		tx, err := e.d.Partners.Begin(ctx)
		if err == nil {
			_ = tx.Rollback(context.Background())
		}
		return err
	})
	made := e.tick()
	for _, name := range []string{"b", "B", "a"} {
		must(e.t, e.d.Partners.InsertPartner(e.ctx, &storelink.Partner{ID: storelink.NewID(e.tick()), Name: name, CreatedAt: made}))
	}
	n, err := e.d.Partners.PartnerCount(e.ctx)
	must(e.t, err)
	ps, err := e.d.Partners.Partners(e.ctx)
	must(e.t, err)
	if n != 4 || len(ps) != 4 || ps[0].Name != "Acme" || ps[1].Name != "B" || ps[2].Name != "a" || ps[3].Name != "b" {
		e.t.Fatalf("PartnerCount = %d, Partners = %+v, want 4 by name bytewise", n, ps)
	}
	if !ps[3].CreatedAt.Equal(made) {
		e.t.Fatalf("partner created at %s, want %s", ps[3].CreatedAt, made)
	}
	partner := ps[1].ID
	c := &storelink.Client{ID: storelink.NewID(e.tick()), PartnerID: partner, CountryCode: "AT", Currency: "EUR", CreatedAt: e.at}
	e.inPartnerTx(func(tx service.PartnerTx) {
		ok, err := tx.PartnerExists(e.ctx, partner)
		must(e.t, err)
		missing, err := tx.PartnerExists(e.ctx, "nope")
		must(e.t, err)
		if !ok || missing {
			e.t.Fatalf("PartnerExists = %v, %v for a partner and none, want true, false", ok, missing)
		}
		inserted, err := tx.InsertClient(e.ctx, c)
		must(e.t, err)
		again := *c
		again.ID = storelink.NewID(e.tick())
		second, err := tx.InsertClient(e.ctx, &again)
		must(e.t, err)
		if !inserted || second {
			e.t.Fatalf("InsertClient = %v, then %v for the same partner and country, want true, false", inserted, second)
		}
		ok, err = tx.ClientExists(e.ctx, c.ID)
		must(e.t, err)
		if !ok {
			e.t.Fatal("ClientExists in the transaction that wrote it = false")
		}
	})
	got, err := e.d.Partners.GetClient(e.ctx, c.ID)
	must(e.t, err)
	if *got != *c {
		e.t.Fatalf("GetClient = %+v, want %+v", got, c)
	}
	_, err = e.d.Partners.GetClient(e.ctx, "nope")
	wantNotFound(e.t, "GetClient of no client", err)
	if ok, err := e.d.Partners.ClientExists(e.ctx, "nope"); err != nil || ok {
		e.t.Fatalf("ClientExists of no client = %v, %v", ok, err)
	}
	cs, err := e.d.Partners.Clients(e.ctx)
	must(e.t, err)
	if len(cs) != 2 || cs[0].PartnerID > cs[1].PartnerID {
		e.t.Fatalf("Clients = %+v, want both by partner", cs)
	}
}

func testKeyRows(e *env) {
	p, err := e.seed.Partners.CreatePartner(e.ctx, "Other")
	must(e.t, err)
	stranger, err := e.seed.Partners.CreateClient(e.ctx, p.ID, "DE", "EUR")
	must(e.t, err)
	sibling, err := e.seed.Partners.CreateClient(e.ctx, e.client.PartnerID, "AT", "EUR")
	must(e.t, err)
	at := e.tick()
	key := func(id, clientID, hash string) storelink.APIKey {
		k := storelink.APIKey{ID: id, ClientID: clientID, Prefix: "sl_" + id[:4], CreatedAt: at}
		e.inPartnerTx(func(tx service.PartnerTx) { must(e.t, tx.InsertAPIKey(e.ctx, k, hash)) })
		return k
	}
	k2 := key("k2-"+storelink.NewID(at), e.client.ID, "hash-own")
	k1 := key("k1-"+storelink.NewID(at), e.client.ID, "hash-own-2")
	key("k3-"+storelink.NewID(at), sibling.ID, "hash-sibling")
	key("k4-"+storelink.NewID(at), stranger.ID, "hash-stranger")

	keys, err := e.d.Partners.APIKeys(e.ctx, e.client.ID)
	must(e.t, err)
	// The client's first key, made with it on the seeder's clock, is
	// younger than both.
	if len(keys) != 3 || keys[0] != k1 || keys[1] != k2 {
		e.t.Fatalf("APIKeys = %+v, want %+v and %+v by time and id, then the first key", keys, k1, k2)
	}
	for _, c := range []struct {
		hash, want, partner string
	}{{"hash-own", e.client.ID, e.client.PartnerID}, {"hash-sibling", sibling.ID, e.client.PartnerID}, {"hash-stranger", stranger.ID, p.ID}} {
		m, err := e.d.Partners.KeyClient(e.ctx, e.client.ID, c.hash)
		must(e.t, err)
		got := m.Client
		if m.HolderClientID != c.want || m.HolderPartnerID != c.partner || got.ID != e.client.ID || got.PartnerID != e.client.PartnerID ||
			!got.CreatedAt.Equal(e.client.CreatedAt) {
			e.t.Fatalf("KeyClient(%s) = %+v, want the client, %s and %s", c.hash, m, c.want, c.partner)
		}
	}
	for _, c := range []struct{ client, hash string }{{e.client.ID, "hash-none"}, {"nope", "hash-own"}} {
		_, err := e.d.Partners.KeyClient(e.ctx, c.client, c.hash)
		wantNotFound(e.t, "KeyClient("+c.client+", "+c.hash+")", err)
	}
	ok, err := e.d.Partners.DeleteAPIKey(e.ctx, e.client.ID, k1.ID)
	must(e.t, err)
	again, err := e.d.Partners.DeleteAPIKey(e.ctx, e.client.ID, k1.ID)
	must(e.t, err)
	if !ok || again {
		e.t.Fatalf("DeleteAPIKey = %v, then %v, want true, false", ok, again)
	}
	if _, err := e.d.Partners.KeyClient(e.ctx, e.client.ID, "hash-own-2"); err == nil {
		e.t.Fatal("a deleted key still finds its client")
	}
}

func testStoreRows(e *env) {
	first := e.tick()
	s := &storelink.Store{ClientID: e.client.ID, ID: "S0", Name: "New", CreatedAt: first}
	created, err := e.d.Partners.PutStore(e.ctx, s)
	must(e.t, err)
	renamed := &storelink.Store{ClientID: e.client.ID, ID: "S0", Name: "Renamed", CreatedAt: e.tick()}
	again, err := e.d.Partners.PutStore(e.ctx, renamed)
	must(e.t, err)
	if !created || again || !renamed.CreatedAt.Equal(first) {
		e.t.Fatalf("PutStore = %v, then %v at %s, want true, then false with the first creation time %s", created, again, renamed.CreatedAt, first)
	}
	stores, err := e.d.Partners.Stores(e.ctx, e.client.ID)
	must(e.t, err)
	if len(stores) != 3 || stores[0] != *renamed || stores[1].ID != "S1" {
		e.t.Fatalf("Stores = %+v, want %+v first, by id", stores, renamed)
	}
	e.feed(storelink.StockRow{StoreID: "S1", EAN: eanA, Quantity: 3, ArticleNumber: "A-1", Price: 1999})
	e.inPartnerTx(func(tx service.PartnerTx) {
		ok, err := tx.DeleteStore(e.ctx, e.client.ID, "S1")
		must(e.t, err)
		missing, err := tx.DeleteStore(e.ctx, e.client.ID, "S9")
		must(e.t, err)
		if !ok || missing {
			e.t.Fatalf("DeleteStore = %v, %v for a store and none, want true, false", ok, missing)
		}
		must(e.t, tx.DeleteStoreStock(e.ctx, e.client.ID, "S1"))
	})
	if stock := e.stockInForce(eanA); len(stock["S1"]) != 0 {
		e.t.Fatalf("stock after DeleteStoreStock = %v, want none at S1", stock)
	}
}

func testSessionRows(e *env) {
	idA, idB, idC, idD := []byte("session a"), []byte("session b"), []byte("session c"), []byte("session d")
	key, err := e.seed.Partners.CreateAPIKey(e.ctx, e.client.ID)
	must(e.t, err)
	t0 := e.tick()
	e.inPartnerTx(func(tx service.PartnerTx) {
		must(e.t, tx.InsertSession(e.ctx, service.SessionRow{IDHash: idA, Expires: t0.Add(time.Hour)}))
		must(e.t, tx.InsertSession(e.ctx, service.SessionRow{IDHash: idB, Expires: t0.Add(2 * time.Hour)}))
		// A partner's session, and one whose key hash is no key of its
		// client (the client's first key is another).
		must(e.t, tx.InsertSession(e.ctx, service.SessionRow{IDHash: idC, ClientID: e.client.ID,
			KeyHash: storelink.HashAPIKey(key.APIKey), Expires: t0.Add(time.Hour)}))
		must(e.t, tx.InsertSession(e.ctx, service.SessionRow{IDHash: idD, ClientID: e.client.ID,
			KeyHash: storelink.HashAPIKey("slk_not_a_key"), Expires: t0.Add(time.Hour)}))
	})
	session := func(id []byte, at time.Time) (string, bool) {
		e.t.Helper()
		client, err := e.d.Partners.GetSession(e.ctx, id, at)
		if errors.Is(err, service.ErrNotFound) {
			return "", false
		}
		must(e.t, err)
		return client, true
	}
	if c, ok := session(idA, t0); !ok || c != "" {
		e.t.Fatalf("GetSession(operator's) = %q, %v; want \"\", true", c, ok)
	}
	if _, ok := session(idA, t0.Add(time.Hour)); ok {
		e.t.Fatal("GetSession: a session is active at its expiry")
	}
	if _, ok := session([]byte("none"), t0); ok {
		e.t.Fatal("GetSession: an unknown session is active")
	}
	if c, ok := session(idC, t0); !ok || c != e.client.ID {
		e.t.Fatalf("GetSession(partner's) = %q, %v; want the client, true", c, ok)
	}
	if _, ok := session(idD, t0); ok {
		e.t.Fatal("GetSession: a partner's session whose key hash is no key of its client is active")
	}
	if ok, err := e.d.Partners.DeleteAPIKey(e.ctx, e.client.ID, key.KeyID); err != nil || !ok {
		e.t.Fatalf("DeleteAPIKey = %v, %v", ok, err)
	}
	if _, ok := session(idC, t0); ok {
		e.t.Fatal("GetSession: a partner's session is active after its key was deleted")
	}
	e.inPartnerTx(func(tx service.PartnerTx) { must(e.t, tx.DeleteExpiredSessions(e.ctx, t0.Add(time.Hour))) })
	if _, ok := session(idA, t0); ok {
		e.t.Fatal("DeleteExpiredSessions: the session expired at that time is kept")
	}
	if _, ok := session(idB, t0); !ok {
		e.t.Fatal("DeleteExpiredSessions: a session not yet expired is gone")
	}
	must(e.t, e.d.Partners.DeleteSession(e.ctx, idB))
	must(e.t, e.d.Partners.DeleteSession(e.ctx, idB))
	if _, ok := session(idB, t0); ok {
		e.t.Fatal("DeleteSession kept the session")
	}
}

func testSealedRows(e *env) {
	cancelledBeginFails(e, "SecretKeys", func(ctx context.Context) error {
		tx, err := e.d.SecretKeys.Begin(ctx)
		if err == nil {
			_ = tx.Rollback(context.Background())
		}
		return err
	})
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	ep, err := e.seed.Webhooks.CreateEndpoint(e.ctx, e.client.ID, storelink.NewEndpoint{URL: "https://a.test/", APIKey: "key"}, secret)
	must(e.t, err)
	_, err = e.seed.Webhooks.RotateSecret(e.ctx, "", ep.ID, storelink.SecretRotation{Secret: "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=", Overlap: time.Hour})
	must(e.t, err)
	bare, err := e.seed.Webhooks.CreateEndpoint(e.ctx, e.client.ID, storelink.NewEndpoint{URL: "https://b.test/"}, secret)
	must(e.t, err)
	// The seeder seals only while no other key's check value is recorded.
	check, err := e.d.SecretKeys.SecretKeyCheck(e.ctx)
	must(e.t, err)
	first, err := e.d.SecretKeys.RecordSecretKeyCheck(e.ctx, "check-a")
	must(e.t, err)
	second, err := e.d.SecretKeys.RecordSecretKeyCheck(e.ctx, "check-b")
	must(e.t, err)
	if check != "" || first != "check-a" || second != "check-a" {
		e.t.Fatalf("check values %q, %q, %q, want none, then the first recorded twice", check, first, second)
	}
	eps, err := e.d.SecretKeys.SealedEndpoints(e.ctx)
	must(e.t, err)
	if len(eps) != 2 || eps[0].ID > eps[1].ID {
		e.t.Fatalf("SealedEndpoints = %+v, want both endpoints by id", eps)
	}
	for _, s := range eps {
		withKey := s.ID == ep.ID
		if s.Secret == "" || (s.APIKey != "") != withKey || (s.PreviousSecret != "") != withKey || (s.PreviousUntil != nil) != withKey {
			e.t.Fatalf("sealed values %+v, want a secret, and an api key and previous secret with its end only for %s (not %s)", s, ep.ID, bare.ID)
		}
	}
	resealed := make([]service.SealedEndpoint, len(eps))
	for i, s := range eps {
		resealed[i] = service.SealedEndpoint{ID: s.ID, APIKey: s.APIKey + "!", Secret: s.Secret + "!", PreviousUntil: s.PreviousUntil}
	}
	inAreaTx(e, e.d.SecretKeys.Begin, func(tx service.SecretKeyTx) {
		must(e.t, tx.LockSealed(e.ctx))
		got, err := tx.SealedEndpoints(e.ctx)
		must(e.t, err)
		check, err := tx.SecretKeyCheck(e.ctx)
		must(e.t, err)
		if len(got) != 2 || check != "check-a" {
			e.t.Fatalf("in the transaction: %d endpoints, check %q", len(got), check)
		}
		must(e.t, tx.ResealEndpoints(e.ctx, resealed, "check-c"))
	})
	after, err := e.d.SecretKeys.SealedEndpoints(e.ctx)
	must(e.t, err)
	for i, s := range after {
		w := resealed[i]
		if s.ID != w.ID || s.APIKey != w.APIKey || s.Secret != w.Secret || s.PreviousSecret != "" ||
			(s.PreviousUntil == nil) != (w.PreviousUntil == nil) {
			e.t.Fatalf("after ResealEndpoints %+v, want %+v", s, w)
		}
	}
	if check, err := e.d.SecretKeys.SecretKeyCheck(e.ctx); err != nil || check != "check-c" {
		e.t.Fatalf("check value after ResealEndpoints = %q, %v, want check-c", check, err)
	}
}

// inPartnerTx runs fn in a transaction of the partners' driver and commits
// it.
func (e *env) inPartnerTx(fn func(tx service.PartnerTx)) {
	e.t.Helper()
	inAreaTx(e, e.d.Partners.Begin, fn)
}

// inAreaTx runs fn in a transaction that begin starts and commits it; the
// transaction is rolled back when fn fails the case.
func inAreaTx[T interface {
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}](e *env, begin func(context.Context) (T, error), fn func(tx T)) {
	e.t.Helper()
	tx, err := begin(e.ctx)
	must(e.t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	fn(tx)
	must(e.t, tx.Commit(e.ctx))
}

// cancelledBeginFails fails unless begin, given a context that has ended,
// returns the context's error rather than a transaction.
func cancelledBeginFails(e *env, what string, begin func(ctx context.Context) error) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if err := begin(ctx); !errors.Is(err, context.Canceled) {
		e.t.Fatalf("%s.Begin with a cancelled context = %v, want context.Canceled", what, err)
	}
}
