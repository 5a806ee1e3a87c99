package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"storelink"
	"storelink/service"
)

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
	insertEventSQL = `INSERT INTO events (id, client_id, order_id, upload_id, state, payload, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`
	orderSQL       = `SELECT ` + orderColumns + ` FROM orders WHERE id = ?`
	itemsSQL       = `SELECT ` + itemColumns + ` FROM order_items WHERE order_id = ? ORDER BY pos`
	// endpointStatesSQL: a deleted endpoint is disabled too; "deleted_at
	// IS NULL" has the client's live endpoints read from endpoints_live,
	// however many it deleted.
	endpointStatesSQL = `SELECT id, states FROM endpoints WHERE client_id = ? AND enabled = 1 AND deleted_at IS NULL`
	insertDeliverySQL = `INSERT INTO deliveries (id, event_id, event_seq, endpoint_id, client_id, order_id, event_state,
		state, next_attempt_at, created_at, updated_at) VALUES (?, ?, (SELECT seq FROM events WHERE id = ?), ?, ?, ?, ?, ?, ?, ?, ?)`
	itemColumns = `item_id, ean, price, currency, article_number, marketplace_article_number,
		article_location, status, cancellation_reason, return_reason_code, return_location, return_store_id, reserving`
	orderColumns = `id, client_id, order_number, store_id, state, billing, delivery, reassigned_from, reassigned_order_id, created_at, updated_at`
)

var orderStatements = append([]string{storeExistsSQL, clientSQL, stockInForceSQL, stockInForceAtSQL, insertOrderSQL,
	updateOrderSQL, insertItemSQL, updateItemSQL, insertEventSQL, orderSQL, itemsSQL, endpointStatesSQL, insertDeliverySQL},
	orderKeyStatements...)

// orders is the driver of the order calls and of the reads of orders and
// events.
type orders struct{ db *DB }

var _ service.OrderDriver = orders{}

// Begin starts the call's write transaction on the write connection
// (beginWrite): the calls that come while another is in its transaction
// join it and commit with it.
func (d orders) Begin(ctx context.Context) (service.OrderTx, error) {
	w, err := d.db.beginWrite(ctx, true)
	if err != nil {
		return nil, err
	}
	return &ordersTx{w: w}, nil
}

// Transient is always false: with one writer no transaction is ever a
// deadlock's victim.
func (orders) Transient(error) bool { return false }

// ordersTx is an order call's transaction. The rows it reads it reads at
// once; the deliveries and the idempotency key it is given it writes at
// Commit.
type ordersTx struct {
	w          *writeTx
	deliveries []service.InsertDeliveriesParams
	keys       []putKey
}

// putKey is a PutOrderKey kept until Commit.
type putKey struct {
	k       storelink.OrderKey
	expired time.Time
	sweep   int
}

// Commit writes the deliveries and keys it was given, then commits and
// gives the turn back. After an error the transaction is still open:
// Rollback ends it.
func (tx *ordersTx) Commit(ctx context.Context) error {
	if tx.w.done {
		return errors.New("commit of an ended transaction")
	}
	for _, p := range tx.deliveries {
		if err := tx.insertDeliveries(ctx, p); err != nil {
			return fmt.Errorf("queue deliveries of event %s: %w", p.Event.ID, err)
		}
	}
	for _, k := range tx.keys {
		if err := tx.putOrderKey(ctx, k); err != nil {
			return fmt.Errorf("save idempotency key of order %s: %w", k.k.OrderID, err)
		}
	}
	tx.deliveries, tx.keys = nil, nil
	return tx.w.Commit(ctx)
}

// Rollback rolls back, unless the transaction ended already.
func (tx *ordersTx) Rollback(ctx context.Context) error { return tx.w.Rollback(ctx) }

// GetClient reads a client with its prepared statement.
func (tx *ordersTx) GetClient(ctx context.Context, id string) (*storelink.Client, error) {
	c := &storelink.Client{}
	var created int64
	err := tx.w.QueryRowContext(ctx, clientSQL, id).Scan(&c.ID, &c.PartnerID, &c.CountryCode, &c.Currency, &created)
	if err != nil {
		return nil, noRow(err)
	}
	c.CreatedAt = fromMS(created)
	return c, nil
}

// StoreExists looks the store up with its prepared statement.
func (tx *ordersTx) StoreExists(ctx context.Context, clientID, storeID string) (bool, error) {
	return found(exists(ctx, tx.w, storeExistsSQL, clientID, storeID))
}

// GetOrder reads an order in the transaction. ForUpdate asks for nothing
// more: the transaction holds the one write connection, so no other can
// change the order meanwhile.
func (tx *ordersTx) GetOrder(ctx context.Context, p service.GetOrderParams) (*storelink.Order, error) {
	return loadOrder(ctx, tx.w, p.ID)
}

// StockInForce reads the stock rows of the EANs, passed as one JSON array
// (json_each), with their reserved units. Lock asks for nothing more: the
// transaction holds the one write connection.
func (tx *ordersTx) StockInForce(ctx context.Context, p service.StockInForceParams) (storelink.StoreStock, error) {
	list, _ := json.Marshal(p.EANs) // strings always encode
	query, args := stockInForceSQL, []any{p.ClientID, string(list)}
	if p.StoreID != "" {
		query, args = stockInForceAtSQL, append(args, p.StoreID)
	}
	rows, err := tx.w.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
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

// WriteOrder writes the order, its items one statement each (prepared
// statements on an embedded database cost no round trip) and its event,
// whose number is its row's sequence, which follows commit order since
// SQLite has one writer; then it reads the client's enabled endpoints.
func (tx *ordersTx) WriteOrder(ctx context.Context, p service.WriteOrderParams) ([]storelink.Endpoint, error) {
	o := p.Order
	if p.New {
		_, err := tx.w.ExecContext(ctx, insertOrderSQL,
			o.ID, o.ClientID, o.OrderNumber, nullString(o.StoreID), o.State, jsonOrNull(o.CustomerBillingAddress),
			jsonOrNull(o.DeliveryDetails), nullString(o.ReassignedFrom), nullString(o.ReassignedOrderID), ms(o.CreatedAt), ms(o.UpdatedAt))
		if err != nil {
			return nil, err
		}
		for pos := range o.Items {
			if err := tx.insertItem(ctx, o, pos); err != nil {
				return nil, err
			}
		}
	} else if err := tx.updateOrder(ctx, o, p.Inserted, p.Updated); err != nil {
		return nil, err
	}
	ev := p.Event
	if ev == nil {
		return nil, nil
	}
	if _, err := tx.w.ExecContext(ctx, insertEventSQL, ev.EventID, o.ClientID, ev.OrderID, nil, ev.State, string(ev.Marshal()), ms(p.At)); err != nil {
		return nil, fmt.Errorf("write event: %w", err)
	}
	return tx.enabledEndpoints(ctx, o.ClientID)
}

// updateOrder writes the order's changeable columns and the items asked for.
func (tx *ordersTx) updateOrder(ctx context.Context, o *storelink.Order, inserted, updated []int) error {
	_, err := tx.w.ExecContext(ctx, updateOrderSQL, o.State, jsonOrNull(o.CustomerBillingAddress), jsonOrNull(o.DeliveryDetails),
		nullString(o.ReassignedOrderID), ms(o.UpdatedAt), o.ID)
	if err != nil {
		return err
	}
	for _, pos := range inserted {
		if err := tx.insertItem(ctx, o, pos); err != nil {
			return err
		}
	}
	for _, pos := range updated {
		it := o.Items[pos]
		if _, err := tx.w.ExecContext(ctx, updateItemSQL, it.Status, it.CancellationReason, reasonCode(it.ReturnReasonCode),
			it.ReturnLocation, it.ReturnStoreID, it.Reserving, it.ItemID); err != nil {
			return fmt.Errorf("save item %s: %w", it.ItemID, err)
		}
	}
	return nil
}

func (tx *ordersTx) insertItem(ctx context.Context, o *storelink.Order, pos int) error {
	it := o.Items[pos]
	_, err := tx.w.ExecContext(ctx, insertItemSQL,
		it.ItemID, o.ID, pos, o.ClientID, nullString(o.StoreID), it.EAN, int64(it.Price), it.Currency, it.ArticleNumber,
		it.MarketplaceArticleNumber, it.ArticleLocation, it.Status, it.CancellationReason, reasonCode(it.ReturnReasonCode),
		it.ReturnLocation, it.ReturnStoreID, it.Reserving)
	if err != nil {
		return fmt.Errorf("save item %s: %w", it.ItemID, err)
	}
	return nil
}

// InsertDeliveries keeps the deliveries until Commit; the deliverer's queue
// reads them from the file at its next round.
func (tx *ordersTx) InsertDeliveries(_ context.Context, p service.InsertDeliveriesParams) error {
	tx.deliveries = append(tx.deliveries, p)
	return nil
}

// insertDeliveries writes deliveries, with the number of their event.
func (tx *ordersTx) insertDeliveries(ctx context.Context, p service.InsertDeliveriesParams) error {
	t, ev := ms(p.At), p.Event
	for _, d := range p.Deliveries {
		if _, err := tx.w.ExecContext(ctx, insertDeliverySQL, d.ID, ev.ID, ev.ID, d.EndpointID, p.ClientID, ev.Chain,
			ev.State, p.State, t, t, t); err != nil {
			return err
		}
	}
	return nil
}

// WriteEvent writes an upload's event (order_id NULL), numbered by its
// row's sequence as an order's is, then reads the client's enabled
// endpoints.
func (tx *ordersTx) WriteEvent(ctx context.Context, p service.WriteEventParams) ([]storelink.Endpoint, error) {
	if _, err := tx.w.ExecContext(ctx, insertEventSQL, p.EventID, p.ClientID, nil, p.UploadID, p.State, string(p.Payload), ms(p.At)); err != nil {
		return nil, fmt.Errorf("write event: %w", err)
	}
	return tx.enabledEndpoints(ctx, p.ClientID)
}

// TakeUploadEvent clears the upload's mark in one statement; the
// transaction holds the one writer, so no other takes it meanwhile.
func (tx *ordersTx) TakeUploadEvent(ctx context.Context, uploadID string) (bool, error) {
	res, err := tx.w.ExecContext(ctx, `UPDATE uploads SET event_due = 0 WHERE id = ? AND event_due = 1`, uploadID)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// enabledEndpoints reads the client's enabled endpoints, whose states
// column is a comma-separated list.
func (tx *ordersTx) enabledEndpoints(ctx context.Context, clientID string) ([]storelink.Endpoint, error) {
	rows, err := tx.w.QueryContext(ctx, endpointStatesSQL, clientID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storelink.Endpoint
	for rows.Next() {
		var id, states string
		if err := rows.Scan(&id, &states); err != nil {
			return nil, err
		}
		out = append(out, storelink.Endpoint{ID: id, ClientID: clientID, Enabled: true, States: parseStates(states)})
	}
	return out, rows.Err()
}

// noRow turns sql.ErrNoRows into service.ErrNotFound.
func noRow(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return service.ErrNotFound
	}
	return err
}

func reasonCode(c *storelink.ReturnReasonCode) any {
	if c == nil {
		return nil
	}
	return int(*c)
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

// The statements of idempotency keys, prepared with the order statements.
const (
	orderKeySQL = `SELECT request_hash, order_id, created_at FROM order_keys WHERE client_id = ? AND idempotency_key = ?`
	// An existing row can only be an expired one (a live one is replayed
	// instead): the key starts afresh.
	insertOrderKeySQL = `INSERT INTO order_keys (client_id, idempotency_key, request_hash, order_id, created_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (client_id, idempotency_key) DO UPDATE SET
		request_hash = excluded.request_hash, order_id = excluded.order_id, created_at = excluded.created_at`
	sweepOrderKeysSQL = `DELETE FROM order_keys WHERE (client_id, idempotency_key) IN
		(SELECT client_id, idempotency_key FROM order_keys WHERE created_at <= ? ORDER BY created_at LIMIT ?)`
)

var orderKeyStatements = []string{orderKeySQL, insertOrderKeySQL, sweepOrderKeysSQL}

// GetOrderKey reads a remembered key. Lock asks for nothing more: the
// transaction holds the one write connection, so no other call with the
// key can come between its read and its write.
func (tx *ordersTx) GetOrderKey(ctx context.Context, p service.GetOrderKeyParams) (*storelink.OrderKey, error) {
	k := &storelink.OrderKey{ClientID: p.ClientID, Key: p.Key}
	var created int64
	if err := tx.w.QueryRowContext(ctx, orderKeySQL, p.ClientID, p.Key).Scan(&k.RequestHash, &k.OrderID, &created); err != nil {
		return nil, noRow(err)
	}
	k.CreatedAt = fromMS(created)
	return k, nil
}

// PutOrderKey keeps k until Commit.
func (tx *ordersTx) PutOrderKey(_ context.Context, k storelink.OrderKey, expired time.Time, sweep int) error {
	tx.keys = append(tx.keys, putKey{k: k, expired: expired, sweep: sweep})
	return nil
}

// putOrderKey deletes expired keys, then writes k.
func (tx *ordersTx) putOrderKey(ctx context.Context, p putKey) error {
	if _, err := tx.w.ExecContext(ctx, sweepOrderKeysSQL, ms(p.expired), p.sweep); err != nil {
		return fmt.Errorf("delete expired idempotency keys: %w", err)
	}
	k := p.k
	_, err := tx.w.ExecContext(ctx, insertOrderKeySQL, k.ClientID, k.Key, k.RequestHash, k.OrderID, ms(k.CreatedAt))
	return err
}
