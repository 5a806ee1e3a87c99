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
	insertEventSQL = `INSERT INTO events (id, client_id, order_id, state, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)`
	orderSQL       = `SELECT ` + orderColumns + ` FROM orders WHERE id = ?`
	itemsSQL       = `SELECT item_id, ean, price, currency, article_number, marketplace_article_number,
		article_location, status, cancellation_reason, return_reason_code, return_location, return_store_id, reserving
		FROM order_items WHERE order_id = ? ORDER BY pos`
	endpointStatesSQL = `SELECT id, states FROM endpoints WHERE client_id = ? AND enabled = 1`
	insertDeliverySQL = `INSERT INTO deliveries (id, event_id, event_seq, endpoint_id, client_id, order_id, event_state,
		state, next_attempt_at, created_at, updated_at) VALUES (?, ?, (SELECT seq FROM events WHERE id = ?), ?, ?, ?, ?, 'pending', ?, ?, ?)`
	orderColumns = `id, client_id, order_number, store_id, state, billing, delivery, reassigned_from, reassigned_order_id, created_at, updated_at`
)

var orderStatements = append([]string{storeExistsSQL, clientSQL, stockInForceSQL, stockInForceAtSQL, insertOrderSQL,
	updateOrderSQL, insertItemSQL, updateItemSQL, insertEventSQL, orderSQL, itemsSQL, endpointStatesSQL, insertDeliverySQL},
	orderKeyStatements...)

// GetClient reads a client with its prepared statement.
func (tx *writeTx) GetClient(ctx context.Context, id string) (*storelink.Client, error) {
	c := &storelink.Client{}
	var created int64
	err := tx.QueryRowContext(ctx, clientSQL, id).Scan(&c.ID, &c.PartnerID, &c.CountryCode, &c.Currency, &created)
	if err != nil {
		return nil, noRow(err)
	}
	c.CreatedAt = fromMS(created)
	return c, nil
}

// StoreExists looks the store up with its prepared statement.
func (tx *writeTx) StoreExists(ctx context.Context, clientID, storeID string) (bool, error) {
	return found(exists(ctx, tx, storeExistsSQL, clientID, storeID))
}

// GetOrder reads an order in the transaction.
func (tx *writeTx) GetOrder(ctx context.Context, id string) (*storelink.Order, error) {
	return loadOrder(ctx, tx, id)
}

// GetOrderForUpdate is GetOrder: the transaction holds the one write
// connection, so no other can change the order meanwhile.
func (tx *writeTx) GetOrderForUpdate(ctx context.Context, id string) (*storelink.Order, error) {
	return loadOrder(ctx, tx, id)
}

// LockRouting does nothing: the transaction holds the one write connection.
func (tx *writeTx) LockRouting(context.Context, string) error { return nil }

// StockInForce reads the stock rows of the EANs, passed as one JSON array
// (json_each), with their reserved units.
func (tx *writeTx) StockInForce(ctx context.Context, clientID, storeID string, eans []string) (storelink.StoreStock, error) {
	list, _ := json.Marshal(eans) // strings always encode
	query, args := stockInForceSQL, []any{clientID, string(list)}
	if storeID != "" {
		query, args = stockInForceAtSQL, append(args, storeID)
	}
	rows, err := tx.QueryContext(ctx, query, args...)
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

// InsertOrder writes a new order, then its items one statement each:
// prepared statements on an embedded database cost no round trip.
func (tx *writeTx) InsertOrder(ctx context.Context, o *storelink.Order) error {
	_, err := tx.ExecContext(ctx, insertOrderSQL,
		o.ID, o.ClientID, o.OrderNumber, nullString(o.StoreID), o.State, jsonOrNull(o.CustomerBillingAddress),
		jsonOrNull(o.DeliveryDetails), nullString(o.ReassignedFrom), nullString(o.ReassignedOrderID), ms(o.CreatedAt), ms(o.UpdatedAt))
	if err != nil {
		return err
	}
	for pos := range o.Items {
		if err := tx.insertItem(ctx, o, pos); err != nil {
			return err
		}
	}
	return nil
}

// UpdateOrder writes the order's changeable columns and the items asked for.
func (tx *writeTx) UpdateOrder(ctx context.Context, o *storelink.Order, inserted, updated []int) error {
	_, err := tx.ExecContext(ctx, updateOrderSQL, o.State, jsonOrNull(o.CustomerBillingAddress), jsonOrNull(o.DeliveryDetails),
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
		if _, err := tx.ExecContext(ctx, updateItemSQL, it.Status, it.CancellationReason, reasonCode(it.ReturnReasonCode),
			it.ReturnLocation, it.ReturnStoreID, it.Reserving, it.ItemID); err != nil {
			return fmt.Errorf("save item %s: %w", it.ItemID, err)
		}
	}
	return nil
}

func (tx *writeTx) insertItem(ctx context.Context, o *storelink.Order, pos int) error {
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

// InsertEvent writes an event; its number is its row's sequence, which
// follows commit order since SQLite has one writer.
func (tx *writeTx) InsertEvent(ctx context.Context, clientID string, ev *storelink.Event, at time.Time) error {
	_, err := tx.ExecContext(ctx, insertEventSQL, ev.EventID, clientID, ev.OrderID, ev.State, string(ev.Marshal()), ms(at))
	return err
}

// InsertDeliveries writes the deliveries, with the number of their event;
// the deliverer's queue reads them from the file at its next round.
func (tx *writeTx) InsertDeliveries(ctx context.Context, clientID string, ev *storelink.Event, at time.Time, ds []service.NewDelivery) error {
	t := ms(at)
	for _, d := range ds {
		if _, err := tx.ExecContext(ctx, insertDeliverySQL, d.ID, ev.EventID, ev.EventID, d.EndpointID, clientID, ev.OrderID,
			ev.State, t, t, t); err != nil {
			return err
		}
	}
	return nil
}

// EnabledEndpoints reads the client's enabled endpoints, whose states
// column is a comma-separated list.
func (tx *writeTx) EnabledEndpoints(ctx context.Context, clientID string) ([]storelink.Endpoint, error) {
	rows, err := tx.QueryContext(ctx, endpointStatesSQL, clientID)
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

// LockOrderKey does nothing: the transaction holds the one write
// connection, so no other call with the key can come between its read and
// its write.
func (tx *writeTx) LockOrderKey(context.Context, string, string) error { return nil }

// GetOrderKey reads a remembered key.
func (tx *writeTx) GetOrderKey(ctx context.Context, clientID, key string) (*storelink.OrderKey, error) {
	k := &storelink.OrderKey{ClientID: clientID, Key: key}
	var created int64
	if err := tx.QueryRowContext(ctx, orderKeySQL, clientID, key).Scan(&k.RequestHash, &k.OrderID, &created); err != nil {
		return nil, noRow(err)
	}
	k.CreatedAt = fromMS(created)
	return k, nil
}

// PutOrderKey deletes expired keys, then writes k.
func (tx *writeTx) PutOrderKey(ctx context.Context, k storelink.OrderKey, expired time.Time, sweep int) error {
	if _, err := tx.ExecContext(ctx, sweepOrderKeysSQL, ms(expired), sweep); err != nil {
		return fmt.Errorf("delete expired idempotency keys: %w", err)
	}
	_, err := tx.ExecContext(ctx, insertOrderKeySQL, k.ClientID, k.Key, k.RequestHash, k.OrderID, ms(k.CreatedAt))
	return err
}
