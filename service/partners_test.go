package service_test

import (
	"context"
	"testing"
	"time"

	"storelink"
)

// mustFailWith fails unless err carries the storelink error code.
func mustFailWith(t *testing.T, what string, err error, code string) {
	t.Helper()
	if got := storelink.ErrorCode(err); got != code {
		t.Fatalf("%s: error %v (code %q), want %s", what, err, got, code)
	}
}

// An API key opens its own client; a key of another client of the same
// partner is told apart (EFORBIDDEN); a key of another partner, a revoked
// key and a client that does not exist are all as good as no key.
func TestAuthenticateKeepsPartnersApart(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		ctx := context.Background()
		own := client(t, db)
		sibling, err := db.svc.Partners.CreateClient(ctx, own.PartnerID, "AT", "EUR")
		if err != nil {
			t.Fatal(err)
		}
		other, err := db.svc.Partners.CreatePartner(ctx, "Other")
		if err != nil {
			t.Fatal(err)
		}
		stranger, err := db.svc.Partners.CreateClient(ctx, other.ID, "DE", "EUR")
		if err != nil {
			t.Fatal(err)
		}
		c, err := db.svc.Partners.Authenticate(ctx, own.ID, own.APIKey)
		if err != nil || c.ID != own.ID || c.PartnerID != own.PartnerID || c.CountryCode != "DE" {
			t.Fatalf("Authenticate with the client's own key = %+v, %v; want the client", c, err)
		}
		_, err = db.svc.Partners.Authenticate(ctx, own.ID, sibling.APIKey)
		mustFailWith(t, "a key of another client of the partner", err, storelink.EFORBIDDEN)
		for _, c := range []struct{ what, clientID, key string }{
			{"another partner's key", own.ID, stranger.APIKey},
			{"no key", own.ID, ""},
			{"a key that is none", own.ID, "slk_not_a_key"},
			{"a client that does not exist", "no-such-client", own.APIKey},
		} {
			_, err := db.svc.Partners.Authenticate(ctx, c.clientID, c.key)
			mustFailWith(t, c.what, err, storelink.EUNAUTHORIZED)
		}
		second, err := db.svc.Partners.CreateAPIKey(ctx, own.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.svc.Partners.DeleteAPIKey(ctx, own.ID, second.KeyID); err != nil {
			t.Fatal(err)
		}
		_, err = db.svc.Partners.Authenticate(ctx, own.ID, second.APIKey)
		mustFailWith(t, "a revoked key", err, storelink.EUNAUTHORIZED)
		if _, err := db.svc.Partners.Authenticate(ctx, own.ID, own.APIKey); err != nil {
			t.Fatalf("the first key after another was revoked: %v", err)
		}
		mustFailWith(t, "revoking it again", db.svc.Partners.DeleteAPIKey(ctx, own.ID, second.KeyID), storelink.ENOTFOUND)
	})
}

// A partner has one client per country; the country and currency are
// read in upper case; a partner that does not exist has none.
func TestCreateClientOnePerCountry(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		ctx := context.Background()
		p, err := db.svc.Partners.CreatePartner(ctx, "Acme")
		if err != nil {
			t.Fatal(err)
		}
		c, err := db.svc.Partners.CreateClient(ctx, p.ID, " de ", "eur")
		if err != nil {
			t.Fatal(err)
		}
		if c.CountryCode != "DE" || c.Currency != "EUR" || c.APIKey == "" {
			t.Fatalf("client = %+v, want DE in EUR with a key", c)
		}
		_, err = db.svc.Partners.CreateClient(ctx, p.ID, "DE", "CHF")
		mustFailWith(t, "a second client for the country", err, storelink.ECONFLICT)
		_, err = db.svc.Partners.CreateClient(ctx, "no-such-partner", "FR", "EUR")
		mustFailWith(t, "a client of no partner", err, storelink.ENOTFOUND)
		_, err = db.svc.Partners.CreateClient(ctx, p.ID, "Germany", "EUR")
		mustFailWith(t, "a country that is no code", err, storelink.EINVALID)
		list, err := db.svc.Partners.ListClients(ctx, storelink.ClientFilter{PartnerID: p.ID, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Clients) != 1 || list.Clients[0].ID != c.ID || list.Clients[0].PartnerName != "Acme" {
			t.Fatalf("clients of the partner = %+v, want the one made", list.Clients)
		}
	})
}

// A store is created once and renamed after; deleting it deletes its
// stock with it, and a store that is gone cannot be deleted again.
func TestDeleteStoreDeletesItsStock(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		ctx := context.Background()
		c := client(t, db)
		st, created, err := db.svc.Partners.PutStore(ctx, c.ID, "S1", "Renamed")
		if err != nil || created || st.Name != "Renamed" {
			t.Fatalf("PutStore of an existing store = %+v, %v, %v; want it renamed, not created", st, created, err)
		}
		applyStockRows(t, db, c.ID,
			storelink.StockRow{StoreID: "S1", EAN: "4006381333931", Quantity: 3, ArticleNumber: "A-1", Price: 1999},
			storelink.StockRow{StoreID: "S2", EAN: "4006381333931", Quantity: 5, ArticleNumber: "A-1", Price: 1999})
		if err := db.svc.Partners.DeleteStore(ctx, c.ID, "S1"); err != nil {
			t.Fatal(err)
		}
		stock, _, err := db.svc.Uploads.Stock(ctx, c.ID, storelink.StockFilter{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(stock) != 1 || stock[0].StoreID != "S2" {
			t.Fatalf("stock after deleting S1 = %+v, want S2's row only", stock)
		}
		stores, err := db.svc.Partners.Stores(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(stores) != 1 || stores[0].ID != "S2" {
			t.Fatalf("stores after deleting S1 = %+v, want S2", stores)
		}
		mustFailWith(t, "deleting S1 again", db.svc.Partners.DeleteStore(ctx, c.ID, "S1"), storelink.ENOTFOUND)
		_, _, err = db.svc.Partners.PutStore(ctx, "no-such-client", "S3", "Nowhere")
		mustFailWith(t, "a store of no client", err, storelink.ENOTFOUND)
	})
}

// A session is active until it expires; a partner's only while the key it
// was opened with is one of its client's; an ended one is not.
func TestSessionsLastWhileTheirKey(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		ctx := context.Background()
		c := client(t, db)
		key, err := db.svc.Partners.CreateAPIKey(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		expires := db.clock.now().Add(time.Hour)
		operator, partner := []byte("operator's session"), []byte("partner's session")
		for _, n := range []storelink.NewSession{
			{IDHash: operator, Expires: expires},
			{IDHash: partner, ClientID: c.ID, APIKey: key.APIKey, Expires: expires},
		} {
			if err := db.svc.Partners.CreateSession(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
		err = db.svc.Partners.CreateSession(ctx, storelink.NewSession{IDHash: []byte("keyless"), ClientID: c.ID, Expires: expires})
		mustFailWith(t, "a partner's session without its key", err, storelink.EINVALID)
		session := func(id []byte) (string, bool) {
			t.Helper()
			who, ok, err := db.svc.Partners.Session(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return who, ok
		}
		if who, ok := session(operator); !ok || who != "" {
			t.Fatalf("operator's session = %q, %v; want active, nobody's client", who, ok)
		}
		if who, ok := session(partner); !ok || who != c.ID {
			t.Fatalf("partner's session = %q, %v; want active, the client's", who, ok)
		}
		if err := db.svc.Partners.DeleteAPIKey(ctx, c.ID, key.KeyID); err != nil {
			t.Fatal(err)
		}
		if _, ok := session(partner); ok {
			t.Fatal("a partner's session is active after its key was revoked")
		}
		if err := db.svc.Partners.DeleteSession(ctx, operator); err != nil {
			t.Fatal(err)
		}
		if _, ok := session(operator); ok {
			t.Fatal("a deleted session is active")
		}
		later := []byte("later session")
		if err := db.svc.Partners.CreateSession(ctx, storelink.NewSession{IDHash: later, Expires: expires.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		db.clock.advance(time.Hour)
		if _, ok := session(later); !ok {
			t.Fatal("a session is not active before it expires")
		}
		db.clock.advance(time.Hour)
		if _, ok := session(later); ok {
			t.Fatal("a session is active at its expiry")
		}
	})
}

// applyStockRows applies stock rows of the client through an upload, as
// the worker applies one.
func applyStockRows(t testing.TB, db database, clientID string, rows ...storelink.StockRow) {
	t.Helper()
	ctx := context.Background()
	_, _, err := db.svc.Uploads.Accept(ctx, storelink.NewUpload{ClientID: clientID, FileName: "feed.csv", Body: storelink.ChunksOf([]byte("x")), SHA256: "00"},
		storelink.CapacityPolicy{Base: 1 << 30, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.svc.Uploads.Claim(ctx, "test", time.Minute)
	if err != nil || c == nil {
		t.Fatalf("claim of the feed = %+v, %v", c, err)
	}
	u, err := db.svc.Uploads.Apply(ctx, c, func(_ map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
		for _, r := range rows {
			if err := put(r); err != nil {
				return storelink.FeedReport{}, err
			}
		}
		return storelink.FeedReport{RowsTotal: len(rows), RowsValid: len(rows), RowsApplied: len(rows)}, nil
	})
	if err != nil || u.Status != storelink.UploadApplied {
		t.Fatalf("feed = %+v, %v; want applied", u, err)
	}
}
