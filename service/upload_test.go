package service_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"storelink"
)

// anyCapacity lets every upload in.
var anyCapacity = storelink.CapacityPolicy{Base: 1 << 30, Window: time.Hour}

// accept stores an upload of the client with body, a millisecond after the
// previous one, so that their order is their acceptance order.
func accept(t *testing.T, db database, clientID, body string) *storelink.Upload {
	t.Helper()
	db.clock.advance(time.Millisecond)
	u, _, err := db.svc.Uploads.Accept(context.Background(),
		storelink.NewUpload{ClientID: clientID, FileName: "feed.csv", Body: storelink.ChunksOf([]byte(body)), SHA256: "00"}, anyCapacity)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// claimBatch claims for owner within limit, failing unless the claims are
// of want, in acceptance order, each with its body and attempts.
func claimBatch(t *testing.T, db database, owner string, limit storelink.BatchLimit, attempts int, want ...*storelink.Upload) []*storelink.Claim {
	t.Helper()
	claims, err := db.svc.Uploads.ClaimBatch(context.Background(), owner, time.Minute, limit)
	if err != nil {
		t.Fatal(err)
	}
	got, wanted := []string{}, []string{}
	for _, c := range claims {
		got = append(got, c.ID)
		if c.Owner != owner || c.Status != storelink.UploadProcessing || c.Attempts != attempts || c.Body.Len() != c.SizeBytes {
			t.Errorf("claim %+v with a body of %d bytes; want %s's, attempt %d", c.Upload, c.Body.Len(), owner, attempts)
		}
	}
	for _, u := range want {
		wanted = append(wanted, u.ID)
	}
	if !reflect.DeepEqual(got, wanted) {
		t.Fatalf("%s claimed %v within %+v, want %v", owner, got, limit, wanted)
	}
	return claims
}

// rowsOf is a feed apply that puts rows, all valid.
func rowsOf(rs ...storelink.StockRow) storelink.FeedApply {
	return func(_ map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
		for _, r := range rs {
			if err := put(r); err != nil {
				return storelink.FeedReport{}, err
			}
		}
		return storelink.FeedReport{RowsTotal: len(rs), RowsValid: len(rs), RowsApplied: len(rs)}, nil
	}
}

// feed accepts, claims and applies rows for the client, and returns the
// upload as applied.
func feed(t *testing.T, db database, clientID string, rs ...storelink.StockRow) *storelink.Upload {
	t.Helper()
	ctx := context.Background()
	accept(t, db, clientID, "x")
	c, err := db.svc.Uploads.Claim(ctx, "feeder", time.Minute)
	if err != nil || c == nil {
		t.Fatalf("claim of the feed = %v, %v", c, err)
	}
	u, err := db.svc.Uploads.Apply(ctx, c, rowsOf(rs...))
	if err != nil || u.Status != storelink.UploadApplied {
		t.Fatalf("feed = %+v, %v; want applied", u, err)
	}
	return u
}

var anyBatch = storelink.BatchLimit{Uploads: 100, Bytes: 1 << 20}

// A claim takes the oldest upload that can be claimed and, client by
// client, the next ones that can go with it, within its count; never an
// upload behind its client's upload under a live lease.
func TestClaimBatchTakesClientByClient(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		a, b := client(t, db).ID, client(t, db).ID
		a1, b1, a2 := accept(t, db, a, "a1"), accept(t, db, b, "b1"), accept(t, db, a, "a2")
		accept(t, db, b, "b2")
		claimBatch(t, db, "w1", storelink.BatchLimit{Uploads: 3, Bytes: 1 << 20}, 1, a1, b1, a2)
		claimBatch(t, db, "w2", anyBatch, 0) // b2 waits behind b1, held by w1
	})
}

// A claim takes the first upload whatever its size, and the next ones while
// their files fit in the bytes of its limit, the first's included.
func TestClaimBatchWithinBytes(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		a := client(t, db).ID
		big, small, more := accept(t, db, a, "0123456789"), accept(t, db, a, "ab"), accept(t, db, a, "cd")
		claimBatch(t, db, "w1", storelink.BatchLimit{Uploads: 10, Bytes: 4}, 1, big)
		claimBatch(t, db, "w1", storelink.BatchLimit{Uploads: 10, Bytes: 1 << 20}, 0)
		db.clock.advance(2 * time.Minute) // big's lease runs out: it is claimed alone
		c := claimBatch(t, db, "w2", anyBatch, 2, big)
		if _, err := db.svc.Uploads.Apply(context.Background(), c[0], rowsOf()); err != nil {
			t.Fatal(err)
		}
		claimBatch(t, db, "w3", storelink.BatchLimit{Uploads: 10, Bytes: 4}, 1, small, more)
	})
}

// An upload claimed before is claimed alone, and an interrupted one waits
// for its backoff (none after its first interruption, then
// storelink.InterruptedBackoff's Base) before it is claimed again, holding
// back its client's later uploads meanwhile.
func TestClaimedBeforeAloneAfterItsBackoff(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		a := client(t, db).ID
		a1, a2 := accept(t, db, a, "a1"), accept(t, db, a, "a2")
		claimBatch(t, db, "w1", anyBatch, 1, a1, a2)
		db.clock.advance(time.Minute + time.Millisecond) // the lease ran out: one interruption
		claimBatch(t, db, "w2", anyBatch, 2, a1)
		db.clock.advance(time.Minute + storelink.InterruptedBackoff.Base/2) // two: not yet
		claimBatch(t, db, "w3", anyBatch, 0)
		db.clock.advance(storelink.InterruptedBackoff.Base)
		claimBatch(t, db, "w3", anyBatch, 3, a1)
	})
}

// A feed row applied after a sale ends the sold unit's reservation at its
// store and EAN: the feed's quantity no longer holds the unit. A unit still
// assigned keeps its reservation.
func TestFeedEndsSoldReservations(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		ctx := context.Background()
		c := client(t, db)
		const ean, other = "4006381333931", "5901234123457"
		feed(t, db, c.ID, storelink.StockRow{StoreID: "S1", EAN: ean, ArticleNumber: "A", Quantity: 5, Price: 100},
			storelink.StockRow{StoreID: "S1", EAN: other, ArticleNumber: "A", Quantity: 5, Price: 100})
		sold, err := db.svc.Orders.CreateOrder(ctx, storelink.NewOrder{OrderNumber: "1", ClientID: c.ID,
			Items: []storelink.NewItem{{EAN: ean, MarketplaceArticleNumber: "M1"}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.svc.Orders.CreateOrder(ctx, storelink.NewOrder{OrderNumber: "2", ClientID: c.ID,
			Items: []storelink.NewItem{{EAN: other, MarketplaceArticleNumber: "M2"}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.svc.Orders.FulfilOrder(ctx, sold.ID, storelink.FulfilRequest{}); err != nil {
			t.Fatal(err)
		}
		reserved := func() map[string]int {
			rows, _, err := db.svc.Uploads.Stock(ctx, c.ID, storelink.StockFilter{StoreID: "S1", Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]int{}
			for _, r := range rows {
				out[r.EAN] = r.Reserved
			}
			return out
		}
		if got := reserved(); got[ean] != 1 || got[other] != 1 {
			t.Fatalf("reserved before the feed = %v, want one unit of each", got)
		}
		u := feed(t, db, c.ID, storelink.StockRow{StoreID: "S1", EAN: ean, ArticleNumber: "A", Quantity: 4, Price: 100},
			storelink.StockRow{StoreID: "S1", EAN: other, ArticleNumber: "A", Quantity: 5, Price: 100})
		if got := reserved(); got[ean] != 0 || got[other] != 1 {
			t.Fatalf("reserved after the feed = %v, want the sold unit's ended, the assigned one's kept", got)
		}
		if u.RowsUnchanged != 1 {
			t.Errorf("rows unchanged = %d, want 1 (the row that holds what it held)", u.RowsUnchanged)
		}
	})
}

// Backlog counts, for a client, the unfinished uploads up to its first
// waiting one; for all, every unfinished upload; QueueDepth likewise.
func TestBacklogCountsAhead(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		ctx := context.Background()
		a, b := client(t, db).ID, client(t, db).ID
		a1 := accept(t, db, a, "a1")
		accept(t, db, a, "a2")
		b1 := accept(t, db, b, "b1")
		claimBatch(t, db, "w1", storelink.BatchLimit{Uploads: 1}, 1, a1)
		for _, c := range []struct {
			client string
			want   storelink.Backlog
		}{
			{a, storelink.Backlog{Waiting: 1, Ahead: 2}},
			{b, storelink.Backlog{Waiting: 1, Ahead: 3, Oldest: b1.ReceivedAt}},
			{"", storelink.Backlog{Waiting: 2, Ahead: 3}},
		} {
			got, err := db.svc.Uploads.Backlog(ctx, c.client)
			if err != nil {
				t.Fatal(err)
			}
			if got.Waiting != c.want.Waiting || got.Ahead != c.want.Ahead || (!c.want.Oldest.IsZero() && !got.Oldest.Equal(c.want.Oldest)) {
				t.Errorf("Backlog(%q) = %+v, want %+v", c.client, got, c.want)
			}
		}
		if n, err := db.svc.Uploads.QueueDepth(ctx); err != nil || n != 3 {
			t.Errorf("QueueDepth = %d, %v; want 3", n, err)
		}
		if got, err := db.svc.Uploads.Backlog(ctx, "no-uploads"); err != nil || got.Waiting != 0 || got.Ahead != 0 {
			t.Errorf("Backlog of a client without uploads = %+v, %v", got, err)
		}
	})
}
