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
	"strings"
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
	if err := n.Validate(); err != nil {
		return nil, err
	}
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	now := db.now()
	c, err := orderClient(ctx, tx, n.ClientID)
	if err != nil {
		return nil, err
	}
	needs := n.Needs()
	stock, err := stockInForce(ctx, tx, c.ID, n.StoreID, slices.Collect(maps.Keys(needs)))
	if err != nil {
		return nil, err
	}
	storeID := n.StoreID
	if storeID != "" {
		if err := exists(ctx, tx, `SELECT 1 FROM stores WHERE client_id = ? AND id = ?`, c.ID, storeID); err != nil {
			return nil, unprocessable(err, "store_id %q is not a store of client %s.", storeID, c.ID)
		}
	} else if storeID = storelink.Route(needs, available(stock), ""); storeID == "" {
		return nil, storelink.Errorf(storelink.ECONFLICT, "No store of client %s has stock in force for every item of this order.", c.ID)
	}
	o, ev, err := storelink.Assign(&n, c, storeID, stock[storeID], db.idsAt(now), now)
	if err != nil {
		return nil, err
	}
	if err := saveOrder(ctx, tx, o, true, ev, now); err != nil {
		return nil, err
	}
	return o, tx.Commit()
}

// CreateWarehouseOrder records an order the marketplace warehouse fulfilled.
func (db *DB) CreateWarehouseOrder(ctx context.Context, n storelink.NewOrder) (*storelink.Order, error) {
	if err := n.Validate(); err != nil {
		return nil, err
	}
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	now := db.now()
	c, err := orderClient(ctx, tx, n.ClientID)
	if err != nil {
		return nil, err
	}
	stock, err := stockInForce(ctx, tx, c.ID, "", slices.Collect(maps.Keys(n.Needs())))
	if err != nil {
		return nil, err
	}
	// Article data for EANs not described in the request: the row of the
	// lowest store id that has one.
	rows := map[string]*storelink.Stock{}
	for _, id := range slices.Sorted(maps.Keys(stock)) {
		for ean, r := range stock[id] {
			if rows[ean] == nil {
				rows[ean] = r
			}
		}
	}
	o, ev, err := storelink.NewWarehouseOrder(&n, c, rows, db.idsAt(now), now)
	if err != nil {
		return nil, err
	}
	if err := saveOrder(ctx, tx, o, true, ev, now); err != nil {
		return nil, err
	}
	return o, tx.Commit()
}

// CancelOrder cancels an assigned order and, when asked, hands the items
// cancelled for stock reasons to another store that has them.
func (db *DB) CancelOrder(ctx context.Context, id string, r storelink.CancelRequest) (*storelink.Order, error) {
	return db.changeOrder(ctx, id, func(tx *sql.Tx, o *storelink.Order, now time.Time) error {
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
			if store := storelink.Route(needs, available(stock), o.StoreID); store != "" {
				next, nextEv = storelink.Reassign(o, again, store, stock[store], db.idsAt(now), now)
			}
		}
		if err := saveOrder(ctx, tx, o, false, ev, now); err != nil {
			return err
		}
		if next != nil {
			return saveOrder(ctx, tx, next, true, nextEv, now)
		}
		return nil
	})
}

// FulfilOrder fulfils an assigned order.
func (db *DB) FulfilOrder(ctx context.Context, id string, r storelink.FulfilRequest) (*storelink.Order, error) {
	return db.changeOrder(ctx, id, func(tx *sql.Tx, o *storelink.Order, now time.Time) error {
		ev, err := o.Fulfil(r, storelink.NewID(now), now)
		if err != nil {
			return err
		}
		return saveOrder(ctx, tx, o, false, ev, now)
	})
}

// ReturnItems records items of a store-fulfilled order coming back.
func (db *DB) ReturnItems(ctx context.Context, id string, r storelink.ReturnRequest) (*storelink.Order, error) {
	return db.changeOrder(ctx, id, func(tx *sql.Tx, o *storelink.Order, now time.Time) error {
		var lookupErr error
		storeExists := func(store string) bool {
			err := exists(ctx, tx, `SELECT 1 FROM stores WHERE client_id = ? AND id = ?`, o.ClientID, store)
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
		return saveOrder(ctx, tx, o, false, ev, now)
	})
}

// WarehouseReturn records items of a warehouse-fulfilled order coming back.
func (db *DB) WarehouseReturn(ctx context.Context, id string, r storelink.WarehouseReturnRequest) (*storelink.Order, error) {
	return db.changeOrder(ctx, id, func(tx *sql.Tx, o *storelink.Order, now time.Time) error {
		ev, err := o.WarehouseReturn(r, storelink.NewID(now), now)
		if err != nil {
			return err
		}
		return saveOrder(ctx, tx, o, false, ev, now)
	})
}

// changeOrder loads an order in a write transaction, lets fn change it (fn
// writes the order and its events), and commits.
func (db *DB) changeOrder(ctx context.Context, id string, fn func(tx *sql.Tx, o *storelink.Order, now time.Time) error) (*storelink.Order, error) {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	o, err := loadOrder(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	if err := fn(tx, o, db.now()); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit order %s: %w", id, err)
	}
	return o, nil
}

func orderClient(ctx context.Context, q querier, id string) (*storelink.Client, error) {
	c := &storelink.Client{}
	var created int64
	err := q.QueryRowContext(ctx, `SELECT id, partner_id, country_code, currency, created_at FROM clients WHERE id = ?`, id).
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
func stockInForce(ctx context.Context, q querier, clientID, storeID string, eans []string) (map[string]map[string]*storelink.Stock, error) {
	query := `SELECT s.store_id, s.ean, s.article_number, s.quantity, s.price, s.article_location,
		(SELECT count(*) FROM order_items i WHERE i.reserving = 1 AND i.client_id = s.client_id AND i.store_id = s.store_id AND i.ean = s.ean)
		FROM stock s WHERE s.client_id = ? AND s.ean IN (` + strings.TrimSuffix(strings.Repeat("?,", len(eans)), ",") + `)`
	args := []any{clientID}
	for _, e := range eans {
		args = append(args, e)
	}
	if storeID != "" {
		query += ` AND s.store_id = ?`
		args = append(args, storeID)
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read stock in force: %w", err)
	}
	defer rows.Close()
	out := map[string]map[string]*storelink.Stock{}
	for rows.Next() {
		s := &storelink.Stock{}
		var price int64
		if err := rows.Scan(&s.StoreID, &s.EAN, &s.ArticleNumber, &s.Quantity, &price, &s.ArticleLocation, &s.Reserved); err != nil {
			return nil, err
		}
		s.Price, s.Available = storelink.Money(price), max(s.Quantity-s.Reserved, 0)
		if out[s.StoreID] == nil {
			out[s.StoreID] = map[string]*storelink.Stock{}
		}
		out[s.StoreID][s.EAN] = s
	}
	return out, rows.Err()
}

func available(stock map[string]map[string]*storelink.Stock) map[string]map[string]int {
	out := make(map[string]map[string]int, len(stock))
	for store, rows := range stock {
		out[store] = make(map[string]int, len(rows))
		for ean, r := range rows {
			out[store][ean] = r.Available
		}
	}
	return out
}

// saveOrder writes the order and its items, then the event: in this order,
// inside the caller's transaction, so that neither is ever without the other.
func saveOrder(ctx context.Context, tx *sql.Tx, o *storelink.Order, isNew bool, ev *storelink.Event, now time.Time) error {
	billing, delivery := jsonOrNull(o.CustomerBillingAddress), jsonOrNull(o.DeliveryDetails)
	var err error
	if isNew {
		_, err = tx.ExecContext(ctx, `INSERT INTO orders (id, client_id, order_number, store_id, state, billing, delivery,
			reassigned_from, reassigned_order_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			o.ID, o.ClientID, o.OrderNumber, nullString(o.StoreID), o.State, billing, delivery,
			nullString(o.ReassignedFrom), nullString(o.ReassignedOrderID), ms(o.CreatedAt), ms(o.UpdatedAt))
	} else {
		_, err = tx.ExecContext(ctx, `UPDATE orders SET state = ?, billing = ?, delivery = ?, reassigned_order_id = ?, updated_at = ?
			WHERE id = ?`, o.State, billing, delivery, nullString(o.ReassignedOrderID), ms(o.UpdatedAt), o.ID)
	}
	if err != nil {
		return fmt.Errorf("save order %s: %w", o.ID, err)
	}
	for pos, it := range o.Items {
		var code any
		if it.ReturnReasonCode != nil {
			code = int(*it.ReturnReasonCode)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO order_items (item_id, order_id, pos, client_id, store_id, ean, price, currency,
			article_number, marketplace_article_number, article_location, status, cancellation_reason, return_reason_code,
			return_location, return_store_id, reserving) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (item_id) DO UPDATE SET status = excluded.status, cancellation_reason = excluded.cancellation_reason,
			return_reason_code = excluded.return_reason_code, return_location = excluded.return_location,
			return_store_id = excluded.return_store_id, reserving = excluded.reserving`,
			it.ItemID, o.ID, pos, o.ClientID, nullString(o.StoreID), it.EAN, int64(it.Price), it.Currency, it.ArticleNumber,
			it.MarketplaceArticleNumber, it.ArticleLocation, it.Status, it.CancellationReason, code, it.ReturnLocation,
			it.ReturnStoreID, it.Reserving)
		if err != nil {
			return fmt.Errorf("save item %s: %w", it.ItemID, err)
		}
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO events (id, client_id, order_id, state, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		ev.EventID, o.ClientID, o.ID, ev.State, string(ev.Marshal()), ms(now))
	if err != nil {
		return fmt.Errorf("write event of order %s: %w", o.ID, err)
	}
	return nil
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
	o, err := scanOrder(q.QueryRowContext(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = ?`, id))
	if err != nil {
		return nil, notFound(err, "order %q", id)
	}
	return o, loadItems(ctx, q, o)
}

func loadItems(ctx context.Context, q querier, o *storelink.Order) error {
	rows, err := q.QueryContext(ctx, `SELECT item_id, ean, price, currency, article_number, marketplace_article_number,
		article_location, status, cancellation_reason, return_reason_code, return_location, return_store_id, reserving
		FROM order_items WHERE order_id = ? ORDER BY pos`, o.ID)
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
