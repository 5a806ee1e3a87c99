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
	_, err = e.seed.Webhooks.UpdateEndpoint(e.ctx, off.ID, storelink.EndpointPatch{Enabled: &disabled})
	must(e.t, err)

	o := e.order("S1", eanA)
	e.insert(o)
	ev := event(o)
	at := e.tick()
	e.inTx(func(tx service.Tx) {
		eps, err := tx.EnabledEndpoints(e.ctx, e.client.ID)
		must(e.t, err)
		states := map[string][]storelink.OrderState{}
		for _, ep := range eps {
			if !ep.Enabled {
				e.t.Fatalf("EnabledEndpoints gave %+v, not enabled", ep)
			}
			states[ep.ID] = ep.States
		}
		allStates, hasAll := states[all.ID]
		if len(eps) != 2 || !hasAll || len(allStates) != 0 || len(states[some.ID]) != 2 ||
			states[some.ID][0] != storelink.StateFulfilled {
			e.t.Fatalf("EnabledEndpoints = %+v, want %s (every state) and %s (fulfilled, returned)", eps, all.ID, some.ID)
		}
		must(e.t, tx.InsertEvent(e.ctx, e.client.ID, ev, at))
		must(e.t, tx.InsertDeliveries(e.ctx, e.client.ID, ev, at, []service.NewDelivery{{ID: storelink.NewID(at), EndpointID: all.ID}}))
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
		e.inTx(func(tx service.Tx) { must(e.t, tx.PutOrderKey(e.ctx, k, expired, sweep)) })
		return k
	}
	get := func(key string) (*storelink.OrderKey, error) {
		tx := e.begin()
		defer tx.Rollback(e.ctx)
		return tx.GetOrderKey(e.ctx, e.client.ID, key)
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
// does not hold. A driver may take a lock with the next statement (see
// LockRouting), so each lock is followed by the read it guards.
func testLocks(e *env) {
	o := e.order("S1", eanA)
	e.insert(o)
	for _, c := range []struct {
		name string
		lock func(tx service.Tx) error
		then func(tx service.Tx) error // the second's; lock when nil
	}{
		{"routing", func(tx service.Tx) error { return e.routingRead(tx, eanA) }, func(tx service.Tx) error {
			return e.routingRead(tx, eanB) // another EAN of the client waits too
		}},
		{"idempotency key", func(tx service.Tx) error {
			if err := tx.LockOrderKey(e.ctx, e.client.ID, "key"); err != nil {
				return err
			}
			if _, err := tx.GetOrderKey(e.ctx, e.client.ID, "key"); !errors.Is(err, service.ErrNotFound) {
				return fmt.Errorf("read of a key never written: %v", err)
			}
			return nil
		}, nil},
		{"client events", func(tx service.Tx) error { return tx.LockClientEvents(e.ctx, e.client.ID) }, func(tx service.Tx) error {
			if err := tx.InsertEvent(e.ctx, e.client.ID, event(o), e.at); err != nil {
				return err
			}
			_, err := tx.EnabledEndpoints(e.ctx, e.client.ID) // a statement after it
			return err
		}},
	} {
		if c.then == nil {
			c.then = c.lock
		}
		first := e.begin()
		must(e.t, c.lock(first))
		var ended atomic.Bool
		done := make(chan error, 1)
		go func() {
			second, err := e.d.Orders.Begin(e.ctx)
			if err == nil {
				err = c.then(second)
				if err == nil && !ended.Load() {
					err = errors.New("took the lock while the first transaction held it")
				}
				_ = second.Rollback(context.Background())
			}
			done <- err
		}()
		time.Sleep(50 * time.Millisecond)
		ended.Store(true)
		must(e.t, first.Commit(e.ctx))
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
func (e *env) routingRead(tx service.Tx, eans ...string) error {
	if err := tx.LockRouting(e.ctx, e.client.ID); err != nil {
		return err
	}
	_, err := tx.StockInForce(e.ctx, e.client.ID, "", eans)
	return err
}
