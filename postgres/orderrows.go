package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
)

const (
	insertOrderSQL = `INSERT INTO orders (id, client_id, order_number, store_id, state, billing, delivery,
		reassigned_from, reassigned_order_id, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`
	updateOrderSQL = `UPDATE orders SET state = $1, billing = $2, delivery = $3, reassigned_order_id = $4, updated_at = $5
		WHERE id = $6`
	insertItemSQL = `INSERT INTO order_items (item_id, order_id, pos, client_id, store_id, ean, price, currency,
		article_number, marketplace_article_number, article_location, status, cancellation_reason, return_reason_code,
		return_location, return_store_id, reserving) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`
	// updateItemSQL sets the fields of an item that an order call can change.
	updateItemSQL = `UPDATE order_items SET status = $1, cancellation_reason = $2, return_reason_code = $3,
		return_location = $4, return_store_id = $5, reserving = $6 WHERE item_id = $7`
	orderColumns = `id, client_id, order_number, store_id, state, billing, delivery, reassigned_from, reassigned_order_id, created_at, updated_at`
	itemsSQL     = `SELECT item_id, ean, price, currency, article_number, marketplace_article_number,
		article_location, status, cancellation_reason, return_reason_code, return_location, return_store_id, reserving
		FROM order_items WHERE order_id = $1 ORDER BY pos`
)

// insertOrder writes a new order and its items, then its event: in this
// order, inside the caller's transaction, so that neither is ever without
// the other. The order and its items go in one batch: one round trip.
func insertOrder(ctx context.Context, tx pgx.Tx, o *storelink.Order, ev *storelink.Event, now time.Time) error {
	b := &pgx.Batch{}
	b.Queue(insertOrderSQL, o.ID, o.ClientID, o.OrderNumber, nullString(o.StoreID), o.State, jsonOrNull(o.CustomerBillingAddress),
		jsonOrNull(o.DeliveryDetails), nullString(o.ReassignedFrom), nullString(o.ReassignedOrderID), o.CreatedAt, o.UpdatedAt)
	for pos := range o.Items {
		queueItem(b, o, pos)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("save order %s: %w", o.ID, err)
	}
	return insertEvent(ctx, tx, o, ev, now)
}

// updateOrder writes an order that an order call changed, the items that
// differ from was (the items as they were read), then the event.
func updateOrder(ctx context.Context, tx pgx.Tx, o *storelink.Order, was []storelink.Item, ev *storelink.Event, now time.Time) error {
	b := &pgx.Batch{}
	b.Queue(updateOrderSQL, o.State, jsonOrNull(o.CustomerBillingAddress), jsonOrNull(o.DeliveryDetails),
		nullString(o.ReassignedOrderID), o.UpdatedAt, o.ID)
	for pos, it := range o.Items {
		i := slices.IndexFunc(was, func(w storelink.Item) bool { return w.ItemID == it.ItemID })
		switch {
		case i < 0:
			queueItem(b, o, pos)
		case itemChanged(was[i], it):
			b.Queue(updateItemSQL, it.Status, it.CancellationReason, reasonCode(it.ReturnReasonCode),
				it.ReturnLocation, it.ReturnStoreID, it.Reserving, it.ItemID)
		}
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("save order %s: %w", o.ID, err)
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

func queueItem(b *pgx.Batch, o *storelink.Order, pos int) {
	it := o.Items[pos]
	b.Queue(insertItemSQL, it.ItemID, o.ID, pos, o.ClientID, nullString(o.StoreID), it.EAN, int64(it.Price), it.Currency, it.ArticleNumber,
		it.MarketplaceArticleNumber, it.ArticleLocation, it.Status, it.CancellationReason, reasonCode(it.ReturnReasonCode),
		it.ReturnLocation, it.ReturnStoreID, it.Reserving)
}

// nextEventSQL takes the client's next event number. The counter row stays
// locked until the transaction ends, so the client's events are numbered in
// the order their transactions commit.
const nextEventSQL = `INSERT INTO event_counters (client_id, last_seq) VALUES ($1, 1)
	ON CONFLICT (client_id) DO UPDATE SET last_seq = event_counters.last_seq + 1 RETURNING last_seq`

func insertEvent(ctx context.Context, tx pgx.Tx, o *storelink.Order, ev *storelink.Event, now time.Time) error {
	var seq int64
	if err := tx.QueryRow(ctx, nextEventSQL, o.ClientID).Scan(&seq); err != nil {
		return fmt.Errorf("number event of order %s: %w", o.ID, err)
	}
	_, err := tx.Exec(ctx, `INSERT INTO events (client_id, seq, id, order_id, state, payload, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		o.ClientID, seq, ev.EventID, o.ID, ev.State, string(ev.Marshal()), now)
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

func scanOrder(row interface{ Scan(...any) error }) (*storelink.Order, error) {
	o := &storelink.Order{}
	var store, from, to *string
	var billing, delivery []byte
	if err := row.Scan(&o.ID, &o.ClientID, &o.OrderNumber, &store, &o.State, &billing, &delivery, &from, &to, &o.CreatedAt, &o.UpdatedAt); err != nil {
		return nil, err
	}
	o.StoreID, o.ReassignedFrom, o.ReassignedOrderID = deref(store), deref(from), deref(to)
	if billing != nil {
		o.CustomerBillingAddress = &storelink.Address{}
		if err := json.Unmarshal(billing, o.CustomerBillingAddress); err != nil {
			return nil, fmt.Errorf("decode billing address of order %s: %w", o.ID, err)
		}
	}
	if delivery != nil {
		o.DeliveryDetails = &storelink.DeliveryDetails{}
		if err := json.Unmarshal(delivery, o.DeliveryDetails); err != nil {
			return nil, fmt.Errorf("decode delivery details of order %s: %w", o.ID, err)
		}
	}
	return o, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// loadOrder reads an order and its items; forUpdate locks the order's row
// until the transaction ends.
func loadOrder(ctx context.Context, q querier, id string, forUpdate bool) (*storelink.Order, error) {
	query := `SELECT ` + orderColumns + ` FROM orders WHERE id = $1`
	if forUpdate {
		query += ` FOR UPDATE`
	}
	o, err := scanOrder(q.QueryRow(ctx, query, id))
	if err != nil {
		return nil, notFound(err, "order %q", id)
	}
	return o, loadItems(ctx, q, o)
}

func loadItems(ctx context.Context, q querier, o *storelink.Order) error {
	rows, err := q.Query(ctx, itemsSQL, o.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	o.Items = []storelink.Item{}
	for rows.Next() {
		var it storelink.Item
		var price int64
		var code *int32
		if err := rows.Scan(&it.ItemID, &it.EAN, &price, &it.Currency, &it.ArticleNumber, &it.MarketplaceArticleNumber,
			&it.ArticleLocation, &it.Status, &it.CancellationReason, &code, &it.ReturnLocation, &it.ReturnStoreID, &it.Reserving); err != nil {
			return err
		}
		it.Price = storelink.Money(price)
		if code != nil {
			c := storelink.ReturnReasonCode(*code)
			it.ReturnReasonCode = &c
		}
		o.Items = append(o.Items, it)
	}
	return rows.Err()
}

// Order returns one order with its items.
func (db *DB) Order(ctx context.Context, id string) (*storelink.Order, error) {
	return loadOrder(ctx, db.pool, id, false)
}

// Orders lists orders, newest first.
func (db *DB) Orders(ctx context.Context, f storelink.OrderFilter) ([]storelink.Order, error) {
	var a args
	q := `SELECT ` + orderColumns + ` FROM orders WHERE true`
	for _, c := range []struct{ col, v string }{{"client_id", f.ClientID}, {"order_number", f.OrderNumber}, {"state", string(f.State)}} {
		if c.v != "" {
			q += ` AND ` + c.col + ` = ` + a.add(c.v)
		}
	}
	if f.Before != "" {
		q += ` AND seq < (SELECT seq FROM orders WHERE id = ` + a.add(f.Before) + `)`
	}
	q += ` ORDER BY seq DESC LIMIT ` + a.add(f.Limit)
	rows, err := db.pool.Query(ctx, q, a...)
	if err != nil {
		return nil, err
	}
	out := []storelink.Order{}
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
		if err := loadItems(ctx, db.pool, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func queryEvents(ctx context.Context, q querier, where string, args ...any) ([]storelink.EventRecord, error) {
	rows, err := q.Query(ctx, `SELECT seq, id, client_id, order_id, state, payload, created_at FROM events WHERE `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []storelink.EventRecord{}
	for rows.Next() {
		var r storelink.EventRecord
		var seq int64
		var payload string
		if err := rows.Scan(&seq, &r.EventID, &r.ClientID, &r.OrderID, &r.State, &payload, &r.CreatedAt); err != nil {
			return nil, err
		}
		r.Payload, r.Cursor = json.RawMessage(payload), strconv.FormatInt(seq, 10)
		out = append(out, r)
	}
	return out, rows.Err()
}

// OrderEvents lists an order's events, oldest first.
func (db *DB) OrderEvents(ctx context.Context, id string) ([]storelink.EventRecord, error) {
	if err := exists(ctx, db.pool, `SELECT 1 FROM orders WHERE id = $1`, id); err != nil {
		return nil, notFound(err, "order %q", id)
	}
	return queryEvents(ctx, db.pool, `order_id = $1 ORDER BY seq`, id)
}

// Events lists a client's events after a cursor, in the order they were
// committed: the cursor is the event's number among its client's events,
// taken from the client's counter row in the event's transaction (see
// nextEventSQL), not from a global sequence, whose numbers can commit out of
// order and would let a reader skip a late one.
func (db *DB) Events(ctx context.Context, clientID, after string, limit int) ([]storelink.EventRecord, string, error) {
	var from int64
	if after != "" {
		var err error
		if from, err = strconv.ParseInt(after, 10, 64); err != nil || from < 0 {
			return nil, "", storelink.Errorf(storelink.EINVALID, "after %q is not a cursor returned by this call.", after)
		}
	}
	list, err := queryEvents(ctx, db.pool, `client_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, clientID, from, limit)
	if err != nil {
		return nil, "", err
	}
	next := after
	if len(list) > 0 {
		next = list[len(list)-1].Cursor
	}
	return list, next, nil
}
