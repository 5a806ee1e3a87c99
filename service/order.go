package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"storelink"
)

var (
	_ storelink.OrderService = (*Orders)(nil)
	_ storelink.EventService = (*Orders)(nil)
)

// soldStatuses are the statuses of the items whose units have left their
// store: fulfilled, and returned after that. An item holds a unit of its
// store's stock in force while its Reserving flag is set (storelink.Item),
// which StockInForce counts: from its assignment until it is cancelled or,
// once sold, until a feed row of its store and EAN applied after the sale
// ends its reservation, as the row's quantity no longer holds the unit.
// The feed's apply names these statuses to the driver; no driver names them.
var soldStatuses = []storelink.ItemStatus{storelink.ItemFulfilled, storelink.ItemReturned}

// Orders are the order calls, each of which writes the order's new state
// and its event in one transaction, and the reads of orders and events.
type Orders struct {
	config
	d OrderDriver
}

// CreateOrder assigns a new order to the given store or to the store that
// the stock in force routes it to, and writes its assigned event.
func (s *Orders) CreateOrder(ctx context.Context, n storelink.NewOrder) (*storelink.Order, error) {
	return s.createOrder(ctx, n, storelink.CreateOrderCall, func(tx OrderTx, n *storelink.NewOrder, c *storelink.Client, now time.Time) (*storelink.Order, *storelink.Event, error) {
		needs := n.Needs()
		stock, err := routingStock(ctx, tx, c.ID, n.StoreID, needs)
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
		return storelink.Assign(n, c, storeID, stock[storeID], newIDFunc(now), now)
	})
}

// CreateWarehouseOrder records an order the marketplace warehouse fulfilled.
// It reserves nothing, so it takes no routing lock.
func (s *Orders) CreateWarehouseOrder(ctx context.Context, n storelink.NewOrder) (*storelink.Order, error) {
	return s.createOrder(ctx, n, storelink.CreateWarehouseOrderCall, func(tx OrderTx, n *storelink.NewOrder, c *storelink.Client, now time.Time) (*storelink.Order, *storelink.Event, error) {
		stock, err := stockInForce(ctx, tx, c.ID, "", n.Needs())
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
		return storelink.NewWarehouseOrder(n, c, rows, newIDFunc(now), now)
	})
}

// createOrder is a create call: it validates n, then in one transaction
// answers a remembered idempotency key, or lets build make the order and its
// event for the client (from n as validated), writes them and remembers the
// key. The key's lock is taken before build runs, and so before the routing
// lock that build may take (routingStock): the two never deadlock.
func (s *Orders) createOrder(ctx context.Context, n storelink.NewOrder, call storelink.KeyedCall,
	build func(tx OrderTx, n *storelink.NewOrder, c *storelink.Client, now time.Time) (*storelink.Order, *storelink.Event, error)) (*storelink.Order, error) {
	hash := n.RequestHash(call) // of the request as sent, before Validate tidies it
	if err := n.Validate(); err != nil {
		return nil, err
	}
	var o *storelink.Order
	err := inTx(ctx, s.d, func(tx OrderTx) error {
		o = nil // inTx may run this again
		c, err := tx.GetClient(ctx, n.ClientID)
		if errors.Is(err, ErrNotFound) {
			return storelink.Errorf(storelink.EUNPROCESSABLE, "client_id %q is not a client.", n.ClientID)
		} else if err != nil {
			return err
		}
		if n.IdempotencyKey != "" {
			if o, err = s.replay(ctx, tx, c.ID, n.IdempotencyKey, hash); err != nil || o != nil {
				return err
			}
		}
		now := s.now() // after the key's lock, which may have been waited for
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

// replay takes the lock of the client's key and looks the key up. It returns the order
// the key stands for when the key is live and hash is the request that
// brought it, the error of Replays when hash is another request, and nil,
// nil when the key is not remembered (never seen, or expired): then the
// call goes ahead.
func (s *Orders) replay(ctx context.Context, tx OrderTx, clientID, key string, hash []byte) (*storelink.Order, error) {
	k, err := tx.GetOrderKey(ctx, GetOrderKeyParams{ClientID: clientID, Key: key, Lock: true})
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read idempotency key: %w", err)
	}
	if !k.Live(s.now()) {
		return nil, nil
	}
	if err := k.Replays(hash); err != nil {
		return nil, err
	}
	o, err := tx.GetOrder(ctx, GetOrderParams{ID: k.OrderID})
	if err != nil {
		return nil, fmt.Errorf("load order %s of an idempotency key: %w", k.OrderID, err)
	}
	o.Replayed = true
	return o, nil
}

// rememberKey writes a key with the order its call made, inside the
// transaction that wrote the order, and deletes a few expired keys: the
// calls that add keys keep the table to about a day's worth of them. An
// existing row of the key can only be an expired one (a live one is
// replayed instead): the key starts afresh.
func rememberKey(ctx context.Context, tx OrderTx, k storelink.OrderKey) error {
	if err := tx.PutOrderKey(ctx, k, k.CreatedAt.Add(-storelink.IdempotencyKeyTTL), storelink.KeySweep); err != nil {
		return fmt.Errorf("save idempotency key of order %s: %w", k.OrderID, err)
	}
	return nil
}

// stockInForce reads the stock in force of the EANs that an order needs.
func stockInForce(ctx context.Context, tx OrderTx, clientID, storeID string, needs map[string]int) (storelink.StoreStock, error) {
	return readStock(ctx, tx, StockInForceParams{ClientID: clientID, StoreID: storeID, EANs: slices.Collect(maps.Keys(needs))})
}

// routingStock takes the client's routing lock and then reads the stock in
// force of the EANs that an order needs, to reserve some of it: until the
// transaction ends, no other counts the units it finds free.
func routingStock(ctx context.Context, tx OrderTx, clientID, storeID string, needs map[string]int) (storelink.StoreStock, error) {
	return readStock(ctx, tx, StockInForceParams{ClientID: clientID, StoreID: storeID, EANs: slices.Collect(maps.Keys(needs)), Lock: true})
}

func readStock(ctx context.Context, tx OrderTx, p StockInForceParams) (storelink.StoreStock, error) {
	stock, err := tx.StockInForce(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("read stock in force: %w", err)
	}
	return stock, nil
}

// insertOrder writes a new order and its items, then its event: in this
// order, inside the caller's transaction, so that neither is ever without
// the other.
func insertOrder(ctx context.Context, tx OrderTx, o *storelink.Order, ev *storelink.Event, now time.Time) error {
	return writeOrder(ctx, tx, WriteOrderParams{Order: o, New: true, Event: ev, At: now})
}

// writeOrder writes an order and its event and, with them, a delivery
// for every endpoint of the client that wants the event's state: an event
// that exists is always delivered. The endpoints are read after the event
// is numbered, with the client's events locked: an endpoint operation that
// holds them (DeleteEndpoint) has committed before, or waits until this
// transaction has, and every endpoint change committed before the event was
// numbered is seen.
func writeOrder(ctx context.Context, tx OrderTx, p WriteOrderParams) error {
	endpoints, err := tx.WriteOrder(ctx, p)
	if err != nil {
		return fmt.Errorf("save order %s and its event: %w", p.Order.ID, err)
	}
	var ds []NewDelivery
	for _, e := range endpoints {
		if e.Wants(p.Event.State) {
			ds = append(ds, NewDelivery{ID: storelink.NewID(p.At), EndpointID: e.ID})
		}
	}
	if len(ds) == 0 {
		return nil
	}
	err = tx.InsertDeliveries(ctx, InsertDeliveriesParams{ClientID: p.Order.ClientID, Event: OrderEvent(p.Event), At: p.At,
		State: storelink.DeliveryPending, Deliveries: ds})
	if err != nil {
		return fmt.Errorf("queue deliveries of event %s: %w", p.Event.EventID, err)
	}
	return nil
}

// Order returns one order with its items.
func (s *Orders) Order(ctx context.Context, id string) (*storelink.Order, error) {
	o, err := s.d.GetOrder(ctx, id)
	if err != nil {
		return nil, orderNotFound(err, id)
	}
	return o, nil
}

// Orders lists orders, newest first.
func (s *Orders) Orders(ctx context.Context, f storelink.OrderFilter) ([]storelink.Order, error) {
	if f.Before != "" {
		// A before that is no order (of the client listed) would give an
		// empty page, which reads as the end of the list; another client's
		// order gets the very answer of an unknown id, so that a cursor
		// tells nothing of which orders exist.
		o, err := s.d.GetOrder(ctx, f.Before)
		if errors.Is(err, ErrNotFound) || err == nil && f.ClientID != "" && o.ClientID != f.ClientID {
			return nil, storelink.CursorError("before", f.Before)
		} else if err != nil {
			return nil, err
		}
	}
	return s.d.ListOrders(ctx, f)
}

// OrderEvents lists an order's events, oldest first.
func (s *Orders) OrderEvents(ctx context.Context, id string) ([]storelink.EventRecord, error) {
	ok, err := s.d.OrderExists(ctx, id)
	if err != nil {
		return nil, err
	} else if !ok {
		return nil, orderNotFound(ErrNotFound, id)
	}
	return s.d.ListOrderEvents(ctx, id)
}

// Events lists a client's events after a cursor, in the order they were
// committed. A cursor names an event (storelink.EventCursor): its number
// (on PostgreSQL among its client's events, on SQLite among all events)
// and a tag of its id. A cursor whose event is not the client's event of
// that number, or one past the client's newest event, is ECURSORAHEAD
// naming the newest: this database did not give it out, or was restored
// from a backup taken before it, and an empty page, or a page from there,
// would hide that the feed does not go on from it. A bare number is taken
// as cursors were before they had a tag: only checked against the newest.
// The newest cursor itself is an empty page.
func (s *Orders) Events(ctx context.Context, clientID, after string, limit int) ([]storelink.EventRecord, string, error) {
	var from int64
	var tag string
	if after != "" {
		var ok bool
		if from, tag, ok = storelink.ParseEventCursor(after); !ok {
			return nil, "", storelink.CursorError("after", after)
		}
	}
	var list []storelink.EventRecord
	var err error
	if tag != "" {
		// The cursor's own event first, to check it is the one named.
		list, err = s.d.ListEvents(ctx, clientID, from-1, limit+1)
		if err == nil && (len(list) == 0 || eventNumber(list[0]) != from || !storelink.TagOf(tag, list[0].EventID)) {
			return nil, "", s.cursorAhead(ctx, clientID, after)
		}
		if err == nil {
			list = list[1:]
		}
	} else {
		list, err = s.d.ListEvents(ctx, clientID, from, limit)
	}
	if err != nil {
		return nil, "", err
	}
	if len(list) == 0 && from > 0 && tag == "" {
		newest, err := s.d.NewestEvent(ctx, clientID)
		if err != nil {
			return nil, "", err
		}
		if newest == nil || from > eventNumber(*newest) {
			return nil, "", s.cursorAhead(ctx, clientID, after)
		}
	}
	for i := range list {
		list[i].Cursor = storelink.EventCursor(eventNumber(list[i]), list[i].EventID)
	}
	next := after
	if len(list) > 0 {
		next = list[len(list)-1].Cursor
	}
	return list, next, nil
}

// cursorAhead is ECURSORAHEAD for after, naming the client's newest cursor
// ("0" when it has no event).
func (s *Orders) cursorAhead(ctx context.Context, clientID, after string) error {
	newest, err := s.d.NewestEvent(ctx, clientID)
	if err != nil {
		return err
	}
	cursor := "0"
	if newest != nil {
		cursor = storelink.EventCursor(eventNumber(*newest), newest.EventID)
	}
	return storelink.CursorAhead(after, cursor)
}

// eventNumber is the number a driver gave an event record as its Cursor.
func eventNumber(r storelink.EventRecord) int64 {
	n, _ := strconv.ParseInt(r.Cursor, 10, 64)
	return n
}

// orderNotFound turns ErrNotFound into ENOTFOUND for the order id.
func orderNotFound(err error, id string) error {
	if errors.Is(err, ErrNotFound) {
		return storelink.Errorf(storelink.ENOTFOUND, "Order %q not found.", id)
	}
	return err
}
