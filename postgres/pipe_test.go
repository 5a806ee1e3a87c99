package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"storelink"
	"storelink/postgres"
	"storelink/service"
)

// TestPipedTransactions: an order transaction queues its writes and locks
// and sends them with its next read or its COMMIT. What the queue must not
// change: a failed write fails the transaction, and is never taken for the
// next read's answer; a read that finds nothing leaves the transaction
// usable; a read sees the writes queued before it; nothing runs once the
// transaction has ended.
func TestPipedTransactions(t *testing.T) {
	dbURL := newSchema(t)
	db := openDB(t, dbURL, time.Now)
	d := postgres.NewDriver(db)
	client := setup(t, services(db), 1)[0]
	ctx := context.Background()
	order := func(number string) *storelink.Order {
		now := time.Now().UTC().Truncate(time.Millisecond)
		return &storelink.Order{ID: storelink.NewID(now), OrderNumber: number, ClientID: client, StoreID: "S1",
			State: storelink.StateAssigned, Items: []storelink.Item{{ItemID: storelink.NewID(now), EAN: "4006381333931",
				Price: 100, Currency: "EUR", ArticleNumber: "A", MarketplaceArticleNumber: "M", Status: storelink.ItemAssigned,
				Reserving: true}}, CreatedAt: now, UpdatedAt: now}
	}
	begin := func() service.Tx {
		tx, err := d.Begin(ctx)
		must(t, err)
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		return tx
	}

	// A write PostgreSQL refuses (a NUL byte, as "not found" is told for a
	// lookup's key) fails the read it went with, not as "no such store".
	bad := order("N-\x00")
	tx := begin()
	must(t, tx.InsertOrder(ctx, bad))
	if ok, err := tx.StoreExists(ctx, client, "S1"); err == nil {
		t.Fatalf("StoreExists after a refused write = %v, nil; want the write's error", ok)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("Commit after a refused write succeeded")
	}
	must(t, tx.Rollback(ctx))
	if _, err := d.GetOrder(ctx, bad.ID); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("order of the failed transaction: %v; want none", err)
	}

	// A lookup that finds nothing, then a write read back and committed.
	good := order("N-1")
	tx = begin()
	must(t, tx.LockOrderKey(ctx, client, "k"))
	if _, err := tx.GetOrderKey(ctx, client, "k"); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("GetOrderKey of a key never written: %v; want ErrNotFound", err)
	}
	must(t, tx.InsertOrder(ctx, good))
	if got, err := tx.GetOrder(ctx, good.ID); err != nil || got.OrderNumber != "N-1" || len(got.Items) != 1 {
		t.Fatalf("GetOrder of the order queued before it = %+v, %v; want it with its item", got, err)
	}
	if _, err := d.GetOrder(ctx, good.ID); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("the order is seen outside its transaction before the commit: %v", err)
	}
	must(t, tx.Commit(ctx))
	if got, err := d.GetOrder(ctx, good.ID); err != nil || got.OrderNumber != "N-1" {
		t.Fatalf("GetOrder after the commit = %+v, %v", got, err)
	}
	if _, err := tx.GetOrder(ctx, good.ID); err == nil {
		t.Fatal("a read in a committed transaction succeeded")
	}

	// A write queued and never followed by a read goes with the COMMIT.
	last := order("N-2")
	tx = begin()
	must(t, tx.InsertOrder(ctx, last))
	must(t, tx.Commit(ctx))
	if _, err := d.GetOrder(ctx, last.ID); err != nil {
		t.Fatalf("order queued before the commit: %v", err)
	}
}

// TestEventAfterEndpointDeleted: an order transaction reads the client's
// endpoints before it numbers its event. An endpoint deleted in between
// (DeleteEndpoint holds the client's events while it cancels the
// endpoint's deliveries) gets no delivery of the event; one still enabled
// does.
func TestEventAfterEndpointDeleted(t *testing.T) {
	dbURL := newSchema(t)
	db := openDB(t, dbURL, time.Now)
	svc := services(db)
	d := postgres.NewDriver(db)
	client := setup(t, svc, 1)[0]
	ctx := context.Background()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	gone, err := svc.CreateEndpoint(ctx, client, storelink.NewEndpoint{URL: "https://gone.test/"}, secret)
	must(t, err)
	kept, err := svc.CreateEndpoint(ctx, client, storelink.NewEndpoint{URL: "https://kept.test/"}, secret)
	must(t, err)
	now := time.Now().UTC().Truncate(time.Millisecond)
	o := &storelink.Order{ID: storelink.NewID(now), OrderNumber: "N-1", ClientID: client, StoreID: "S1",
		State: storelink.StateAssigned, Items: []storelink.Item{}, CreatedAt: now, UpdatedAt: now}
	ev := &storelink.Event{EventID: storelink.NewID(now), OrderID: o.ID, OrderNumber: o.OrderNumber, State: o.State,
		StoreID: "S1", Timestamp: now.Format(time.RFC3339), Items: []storelink.EventItem{}}

	tx, err := d.Begin(ctx)
	must(t, err)
	defer tx.Rollback(ctx)
	must(t, tx.InsertOrder(ctx, o))
	eps, err := tx.EnabledEndpoints(ctx, client)
	must(t, err)
	if len(eps) != 2 {
		t.Fatalf("EnabledEndpoints = %+v, want both", eps)
	}
	must(t, svc.DeleteEndpoint(ctx, gone.ID))
	var ds []service.NewDelivery
	for _, e := range eps {
		ds = append(ds, service.NewDelivery{ID: storelink.NewID(now), EndpointID: e.ID})
	}
	must(t, tx.InsertEvent(ctx, client, ev, now, ds))
	must(t, tx.Commit(ctx))

	for ep, want := range map[string]int{gone.ID: 0, kept.ID: 1} {
		list, err := svc.Deliveries(ctx, storelink.DeliveryFilter{ClientID: client, EndpointID: ep, Limit: 10})
		must(t, err)
		if len(list) != want {
			t.Fatalf("deliveries to %s: %+v; want %d", ep, list, want)
		}
	}
}
