package sqlite_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"storelink"
	"storelink/service"
	"storelink/sqlite"
)

// The order calls reach the write connection through a first-come queue
// that hands the write transaction from one order call to the next
// (beginWrite, writeGroup). These tests show that this never costs a call
// its own outcome, never keeps the other writers out, and never keeps the
// connection when the callers waiting for it have gone.

// orderDB opens a database with a client, stores S1 and S2 and stock of
// ean at both.
func orderDB(t *testing.T) (*service.Services, string, string) {
	t.Helper()
	ctx := context.Background()
	db := sqlite.OpenFixture(t, nil)
	s := db.Services()
	p, err := s.Partners.CreatePartner(ctx, "P")
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Partners.CreateClient(ctx, p.ID, "DE", "EUR")
	if err != nil {
		t.Fatal(err)
	}
	const ean = "4006381333931"
	for _, id := range []string{"S1", "S2"} {
		if _, _, err := s.Partners.PutStore(ctx, c.ID, id, "Store "+id); err != nil {
			t.Fatal(err)
		}
		if err := db.TestAccess().Exec(ctx, fmt.Sprintf(`INSERT INTO stock (client_id, store_id, ean, article_number,
			quantity, price, upload_id, updated_at) VALUES ('%s', '%s', '%s', 'A-1', 100000, 1999, 'u', 0)`, c.ID, id, ean)); err != nil {
			t.Fatal(err)
		}
	}
	return s, c.ID, ean
}

// lifecycle creates an order, fulfils it and returns its item.
func lifecycle(ctx context.Context, db *service.Services, clientID, ean, number string) error {
	o, err := db.Orders.CreateOrder(ctx, storelink.NewOrder{OrderNumber: number, ClientID: clientID,
		Items: []storelink.NewItem{{EAN: ean, MarketplaceArticleNumber: "M-1"}}})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	if _, err := db.Orders.FulfilOrder(ctx, o.ID, storelink.FulfilRequest{}); err != nil {
		return fmt.Errorf("fulfil %s: %w", o.ID, err)
	}
	_, err = db.Orders.ReturnItems(ctx, o.ID, storelink.ReturnRequest{
		Items: []storelink.ReturnItem{{ItemID: o.Items[0].ItemID, ReturnLocation: storelink.ReturnToStore}}})
	if err != nil {
		return fmt.Errorf("return %s: %w", o.ID, err)
	}
	return nil
}

func TestOrderCallsShareTheWriter(t *testing.T) {
	db, clientID, ean := orderDB(t)
	ctx := context.Background()
	const callers, orders = 8, 25
	errs := make(chan error, callers+1)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range orders {
				if err := lifecycle(ctx, db, clientID, ean, fmt.Sprintf("N-%d-%d", c, i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	// Another writer, while the order calls keep coming: each of its
	// transactions must get the connection within a short while.
	wg.Go(func() {
		for i := range 20 {
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, _, err := db.Partners.PutStore(wctx, clientID, fmt.Sprintf("X%d", i), "Other writer")
			cancel()
			if err != nil {
				errs <- fmt.Errorf("store write %d while orders were written: %w", i, err)
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// One event per call, each order's in order.
	events, _, err := db.Orders.Events(ctx, clientID, "", callers*orders*3+1)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != callers*orders*3 {
		t.Fatalf("%d events for %d order calls", len(events), callers*orders*3)
	}
	last := map[string]storelink.OrderState{}
	next := map[storelink.OrderState]storelink.OrderState{"": storelink.StateAssigned,
		storelink.StateAssigned: storelink.StateFulfilled, storelink.StateFulfilled: storelink.StateReturned}
	for _, e := range events {
		if want := next[last[e.OrderID]]; e.State != want {
			t.Fatalf("order %s: %s after %q, want %s", e.OrderID, e.State, last[e.OrderID], want)
		}
		last[e.OrderID] = e.State
	}
}

func TestOrderCallsGivenUpReleaseTheWriter(t *testing.T) {
	db, clientID, ean := orderDB(t)
	ctx := context.Background()
	// Rounds of callers that give up at once, some before their turn, some
	// during their transaction; after each, the connection must not stay
	// with the queue.
	for round := range 10 {
		var wg sync.WaitGroup
		for c := range 32 {
			wg.Go(func() {
				cctx, cancel := context.WithTimeout(ctx, time.Duration(c%8)*250*time.Microsecond)
				defer cancel()
				err := lifecycle(cctx, db, clientID, ean, fmt.Sprintf("G-%d-%d", round, c))
				// A call whose context ended fails at its next statement
				// and rolls back its own writes.
				if err != nil && cctx.Err() == nil {
					t.Errorf("caller %d: %v", c, err)
				}
			})
		}
		wg.Wait()
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, _, err := db.Partners.PutStore(wctx, clientID, fmt.Sprintf("S%d", 10+round), "After")
		cancel()
		if err != nil {
			t.Fatalf("round %d: a write after the order callers gave up: %v", round, err)
		}
	}
	if err := lifecycle(ctx, db, clientID, ean, "after"); err != nil {
		t.Fatalf("an order after the callers gave up: %v", err)
	}
}

// A call that fails leaves nothing and does not affect the next one.
func TestOrderCallFailureIsItsOwn(t *testing.T) {
	db, clientID, ean := orderDB(t)
	ctx := context.Background()
	o, err := db.Orders.CreateOrder(ctx, storelink.NewOrder{OrderNumber: "F-1", ClientID: clientID,
		Items: []storelink.NewItem{{EAN: ean, MarketplaceArticleNumber: "M-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	results := make([]error, 8)
	for i := range results {
		wg.Go(func() {
			if i%2 == 0 { // not allowed: an assigned order cannot be returned
				_, results[i] = db.Orders.ReturnItems(ctx, o.ID, storelink.ReturnRequest{
					Items: []storelink.ReturnItem{{ItemID: o.Items[0].ItemID, ReturnLocation: storelink.ReturnToStore}}})
				return
			}
			results[i] = lifecycle(ctx, db, clientID, ean, fmt.Sprintf("F-%d", i))
		})
	}
	wg.Wait()
	for i, err := range results {
		switch {
		case i%2 == 0 && storelink.ErrorCode(err) != storelink.ECONFLICT:
			t.Errorf("return of an assigned order: %v, want %s", err, storelink.ECONFLICT)
		case i%2 == 1 && err != nil:
			t.Errorf("lifecycle next to failing calls: %v", err)
		}
	}
	got, err := db.Orders.Order(ctx, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != storelink.StateAssigned || got.Items[0].Status != storelink.ItemAssigned {
		t.Fatalf("order after refused returns: %s, item %s", got.State, got.Items[0].Status)
	}
	if evs, err := db.Orders.OrderEvents(ctx, o.ID); err != nil || len(evs) != 1 {
		t.Fatalf("events of the order after refused returns: %d, %v", len(evs), err)
	}
}
