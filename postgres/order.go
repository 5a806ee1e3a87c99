package postgres

import (
	"context"
	"errors"
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
		INSERT INTO events (client_id, seq, id, order_id, upload_id, state, payload, created_at)
		SELECT $1, last_seq, $2, $3, $4, $5, $6, $7 FROM c`
	// insertDeliveriesSQL queues deliveries of an event, with its number.
	insertDeliveriesSQL = `INSERT INTO deliveries (id, event_id, event_seq, endpoint_id, client_id, order_id, event_state,
		state, next_attempt_at, created_at, updated_at)
		SELECT d.id, $3, (SELECT seq FROM events WHERE id = $3), d.endpoint_id, $4, $5, $6, $8, $7, $7, $7
		FROM unnest($1::text[], $2::text[]) AS d (id, endpoint_id)`
	// lockSQL takes an advisory lock until the transaction ends.
	lockSQL = `SELECT pg_advisory_xact_lock($1, hashtext($2))`
	// genericPlansSQL has the statements after it planned once per
	// connection, until the transaction ends or plan_cache_mode is RESET
	// (see StockInForce); routingLockSQL is lockSQL with it.
	genericPlansSQL = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true)`
	routingLockSQL  = `SELECT pg_advisory_xact_lock($1, hashtext($2)), set_config('plan_cache_mode', 'force_generic_plan', true)`
)

// orders is the driver of the order calls and of the reads of orders and
// events, on the pool.
type orders struct{ db *DB }

var _ service.OrderDriver = orders{}

// Begin starts a transaction at READ COMMITTED (each statement takes a new
// snapshot, so a transaction that waited for a lock reads what the holder
// committed) on a pipe: BEGIN and a call's locks and writes go with the
// call's read, and the writes that InsertDeliveries and PutOrderKey are
// given with COMMIT, so that an order call costs a round trip per read,
// not per statement.
func (d orders) Begin(ctx context.Context) (service.OrderTx, error) {
	p, err := beginPipe(ctx, d.db.pool)
	if err != nil {
		return nil, err
	}
	return &ordersTx{tx: p, db: d.db, atCommit: &pgx.Batch{}}, nil
}

// Transient tells deadlock victims and serialization failures: with many
// writers these are expected and rare, and a fresh try avoids them.
func (orders) Transient(err error) bool { return retryable(err) }

// ordersTx is an order call's transaction.
type ordersTx struct {
	tx pipe
	db *DB
	// atCommit holds the writes that go with COMMIT.
	atCommit *pgx.Batch
	// wake: deliveries were inserted, the deliverers are told at commit.
	wake bool
}

// Commit sends the writes kept for it with COMMIT, and then wakes the
// deliverers of every process for the deliveries inserted (see DB.wake: a
// NOTIFY sent from the transaction itself would make the commits of every
// order call, in every process, wait for one another's flush).
func (t *ordersTx) Commit(ctx context.Context) error {
	t.tx.with(t.atCommit)
	t.atCommit = &pgx.Batch{}
	if err := t.tx.commit(ctx); err != nil {
		return err // Rollback ends it
	}
	if t.wake {
		t.db.wake(ChannelDeliveries)
	}
	return nil
}

// Rollback rolls back; after Commit it does nothing.
func (t *ordersTx) Rollback(ctx context.Context) error {
	t.tx.rollback(ctx)
	return nil
}

// GetClient reads a client; the row is not locked, as no order call
// changes a client.
func (t *ordersTx) GetClient(ctx context.Context, id string) (*storelink.Client, error) {
	c := &storelink.Client{}
	err := t.tx.QueryRow(ctx, `SELECT id, partner_id, country_code, currency, created_at FROM clients WHERE id = $1`, id).
		Scan(&c.ID, &c.PartnerID, &c.CountryCode, &c.Currency, &c.CreatedAt)
	if err != nil {
		return nil, noRow(err)
	}
	return c, nil
}

// StoreExists looks the store up as committed when the statement runs
// (READ COMMITTED).
func (t *ordersTx) StoreExists(ctx context.Context, clientID, storeID string) (bool, error) {
	return found(exists(ctx, &t.tx, `SELECT 1 FROM stores WHERE client_id = $1 AND id = $2`, clientID, storeID))
}

// GetOrder reads an order in the transaction; for update, with its row
// locked (FOR UPDATE) until the transaction ends: with many writers, racing
// changes of one order wait for each other here.
func (t *ordersTx) GetOrder(ctx context.Context, p service.GetOrderParams) (*storelink.Order, error) {
	return loadOrder(ctx, t.tx.sendBatch, p.ID, p.ForUpdate)
}

// lock adds an advisory lock to go ahead of the call's read.
func (t *ordersTx) lock(kind int, key string) {
	b := &pgx.Batch{}
	b.Queue(lockSQL, kind, key)
	t.tx.with(b)
}

// reservedSQL counts the units that order items hold reserved at the stock
// row s: a seek of order_items_reserving. The index's columns have the
// database's collation and stock's store and EAN are COLLATE "C", so the
// comparison names the index's collation; without it the stock column's "C"
// decides, the index cannot serve the comparison, and it is searched by
// client alone, every reserving item of the client read for each row.
const reservedSQL = `(SELECT count(*) FROM order_items i WHERE i.reserving AND i.client_id = s.client_id
	AND i.store_id = s.store_id COLLATE "default" AND i.ean = s.ean COLLATE "default")`

// stockInForceSQL reads the stock rows of client $1 for the EANs $2 with
// their reserved units (StockInForce).
const stockInForceSQL = `SELECT s.store_id, s.ean, s.article_number, s.quantity, s.price, s.article_location, ` + reservedSQL + `
	FROM stores st CROSS JOIN unnest($2::text[]) AS e (ean)
	CROSS JOIN LATERAL (SELECT * FROM stock s WHERE s.client_id = $1 AND s.store_id = st.id AND s.ean = e.ean LIMIT 1) AS s
	WHERE st.client_id = $1`

// StockInForce reads the stock rows of the EANs, passed as one text array,
// at the client's stores (or one of them), with their reserved units: a
// primary-key lookup per store and EAN (LATERAL, kept from being flattened
// into a join by its LIMIT), whatever the table's statistics say: with
// `ean = ANY($2)`, or a join, the planner can read each store's whole stock
// when a young table's estimates make the client's rows look few. Stock
// rows only ever exist for the client's stores; the stores are kept in the
// query so that a deleted store's leftovers, if any, never route an order.
//
// The read has a generic plan, made once per connection: with PostgreSQL
// choosing, the plan for the EANs given looks cheaper than one for any
// number of them (an unnest of a parameter is taken for 10 rows), so each
// read was planned afresh, which cost more than the read itself. The plan
// is the same for any EANs: a primary-key lookup of each store and EAN and
// a seek of order_items_reserving. Only this read is planned so: the
// statements after it have plan_cache_mode reset.
//
// Lock first takes the client's routing lock, in the same round trip: an
// advisory lock, since the stock the transactions read is no one row to
// lock. One lock per client, not per EAN: an order of 500 items would take
// 500 entries of PostgreSQL's shared lock table, which a few such orders at
// once fill for every session of the server; and the orders of one client
// wait for each other on its event counter anyway, where per-EAN locks
// would add a second queue, in which an order waits once per EAN, first
// come no longer first served.
func (t *ordersTx) StockInForce(ctx context.Context, p service.StockInForceParams) (storelink.StoreStock, error) {
	clientID, storeID, eans := p.ClientID, p.StoreID, p.EANs
	b := &pgx.Batch{}
	if p.Lock {
		b.Queue(routingLockSQL, lockRouting, clientID)
	} else {
		b.Queue(genericPlansSQL)
	}
	t.tx.with(b)
	query := stockInForceSQL
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
	if err := rows.Err(); err != nil {
		return nil, err
	}
	reset := &pgx.Batch{}
	reset.Queue(`RESET plan_cache_mode`)
	t.tx.with(reset)
	return out, nil
}

// WriteOrder sends the writes of the order, its items and its event, and
// then reads the client's enabled endpoints, in one round trip. Without an
// event it sends the writes alone.
func (t *ordersTx) WriteOrder(ctx context.Context, p service.WriteOrderParams) ([]storelink.Endpoint, error) {
	o := p.Order
	b := &pgx.Batch{}
	if p.New {
		b.Queue(insertOrderSQL, o.ID, o.ClientID, o.OrderNumber, nullString(o.StoreID), o.State, o.CustomerBillingAddress,
			o.DeliveryDetails, nullString(o.ReassignedFrom), nullString(o.ReassignedOrderID), o.CreatedAt, o.UpdatedAt)
		for pos := range o.Items {
			queueItem(b, o, pos)
		}
	} else {
		b.Queue(updateOrderSQL, o.State, o.CustomerBillingAddress, o.DeliveryDetails,
			nullString(o.ReassignedOrderID), o.UpdatedAt, o.ID)
		for _, pos := range p.Inserted {
			queueItem(b, o, pos)
		}
		for _, pos := range p.Updated {
			it := o.Items[pos]
			b.Queue(updateItemSQL, it.Status, it.CancellationReason, it.ReturnReasonCode,
				it.ReturnLocation, it.ReturnStoreID, it.Reserving, it.ItemID)
		}
	}
	ev := p.Event
	if ev != nil {
		b.Queue(insertEventSQL, o.ClientID, ev.EventID, ev.OrderID, nil, ev.State, string(ev.Marshal()), p.At)
	}
	t.tx.with(b)
	if ev == nil {
		return nil, t.tx.send(ctx)
	}
	return t.enabledEndpoints(ctx, o.ClientID)
}

// enabledEndpoints reads the client's enabled endpoints, with the writes
// queued before.
func (t *ordersTx) enabledEndpoints(ctx context.Context, clientID string) ([]storelink.Endpoint, error) {
	rows, err := t.tx.Query(ctx, orderEndpointsSQL, clientID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (storelink.Endpoint, error) {
		e := storelink.Endpoint{ClientID: clientID, Enabled: true}
		err := row.Scan(&e.ID, &e.States)
		return e, err
	})
}

// WriteEvent queues an upload's event (order_id NULL), numbered as an
// order's is (insertEventSQL), and reads the client's enabled endpoints in
// the same round trip.
func (t *ordersTx) WriteEvent(ctx context.Context, p service.WriteEventParams) ([]storelink.Endpoint, error) {
	b := &pgx.Batch{}
	b.Queue(insertEventSQL, p.ClientID, p.EventID, nil, p.UploadID, p.State, string(p.Payload), p.At)
	t.tx.with(b)
	return t.enabledEndpoints(ctx, p.ClientID)
}

// TakeUploadEvent clears the upload's mark in one statement, which locks
// its row: a racing transaction waits for this one and then, at READ
// COMMITTED, finds the mark cleared.
func (t *ordersTx) TakeUploadEvent(ctx context.Context, uploadID string) (bool, error) {
	var id string
	err := t.tx.QueryRow(ctx, `UPDATE uploads SET event_due = false WHERE id = $1 AND event_due RETURNING id`, uploadID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func queueItem(b *pgx.Batch, o *storelink.Order, pos int) {
	it := o.Items[pos]
	b.Queue(insertItemSQL, it.ItemID, o.ID, pos, o.ClientID, nullString(o.StoreID), it.EAN, it.Price, it.Currency, it.ArticleNumber,
		it.MarketplaceArticleNumber, it.ArticleLocation, it.Status, it.CancellationReason, it.ReturnReasonCode,
		it.ReturnLocation, it.ReturnStoreID, it.Reserving)
}

// InsertDeliveries keeps the deliveries' writes for COMMIT; the
// deliverers of every process are woken once the transaction has committed
// (Commit).
func (t *ordersTx) InsertDeliveries(_ context.Context, p service.InsertDeliveriesParams) error {
	ids, endpoints := make([]string, len(p.Deliveries)), make([]string, len(p.Deliveries))
	for i, d := range p.Deliveries {
		ids[i], endpoints[i] = d.ID, d.EndpointID
	}
	ev := p.Event
	t.atCommit.Queue(insertDeliveriesSQL, ids, endpoints, ev.ID, p.ClientID, ev.Chain, ev.State, p.At, p.State)
	t.wake = true
	return nil
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// GetOrderKey reads a remembered key. Lock first takes the key's lock, in
// the same round trip, so that a racing call with the key has committed or
// waits: an advisory lock, since the key's row may not exist yet (the
// primary key would refuse a second insert only at its end, after it had
// done all the work).
func (t *ordersTx) GetOrderKey(ctx context.Context, p service.GetOrderKeyParams) (*storelink.OrderKey, error) {
	if p.Lock {
		t.lock(lockOrderKey, p.ClientID+" "+p.Key)
	}
	k := &storelink.OrderKey{ClientID: p.ClientID, Key: p.Key}
	err := t.tx.QueryRow(ctx, `SELECT request_hash, order_id, created_at FROM order_keys WHERE client_id = $1 AND idempotency_key = $2`,
		p.ClientID, p.Key).Scan(&k.RequestHash, &k.OrderID, &k.CreatedAt)
	if err != nil {
		return nil, noRow(err)
	}
	return k, nil
}

// PutOrderKey keeps the deletion of expired keys and the write of k for
// COMMIT. Expired rows another transaction holds are skipped (SKIP
// LOCKED), not waited for.
func (t *ordersTx) PutOrderKey(ctx context.Context, k storelink.OrderKey, expired time.Time, sweep int) error {
	b := t.atCommit
	b.Queue(`DELETE FROM order_keys WHERE (client_id, idempotency_key) IN (SELECT client_id, idempotency_key FROM order_keys
		WHERE created_at <= $1 ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)`, expired, sweep)
	b.Queue(`INSERT INTO order_keys (client_id, idempotency_key, request_hash, order_id, created_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (client_id, idempotency_key) DO UPDATE SET
		request_hash = excluded.request_hash, order_id = excluded.order_id, created_at = excluded.created_at`,
		k.ClientID, k.Key, k.RequestHash, k.OrderID, k.CreatedAt)
	return nil
}

// orderEndpointsSQL reads the endpoints an order event of client $1 is
// delivered to. A deleted endpoint is disabled too; "deleted_at IS NULL"
// has the client's live endpoints read from endpoints_live, however many it
// deleted.
const orderEndpointsSQL = `SELECT id, states FROM endpoints WHERE client_id = $1 AND enabled AND deleted_at IS NULL`
