package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"storelink"
)

var (
	_ storelink.OrderService = (*DB)(nil)
	_ storelink.EventService = (*DB)(nil)
)

func (db *DB) idsAt(now time.Time) func() string {
	return func() string { return storelink.NewID(now) }
}

// CreateOrder assigns a new order to the given store or to the store that
// the stock in force routes it to, and writes its assigned event.
func (db *DB) CreateOrder(ctx context.Context, n storelink.NewOrder) (*storelink.Order, error) {
	return db.createOrder(ctx, n, storelink.CallCreateOrder, func(tx orderTx, n *storelink.NewOrder, c *storelink.Client, now time.Time) (*storelink.Order, *storelink.Event, error) {
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
		return storelink.Assign(n, c, storeID, stock[storeID], db.idsAt(now), now)
	})
}

// CreateWarehouseOrder records an order the marketplace warehouse fulfilled.
func (db *DB) CreateWarehouseOrder(ctx context.Context, n storelink.NewOrder) (*storelink.Order, error) {
	return db.createOrder(ctx, n, storelink.CallCreateWarehouseOrder, func(tx orderTx, n *storelink.NewOrder, c *storelink.Client, now time.Time) (*storelink.Order, *storelink.Event, error) {
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
		return storelink.NewWarehouseOrder(n, c, rows, db.idsAt(now), now)
	})
}

// createOrder is a create call: it validates n, then in one write
// transaction answers a remembered idempotency key, or lets build make the
// order and its event for the client (from n as validated), writes them and
// remembers the key.
func (db *DB) createOrder(ctx context.Context, n storelink.NewOrder, call string,
	build func(tx orderTx, n *storelink.NewOrder, c *storelink.Client, now time.Time) (*storelink.Order, *storelink.Event, error)) (*storelink.Order, error) {
	hash := n.RequestHash(call) // of the request as sent, before Validate tidies it
	if err := n.Validate(); err != nil {
		return nil, err
	}
	var o *storelink.Order
	err := db.inOrderTx(ctx, func(tx orderTx) error {
		now := db.now()
		if n.IdempotencyKey != "" {
			var err error
			if o, err = replay(ctx, tx, n.ClientID, n.IdempotencyKey, hash, now); err != nil || o != nil {
				return err
			}
		}
		c, err := orderClient(ctx, tx, n.ClientID)
		if err != nil {
			return err
		}
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
	return db.changeOrder(ctx, id, func(tx orderTx, o *storelink.Order, was []storelink.Item, now time.Time) error {
		ev, again, err := o.Cancel(r, storelink.NewID(now), now)
		if err != nil {
			return err
		}
		var next *storelink.Order
		var nextEv *storelink.Event
		if len(again) > 0 {
			needs := storelink.ItemNeeds(again)
			stock, err := stockInForce(ctx, tx, o.ClientID, "", slices.Collect(maps.Keys(needs)))
			if err != nil {
				return err
			}
			// The items cancelled here no longer hold stock at this store,
			// but this store is the one that could not serve them.
			if store := storelink.Route(needs, stock.Available(), o.StoreID); store != "" {
				next, nextEv = storelink.Reassign(o, again, store, stock[store], db.idsAt(now), now)
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
	return db.changeOrder(ctx, id, func(tx orderTx, o *storelink.Order, was []storelink.Item, now time.Time) error {
		ev, err := o.Fulfil(r, storelink.NewID(now), now)
		if err != nil {
			return err
		}
		return updateOrder(ctx, tx, o, was, ev, now)
	})
}

// ReturnItems records items of a store-fulfilled order coming back.
func (db *DB) ReturnItems(ctx context.Context, id string, r storelink.ReturnRequest) (*storelink.Order, error) {
	return db.changeOrder(ctx, id, func(tx orderTx, o *storelink.Order, was []storelink.Item, now time.Time) error {
		var lookupErr error
		storeExists := func(store string) bool {
			err := exists(ctx, tx, storeExistsSQL, o.ClientID, store)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
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
	return db.changeOrder(ctx, id, func(tx orderTx, o *storelink.Order, was []storelink.Item, now time.Time) error {
		ev, err := o.WarehouseReturn(r, storelink.NewID(now), now)
		if err != nil {
			return err
		}
		return updateOrder(ctx, tx, o, was, ev, now)
	})
}

// changeOrder loads an order in a write transaction, lets fn change it (fn
// writes the order and its events, given the items as they were read), and
// commits.
func (db *DB) changeOrder(ctx context.Context, id string, fn func(tx orderTx, o *storelink.Order, was []storelink.Item, now time.Time) error) (*storelink.Order, error) {
	var o *storelink.Order
	err := db.inOrderTx(ctx, func(tx orderTx) error {
		var err error
		if o, err = loadOrder(ctx, tx, id); err != nil {
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
	var created int64
	err := q.QueryRowContext(ctx, clientSQL, id).
		Scan(&c.ID, &c.PartnerID, &c.CountryCode, &c.Currency, &created)
	if err != nil {
		return nil, unprocessable(err, "client_id %q is not a client.", id)
	}
	c.CreatedAt = fromMS(created)
	return c, nil
}

// unprocessable turns sql.ErrNoRows into EUNPROCESSABLE: an id in a body
// that names nothing is a bad request body, not a missing resource.
func unprocessable(err error, format string, args ...any) error {
	if errors.Is(err, sql.ErrNoRows) {
		return storelink.Errorf(storelink.EUNPROCESSABLE, format, args...)
	}
	return err
}

// stockInForce reads the stock rows of the EANs at one store, or at all of
// the client's stores, with the units reserved by orders.
func stockInForce(ctx context.Context, q querier, clientID, storeID string, eans []string) (storelink.StoreStock, error) {
	list, _ := json.Marshal(eans) // strings always encode
	query, args := stockInForceSQL, []any{clientID, string(list)}
	if storeID != "" {
		query, args = stockInForceAtSQL, append(args, storeID)
	}
	rows, err := q.QueryContext(ctx, query, args...)
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

// The statements of the order calls' write transactions. They are constants
// so that they can be prepared once, when the database is opened (see
// orderTx); orderStatements lists them.
const (
	storeExistsSQL = `SELECT 1 FROM stores WHERE client_id = ? AND id = ?`
	clientSQL      = `SELECT id, partner_id, country_code, currency, created_at FROM clients WHERE id = ?`
	// The stock rows of a client's stores for a JSON array of EANs, with
	// the units reserved by orders. The store_id condition lets SQLite look
	// every row up by its primary key instead of reading all of the
	// client's stock (every store's whole catalogue) to find a few EANs;
	// stock rows only ever exist for the client's stores.
	stockInForceSQL = `SELECT s.store_id, s.ean, s.article_number, s.quantity, s.price, s.article_location,
		(SELECT count(*) FROM order_items i WHERE i.reserving = 1 AND i.client_id = s.client_id AND i.store_id = s.store_id AND i.ean = s.ean)
		FROM stock s WHERE s.client_id = ?1 AND s.ean IN (SELECT value FROM json_each(?2))
		AND s.store_id IN (SELECT id FROM stores WHERE client_id = ?1)`
	stockInForceAtSQL = `SELECT s.store_id, s.ean, s.article_number, s.quantity, s.price, s.article_location,
		(SELECT count(*) FROM order_items i WHERE i.reserving = 1 AND i.client_id = s.client_id AND i.store_id = s.store_id AND i.ean = s.ean)
		FROM stock s WHERE s.client_id = ?1 AND s.ean IN (SELECT value FROM json_each(?2)) AND s.store_id = ?3`
	insertOrderSQL = `INSERT INTO orders (id, client_id, order_number, store_id, state, billing, delivery,
		reassigned_from, reassigned_order_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	updateOrderSQL = `UPDATE orders SET state = ?, billing = ?, delivery = ?, reassigned_order_id = ?, updated_at = ?
		WHERE id = ?`
	insertItemSQL = `INSERT INTO order_items (item_id, order_id, pos, client_id, store_id, ean, price, currency,
		article_number, marketplace_article_number, article_location, status, cancellation_reason, return_reason_code,
		return_location, return_store_id, reserving) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (item_id) DO UPDATE SET status = excluded.status, cancellation_reason = excluded.cancellation_reason,
		return_reason_code = excluded.return_reason_code, return_location = excluded.return_location,
		return_store_id = excluded.return_store_id, reserving = excluded.reserving`
	// updateItemSQL sets what insertItemSQL sets on a conflict: the fields
	// of an item that an order call can change.
	updateItemSQL = `UPDATE order_items SET status = ?, cancellation_reason = ?, return_reason_code = ?,
		return_location = ?, return_store_id = ?, reserving = ? WHERE item_id = ?`
	insertEventSQL = `INSERT INTO events (id, client_id, order_id, state, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)`
	orderSQL       = `SELECT ` + orderColumns + ` FROM orders WHERE id = ?`
	itemsSQL       = `SELECT item_id, ean, price, currency, article_number, marketplace_article_number,
		article_location, status, cancellation_reason, return_reason_code, return_location, return_store_id, reserving
		FROM order_items WHERE order_id = ? ORDER BY pos`
)

var orderStatements = append([]string{storeExistsSQL, clientSQL, stockInForceSQL, stockInForceAtSQL, insertOrderSQL,
	updateOrderSQL, insertItemSQL, updateItemSQL, insertEventSQL, orderSQL, itemsSQL}, orderKeyStatements...)

// insertOrder writes a new order and its items, then its event: in this
// order, inside the caller's transaction, so that neither is ever without
// the other.
func insertOrder(ctx context.Context, tx orderTx, o *storelink.Order, ev *storelink.Event, now time.Time) error {
	_, err := tx.ExecContext(ctx, insertOrderSQL,
		o.ID, o.ClientID, o.OrderNumber, nullString(o.StoreID), o.State, jsonOrNull(o.CustomerBillingAddress),
		jsonOrNull(o.DeliveryDetails), nullString(o.ReassignedFrom), nullString(o.ReassignedOrderID), ms(o.CreatedAt), ms(o.UpdatedAt))
	if err != nil {
		return fmt.Errorf("save order %s: %w", o.ID, err)
	}
	for pos := range o.Items {
		if err := insertItem(ctx, tx, o, pos); err != nil {
			return err
		}
	}
	return insertEvent(ctx, tx, o, ev, now)
}

// updateOrder writes an order that an order call changed, the items that
// differ from was (the items as they were read), then the event. Items an
// order call did not touch are not written again: a return of one item of
// three writes one.
func updateOrder(ctx context.Context, tx orderTx, o *storelink.Order, was []storelink.Item, ev *storelink.Event, now time.Time) error {
	_, err := tx.ExecContext(ctx, updateOrderSQL, o.State, jsonOrNull(o.CustomerBillingAddress), jsonOrNull(o.DeliveryDetails),
		nullString(o.ReassignedOrderID), ms(o.UpdatedAt), o.ID)
	if err != nil {
		return fmt.Errorf("save order %s: %w", o.ID, err)
	}
	for pos, it := range o.Items {
		i := slices.IndexFunc(was, func(w storelink.Item) bool { return w.ItemID == it.ItemID })
		switch {
		case i < 0:
			err = insertItem(ctx, tx, o, pos)
		case itemChanged(was[i], it):
			_, err = tx.ExecContext(ctx, updateItemSQL, it.Status, it.CancellationReason, reasonCode(it.ReturnReasonCode),
				it.ReturnLocation, it.ReturnStoreID, it.Reserving, it.ItemID)
		}
		if err != nil {
			return fmt.Errorf("save item %s: %w", it.ItemID, err)
		}
	}
	return insertEvent(ctx, tx, o, ev, now)
}

// itemChanged tells whether an order call changed a field that updateItemSQL
// writes; the others never change once an item exists.
func itemChanged(a, b storelink.Item) bool {
	return a.Status != b.Status || a.CancellationReason != b.CancellationReason ||
		reasonCode(a.ReturnReasonCode) != reasonCode(b.ReturnReasonCode) || a.ReturnLocation != b.ReturnLocation ||
		a.ReturnStoreID != b.ReturnStoreID || a.Reserving != b.Reserving
}

func reasonCode(c *storelink.ReturnReasonCode) any {
	if c == nil {
		return nil
	}
	return int(*c)
}

func insertItem(ctx context.Context, tx orderTx, o *storelink.Order, pos int) error {
	it := o.Items[pos]
	_, err := tx.ExecContext(ctx, insertItemSQL,
		it.ItemID, o.ID, pos, o.ClientID, nullString(o.StoreID), it.EAN, int64(it.Price), it.Currency, it.ArticleNumber,
		it.MarketplaceArticleNumber, it.ArticleLocation, it.Status, it.CancellationReason, reasonCode(it.ReturnReasonCode),
		it.ReturnLocation, it.ReturnStoreID, it.Reserving)
	if err != nil {
		return fmt.Errorf("save item %s: %w", it.ItemID, err)
	}
	return nil
}

func insertEvent(ctx context.Context, tx orderTx, o *storelink.Order, ev *storelink.Event, now time.Time) error {
	res, err := tx.ExecContext(ctx, insertEventSQL, ev.EventID, o.ClientID, o.ID, ev.State, string(ev.Marshal()), ms(now))
	if err != nil {
		return fmt.Errorf("write event of order %s: %w", o.ID, err)
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("write event of order %s: %w", o.ID, err)
	}
	// The deliveries go in with the event: an event that exists is always
	// delivered.
	return createDeliveries(ctx, tx, ev, o.ClientID, seq, now)
}

func jsonOrNull[T any](v *T) any {
	if v == nil {
		return nil
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

const orderColumns = `id, client_id, order_number, store_id, state, billing, delivery, reassigned_from, reassigned_order_id, created_at, updated_at`

func scanOrder(row interface{ Scan(...any) error }) (*storelink.Order, error) {
	o := &storelink.Order{}
	var store, billing, delivery, from, to sql.NullString
	var created, updated int64
	if err := row.Scan(&o.ID, &o.ClientID, &o.OrderNumber, &store, &o.State, &billing, &delivery, &from, &to, &created, &updated); err != nil {
		return nil, err
	}
	o.StoreID, o.ReassignedFrom, o.ReassignedOrderID = store.String, from.String, to.String
	o.CreatedAt, o.UpdatedAt = fromMS(created), fromMS(updated)
	if billing.Valid {
		o.CustomerBillingAddress = &storelink.Address{}
		if err := json.Unmarshal([]byte(billing.String), o.CustomerBillingAddress); err != nil {
			return nil, fmt.Errorf("decode billing address of order %s: %w", o.ID, err)
		}
	}
	if delivery.Valid {
		o.DeliveryDetails = &storelink.DeliveryDetails{}
		if err := json.Unmarshal([]byte(delivery.String), o.DeliveryDetails); err != nil {
			return nil, fmt.Errorf("decode delivery details of order %s: %w", o.ID, err)
		}
	}
	return o, nil
}

func loadOrder(ctx context.Context, q querier, id string) (*storelink.Order, error) {
	o, err := scanOrder(q.QueryRowContext(ctx, orderSQL, id))
	if err != nil {
		return nil, notFound(err, "order %q", id)
	}
	return o, loadItems(ctx, q, o)
}

func loadItems(ctx context.Context, q querier, o *storelink.Order) error {
	rows, err := q.QueryContext(ctx, itemsSQL, o.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	o.Items = []storelink.Item{}
	for rows.Next() {
		var it storelink.Item
		var price int64
		var code sql.NullInt64
		if err := rows.Scan(&it.ItemID, &it.EAN, &price, &it.Currency, &it.ArticleNumber, &it.MarketplaceArticleNumber,
			&it.ArticleLocation, &it.Status, &it.CancellationReason, &code, &it.ReturnLocation, &it.ReturnStoreID, &it.Reserving); err != nil {
			return err
		}
		it.Price = storelink.Money(price)
		if code.Valid {
			c := storelink.ReturnReasonCode(code.Int64)
			it.ReturnReasonCode = &c
		}
		o.Items = append(o.Items, it)
	}
	return rows.Err()
}

// Order returns one order with its items.
func (db *DB) Order(ctx context.Context, id string) (*storelink.Order, error) {
	return loadOrder(ctx, db.read, id)
}

// Orders lists orders, newest first.
func (db *DB) Orders(ctx context.Context, f storelink.OrderFilter) ([]storelink.Order, error) {
	q := `SELECT ` + orderColumns + ` FROM orders WHERE 1 = 1`
	var args []any
	for _, c := range []struct{ col, v string }{{"client_id", f.ClientID}, {"order_number", f.OrderNumber}, {"state", string(f.State)}} {
		if c.v != "" {
			q += ` AND ` + c.col + ` = ?`
			args = append(args, c.v)
		}
	}
	if f.Before != "" {
		q += ` AND seq < (SELECT seq FROM orders WHERE id = ?)`
		args = append(args, f.Before)
	}
	q += ` ORDER BY seq DESC LIMIT ?`
	args = append(args, f.Limit)
	rows, err := db.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	var out []storelink.Order
	for rows.Next() {
		o, err := scanOrder(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, *o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		if err := loadItems(ctx, db.read, &out[i]); err != nil {
			return nil, err
		}
	}
	if out == nil {
		out = []storelink.Order{}
	}
	return out, nil
}

func queryEvents(ctx context.Context, q querier, where string, args ...any) ([]storelink.EventRecord, error) {
	rows, err := q.QueryContext(ctx, `SELECT seq, id, client_id, order_id, state, payload, created_at FROM events WHERE `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []storelink.EventRecord{}
	for rows.Next() {
		var r storelink.EventRecord
		var seq, created int64
		var payload string
		if err := rows.Scan(&seq, &r.EventID, &r.ClientID, &r.OrderID, &r.State, &payload, &created); err != nil {
			return nil, err
		}
		r.Payload, r.Cursor, r.CreatedAt = json.RawMessage(payload), strconv.FormatInt(seq, 10), fromMS(created)
		out = append(out, r)
	}
	return out, rows.Err()
}

// OrderEvents lists an order's events, oldest first.
func (db *DB) OrderEvents(ctx context.Context, id string) ([]storelink.EventRecord, error) {
	if err := exists(ctx, db.read, `SELECT 1 FROM orders WHERE id = ?`, id); err != nil {
		return nil, notFound(err, "order %q", id)
	}
	return queryEvents(ctx, db.read, `order_id = ? ORDER BY seq`, id)
}

// Events lists a client's events after a cursor, in the order they were
// committed. SQLite has one writer, so sequence order is commit order.
func (db *DB) Events(ctx context.Context, clientID, after string, limit int) ([]storelink.EventRecord, string, error) {
	var from int64
	if after != "" {
		var err error
		if from, err = strconv.ParseInt(after, 10, 64); err != nil || from < 0 {
			return nil, "", storelink.Errorf(storelink.EINVALID, "after %q is not a cursor returned by this call.", after)
		}
	}
	list, err := queryEvents(ctx, db.read, `client_id = ? AND seq > ? ORDER BY seq LIMIT ?`, clientID, from, limit)
	if err != nil {
		return nil, "", err
	}
	next := after
	if len(list) > 0 {
		next = list[len(list)-1].Cursor
	}
	return list, next, nil
}
