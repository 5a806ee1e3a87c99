package sqlite

import (
	"context"
	"database/sql"
	"time"

	"storelink"
)

// Redeliver makes a delivery pending again, due now, with a fresh schedule.
// A delivery being attempted right now is left to that attempt: sending it
// again meanwhile would send the event twice at once.
func (db *DB) Redeliver(ctx context.Context, id string) error {
	var seq, eventSeq int64
	var endpointID, orderID string
	if err := db.read.QueryRowContext(ctx, `SELECT seq, event_seq, endpoint_id, order_id FROM deliveries WHERE id = ?`, id).
		Scan(&seq, &eventSeq, &endpointID, &orderID); err != nil {
		return notFound(err, "delivery %q", id)
	}
	// The write connection, held, keeps claims out between the look at the
	// lease and the update.
	conn, err := db.write.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	now := ms(db.now())
	if !db.leases.redeliverable(id, now) {
		return nil
	}
	if _, err = conn.ExecContext(ctx, `UPDATE deliveries SET state = 'pending', tries = 0, next_attempt_at = ?, updated_at = ?
		WHERE seq = ?`, now, now, seq); err != nil {
		db.queue.reset()
		return err
	}
	db.queue.redeliver(endpointID, orderID, queued{seq: seq, eventSeq: eventSeq, next: now})
	return nil
}

// deliveriesQuery is the query of a listing of deliveries, and false for a
// state no delivery has.
//
// A listing by state reads that state's own rows: the pending ones in
// deliveries_pending, the failed ones in
// deliveries_failed (the + keeps a client's filter from taking
// deliveries_client, every delivery of the client, instead). The state is
// written out rather than bound, since a partial index is only used for a
// literal. Without a state, or for succeeded, most rows match: the table
// is read newest first, or the client's rows are.
func deliveriesQuery(f storelink.DeliveryFilter) (string, []any, bool) {
	from, client := `deliveries`, ` AND client_id = ?`
	var where string
	switch f.State {
	case "":
	case storelink.DeliverySucceeded:
		where = ` AND state = 'succeeded'`
	case storelink.DeliveryPending:
		from, where = `deliveries INDEXED BY deliveries_pending`, ` AND state = 'pending'`
	case storelink.DeliveryFailed:
		from, where, client = `deliveries INDEXED BY deliveries_failed`, ` AND state = 'failed'`, ` AND +client_id = ?`
	default:
		return "", nil, false
	}
	q := `SELECT id, event_id, endpoint_id, client_id, order_id, event_state, state, next_attempt_at, created_at, updated_at
		FROM ` + from + ` WHERE 1 = 1` + where
	var args []any
	if f.ClientID != "" {
		q, args = q+client, append(args, f.ClientID)
	}
	if f.Before != "" {
		q, args = q+` AND seq < (SELECT seq FROM deliveries WHERE id = ?)`, append(args, f.Before)
	}
	return q + ` ORDER BY seq DESC LIMIT ?`, append(args, f.Limit), true
}

// Deliveries lists deliveries, newest first, each with its attempts.
func (db *DB) Deliveries(ctx context.Context, f storelink.DeliveryFilter) ([]storelink.Delivery, error) {
	q, args, ok := deliveriesQuery(f)
	if !ok {
		return []storelink.Delivery{}, nil
	}
	rows, err := db.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	out := []storelink.Delivery{}
	for rows.Next() {
		var d storelink.Delivery
		var next sql.NullInt64
		var created, updated int64
		if err := rows.Scan(&d.ID, &d.EventID, &d.EndpointID, &d.ClientID, &d.OrderID, &d.EventState, &d.State, &next, &created, &updated); err != nil {
			rows.Close()
			return nil, err
		}
		d.NextAttemptAt, d.CreatedAt, d.UpdatedAt = fromNullMS(next), fromMS(created), fromMS(updated)
		out = append(out, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Attempts, err = db.attempts(ctx, out[i].ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (db *DB) attempts(ctx context.Context, deliveryID string) ([]storelink.Attempt, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT number, at, duration_ms, coalesce(status_code, 0), error, response
		FROM delivery_attempts WHERE delivery_id = ? ORDER BY number`, deliveryID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []storelink.Attempt{}
	for rows.Next() {
		var a storelink.Attempt
		var at int64
		if err := rows.Scan(&a.Number, &at, &a.DurationMS, &a.StatusCode, &a.Error, &a.Response); err != nil {
			return nil, err
		}
		a.At = fromMS(at)
		out = append(out, a)
	}
	return out, rows.Err()
}

// PendingDeliveries counts pending deliveries and the age of the oldest.
func (db *DB) PendingDeliveries(ctx context.Context) (int, time.Duration, error) {
	var n int
	var oldest sql.NullInt64
	err := db.read.QueryRowContext(ctx, `SELECT count(*), min(created_at) FROM deliveries WHERE state = 'pending'`).Scan(&n, &oldest)
	if err != nil || !oldest.Valid {
		return n, 0, err
	}
	return n, db.now().Sub(fromMS(oldest.Int64)), nil
}
