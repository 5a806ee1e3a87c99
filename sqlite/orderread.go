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

// GetOrder reads an order from the read pool.
func (d *Driver) GetOrder(ctx context.Context, id string) (*storelink.Order, error) {
	return loadOrder(ctx, d.db.read, id)
}

// ListOrders reads the orders that f selects from the read pool.
func (d *Driver) ListOrders(ctx context.Context, f storelink.OrderFilter) ([]storelink.Order, error) {
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
	for i := range out {
		if err := loadItems(ctx, d.db.read, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// OrderExists looks the order up in the read pool.
func (d *Driver) OrderExists(ctx context.Context, id string) (bool, error) {
	err := exists(ctx, d.db.read, `SELECT 1 FROM orders WHERE id = ?`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// ListOrderEvents reads an order's events from the read pool.
func (d *Driver) ListOrderEvents(ctx context.Context, orderID string) ([]storelink.EventRecord, error) {
	return queryEvents(ctx, d.db.read, `order_id = ? ORDER BY seq`, orderID)
}

// ListEvents reads a client's events by number. SQLite has one writer, so
// the sequence of the events table is commit order.
func (d *Driver) ListEvents(ctx context.Context, clientID string, after int64, limit int) ([]storelink.EventRecord, error) {
	return queryEvents(ctx, d.db.read, `client_id = ? AND seq > ? ORDER BY seq LIMIT ?`, clientID, after, limit)
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
