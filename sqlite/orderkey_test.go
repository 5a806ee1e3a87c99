package sqlite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"storelink"
	"storelink/sqlite"
)

// Each call that remembers an idempotency key deletes up to KeySweep
// expired ones, so expired keys do not outlive the calls that use keys by
// long; live keys are never deleted.
func TestOrderKeysSwept(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	lite := sqlite.OpenFixture(t, func() time.Time { return now })
	db := lite.Services()
	p, err := db.Partners.CreatePartner(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.Partners.CreateClient(ctx, p.ID, "DE", "EUR")
	if err != nil {
		t.Fatal(err)
	}
	price := storelink.Money(100)
	order := func(key string) {
		t.Helper()
		_, err := db.Orders.CreateWarehouseOrder(ctx, storelink.NewOrder{OrderNumber: key, ClientID: c.ID, IdempotencyKey: key,
			Items: []storelink.NewItem{{EAN: "4006381333931", MarketplaceArticleNumber: "M", ArticleNumber: "A", Price: &price}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	keys := func() int {
		t.Helper()
		rows, err := lite.TestAccess().Query(ctx, `SELECT count(*) AS n FROM order_keys`)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		fmt.Sscan(rows[0]["n"], &n)
		return n
	}
	for i := range 10 {
		order(fmt.Sprintf("old-%d", i))
	}
	now = now.Add(storelink.IdempotencyKeyTTL)
	for i, want := range []int{10 - storelink.KeySweep + 1, 10 - 2*storelink.KeySweep + 2, 3, 4} {
		order(fmt.Sprintf("new-%d", i))
		if got := keys(); got != want {
			t.Fatalf("after %d new keys: %d keys stored, want %d", i+1, got, want)
		}
	}
}
