package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
	"storelink/service"
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
	// insertEventSQL numbers the event from the client's counter row and
	// writes it. The counter row stays locked until the transaction ends,
	// so the client's events are numbered in the order their transactions
	// commit; a global sequence's numbers can commit out of order and would
	// let a reader skip a late one.
	insertEventSQL = `WITH c AS (INSERT INTO event_counters (client_id, last_seq) VALUES ($1, 1)
		ON CONFLICT (client_id) DO UPDATE SET last_seq = event_counters.last_seq + 1 RETURNING last_seq)
		INSERT INTO events (client_id, seq, id, order_id, state, payload, created_at)
		SELECT $1, last_seq, $2, $3, $4, $5, $6 FROM c`
	// insertDeliveriesSQL queues deliveries of the event just numbered:
	// its number is the counter's last_seq, as this transaction left it.
	insertDeliveriesSQL = `INSERT INTO deliveries (id, event_id, event_seq, endpoint_id, client_id, order_id, event_state,
		state, next_attempt_at, created_at, updated_at)
		SELECT d.id, $3, (SELECT last_seq FROM event_counters WHERE client_id = $4), d.endpoint_id, $4, $5, $6, 'pending', $7, $7, $7
		FROM unnest($1::text[], $2::text[]) AS d (id, endpoint_id)`
)

// GetOrder reads an order in the transaction, without locking it.
func (t *pgTx) GetOrder(ctx context.Context, id string) (*storelink.Order, error) {
	return loadOrder(ctx, t.tx.sendBatch, id, false)
}

// GetOrderForUpdate reads an order with its row locked (FOR UPDATE) until
// the transaction ends: with many writers, racing changes of one order wait
// for each other here.
func (t *pgTx) GetOrderForUpdate(ctx context.Context, id string) (*storelink.Order, error) {
	return loadOrder(ctx, t.tx.sendBatch, id, true)
}

// reservedSQL counts the units that order items hold reserved at the stock
// row s: a seek of order_items_reserving. The index's columns have the
// database's collation and stock's store and EAN are COLLATE "C", so the
// comparison names the index's collation; without it the stock column's "C"
// decides, the index cannot serve the comparison, and it is searched by
// client alone, every reserving item of the client read for each row.
const reservedSQL = `(SELECT count(*) FROM order_items i WHERE i.reserving AND i.client_id = s.client_id
	AND i.store_id = s.store_id COLLATE "default" AND i.ean = s.ean COLLATE "default")`

// StockInForce reads the stock rows of the EANs, passed as one text array,
// at the client's stores (or one of them), with their reserved units: a
// primary-key lookup per store and EAN (LATERAL, kept from being flattened
// into a join by its LIMIT), whatever the table's statistics say: with
// `ean = ANY($2)`, or a join, the planner can read each store's whole stock
// when a young table's estimates make the client's rows look few. Stock
// rows only ever exist for the client's stores; the stores are kept in the
// query so that a deleted store's leftovers, if any, never route an order.
func (t *pgTx) StockInForce(ctx context.Context, clientID, storeID string, eans []string) (storelink.StoreStock, error) {
	query := `SELECT s.store_id, s.ean, s.article_number, s.quantity, s.price, s.article_location, ` + reservedSQL + `
		FROM stores st CROSS JOIN unnest($2::text[]) AS e (ean)
		CROSS JOIN LATERAL (SELECT * FROM stock s WHERE s.client_id = $1 AND s.store_id = st.id AND s.ean = e.ean LIMIT 1) AS s
		WHERE st.client_id = $1`
	a := []any{clientID, eans}
	if storeID != "" {
		query, a = query+` AND st.id = $3`, append(a, storeID)
	}
	rows, err := t.tx.Query(ctx, query, a...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := storelink.StoreStock{}
	for rows.Next() {
		s := &storelink.Stock{}
		if err := rows.Scan(&s.StoreID, &s.EAN, &s.ArticleNumber, &s.Quantity, &s.Price, &s.ArticleLocation, &s.Reserved); err != nil {
			return nil, err
		}
		out.Add(s)
	}
	return out, rows.Err()
}

// InsertOrder queues the writes of a new order and its items, to go with
// the transaction's next read or its COMMIT.
func (t *pgTx) InsertOrder(ctx context.Context, o *storelink.Order) error {
	b := &pgx.Batch{}
	b.Queue(insertOrderSQL, o.ID, o.ClientID, o.OrderNumber, nullString(o.StoreID), o.State, o.CustomerBillingAddress,
		o.DeliveryDetails, nullString(o.ReassignedFrom), nullString(o.ReassignedOrderID), o.CreatedAt, o.UpdatedAt)
	for pos := range o.Items {
		queueItem(b, o, pos)
	}
	t.tx.queueBatch(b)
	return nil
}

// UpdateOrder queues the writes of the order and of the items asked for.
func (t *pgTx) UpdateOrder(ctx context.Context, o *storelink.Order, inserted, updated []int) error {
	b := &pgx.Batch{}
	b.Queue(updateOrderSQL, o.State, o.CustomerBillingAddress, o.DeliveryDetails,
		nullString(o.ReassignedOrderID), o.UpdatedAt, o.ID)
	for _, pos := range inserted {
		queueItem(b, o, pos)
	}
	for _, pos := range updated {
		it := o.Items[pos]
		b.Queue(updateItemSQL, it.Status, it.CancellationReason, it.ReturnReasonCode,
			it.ReturnLocation, it.ReturnStoreID, it.Reserving, it.ItemID)
	}
	t.tx.queueBatch(b)
	return nil
}

func queueItem(b *pgx.Batch, o *storelink.Order, pos int) {
	it := o.Items[pos]
	b.Queue(insertItemSQL, it.ItemID, o.ID, pos, o.ClientID, nullString(o.StoreID), it.EAN, it.Price, it.Currency, it.ArticleNumber,
		it.MarketplaceArticleNumber, it.ArticleLocation, it.Status, it.CancellationReason, it.ReturnReasonCode,
		it.ReturnLocation, it.ReturnStoreID, it.Reserving)
}

// InsertEvent queues the event's numbering and write, to go with the
// transaction's next read (EnabledEndpoints) or its COMMIT.
func (t *pgTx) InsertEvent(_ context.Context, clientID string, ev *storelink.Event, at time.Time) error {
	t.tx.queue(insertEventSQL, clientID, ev.EventID, ev.OrderID, ev.State, string(ev.Marshal()), at)
	return nil
}

// InsertDeliveries queues the deliveries' writes, to go with the COMMIT;
// the deliverers of every process are woken once the transaction has
// committed (Commit).
func (t *pgTx) InsertDeliveries(_ context.Context, clientID string, ev *storelink.Event, at time.Time, ds []service.NewDelivery) error {
	ids, endpoints := make([]string, len(ds)), make([]string, len(ds))
	for i, d := range ds {
		ids[i], endpoints[i] = d.ID, d.EndpointID
	}
	t.tx.queue(insertDeliveriesSQL, ids, endpoints, ev.EventID, clientID, ev.OrderID, ev.State, at)
	t.wake = true
	return nil
}

// EnabledEndpoints reads the client's enabled endpoints; their states are a
// text array.
func (t *pgTx) EnabledEndpoints(ctx context.Context, clientID string) ([]storelink.Endpoint, error) {
	rows, err := t.tx.Query(ctx, `SELECT id, states FROM endpoints WHERE client_id = $1 AND enabled`, clientID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (storelink.Endpoint, error) {
		e := storelink.Endpoint{ClientID: clientID, Enabled: true}
		err := row.Scan(&e.ID, &e.States)
		return e, err
	})
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// GetOrderKey reads a remembered key; the caller holds its lock
// (LockOrderKey), so a racing call with the key has committed or waits.
func (t *pgTx) GetOrderKey(ctx context.Context, clientID, key string) (*storelink.OrderKey, error) {
	k := &storelink.OrderKey{ClientID: clientID, Key: key}
	err := t.tx.QueryRow(ctx, `SELECT request_hash, order_id, created_at FROM order_keys WHERE client_id = $1 AND idempotency_key = $2`,
		clientID, key).Scan(&k.RequestHash, &k.OrderID, &k.CreatedAt)
	if err != nil {
		return nil, noRow(err)
	}
	return k, nil
}

// PutOrderKey queues the deletion of expired keys and the write of k.
// Expired rows another transaction holds are skipped (SKIP LOCKED), not
// waited for.
func (t *pgTx) PutOrderKey(ctx context.Context, k storelink.OrderKey, expired time.Time, sweep int) error {
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM order_keys WHERE (client_id, idempotency_key) IN (SELECT client_id, idempotency_key FROM order_keys
		WHERE created_at <= $1 ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)`, expired, sweep)
	b.Queue(`INSERT INTO order_keys (client_id, idempotency_key, request_hash, order_id, created_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (client_id, idempotency_key) DO UPDATE SET
		request_hash = excluded.request_hash, order_id = excluded.order_id, created_at = excluded.created_at`,
		k.ClientID, k.Key, k.RequestHash, k.OrderID, k.CreatedAt)
	t.tx.queueBatch(b)
	return nil
}
