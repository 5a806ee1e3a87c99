package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
)

var (
	_ storelink.OrderService = (*DB)(nil)
	_ storelink.EventService = (*DB)(nil)
)

func idsAt(now time.Time) func() string {
	return func() string { return storelink.NewID(now) }
}

// lockRoutingOf takes the client's routing lock until the transaction ends.
// Routing reads the stock in force (quantity − reserved units) and then
// reserves units by writing items; two transactions doing that at once
// would both see the same free unit. SQLite has one writer; here the
// transactions that route for one client go one at a time, and each reads
// the stock after the previous one committed (READ COMMITTED takes a new
// snapshot for every statement).
func lockRoutingOf(ctx context.Context, tx pgx.Tx, clientID string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, lockRouting, clientID); err != nil {
		return fmt.Errorf("take routing lock: %w", err)
	}
	return nil
}

// CreateOrder assigns a new order to the given store or to the store that
// the stock in force routes it to, and writes its assigned event.
func (db *DB) CreateOrder(ctx context.Context, n storelink.NewOrder) (*storelink.Order, error) {
	return db.createOrder(ctx, n, storelink.CallCreateOrder, true, func(tx pgx.Tx, n *storelink.NewOrder, c *storelink.Client, now time.Time) (*storelink.Order, *storelink.Event, error) {
		needs := n.Needs()
		stock, err := stockInForce(ctx, tx, c.ID, n.StoreID, slices.Collect(maps.Keys(needs)))
		if err != nil {
			return nil, nil, err
		}
		storeID := n.StoreID
		if storeID != "" {
			if err := exists(ctx, tx, storeExistsSQL, c.ID, storeID); err != nil {
				return nil, nil, unprocessable(err, "store_id %q is not a store of client %s.", storeID, c.ID)
			}
		} else if storeID = storelink.Route(needs, stock.Available(), ""); storeID == "" {
			return nil, nil, storelink.Errorf(storelink.ECONFLICT, "No store of client %s has stock in force for every item of this order.", c.ID)
		}
		return storelink.Assign(n, c, storeID, stock[storeID], idsAt(now), now)
	})
}

// CreateWarehouseOrder records an order the marketplace warehouse fulfilled.
// It reserves nothing, so it takes no routing lock.
func (db *DB) CreateWarehouseOrder(ctx context.Context, n storelink.NewOrder) (*storelink.Order, error) {
	return db.createOrder(ctx, n, storelink.CallCreateWarehouseOrder, false, func(tx pgx.Tx, n *storelink.NewOrder, c *storelink.Client, now time.Time) (*storelink.Order, *storelink.Event, error) {
		stock, err := stockInForce(ctx, tx, c.ID, "", slices.Collect(maps.Keys(n.Needs())))
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
// key. routes takes the client's routing lock before build runs.
func (db *DB) createOrder(ctx context.Context, n storelink.NewOrder, call string, routes bool,
	build func(tx pgx.Tx, n *storelink.NewOrder, c *storelink.Client, now time.Time) (*storelink.Order, *storelink.Event, error)) (*storelink.Order, error) {
	hash := n.RequestHash(call) // of the request as sent, before Validate tidies it
	if err := n.Validate(); err != nil {
		return nil, err
	}
	var o *storelink.Order
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		o = nil // inTx may run this again
		c, err := orderClient(ctx, tx, n.ClientID)
		if err != nil {
			return err
		}
		if n.IdempotencyKey != "" {
			if err := lockKey(ctx, tx, c.ID, n.IdempotencyKey); err != nil {
				return err
			}
			if o, err = replay(ctx, tx, c.ID, n.IdempotencyKey, hash, db.now()); err != nil || o != nil {
				return err
			}
		}
		if routes {
			if err := lockRoutingOf(ctx, tx, c.ID); err != nil {
				return err
			}
		}
		now := db.now() // after the locks, which may have been waited for
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
func (db *DB) CancelOrder(ctx context.Context, id string, r storelink.CancelRequest) (*storelink.Order, error) {
	return db.changeOrder(ctx, id, func(tx pgx.Tx, o *storelink.Order, was []storelink.Item, now time.Time) error {
		ev, again, err := o.Cancel(r, storelink.NewID(now), now)
		if err != nil {
			return err
		}
		var next *storelink.Order
		var nextEv *storelink.Event
		if len(again) > 0 {
			if err := lockRoutingOf(ctx, tx, o.ClientID); err != nil {
				return err
			}
			needs := storelink.ItemNeeds(again)
			stock, err := stockInForce(ctx, tx, o.ClientID, "", slices.Collect(maps.Keys(needs)))
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
func (db *DB) FulfilOrder(ctx context.Context, id string, r storelink.FulfilRequest) (*storelink.Order, error) {
	return db.changeOrder(ctx, id, func(tx pgx.Tx, o *storelink.Order, was []storelink.Item, now time.Time) error {
		ev, err := o.Fulfil(r, storelink.NewID(now), now)
		if err != nil {
			return err
		}
		return updateOrder(ctx, tx, o, was, ev, now)
	})
}

// ReturnItems records items of a store-fulfilled order coming back.
func (db *DB) ReturnItems(ctx context.Context, id string, r storelink.ReturnRequest) (*storelink.Order, error) {
	return db.changeOrder(ctx, id, func(tx pgx.Tx, o *storelink.Order, was []storelink.Item, now time.Time) error {
		var lookupErr error
		storeExists := func(store string) bool {
			err := exists(ctx, tx, storeExistsSQL, o.ClientID, store)
			if err != nil && !noRows(err) {
				lookupErr = err
			}
			return err == nil
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
func (db *DB) WarehouseReturn(ctx context.Context, id string, r storelink.WarehouseReturnRequest) (*storelink.Order, error) {
	return db.changeOrder(ctx, id, func(tx pgx.Tx, o *storelink.Order, was []storelink.Item, now time.Time) error {
		ev, err := o.WarehouseReturn(r, storelink.NewID(now), now)
		if err != nil {
			return err
		}
		return updateOrder(ctx, tx, o, was, ev, now)
	})
}

// changeOrder loads an order with its row locked, lets fn change it (fn
// writes the order and its events, given the items as they were read), and
// commits. The lock makes racing changes of one order wait for each other,
// so each decides on the state the previous one left.
func (db *DB) changeOrder(ctx context.Context, id string, fn func(tx pgx.Tx, o *storelink.Order, was []storelink.Item, now time.Time) error) (*storelink.Order, error) {
	var o *storelink.Order
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if o, err = loadOrder(ctx, tx, id, true); err != nil {
			return err
		}
		return fn(tx, o, slices.Clone(o.Items), db.now())
	})
	if err != nil {
		return nil, err
	}
	return o, nil
}

func orderClient(ctx context.Context, q querier, id string) (*storelink.Client, error) {
	c := &storelink.Client{}
	err := q.QueryRow(ctx, `SELECT id, partner_id, country_code, currency, created_at FROM clients WHERE id = $1`, id).
		Scan(&c.ID, &c.PartnerID, &c.CountryCode, &c.Currency, &c.CreatedAt)
	if err != nil {
		return nil, unprocessable(err, "client_id %q is not a client.", id)
	}
	return c, nil
}

const storeExistsSQL = `SELECT 1 FROM stores WHERE client_id = $1 AND id = $2`

// stockInForce reads the stock rows of the EANs at one store, or at all of
// the client's stores, with the units reserved by orders.
func stockInForce(ctx context.Context, q querier, clientID, storeID string, eans []string) (storelink.StoreStock, error) {
	query := `SELECT s.store_id, s.ean, s.article_number, s.quantity, s.price, s.article_location,
		(SELECT count(*) FROM order_items i WHERE i.reserving AND i.client_id = s.client_id AND i.store_id = s.store_id AND i.ean = s.ean)
		FROM stock s WHERE s.client_id = $1 AND s.ean = ANY($2)`
	a := []any{clientID, eans}
	if storeID != "" {
		query, a = query+` AND s.store_id = $3`, append(a, storeID)
	} else {
		// Stock rows only ever exist for the client's stores; the
		// condition is kept so that a deleted store's leftovers, if any,
		// never route an order.
		query += ` AND s.store_id IN (SELECT id FROM stores WHERE client_id = $1)`
	}
	rows, err := q.Query(ctx, query, a...)
	if err != nil {
		return nil, fmt.Errorf("read stock in force: %w", err)
	}
	defer rows.Close()
	out := storelink.StoreStock{}
	for rows.Next() {
		s := &storelink.Stock{}
		var price int64
		if err := rows.Scan(&s.StoreID, &s.EAN, &s.ArticleNumber, &s.Quantity, &price, &s.ArticleLocation, &s.Reserved); err != nil {
			return nil, err
		}
		s.Price = storelink.Money(price)
		out.Add(s)
	}
	return out, rows.Err()
}
