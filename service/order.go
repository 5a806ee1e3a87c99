package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"storelink"
)

// CreateOrder assigns a new order to the given store or to the store that
// the stock in force routes it to, and writes its assigned event.
func (s *Service) CreateOrder(ctx context.Context, n storelink.NewOrder) (*storelink.Order, error) {
	return s.createOrder(ctx, n, storelink.CallCreateOrder, true, func(tx Tx, n *storelink.NewOrder, c *storelink.Client, now time.Time) (*storelink.Order, *storelink.Event, error) {
		needs := n.Needs()
		stock, err := tx.StockInForce(ctx, c.ID, n.StoreID, slices.Collect(maps.Keys(needs)))
		if err != nil {
			return nil, nil, err
		}
		storeID := n.StoreID
		if storeID != "" {
			ok, err := tx.StoreExists(ctx, c.ID, storeID)
			if err != nil {
				return nil, nil, err
			} else if !ok {
				return nil, nil, storelink.Errorf(storelink.EUNPROCESSABLE, "store_id %q is not a store of client %s.", storeID, c.ID)
			}
		} else if storeID = storelink.Route(needs, stock.Available(), ""); storeID == "" {
			return nil, nil, storelink.Errorf(storelink.ECONFLICT, "No store of client %s has stock in force for every item of this order.", c.ID)
		}
		return storelink.Assign(n, c, storeID, stock[storeID], idsAt(now), now)
	})
}

// CreateWarehouseOrder records an order the marketplace warehouse fulfilled.
// It reserves nothing, so it takes no routing lock.
func (s *Service) CreateWarehouseOrder(ctx context.Context, n storelink.NewOrder) (*storelink.Order, error) {
	return s.createOrder(ctx, n, storelink.CallCreateWarehouseOrder, false, func(tx Tx, n *storelink.NewOrder, c *storelink.Client, now time.Time) (*storelink.Order, *storelink.Event, error) {
		stock, err := tx.StockInForce(ctx, c.ID, "", slices.Collect(maps.Keys(n.Needs())))
		if err != nil {
			return nil, nil, err
		}
		// Article data for EANs not described in the request: the row of
		// the lowest store id that has one.
		rows := map[string]*storelink.Stock{}
		for _, id := range slices.Sorted(maps.Keys(stock)) {
			for ean, r := range stock[id] {
				if rows[ean] == nil {
					rows[ean] = r
				}
			}
		}
		return storelink.NewWarehouseOrder(n, c, rows, idsAt(now), now)
	})
}

// createOrder is a create call: it validates n, then in one transaction
// answers a remembered idempotency key, or lets build make the order and its
// event for the client (from n as validated), writes them and remembers the
// key. routes takes the client's routing lock before build runs; the key's
// lock is always taken before it, so the two never deadlock.
func (s *Service) createOrder(ctx context.Context, n storelink.NewOrder, call string, routes bool,
	build func(tx Tx, n *storelink.NewOrder, c *storelink.Client, now time.Time) (*storelink.Order, *storelink.Event, error)) (*storelink.Order, error) {
	hash := n.RequestHash(call) // of the request as sent, before Validate tidies it
	if err := n.Validate(); err != nil {
		return nil, err
	}
	var o *storelink.Order
	err := s.inTx(ctx, func(tx Tx) error {
		o = nil // inTx may run this again
		c, err := tx.GetClient(ctx, n.ClientID)
		if errors.Is(err, ErrNotFound) {
			return storelink.Errorf(storelink.EUNPROCESSABLE, "client_id %q is not a client.", n.ClientID)
		} else if err != nil {
			return err
		}
		if n.IdempotencyKey != "" {
			if err := tx.LockOrderKey(ctx, c.ID, n.IdempotencyKey); err != nil {
				return err
			}
			if o, err = s.replay(ctx, tx, c.ID, n.IdempotencyKey, hash); err != nil || o != nil {
				return err
			}
		}
		if routes {
			if err := tx.LockRouting(ctx, c.ID); err != nil {
				return err
			}
		}
		now := s.now() // after the locks, which may have been waited for
		var ev *storelink.Event
		if o, ev, err = build(tx, &n, c, now); err != nil {
			return err
		}
		if err := insertOrder(ctx, tx, o, ev, now); err != nil {
			return err
		}
		if n.IdempotencyKey == "" {
			return nil
		}
		return rememberKey(ctx, tx, storelink.OrderKey{ClientID: c.ID, Key: n.IdempotencyKey, RequestHash: hash, OrderID: o.ID, CreatedAt: now})
	})
	if err != nil {
		return nil, err
	}
	return o, nil
}

// CancelOrder cancels an assigned order and, when asked, hands the items
// cancelled for stock reasons to another store that has them.
func (s *Service) CancelOrder(ctx context.Context, id string, r storelink.CancelRequest) (*storelink.Order, error) {
	return s.changeOrder(ctx, id, func(tx Tx, o *storelink.Order, was []storelink.Item, now time.Time) error {
		ev, again, err := o.Cancel(r, storelink.NewID(now), now)
		if err != nil {
			return err
		}
		var next *storelink.Order
		var nextEv *storelink.Event
		if len(again) > 0 {
			if err := tx.LockRouting(ctx, o.ClientID); err != nil {
				return err
			}
			needs := storelink.ItemNeeds(again)
			stock, err := tx.StockInForce(ctx, o.ClientID, "", slices.Collect(maps.Keys(needs)))
			if err != nil {
				return err
			}
			// The items cancelled here no longer hold stock at this store,
			// but this store is the one that could not serve them.
			if store := storelink.Route(needs, stock.Available(), o.StoreID); store != "" {
				next, nextEv = storelink.Reassign(o, again, store, stock[store], idsAt(now), now)
			}
		}
		if err := updateOrder(ctx, tx, o, was, ev, now); err != nil {
			return err
		}
		if next != nil {
			return insertOrder(ctx, tx, next, nextEv, now)
		}
		return nil
	})
}

// FulfilOrder fulfils an assigned order.
func (s *Service) FulfilOrder(ctx context.Context, id string, r storelink.FulfilRequest) (*storelink.Order, error) {
	return s.changeOrder(ctx, id, func(tx Tx, o *storelink.Order, was []storelink.Item, now time.Time) error {
		ev, err := o.Fulfil(r, storelink.NewID(now), now)
		if err != nil {
			return err
		}
		return updateOrder(ctx, tx, o, was, ev, now)
	})
}

// ReturnItems records items of a store-fulfilled order coming back.
func (s *Service) ReturnItems(ctx context.Context, id string, r storelink.ReturnRequest) (*storelink.Order, error) {
	return s.changeOrder(ctx, id, func(tx Tx, o *storelink.Order, was []storelink.Item, now time.Time) error {
		var lookupErr error
		storeExists := func(store string) bool {
			ok, err := tx.StoreExists(ctx, o.ClientID, store)
			if err != nil {
				lookupErr = err
			}
			return ok
		}
		ev, err := o.Return(r, storeExists, storelink.NewID(now), now)
		if lookupErr != nil {
			return lookupErr
		} else if err != nil {
			return err
		}
		return updateOrder(ctx, tx, o, was, ev, now)
	})
}

// WarehouseReturn records items of a warehouse-fulfilled order coming back.
func (s *Service) WarehouseReturn(ctx context.Context, id string, r storelink.WarehouseReturnRequest) (*storelink.Order, error) {
	return s.changeOrder(ctx, id, func(tx Tx, o *storelink.Order, was []storelink.Item, now time.Time) error {
		ev, err := o.WarehouseReturn(r, storelink.NewID(now), now)
		if err != nil {
			return err
		}
		return updateOrder(ctx, tx, o, was, ev, now)
	})
}

// changeOrder loads an order for update, lets fn change it (fn writes the
// order and its events, given the items as they were read), and commits.
func (s *Service) changeOrder(ctx context.Context, id string, fn func(tx Tx, o *storelink.Order, was []storelink.Item, now time.Time) error) (*storelink.Order, error) {
	var o *storelink.Order
	err := s.inTx(ctx, func(tx Tx) error {
		var err error
		if o, err = tx.GetOrderForUpdate(ctx, id); err != nil {
			return orderNotFound(err, id)
		}
		return fn(tx, o, slices.Clone(o.Items), s.now())
	})
	if err != nil {
		return nil, err
	}
	return o, nil
}

// orderNotFound turns ErrNotFound into ENOTFOUND for the order id.
func orderNotFound(err error, id string) error {
	if errors.Is(err, ErrNotFound) {
		return storelink.Errorf(storelink.ENOTFOUND, "Order %q not found.", id)
	}
	return err
}

// insertOrder writes a new order and its items, then its event: in this
// order, inside the caller's transaction, so that neither is ever without
// the other.
func insertOrder(ctx context.Context, tx Tx, o *storelink.Order, ev *storelink.Event, now time.Time) error {
	if err := tx.InsertOrder(ctx, o); err != nil {
		return err
	}
	return insertEvent(ctx, tx, o, ev, now)
}

// updateOrder writes an order that an order call changed, the items that
// are new or differ from was (the items as they were read), then the event.
// Items an order call did not touch are not written again: a return of one
// item of three writes one.
func updateOrder(ctx context.Context, tx Tx, o *storelink.Order, was []storelink.Item, ev *storelink.Event, now time.Time) error {
	var inserted, updated []int
	for pos, it := range o.Items {
		i := slices.IndexFunc(was, func(w storelink.Item) bool { return w.ItemID == it.ItemID })
		switch {
		case i < 0:
			inserted = append(inserted, pos)
		case itemChanged(was[i], it):
			updated = append(updated, pos)
		}
	}
	if err := tx.UpdateOrder(ctx, o, inserted, updated); err != nil {
		return err
	}
	return insertEvent(ctx, tx, o, ev, now)
}

// itemChanged tells whether an order call changed a field that UpdateOrder
// writes; the others never change once an item exists.
func itemChanged(a, b storelink.Item) bool {
	return a.Status != b.Status || a.CancellationReason != b.CancellationReason ||
		!sameCode(a.ReturnReasonCode, b.ReturnReasonCode) || a.ReturnLocation != b.ReturnLocation ||
		a.ReturnStoreID != b.ReturnStoreID || a.Reserving != b.Reserving
}

func sameCode(a, b *storelink.ReturnReasonCode) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// insertEvent writes the event of an order and, with it, a delivery for
// every endpoint of the client that wants its state: an event that exists
// is always delivered.
func insertEvent(ctx context.Context, tx Tx, o *storelink.Order, ev *storelink.Event, now time.Time) error {
	seq, err := tx.InsertEvent(ctx, o.ClientID, ev, now)
	if err != nil {
		return err
	}
	endpoints, err := tx.EnabledEndpoints(ctx, o.ClientID)
	if err != nil {
		return fmt.Errorf("read endpoints: %w", err)
	}
	var ds []NewDelivery
	for _, e := range endpoints {
		if e.Wants(ev.State) {
			ds = append(ds, NewDelivery{ID: storelink.NewID(now), EndpointID: e.ID, ClientID: o.ClientID, OrderID: ev.OrderID,
				EventID: ev.EventID, EventSeq: seq, EventState: ev.State, At: now})
		}
	}
	if len(ds) == 0 {
		return nil
	}
	return tx.InsertDeliveries(ctx, ds)
}
