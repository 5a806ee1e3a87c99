package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"storelink"
)

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

// loadOrder reads an order and its items, or service.ErrNotFound.
func loadOrder(ctx context.Context, q querier, id string) (*storelink.Order, error) {
	o, err := scanOrder(q.QueryRowContext(ctx, orderSQL, id))
	if err != nil {
		return nil, noRow(err)
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
		it, err := scanItem(rows)
		if err != nil {
			return err
		}
		o.Items = append(o.Items, it)
	}
	return rows.Err()
}

// scanItem reads a row of itemColumns, after the columns of lead when
// there are any.
func scanItem(rows *sql.Rows, lead ...any) (storelink.Item, error) {
	var it storelink.Item
	var price int64
	var code sql.NullInt64
	err := rows.Scan(append(lead, &it.ItemID, &it.EAN, &price, &it.Currency, &it.ArticleNumber, &it.MarketplaceArticleNumber,
		&it.ArticleLocation, &it.Status, &it.CancellationReason, &code, &it.ReturnLocation, &it.ReturnStoreID, &it.Reserving)...)
	if err != nil {
		return it, err
	}
	it.Price = storelink.Money(price)
	if code.Valid {
		c := storelink.ReturnReasonCode(code.Int64)
		it.ReturnReasonCode = &c
	}
	return it, nil
}

// GetOrder reads an order from the read pool.
func (d orders) GetOrder(ctx context.Context, id string) (*storelink.Order, error) {
	return loadOrder(ctx, d.db.read, id)
}

// ListOrders reads the orders that f selects from the read pool.
func (d orders) ListOrders(ctx context.Context, f storelink.OrderFilter) ([]storelink.Order, error) {
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
	rows, err := d.db.read.QueryContext(ctx, q, args...)
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
	return out, loadPageItems(ctx, d.db.read, out)
}

// pageItemsSQL reads the items of a JSON array of orders, each order's
// in their order: a seek of order_items_order per order.
const pageItemsSQL = `SELECT i.order_id, ` + itemColumns + ` FROM json_each(?) AS p
	CROSS JOIN order_items i INDEXED BY order_items_order ON i.order_id = p.value ORDER BY p.key, i.pos`

// loadPageItems reads the items of a page of orders in one query.
func loadPageItems(ctx context.Context, q querier, page []storelink.Order) error {
	if len(page) == 0 {
		return nil
	}
	ids := make([]string, len(page))
	at := make(map[string]int, len(page))
	for i := range page {
		ids[i], at[page[i].ID] = page[i].ID, i
		page[i].Items = []storelink.Item{}
	}
	list, _ := json.Marshal(ids) // strings always encode
	rows, err := q.QueryContext(ctx, pageItemsSQL, string(list))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var orderID string
		it, err := scanItem(rows, &orderID)
		if err != nil {
			return err
		}
		o := &page[at[orderID]]
		o.Items = append(o.Items, it)
	}
	return rows.Err()
}

// OrderExists looks the order up in the read pool.
func (d orders) OrderExists(ctx context.Context, id string) (bool, error) {
	err := exists(ctx, d.db.read, `SELECT 1 FROM orders WHERE id = ?`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// ListOrderEvents reads an order's events from the read pool.
func (d orders) ListOrderEvents(ctx context.Context, orderID string) ([]storelink.EventRecord, error) {
	return queryEvents(ctx, d.db.read, `order_id = ? ORDER BY seq`, orderID)
}

// ListEvents reads a client's order events by number. SQLite has one writer, so
// the sequence of the events table is commit order.
func (d orders) ListEvents(ctx context.Context, clientID string, after int64, limit int) ([]storelink.EventRecord, error) {
	return queryEvents(ctx, d.db.read, `client_id = ? AND seq > ? AND order_id IS NOT NULL ORDER BY seq LIMIT ?`, clientID, after, limit)
}

// NewestEvent reads the client's newest order event.
func (d orders) NewestEvent(ctx context.Context, clientID string) (*storelink.EventRecord, error) {
	list, err := queryEvents(ctx, d.db.read, `client_id = ? AND order_id IS NOT NULL ORDER BY seq DESC LIMIT 1`, clientID)
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return &list[0], nil
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

// DueUploadEvents reads the uploads whose event is due from the read pool,
// through uploads_event_due.
func (d orders) DueUploadEvents(ctx context.Context, limit int) ([]storelink.Upload, error) {
	rows, err := d.db.read.QueryContext(ctx, `SELECT `+uploadColumns+` FROM uploads WHERE event_due = 1 ORDER BY seq LIMIT ?`, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storelink.Upload
	for rows.Next() {
		u, err := scanUpload(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *u)
	}
	return out, rows.Err()
}
