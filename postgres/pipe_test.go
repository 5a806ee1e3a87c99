package postgres_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
	"storelink/postgres"
	"storelink/service"
)

// TestPipedTransactions: an order transaction sends a call's locks and
// writes with its read, and the writes kept for COMMIT with it. What that
// must not change: a failed write fails the call that sent it, and is never
// taken for a read's answer; a read that finds nothing leaves the
// transaction usable; a read sees the writes sent before it; the writes
// kept for COMMIT are committed with it; nothing runs once the transaction
// has ended.
func TestPipedTransactions(t *testing.T) {
	_, _, ds, client := pipeEnv(t)
	d := ds.Orders
	ctx := context.Background()
	order := func(number string) *storelink.Order {
		now := time.Now().UTC().Truncate(time.Millisecond)
		return &storelink.Order{ID: storelink.NewID(now), OrderNumber: number, ClientID: client, StoreID: "S1",
			State: storelink.StateAssigned, Items: []storelink.Item{{ItemID: storelink.NewID(now), EAN: "4006381333931",
				Price: 100, Currency: "EUR", ArticleNumber: "A", MarketplaceArticleNumber: "M", Status: storelink.ItemAssigned,
				Reserving: true}}, CreatedAt: now, UpdatedAt: now}
	}
	begin := func() service.OrderTx {
		tx, err := d.Begin(ctx)
		must(t, err)
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		return tx
	}
	write := func(tx service.OrderTx, o *storelink.Order) error {
		_, err := tx.WriteOrder(ctx, service.WriteOrderParams{Order: o, New: true})
		return err
	}

	// A write PostgreSQL refuses (a NUL byte, as "not found" is told for a
	// lookup's key) fails the call that sent it, not as "no such row", and
	// the transaction with it.
	bad := order("N-\x00")
	tx := begin()
	if err := write(tx, bad); err == nil || errors.Is(err, service.ErrNotFound) {
		t.Fatalf("WriteOrder of a refused write = %v; want the write's error", err)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("Commit after a refused write succeeded")
	}
	must(t, tx.Rollback(ctx))
	if _, err := d.GetOrder(ctx, bad.ID); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("order of the failed transaction: %v; want none", err)
	}

	// A lookup that finds nothing, then a write read back and committed,
	// with the key kept for COMMIT.
	good := order("N-1")
	tx = begin()
	if _, err := tx.GetOrderKey(ctx, service.GetOrderKeyParams{ClientID: client, Key: "k", Lock: true}); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("GetOrderKey of a key never written: %v; want ErrNotFound", err)
	}
	must(t, write(tx, good))
	if got, err := tx.GetOrder(ctx, service.GetOrderParams{ID: good.ID}); err != nil || got.OrderNumber != "N-1" || len(got.Items) != 1 {
		t.Fatalf("GetOrder of the order written before it = %+v, %v; want it with its item", got, err)
	}
	if _, err := d.GetOrder(ctx, good.ID); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("the order is seen outside its transaction before the commit: %v", err)
	}
	at := good.CreatedAt
	must(t, tx.PutOrderKey(ctx, storelink.OrderKey{ClientID: client, Key: "k", RequestHash: []byte("h"), OrderID: good.ID, CreatedAt: at},
		at.Add(-time.Hour), 1))
	must(t, tx.Commit(ctx))
	if got, err := d.GetOrder(ctx, good.ID); err != nil || got.OrderNumber != "N-1" {
		t.Fatalf("GetOrder after the commit = %+v, %v", got, err)
	}
	if _, err := tx.GetOrder(ctx, service.GetOrderParams{ID: good.ID}); err == nil {
		t.Fatal("a read in a committed transaction succeeded")
	}
	tx = begin()
	if k, err := tx.GetOrderKey(ctx, service.GetOrderKeyParams{ClientID: client, Key: "k"}); err != nil || k.OrderID != good.ID {
		t.Fatalf("key kept for the commit = %+v, %v; want it written", k, err)
	}
	must(t, tx.Rollback(ctx))
}

// eventOf is an order of the client at store S1 with no items, and its
// event.
func eventOf(client, number string) (*storelink.Order, *storelink.Event) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	o := &storelink.Order{ID: storelink.NewID(now), OrderNumber: number, ClientID: client, StoreID: "S1",
		State: storelink.StateAssigned, Items: []storelink.Item{}, CreatedAt: now, UpdatedAt: now}
	ev := &storelink.Event{EventID: storelink.NewID(now), OrderID: o.ID, OrderNumber: o.OrderNumber, State: o.State,
		StoreID: "S1", Timestamp: now.Format(time.RFC3339), Items: []storelink.EventItem{}}
	return o, ev
}

// deliveriesTo returns the states of the client's deliveries to the
// endpoint.
func deliveriesTo(t *testing.T, svc *service.Services, client, endpoint string) []storelink.DeliveryState {
	t.Helper()
	list, err := svc.Webhooks.Deliveries(context.Background(), storelink.DeliveryFilter{ClientID: client, EndpointID: endpoint, Limit: 10})
	must(t, err)
	var states []storelink.DeliveryState
	for _, d := range list {
		states = append(states, d.State)
	}
	return states
}

// TestEventAndEndpointDeleted: an order's transaction numbers its event,
// which locks the client's events, and then reads the endpoints to deliver
// it to; DeleteEndpoint locks the client's events while it disables the
// endpoint and cancels its deliveries. A deletion that holds them first
// leaves the event no delivery to the endpoint; one that waits for the
// event's transaction cancels the delivery it queued. The endpoint kept
// gets its delivery either way.
func TestEventAndEndpointDeleted(t *testing.T) {
	ctx := context.Background()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	for _, deleteFirst := range []bool{true, false} {
		_, svc, ds, client := pipeEnv(t)
		gone, err := svc.Webhooks.CreateEndpoint(ctx, client, storelink.NewEndpoint{URL: "https://gone.test/"}, secret)
		must(t, err)
		kept, err := svc.Webhooks.CreateEndpoint(ctx, client, storelink.NewEndpoint{URL: "https://kept.test/"}, secret)
		must(t, err)
		o, ev := eventOf(client, "N-1")

		del, err := ds.Webhooks.Begin(ctx)
		must(t, err)
		defer del.Rollback(ctx)
		deleteEndpoint := func() {
			_, err := del.LockEndpoint(ctx, gone.ID)
			must(t, err)
			must(t, del.LockClientEvents(ctx, client))
			off, none, now := false, "", time.Now()
			_, err = del.UpdateEndpoint(ctx, gone.ID, service.EndpointChange{Enabled: &off, DisabledReason: &none, DeletedAt: &now, At: now})
			must(t, err)
			_, err = del.CancelDeliveries(ctx, service.MoveDeliveriesParams{EndpointID: gone.ID, At: now, To: storelink.DeliveryCancelled})
			must(t, err)
		}
		if deleteFirst {
			deleteEndpoint() // holds the client's events until it commits
		}
		done := make(chan error, 1)
		go func() {
			done <- func() error {
				tx, err := ds.Orders.Begin(ctx)
				if err != nil {
					return err
				}
				defer tx.Rollback(ctx)
				eps, err := tx.WriteOrder(ctx, service.WriteOrderParams{Order: o, New: true, Event: ev, At: o.CreatedAt})
				if err != nil {
					return err
				}
				var nds []service.NewDelivery
				for _, e := range eps {
					nds = append(nds, service.NewDelivery{ID: storelink.NewID(o.CreatedAt), EndpointID: e.ID})
				}
				if err := tx.InsertDeliveries(ctx, service.InsertDeliveriesParams{ClientID: client, Event: service.OrderEvent(ev), At: o.CreatedAt,
					State: storelink.DeliveryPending, Deliveries: nds}); err != nil {
					return err
				}
				return tx.Commit(ctx)
			}()
		}()
		if deleteFirst {
			select {
			case err := <-done:
				t.Fatalf("the event's transaction ended (%v) while the deletion held the client's events", err)
			case <-time.After(300 * time.Millisecond):
			}
			must(t, del.Commit(ctx))
			must(t, <-done)
		} else {
			must(t, <-done)
			deleteEndpoint()
			must(t, del.Commit(ctx))
		}
		want := []storelink.DeliveryState{storelink.DeliveryCancelled}
		if deleteFirst {
			want = nil
		}
		if got := deliveriesTo(t, svc, client, gone.ID); !slices.Equal(got, want) {
			t.Errorf("delete first %v: deliveries to the deleted endpoint %v, want %v", deleteFirst, got, want)
		}
		if got := deliveriesTo(t, svc, client, kept.ID); !slices.Equal(got, []storelink.DeliveryState{storelink.DeliveryPending}) {
			t.Errorf("delete first %v: deliveries to the endpoint kept %v, want one pending", deleteFirst, got)
		}
	}
}

// TestEndpointChangedWhileOrderWaits: endpoint changes committed while an
// order's create waits to number its event (another transaction holds the
// client's events) decide where the event goes: an endpoint created or
// enabled meanwhile gets it, one that no longer wants its state does not.
func TestEndpointChangedWhileOrderWaits(t *testing.T) {
	dbURL, svc, ds, client := pipeEnv(t)
	ctx := context.Background()
	watch, err := pgx.Connect(ctx, dbURL)
	must(t, err)
	defer watch.Close(ctx)
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	e1, err := svc.Webhooks.CreateEndpoint(ctx, client, storelink.NewEndpoint{URL: "https://e1.test/"}, secret)
	must(t, err)
	e3, err := svc.Webhooks.CreateEndpoint(ctx, client, storelink.NewEndpoint{URL: "https://e3.test/"}, secret)
	must(t, err)
	off := false
	_, err = svc.Webhooks.UpdateEndpoint(ctx, "", e3.ID, storelink.EndpointPatch{Enabled: &off})
	must(t, err)

	h, err := ds.Webhooks.Begin(ctx) // another order's event
	must(t, err)
	defer h.Rollback(ctx)
	must(t, h.LockClientEvents(ctx, client))
	price := storelink.Money(100)
	done := make(chan error, 1)
	go func() {
		_, err := svc.Orders.CreateOrder(ctx, storelink.NewOrder{OrderNumber: "W-1", ClientID: client, StoreID: "S1",
			Items: []storelink.NewItem{{EAN: "4006381333931", MarketplaceArticleNumber: "M", ArticleNumber: "A", Price: &price}}})
		done <- err
	}()
	waitLockWaiters(t, watch, 1) // the create waits for the client's events
	e2, err := svc.Webhooks.CreateEndpoint(ctx, client, storelink.NewEndpoint{URL: "https://e2.test/"}, secret)
	must(t, err)
	fulfilled := []storelink.OrderState{storelink.StateFulfilled}
	_, err = svc.Webhooks.UpdateEndpoint(ctx, "", e1.ID, storelink.EndpointPatch{States: &fulfilled})
	must(t, err)
	on := true
	_, err = svc.Webhooks.UpdateEndpoint(ctx, "", e3.ID, storelink.EndpointPatch{Enabled: &on})
	must(t, err)
	must(t, h.Rollback(ctx))
	must(t, <-done)
	for _, c := range []struct {
		name string
		id   string
		want int
	}{{"e1, now wanting only fulfilled", e1.ID, 0}, {"e2, created meanwhile", e2.ID, 1}, {"e3, enabled meanwhile", e3.ID, 1}} {
		if got := deliveriesTo(t, svc, client, c.id); len(got) != c.want {
			t.Errorf("%s: deliveries of the assigned event %v, want %d", c.name, got, c.want)
		}
	}
}

// TestDeliveriesCarryTheirEventsNumber: each delivery's event number is
// its event's, with two events in one transaction (a cancellation that
// hands items to another store writes two).
func TestDeliveriesCarryTheirEventsNumber(t *testing.T) {
	dbURL, svc, ds, client := pipeEnv(t)
	ctx := context.Background()
	ep, err := svc.Webhooks.CreateEndpoint(ctx, client, storelink.NewEndpoint{URL: "https://a.test/"}, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	must(t, err)
	for range 3 {
		tx, err := ds.Orders.Begin(ctx)
		must(t, err)
		for _, n := range []string{"A", "B"} {
			o, ev := eventOf(client, n)
			_, err := tx.WriteOrder(ctx, service.WriteOrderParams{Order: o, New: true, Event: ev, At: o.CreatedAt})
			must(t, err)
			must(t, tx.InsertDeliveries(ctx, service.InsertDeliveriesParams{ClientID: client, Event: service.OrderEvent(ev), At: o.CreatedAt,
				State: storelink.DeliveryPending, Deliveries: []service.NewDelivery{{ID: storelink.NewID(o.CreatedAt), EndpointID: ep.ID}}}))
		}
		must(t, tx.Commit(ctx))
	}
	conn, err := pgx.Connect(ctx, dbURL)
	must(t, err)
	defer conn.Close(ctx)
	var n, wrong int
	must(t, conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE d.event_seq <> e.seq)
		FROM deliveries d JOIN events e ON e.id = d.event_id`).Scan(&n, &wrong))
	if n != 6 || wrong != 0 {
		t.Fatalf("%d deliveries, %d of them numbered other than their event; want 6 and 0", n, wrong)
	}
}

// pipeEnv opens a database in a schema of its own, with its services, its
// drivers and a client with store S1.
func pipeEnv(t *testing.T) (dbURL string, svc *service.Services, ds service.Drivers, client string) {
	dbURL = newSchema(t)
	db := openDB(t, dbURL, time.Now)
	svc = services(db)
	return dbURL, svc, postgres.NewDrivers(db), setup(t, svc, 1)[0]
}
