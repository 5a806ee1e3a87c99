package postgres

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/jackc/pgx/v5"

	"storelink"
)

const (
	orderColumns = `id, client_id, order_number, store_id, state, billing, delivery, reassigned_from, reassigned_order_id, created_at, updated_at`
	itemColumns  = `item_id, ean, price, currency, article_number, marketplace_article_number,
		article_location, status, cancellation_reason, return_reason_code, return_location, return_store_id, reserving`
	itemsSQL = `SELECT ` + itemColumns + ` FROM order_items WHERE order_id = $1 ORDER BY pos`
)

// scanOrder reads an order's row; pgx decodes the jsonb addresses, NULL
// as none.
func scanOrder(row interface{ Scan(...any) error }) (*storelink.Order, error) {
	o := &storelink.Order{}
	var store, from, to *string
	if err := row.Scan(&o.ID, &o.ClientID, &o.OrderNumber, &store, &o.State, &o.CustomerBillingAddress, &o.DeliveryDetails,
		&from, &to, &o.CreatedAt, &o.UpdatedAt); err != nil {
		return nil, err
	}
	o.StoreID, o.ReassignedFrom, o.ReassignedOrderID = deref(store), deref(from), deref(to)
	return o, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// loadOrder reads an order and its items, or service.ErrNotFound, as one
// batch that send sends: one round trip. forUpdate locks the order's row
// until the transaction ends; the items are read after the lock is taken,
// as its holder left them.
func loadOrder(ctx context.Context, send func(context.Context, *pgx.Batch) error, id string, forUpdate bool) (*storelink.Order, error) {
	query := `SELECT ` + orderColumns + ` FROM orders WHERE id = $1`
	if forUpdate {
		query += ` FOR UPDATE`
	}
	var o *storelink.Order
	var oerr error
	var items []storelink.Item
	b := &pgx.Batch{}
	// No row is an answer, not a failed batch (see pipeRow.Scan).
	b.Queue(query, id).QueryRow(func(row pgx.Row) error {
		o, oerr = scanOrder(row)
		return nil
	})
	b.Queue(itemsSQL, id).Query(func(rows pgx.Rows) error {
		var err error
		items, err = scanItems(rows)
		return err
	})
	if err := send(ctx, b); err != nil {
		return nil, noRow(err)
	}
	if oerr != nil {
		return nil, noRow(oerr)
	}
	o.Items = items
	return o, nil
}

// scanItems reads the rows of itemsSQL and closes them; never nil.
func scanItems(rows pgx.Rows) ([]storelink.Item, error) {
	defer rows.Close()
	items := []storelink.Item{}
	for rows.Next() {
		it, err := scanItem(rows)
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	return items, rows.Err()
}

// scanItem reads a row of itemColumns, after the columns of lead when
// there are any. pgx converts to and from the domain's named types, and
// NULL to a nil reason code.
func scanItem(rows pgx.Rows, lead ...any) (storelink.Item, error) {
	var it storelink.Item
	err := rows.Scan(append(lead, &it.ItemID, &it.EAN, &it.Price, &it.Currency, &it.ArticleNumber, &it.MarketplaceArticleNumber,
		&it.ArticleLocation, &it.Status, &it.CancellationReason, &it.ReturnReasonCode, &it.ReturnLocation,
		&it.ReturnStoreID, &it.Reserving)...)
	return it, err
}

// GetOrder reads an order on the pool, locking nothing.
func (d orders) GetOrder(ctx context.Context, id string) (*storelink.Order, error) {
	return loadOrder(ctx, d.db.sendBatch, id, false)
}

// ListOrders reads the orders that f selects, then the items of each.
func (d orders) ListOrders(ctx context.Context, f storelink.OrderFilter) ([]storelink.Order, error) {
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
	rows, err := d.db.pool.Query(ctx, q, a...)
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
	return out, loadPageItems(ctx, d.db.pool, out)
}

// loadPageItems reads the items of a page of orders in one query: a seek of
// order_items_order per order.
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
	rows, err := q.Query(ctx, `SELECT order_id, `+itemColumns+` FROM order_items WHERE order_id = ANY($1) ORDER BY order_id, pos`, ids)
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

// OrderExists looks the order up; an id PostgreSQL cannot store names none.
func (d orders) OrderExists(ctx context.Context, id string) (bool, error) {
	return found(exists(ctx, d.db.pool, `SELECT 1 FROM orders WHERE id = $1`, id))
}

// ListOrderEvents reads an order's events by number.
func (d orders) ListOrderEvents(ctx context.Context, orderID string) ([]storelink.EventRecord, error) {
	return queryEvents(ctx, d.db.pool, `order_id = $1 ORDER BY seq`, orderID)
}

// ListEvents reads a client's order events by their number, which follows commit
// order (see insertEventSQL).
func (d orders) ListEvents(ctx context.Context, clientID string, after int64, limit int) ([]storelink.EventRecord, error) {
	return queryEvents(ctx, d.db.pool, `client_id = $1 AND seq > $2 AND order_id IS NOT NULL ORDER BY seq LIMIT $3`, clientID, after, limit)
}

// NewestEvent reads the client's newest order event.
func (d orders) NewestEvent(ctx context.Context, clientID string) (*storelink.EventRecord, error) {
	list, err := queryEvents(ctx, d.db.pool, `client_id = $1 AND order_id IS NOT NULL ORDER BY seq DESC LIMIT 1`, clientID)
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return &list[0], nil
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

// DueUploadEvents reads the uploads whose event is due through
// uploads_event_due.
func (d orders) DueUploadEvents(ctx context.Context, limit int) ([]storelink.Upload, error) {
	rows, err := d.db.pool.Query(ctx, `SELECT `+uploadColumns+` FROM uploads WHERE event_due ORDER BY seq LIMIT $1`, limit)
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
