package service_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"storelink"
)

const (
	eanA = "4006381333931"
	eanB = "5901234123457"
)

// putStock puts stock rows in force through an upload, as the worker applies
// one.
func putStock(t *testing.T, db database, clientID string, rows ...storelink.StockRow) {
	t.Helper()
	ctx := context.Background()
	_, _, err := db.svc.Uploads.Accept(ctx, storelink.NewUpload{ClientID: clientID, FileName: "feed.csv", Body: storelink.ChunksOf([]byte("x")), SHA256: "00"},
		storelink.CapacityPolicy{Base: 1 << 30, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.svc.Uploads.Claim(ctx, "test", time.Minute)
	if err != nil || c == nil {
		t.Fatalf("claim of the feed: %v, %v", c, err)
	}
	_, err = db.svc.Uploads.Apply(ctx, c, func(_ map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
		for _, r := range rows {
			if err := put(r); err != nil {
				return storelink.FeedReport{}, err
			}
		}
		return storelink.FeedReport{RowsTotal: len(rows), RowsValid: len(rows), RowsApplied: len(rows)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func newOrder(clientID, number string, eans ...string) storelink.NewOrder {
	price := storelink.Money(1999)
	n := storelink.NewOrder{OrderNumber: number, ClientID: clientID}
	for _, ean := range eans {
		n.Items = append(n.Items, storelink.NewItem{EAN: ean, MarketplaceArticleNumber: "M-" + ean, ArticleNumber: "A-" + ean, Price: &price})
	}
	return n
}

// A unit an order holds is not free for the next order: with one unit at
// each of S1 and S2, two orders go to two stores and a third finds none;
// a fulfilled unit still holds its stock until a feed row counts the sale.
func TestOrdersReserveTheUnitsTheyRoute(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		ctx := context.Background()
		c := client(t, db)
		putStock(t, db, c.ID, storelink.StockRow{StoreID: "S1", EAN: eanA, ArticleNumber: "A", Quantity: 1, Price: 1999},
			storelink.StockRow{StoreID: "S2", EAN: eanA, ArticleNumber: "A", Quantity: 1, Price: 1999})
		first, err := db.svc.Orders.CreateOrder(ctx, newOrder(c.ID, "N-1", eanA))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.svc.Orders.FulfilOrder(ctx, first.ID, storelink.FulfilRequest{}); err != nil {
			t.Fatal(err)
		}
		second, err := db.svc.Orders.CreateOrder(ctx, newOrder(c.ID, "N-2", eanA))
		if err != nil {
			t.Fatal(err)
		}
		if second.StoreID == first.StoreID {
			t.Fatalf("second order at %s, where the first (fulfilled, not yet fed) holds the only unit", second.StoreID)
		}
		_, err = db.svc.Orders.CreateOrder(ctx, newOrder(c.ID, "N-3", eanA))
		if storelink.ErrorCode(err) != storelink.ECONFLICT {
			t.Fatalf("third order: %v, want ECONFLICT (no free unit)", err)
		}
	})
}

// A key brings back the order its first request made, unchanged, and no
// second order; the same key with another request is refused.
func TestIdempotencyKeyReplaysItsOrder(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		ctx := context.Background()
		c := client(t, db)
		putStock(t, db, c.ID, storelink.StockRow{StoreID: "S1", EAN: eanA, ArticleNumber: "A", Quantity: 5, Price: 1999})
		n := newOrder(c.ID, "N-1", eanA)
		n.IdempotencyKey = "key-1"
		first, err := db.svc.Orders.CreateOrder(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		again, err := db.svc.Orders.CreateOrder(ctx, n)
		if err != nil || again.ID != first.ID || !again.Replayed {
			t.Fatalf("the same request again = %+v, %v; want order %s replayed", again, err, first.ID)
		}
		other := newOrder(c.ID, "N-2", eanA)
		other.IdempotencyKey = "key-1"
		if _, err := db.svc.Orders.CreateOrder(ctx, other); err == nil {
			t.Fatal("another request with the key made an order")
		}
		list, err := db.svc.Orders.Orders(ctx, storelink.OrderFilter{ClientID: c.ID, Limit: 10})
		if err != nil || len(list) != 1 {
			t.Fatalf("orders = %d, %v; want the one", len(list), err)
		}
	})
}

// A page of orders carries each order's own items in their order.
func TestOrdersListedWithTheirItems(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		ctx := context.Background()
		c := client(t, db)
		putStock(t, db, c.ID, storelink.StockRow{StoreID: "S1", EAN: eanA, ArticleNumber: "A", Quantity: 50, Price: 1999},
			storelink.StockRow{StoreID: "S1", EAN: eanB, ArticleNumber: "B", Quantity: 50, Price: 999})
		want := map[string][]string{}
		for i, eans := range [][]string{{eanA}, {eanB, eanA, eanB}, {eanA, eanA}} {
			o, err := db.svc.Orders.CreateOrder(ctx, newOrder(c.ID, "N-"+string(rune('1'+i)), eans...))
			if err != nil {
				t.Fatal(err)
			}
			want[o.ID] = eans
		}
		list, err := db.svc.Orders.Orders(ctx, storelink.OrderFilter{ClientID: c.ID, Limit: 2})
		if err != nil || len(list) != 2 {
			t.Fatalf("first page = %d orders, %v; want 2", len(list), err)
		}
		next, err := db.svc.Orders.Orders(ctx, storelink.OrderFilter{ClientID: c.ID, Before: list[1].ID, Limit: 2})
		if err != nil || len(next) != 1 {
			t.Fatalf("next page = %d orders, %v; want 1", len(next), err)
		}
		for _, o := range append(list, next...) {
			var got []string
			for _, it := range o.Items {
				got = append(got, it.EAN)
			}
			if len(got) != len(want[o.ID]) {
				t.Fatalf("order %s listed with items %v, want %v", o.ID, got, want[o.ID])
			}
			for i := range got {
				if got[i] != want[o.ID][i] {
					t.Fatalf("order %s listed with items %v, want %v", o.ID, got, want[o.ID])
				}
			}
		}
	})
}

// A call whose context has ended begins no transaction: it fails with the
// context's error and writes nothing.
func TestOrderCallHonoursItsContext(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		c := client(t, db)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := db.svc.Orders.CreateOrder(ctx, newOrder(c.ID, "N-1", eanA)); !errors.Is(err, context.Canceled) {
			t.Fatalf("create with an ended context: %v, want context.Canceled", err)
		}
	})
}
