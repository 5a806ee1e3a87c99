package service

import (
	"context"
	"slices"
	"time"

	"storelink"
)

// CancelOrder cancels an assigned order and, when asked, hands the items
// cancelled for stock reasons to another store that has them.
func (s *Orders) CancelOrder(ctx context.Context, id string, r storelink.CancelRequest) (*storelink.Order, error) {
	return s.changeOrder(ctx, id, func(tx OrderTx, o *storelink.Order, was []storelink.Item, now time.Time) error {
		ev, again, err := o.Cancel(r, storelink.NewID(now), now)
		if err != nil {
			return err
		}
		var next *storelink.Order
		var nextEv *storelink.Event
		if len(again) > 0 {
			needs := storelink.ItemNeeds(again)
			stock, err := routingStock(ctx, tx, o.ClientID, "", needs)
			if err != nil {
				return err
			}
			// The items cancelled here no longer hold stock at this store,
			// but this store is the one that could not serve them.
			if store := storelink.Route(needs, stock.Available(), o.StoreID); store != "" {
				next, nextEv = storelink.Reassign(o, again, store, stock[store], newIDFunc(now), now)
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
func (s *Orders) FulfilOrder(ctx context.Context, id string, r storelink.FulfilRequest) (*storelink.Order, error) {
	return s.changeOrder(ctx, id, func(tx OrderTx, o *storelink.Order, was []storelink.Item, now time.Time) error {
		ev, err := o.Fulfil(r, storelink.NewID(now), now)
		if err != nil {
			return err
		}
		return updateOrder(ctx, tx, o, was, ev, now)
	})
}

// ReturnItems records items of a store-fulfilled order coming back.
func (s *Orders) ReturnItems(ctx context.Context, id string, r storelink.ReturnRequest) (*storelink.Order, error) {
	return s.changeOrder(ctx, id, func(tx OrderTx, o *storelink.Order, was []storelink.Item, now time.Time) error {
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
func (s *Orders) WarehouseReturn(ctx context.Context, id string, r storelink.WarehouseReturnRequest) (*storelink.Order, error) {
	return s.changeOrder(ctx, id, func(tx OrderTx, o *storelink.Order, was []storelink.Item, now time.Time) error {
		ev, err := o.WarehouseReturn(r, storelink.NewID(now), now)
		if err != nil {
			return err
		}
		return updateOrder(ctx, tx, o, was, ev, now)
	})
}

// changeOrder loads an order for update, lets fn change it (fn writes the
// order and its events, given the items as they were read), and commits.
func (s *Orders) changeOrder(ctx context.Context, id string, fn func(tx OrderTx, o *storelink.Order, was []storelink.Item, now time.Time) error) (*storelink.Order, error) {
	var o *storelink.Order
	err := inTx(ctx, s.d, func(tx OrderTx) error {
		var err error
		if o, err = tx.GetOrder(ctx, GetOrderParams{ID: id, ForUpdate: true}); err != nil {
			return orderNotFound(err, id)
		}
		return fn(tx, o, slices.Clone(o.Items), s.now())
	})
	if err != nil {
		return nil, err
	}
	return o, nil
}

// updateOrder writes an order that an order call changed, the items that
// are new or differ from was (the items as they were read), then the event.
// Items an order call did not touch are not written again: a return of one
// item of three writes one.
func updateOrder(ctx context.Context, tx OrderTx, o *storelink.Order, was []storelink.Item, ev *storelink.Event, now time.Time) error {
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
	return writeOrder(ctx, tx, WriteOrderParams{Order: o, Inserted: inserted, Updated: updated, Event: ev, At: now})
}

// itemChanged tells whether an order call changed a field that WriteOrder
// writes; the others never change once an item exists.
func itemChanged(a, b storelink.Item) bool {
	return a.Status != b.Status || a.CancellationReason != b.CancellationReason ||
		!sameCode(a.ReturnReasonCode, b.ReturnReasonCode) || a.ReturnLocation != b.ReturnLocation ||
		a.ReturnStoreID != b.ReturnStoreID || a.Reserving != b.Reserving
}

func sameCode(a, b *storelink.ReturnReasonCode) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}
