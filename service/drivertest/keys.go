package drivertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"storelink"
	"storelink/service"
)

func testDeliveries(e *env) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	all, err := e.seed.Webhooks.CreateEndpoint(e.ctx, e.client.ID, storelink.NewEndpoint{URL: "https://all.test/"}, secret)
	must(e.t, err)
	some, err := e.seed.Webhooks.CreateEndpoint(e.ctx, e.client.ID, storelink.NewEndpoint{URL: "https://some.test/",
		States: []storelink.OrderState{storelink.StateFulfilled, storelink.StateReturned}}, secret)
	must(e.t, err)
	off, err := e.seed.Webhooks.CreateEndpoint(e.ctx, e.client.ID, storelink.NewEndpoint{URL: "https://off.test/"}, secret)
	must(e.t, err)
	disabled := false
	_, err = e.seed.Webhooks.UpdateEndpoint(e.ctx, "", off.ID, storelink.EndpointPatch{Enabled: &disabled})
	must(e.t, err)

	o := e.order("S1", eanA)
	e.insert(o)
	ev := event(o)
	at := e.tick()
	e.inOrderTx(func(tx service.OrderTx) {
		eps := e.write(tx, service.WriteOrderParams{Order: o, Event: ev, At: at})
		states := map[string][]storelink.OrderState{}
		for _, ep := range eps {
			if !ep.Enabled {
				e.t.Fatalf("WriteOrder gave endpoint %+v, not enabled", ep)
			}
			states[ep.ID] = ep.States
		}
		allStates, hasAll := states[all.ID]
		if len(eps) != 2 || !hasAll || len(allStates) != 0 || len(states[some.ID]) != 2 ||
			states[some.ID][0] != storelink.StateFulfilled {
			e.t.Fatalf("WriteOrder's endpoints = %+v, want %s (every state) and %s (fulfilled, returned)", eps, all.ID, some.ID)
		}
		must(e.t, tx.InsertDeliveries(e.ctx, service.InsertDeliveriesParams{ClientID: e.client.ID, Event: service.OrderEvent(ev), At: at,
			State: storelink.DeliveryPending, Deliveries: []service.NewDelivery{{ID: storelink.NewID(at), EndpointID: all.ID}}}))
	})
	list, err := e.seed.Webhooks.Deliveries(e.ctx, storelink.DeliveryFilter{ClientID: e.client.ID, Limit: 10})
	must(e.t, err)
	if len(list) != 1 {
		e.t.Fatalf("deliveries = %+v, want the one queued", list)
	}
	d := list[0]
	if d.EndpointID != all.ID || d.EventID != ev.EventID || d.OrderID != o.ID || d.EventState != ev.State ||
		d.State != storelink.DeliveryPending || d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(at) || !d.CreatedAt.Equal(at) {
		e.t.Fatalf("delivery = %+v, want pending for %s at %s", d, all.ID, at)
	}
}

func testOrderKeys(e *env) {
	t0 := e.at
	orderAt := func(sec int) (*storelink.Order, time.Time) {
		o := e.order("S1", eanA)
		e.insert(o)
		return o, t0.Add(time.Duration(sec) * time.Second)
	}
	put := func(key string, sec int, expired time.Time, sweep int) storelink.OrderKey {
		e.t.Helper()
		o, at := orderAt(sec)
		k := storelink.OrderKey{ClientID: e.client.ID, Key: key, RequestHash: []byte("hash " + key), OrderID: o.ID, CreatedAt: at}
		e.inOrderTx(func(tx service.OrderTx) { must(e.t, tx.PutOrderKey(e.ctx, k, expired, sweep)) })
		return k
	}
	get := func(key string) (*storelink.OrderKey, error) {
		tx := e.beginOrders()
		defer tx.Rollback(e.ctx)
		return tx.GetOrderKey(e.ctx, service.GetOrderKeyParams{ClientID: e.client.ID, Key: key})
	}
	want := func(k storelink.OrderKey) {
		e.t.Helper()
		got, err := get(k.Key)
		must(e.t, err)
		if got.ClientID != k.ClientID || got.Key != k.Key || !bytes.Equal(got.RequestHash, k.RequestHash) ||
			got.OrderID != k.OrderID || !got.CreatedAt.Equal(k.CreatedAt) {
			e.t.Fatalf("GetOrderKey = %+v, want %+v", got, k)
		}
	}
	gone := func(key string) {
		e.t.Helper()
		_, err := get(key)
		wantNotFound(e.t, "GetOrderKey of key "+key, err)
	}
	gone("k")
	never := t0.Add(-time.Hour)
	want(put("k", 5, never, 4))
	k := put("k", 6, never, 4) // an expired key starts afresh
	want(k)
	for i, key := range []string{"old-1", "old-2", "old-3"} {
		put(key, i+1, never, 4)
	}
	want(put("new", 10, t0.Add(2*time.Second), 4)) // sweeps what is not younger than 2s
	gone("old-1")
	gone("old-2")
	want(put("new-2", 11, t0.Add(time.Hour), 1)) // sweeps one: the oldest
	gone("old-3")
	want(k)
}

// testLocks: while one transaction holds a lock, another that asks for it
// (or, for the client's events, writes one) waits until the first ends. The
// second is given a moment to get ahead, which it can only do if the lock
// does not hold. Each lock is asked for with the read it guards.
func testLocks(e *env) {
	o := e.order("S1", eanA)
	e.insert(o)
	inOrders := func(fn func(tx service.OrderTx) error) func() (func() error, error) {
		return func() (func() error, error) {
			tx, err := e.d.Orders.Begin(e.ctx)
			if err != nil {
				return nil, err
			}
			if err := fn(tx); err != nil {
				_ = tx.Rollback(context.Background())
				return nil, err
			}
			return func() error { return tx.Commit(e.ctx) }, nil
		}
	}
	key := func(tx service.OrderTx) error {
		_, err := tx.GetOrderKey(e.ctx, service.GetOrderKeyParams{ClientID: e.client.ID, Key: "key", Lock: true})
		if !errors.Is(err, service.ErrNotFound) {
			return fmt.Errorf("read of a key never written: %v", err)
		}
		return nil
	}
	for _, c := range []struct {
		name string
		// lock begins a transaction that holds the lock and returns its
		// commit; then begins the second, which asks for it.
		lock, then func() (func() error, error)
	}{
		{"routing", inOrders(func(tx service.OrderTx) error { return e.routingRead(tx, eanA) }),
			inOrders(func(tx service.OrderTx) error {
				return e.routingRead(tx, eanB) // another EAN of the client waits too
			})},
		{"idempotency key", inOrders(key), inOrders(key)},
		{"client events", func() (func() error, error) {
			tx := e.begin()
			if err := tx.LockClientEvents(e.ctx, e.client.ID); err != nil {
				return nil, err
			}
			return func() error { return tx.Commit(e.ctx) }, nil
		}, inOrders(func(tx service.OrderTx) error {
			_, err := tx.WriteOrder(e.ctx, service.WriteOrderParams{Order: o, Event: event(o), At: e.at})
			return err
		})},
	} {
		commit, err := c.lock()
		must(e.t, err)
		var ended atomic.Bool
		done := make(chan error, 1)
		go func() {
			commit, err := c.then()
			if err == nil {
				if !ended.Load() {
					err = errors.New("took the lock while the first transaction held it")
				}
				_ = commit()
			}
			done <- err
		}()
		time.Sleep(50 * time.Millisecond)
		ended.Store(true)
		must(e.t, commit())
		select {
		case err := <-done:
			if err != nil {
				e.t.Fatalf("%s lock: the second transaction %v", c.name, err)
			}
		case <-time.After(10 * time.Second):
			e.t.Fatalf("%s lock: the second transaction still waits after the first ended", c.name)
		}
	}
}

// routingRead takes the client's routing lock and reads the stock in force
// of the EANs, as routing an order does.
func (e *env) routingRead(tx service.OrderTx, eans ...string) error {
	_, err := tx.StockInForce(e.ctx, service.StockInForceParams{ClientID: e.client.ID, EANs: eans, Lock: true})
	return err
}
