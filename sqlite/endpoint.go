package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"storelink"
	"storelink/service"
)

// statesColumn is the states filter as stored: a comma-separated string,
// empty for every state.
func statesColumn(states []storelink.OrderState) string {
	parts := make([]string, len(states))
	for i, s := range states {
		parts[i] = string(s)
	}
	return strings.Join(parts, ",")
}

// parseStates reads the states column; never nil.
func parseStates(col string) []storelink.OrderState {
	out := []storelink.OrderState{}
	if col == "" {
		return out
	}
	for _, s := range strings.Split(col, ",") {
		out = append(out, storelink.OrderState(s))
	}
	return out
}

// endpointColumns are what an endpoint shows of its row: whether it has a
// key, not the key.
const endpointColumns = `id, client_id, url, states, enabled, disabled_reason, api_key != '', previous_secret_until, deleted_at,
	created_at, updated_at, description`

func scanEndpoint(row interface{ Scan(...any) error }) (*storelink.Endpoint, error) {
	e := &storelink.Endpoint{}
	var states string
	var until, deleted sql.NullInt64
	var created, updated int64
	if err := row.Scan(&e.ID, &e.ClientID, &e.URL, &states, &e.Enabled, &e.DisabledReason, &e.HasAPIKey, &until, &deleted,
		&created, &updated, &e.Description); err != nil {
		return nil, noRow(err)
	}
	e.States, e.PreviousSecretUntil, e.DeletedAt = parseStates(states), fromNullMS(until), fromNullMS(deleted)
	e.CreatedAt, e.UpdatedAt = fromMS(created), fromMS(updated)
	return e, nil
}

// loadEndpoint reads an endpoint, or service.ErrNotFound.
func loadEndpoint(ctx context.Context, q querier, id string) (*storelink.Endpoint, error) {
	return scanEndpoint(q.QueryRowContext(ctx, `SELECT `+endpointColumns+` FROM endpoints WHERE id = ?`, id))
}

// insertEndpointSQL inserts an endpoint unless its client has ?9 that are
// not deleted, counted from endpoints_live, however many it deleted.
const insertEndpointSQL = `INSERT INTO endpoints (id, client_id, url, states, api_key, secret, description, created_at, updated_at)
	SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8
	WHERE (SELECT count(*) FROM endpoints WHERE client_id = ?2 AND deleted_at IS NULL) < ?9`

// InsertEndpoint inserts on the write connection, outside a transaction
// (the insert is one, and with one writer its count of the client's
// endpoints cannot be overtaken), and reads the endpoint back on the read
// pool.
func (d *webhooks) InsertEndpoint(ctx context.Context, n service.NewEndpoint) (*storelink.Endpoint, error) {
	res, err := d.db.write.ExecContext(ctx, insertEndpointSQL,
		n.ID, n.ClientID, n.URL, statesColumn(n.States), n.APIKey, n.Secret, n.Description, ms(n.At), n.Max)
	if err != nil {
		return nil, err
	}
	if k, err := res.RowsAffected(); err != nil {
		return nil, err
	} else if k == 0 {
		return nil, service.ErrFull
	}
	return loadEndpoint(ctx, d.db.read, n.ID)
}

// RotateSecret looks the endpoint up, updates it and reads it back in one
// write transaction: SQLite's UPDATE here says nothing of a missing row.
func (d *webhooks) RotateSecret(ctx context.Context, p service.RotateSecretParams) (*storelink.Endpoint, error) {
	id, sealed, until, at := p.ID, p.Sealed, p.Until, p.At
	tx, err := d.db.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if _, err := loadEndpoint(ctx, tx, id); err != nil {
		return nil, err
	}
	_, err = tx.ExecContext(ctx, `UPDATE endpoints SET previous_secret = secret, previous_secret_until = ?, secret = ?, updated_at = ?
		WHERE id = ?`, ms(until), sealed, ms(at), id)
	if err != nil {
		return nil, fmt.Errorf("rotate secret of endpoint %s: %w", id, err)
	}
	e, err := loadEndpoint(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	return e, tx.Commit()
}

// ListEndpoints reads a client's endpoints on the read pool.
func (d *webhooks) ListEndpoints(ctx context.Context, clientIDs []string) ([]storelink.Endpoint, error) {
	rows, err := d.db.read.QueryContext(ctx, `SELECT `+endpointColumns+` FROM endpoints
		WHERE client_id IN (SELECT value FROM json_each(?)) AND deleted_at IS NULL ORDER BY created_at, id`, jsonList(clientIDs))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []storelink.Endpoint{}
	for rows.Next() {
		e, err := scanEndpoint(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *e)
	}
	return out, rows.Err()
}

// endpointTx is a write transaction of the endpoint calls, begun by
// webhooks.Begin on the write connection (beginWrite).
type endpointTx struct{ w *writeTx }

// Commit commits and gives the write connection's turn back.
func (tx *endpointTx) Commit(ctx context.Context) error { return tx.w.Commit(ctx) }

// Rollback rolls back; after Commit it does nothing.
func (tx *endpointTx) Rollback(ctx context.Context) error { return tx.w.Rollback(ctx) }

// UpdateEndpoint looks the endpoint up first, as SQLite's UPDATE here says
// nothing of a missing row, then writes the fields c sets and reads it
// back. A change of the enabled flag has the deliverer's queue read again
// which endpoints are disabled: at its next round, which cannot run before
// this transaction ends, as it needs the one write connection.
func (tx *endpointTx) UpdateEndpoint(ctx context.Context, id string, c service.EndpointChange) (*storelink.Endpoint, error) {
	if _, err := loadEndpoint(ctx, tx.w, id); err != nil {
		return nil, err
	}
	sets, args := []string{"updated_at = ?"}, []any{ms(c.At)}
	if c.URL != nil {
		sets, args = append(sets, "url = ?"), append(args, *c.URL)
	}
	if c.States != nil {
		sets, args = append(sets, "states = ?"), append(args, statesColumn(*c.States))
	}
	if c.APIKey != nil {
		sets, args = append(sets, "api_key = ?"), append(args, *c.APIKey)
	}
	if c.Description != nil {
		sets, args = append(sets, "description = ?"), append(args, *c.Description)
	}
	if c.Enabled != nil {
		sets, args = append(sets, "enabled = ?"), append(args, *c.Enabled)
	}
	if c.DisabledReason != nil {
		sets, args = append(sets, "disabled_reason = ?"), append(args, *c.DisabledReason)
	}
	if c.DeletedAt != nil {
		sets, args = append(sets, "deleted_at = ?"), append(args, ms(*c.DeletedAt))
	}
	if _, err := tx.w.ExecContext(ctx, `UPDATE endpoints SET `+strings.Join(sets, ", ")+` WHERE id = ?`, append(args, id)...); err != nil {
		return nil, fmt.Errorf("update endpoint %s: %w", id, err)
	}
	e, err := loadEndpoint(ctx, tx.w, id)
	if err != nil {
		return nil, err
	}
	if c.Enabled != nil {
		tx.w.db.queue.endpointsChanged.Store(true)
	}
	return e, nil
}

// Redeliver updates the delivery on the write connection, held, which keeps
// claims out between the look at its lease and the update. The leases are
// held in memory here (leaseBook), so the lease is looked at there, and
// the deliverer's in-memory queue (deliveryQueue) is told of the delivery
// at once: it is a cache of the file's pending deliveries that only the
// holder of the write connection changes, dropped when the update fails.
// A delivery of a deleted endpoint is not updated, and not queued.
func (d *webhooks) Redeliver(ctx context.Context, p service.RedeliverParams) error {
	db, id := d.db, p.ID
	var seq, eventSeq int64
	var endpointID, orderID string
	if err := db.read.QueryRowContext(ctx, `SELECT seq, event_seq, endpoint_id, order_id FROM deliveries WHERE id = ?`, id).
		Scan(&seq, &eventSeq, &endpointID, &orderID); err != nil {
		return noRow(err)
	}
	conn, err := db.write.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	now := ms(p.At)
	if !db.leases.redeliverable(id, now) {
		return nil
	}
	res, err := conn.ExecContext(ctx, `UPDATE deliveries SET state = ?, tries = 0, next_attempt_at = ?, updated_at = ?
		WHERE seq = ? AND NOT EXISTS (SELECT 1 FROM endpoints e WHERE e.id = deliveries.endpoint_id AND e.deleted_at IS NOT NULL)`,
		p.Pending, now, now, seq)
	if n, err := rowsAffected(res, err); err != nil {
		db.queue.reset()
		return err
	} else if n == 0 {
		return nil
	}
	db.queue.redeliver(endpointID, orderID, queued{seq: seq, eventSeq: eventSeq, next: now})
	return nil
}

// deliveriesQuery is the query of a listing of deliveries.
//
// A listing by state reads that state's own rows: the pending ones in
// deliveries_pending, the failed ones in deliveries_failed (the + keeps a
// client's filter from taking deliveries_client, every delivery of the
// client, instead). The state is written out rather than bound, since a
// query INDEXED BY a partial index must repeat its predicate: bound, the
// state is not known when the statement is prepared, and it does not
// prepare. Without a state, or for succeeded, most rows match: the table
// is read newest first, or the client's rows are.
//
// A listing of an order's or an event's deliveries reads the order's rows
// (deliveries_order_seq): a few per event and endpoint, whatever the state.
// An event is found by its order, an order number among the client's
// orders.
func deliveriesQuery(f storelink.DeliveryFilter) (string, []any) {
	from, client := `deliveries`, ` AND client_id = ?`
	var where string
	switch f.State {
	case storelink.DeliverySucceeded, storelink.DeliveryCancelled:
		where = ` AND state = '` + string(f.State) + `'`
	case storelink.DeliveryPending:
		from, where = `deliveries INDEXED BY deliveries_pending`, ` AND state = 'pending'`
	case storelink.DeliveryFailed:
		from, where, client = `deliveries INDEXED BY deliveries_failed`, ` AND state = 'failed'`, ` AND +client_id = ?`
	}
	var args []any
	if f.OrderID != "" || f.OrderNumber != "" || f.EventID != "" {
		from, client = `deliveries INDEXED BY deliveries_order_seq`, ` AND client_id = ?`
		if f.State != "" {
			where, args = ` AND state = ?`, append(args, f.State)
		}
	}
	q := `SELECT ` + deliveryColumns + ` FROM ` + from + ` WHERE 1 = 1` + where
	if f.ClientID != "" {
		q, args = q+client, append(args, f.ClientID)
	}
	if f.EndpointID != "" {
		q, args = q+` AND endpoint_id = ?`, append(args, f.EndpointID)
	}
	if f.OrderID != "" {
		q, args = q+` AND order_id = ?`, append(args, f.OrderID)
	}
	if f.OrderNumber != "" {
		q, args = q+` AND order_id IN (SELECT id FROM orders WHERE order_number = ?`, append(args, f.OrderNumber)
		if f.ClientID != "" {
			q, args = q+` AND client_id = ?`, append(args, f.ClientID)
		}
		q += `)`
	}
	if f.EventID != "" {
		q, args = q+` AND order_id = (SELECT coalesce(order_id, upload_id) FROM events WHERE id = ?) AND event_id = ?`, append(args, f.EventID, f.EventID)
	}
	if f.Before != "" {
		q, args = q+` AND seq < (SELECT seq FROM deliveries WHERE id = ?)`, append(args, f.Before)
	}
	return q + ` ORDER BY seq DESC LIMIT ?`, append(args, f.Limit)
}

// deliveryColumns are what a delivery shows of its row.
const deliveryColumns = `id, event_id, endpoint_id, client_id, order_id, event_state, state, next_attempt_at, created_at, updated_at`

func scanDelivery(row interface{ Scan(...any) error }) (*storelink.Delivery, error) {
	var dl storelink.Delivery
	var next sql.NullInt64
	var created, updated int64
	if err := row.Scan(&dl.ID, &dl.EventID, &dl.EndpointID, &dl.ClientID, &dl.OrderID, &dl.EventState, &dl.State, &next,
		&created, &updated); err != nil {
		return nil, err
	}
	dl.NextAttemptAt, dl.CreatedAt, dl.UpdatedAt = fromNullMS(next), fromMS(created), fromMS(updated)
	return &dl, nil
}

// ListDeliveries reads the page on the read pool, then the attempts of the
// whole page in one query.
func (d *webhooks) ListDeliveries(ctx context.Context, f storelink.DeliveryFilter) ([]storelink.Delivery, error) {
	q, args := deliveriesQuery(f)
	rows, err := d.db.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	out := []storelink.Delivery{}
	for rows.Next() {
		dl, err := scanDelivery(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, *dl)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := d.pageAttempts(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// pageAttempts reads the attempts of the deliveries ds in one query, each
// delivery's in their order, and sets them.
func (d *webhooks) pageAttempts(ctx context.Context, ds []storelink.Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	at := make(map[string]int, len(ds))
	args := make([]any, len(ds))
	for i := range ds {
		ds[i].Attempts = []storelink.Attempt{}
		at[ds[i].ID] = i
		args[i] = ds[i].ID
	}
	rows, err := d.db.read.QueryContext(ctx, `SELECT delivery_id, number, at, duration_ms, coalesce(status_code, 0), error, response, url
		FROM delivery_attempts WHERE delivery_id IN (?`+strings.Repeat(", ?", len(ds)-1)+`) ORDER BY delivery_id, number`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var a storelink.Attempt
		var id string
		var ms int64
		if err := rows.Scan(&id, &a.Number, &ms, &a.DurationMS, &a.StatusCode, &a.Error, &a.Response, &a.URL); err != nil {
			return err
		}
		a.At = fromMS(ms)
		i := at[id]
		ds[i].Attempts = append(ds[i].Attempts, a)
	}
	return rows.Err()
}

// FailedDeliveries counts the entries of the failed deliveries' index on
// the read pool.
func (d *webhooks) FailedDeliveries(ctx context.Context) (int, error) {
	var n int
	err := d.db.read.QueryRowContext(ctx, `SELECT count(*) FROM deliveries INDEXED BY deliveries_failed WHERE state = 'failed'`).Scan(&n)
	return n, err
}

// PendingDeliveries counts on the read pool.
func (d *webhooks) PendingDeliveries(ctx context.Context) (service.Backlog, error) {
	var n int
	var oldest sql.NullInt64
	err := d.db.read.QueryRowContext(ctx, `SELECT count(*), min(created_at) FROM deliveries WHERE state = 'pending'`).Scan(&n, &oldest)
	return service.Backlog{Pending: n, Oldest: fromNullMS(oldest)}, err
}
