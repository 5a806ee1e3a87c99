package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"time"

	"storelink"
)

// The statements of the deliverer's two transactions, a claim and a record,
// run prepared (deliveryStatements), since they run hundreds of times a
// second under load: parsing them again each time took about a quarter of
// the CPU of delivering a backlog. Lists of ids go in as one JSON array so
// that the SQL is the same whatever their number.
const (
	// inflightSQL counts the deliveries in flight per endpoint: pending
	// with a lease that has not run out. It reads deliveries_leased, the
	// few rows in flight, rather than every pending row (the planner,
	// without statistics, would take deliveries_state and read the whole
	// backlog).
	inflightSQL = `SELECT d.endpoint_id, count(*) FROM deliveries d INDEXED BY deliveries_leased
		WHERE d.state = 'pending' AND d.lease_until >= ?1 GROUP BY d.endpoint_id`
	// openSQL counts the enabled endpoints not in ?1, the full ones.
	openSQL = `SELECT count(*) FROM endpoints WHERE enabled = 1 AND id NOT IN (SELECT value FROM json_each(?1))`
	// claimableSQL lists due deliveries in the order they are attempted:
	// pending, due, not leased, to an enabled endpoint whose cap is not
	// reached (?2, a JSON array of the full ones), and per order and
	// endpoint only the oldest pending event (so events of one order arrive
	// in order). It walks deliveries_due, which holds (next_attempt_at, seq)
	// in order: the rows come without a sort, so reading stops once enough
	// are found, however long the backlog (the planner would take
	// deliveries_state and sort the backlog first). seq is the order the
	// deliveries were queued in, the order of their events.
	claimableSQL = `SELECT d.id, d.endpoint_id FROM deliveries d INDEXED BY deliveries_due
		JOIN endpoints e ON e.id = d.endpoint_id
		WHERE d.state = 'pending' AND d.next_attempt_at <= ?1 AND (d.lease_until IS NULL OR d.lease_until < ?1)
		  AND e.enabled = 1 AND d.endpoint_id NOT IN (SELECT value FROM json_each(?2))
		  AND NOT EXISTS (SELECT 1 FROM deliveries p WHERE p.endpoint_id = d.endpoint_id AND p.order_id = d.order_id
		                  AND p.state = 'pending' AND p.event_seq < d.event_seq)
		ORDER BY d.next_attempt_at, d.seq`
	leaseSQL = `UPDATE deliveries SET lease_owner = ?1, lease_until = ?2, attempts = attempts + 1, tries = tries + 1
		WHERE id IN (SELECT value FROM json_each(?3))`
	claimedSQL = `SELECT d.id, d.event_id, d.endpoint_id, d.attempts, d.tries, ev.payload,
		e.url, e.api_key, e.secret, e.previous_secret, coalesce(e.previous_secret_until, 0)
		FROM deliveries d JOIN events ev ON ev.id = d.event_id JOIN endpoints e ON e.id = d.endpoint_id
		WHERE d.id IN (SELECT value FROM json_each(?1)) ORDER BY d.next_attempt_at, d.event_seq`

	insertAttemptSQL = `INSERT OR IGNORE INTO delivery_attempts (delivery_id, number, at, duration_ms, status_code, error, response)
		VALUES (?, ?, ?, ?, ?, ?, ?)`
	// Only the lease holder moves the delivery on: the same owner and the
	// same attempt, since a lease that ran out may have been taken again,
	// even by this owner.
	heldSQL      = ` WHERE id = ? AND lease_owner = ? AND attempts = ? AND state = 'pending'`
	succeededSQL = `UPDATE deliveries SET state = 'succeeded', next_attempt_at = NULL, lease_owner = NULL,
		lease_until = NULL, updated_at = ?` + heldSQL
	retrySQL = `UPDATE deliveries SET next_attempt_at = ?, lease_owner = NULL, lease_until = NULL,
		updated_at = ?` + heldSQL
	failedSQL = `UPDATE deliveries SET state = 'failed', next_attempt_at = NULL, lease_owner = NULL,
		lease_until = NULL, updated_at = ?` + heldSQL
	// Parked, not failed: the try does not count, and the delivery goes
	// out again as soon as the endpoint is enabled.
	goneSQL = `UPDATE deliveries SET next_attempt_at = ?, tries = max(tries - 1, 0), lease_owner = NULL,
		lease_until = NULL, updated_at = ?` + heldSQL
)

var deliveryStatements = []string{inflightSQL, openSQL, claimableSQL, leaseSQL, claimedSQL,
	insertAttemptSQL, succeededSQL, retrySQL, failedSQL, goneSQL}

// ClaimDeliveries leases due deliveries and reads what their attempts need.
func (db *DB) ClaimDeliveries(ctx context.Context, owner string, lease time.Duration, limit, perEndpoint int) ([]storelink.DeliveryJob, error) {
	sealer, err := db.sealer()
	if err != nil {
		return nil, err
	}
	tx, err := db.beginBookkeeping(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	now := db.now()
	ids, err := claimable(ctx, tx, ms(now), limit, perEndpoint)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	idsJSON, _ := json.Marshal(ids)
	if _, err := tx.ExecContext(ctx, leaseSQL, owner, ms(now.Add(lease)), string(idsJSON)); err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	rows, err := tx.QueryContext(ctx, claimedSQL, string(idsJSON))
	if err != nil {
		return nil, fmt.Errorf("read claimed deliveries: %w", err)
	}
	defer rows.Close()
	jobs := make([]storelink.DeliveryJob, 0, len(ids))
	for rows.Next() {
		j := storelink.DeliveryJob{Owner: owner}
		var payload, apiKey, secret, previous string
		var until int64
		if err := rows.Scan(&j.DeliveryID, &j.EventID, &j.EndpointID, &j.Attempt, &j.Try, &payload, &j.URL, &apiKey, &secret, &previous, &until); err != nil {
			return nil, err
		}
		j.Body = []byte(payload)
		if j.APIKey, err = sealer.Open(apiKey); err != nil {
			return nil, err
		}
		s, err := sealer.Open(secret)
		if err != nil {
			return nil, err
		}
		j.Secrets = []string{s}
		if previous != "" && until > ms(now) {
			p, err := sealer.Open(previous)
			if err != nil {
				return nil, err
			}
			j.Secrets = append(j.Secrets, p)
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return jobs, tx.Commit()
}

// claimable picks the ids of up to limit due deliveries, at most
// perEndpoint in flight per endpoint counting those already leased. The cap
// is counted here, row by row, rather than by a window over every due row,
// so that a claim reads a few rows of a long backlog, not all of it. It
// still reads on past the due rows of endpoints that reach their cap while
// another endpoint has room, to find that endpoint's.
func claimable(ctx context.Context, tx querier, now int64, limit, perEndpoint int) ([]string, error) {
	inflight := map[string]int{}
	rows, err := tx.QueryContext(ctx, inflightSQL, now)
	if err != nil {
		return nil, fmt.Errorf("count deliveries in flight: %w", err)
	}
	full := []string{}
	for rows.Next() {
		var endpoint string
		var n int
		if err := rows.Scan(&endpoint, &n); err != nil {
			rows.Close()
			return nil, err
		}
		if inflight[endpoint] = n; n >= perEndpoint {
			full = append(full, endpoint)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	fullJSON, _ := json.Marshal(full)
	// open counts the enabled endpoints below their cap: when each has
	// reached it, the scan stops rather than read the rest of the backlog
	// to find that out.
	var open int
	if err := tx.QueryRowContext(ctx, openSQL, string(fullJSON)).Scan(&open); err != nil || open == 0 {
		return nil, err
	}
	if rows, err = tx.QueryContext(ctx, claimableSQL, now, string(fullJSON)); err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	defer rows.Close()
	var ids []string
	for len(ids) < limit && open > 0 && rows.Next() {
		var id, endpoint string
		if err := rows.Scan(&id, &endpoint); err != nil {
			return nil, err
		}
		if inflight[endpoint] >= perEndpoint {
			continue
		}
		ids = append(ids, id)
		if inflight[endpoint]++; inflight[endpoint] == perEndpoint {
			open--
		}
	}
	return ids, rows.Err()
}

// rowsAffected reads a result's count, or 0 after an error.
func rowsAffected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// RecordAttempts records finished attempts and moves their deliveries on.
func (db *DB) RecordAttempts(ctx context.Context, results []storelink.AttemptResult) error {
	if len(results) == 0 {
		return nil
	}
	tx, err := db.beginBookkeeping(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	now := ms(db.now())
	for _, r := range results {
		a := r.Attempt
		var code any
		if a.StatusCode != 0 {
			code = a.StatusCode
		}
		if _, err := tx.ExecContext(ctx, insertAttemptSQL, r.Job.DeliveryID, a.Number, ms(a.At), a.DurationMS, code, a.Error, a.Response); err != nil {
			return fmt.Errorf("record attempt: %w", err)
		}
		held := []any{r.Job.DeliveryID, r.Job.Owner, r.Job.Attempt}
		var res sql.Result
		switch r.Outcome {
		case storelink.OutcomeSucceeded:
			res, err = tx.ExecContext(ctx, succeededSQL, append([]any{now}, held...)...)
		case storelink.OutcomeRetry:
			res, err = tx.ExecContext(ctx, retrySQL, append([]any{ms(r.NextAt), now}, held...)...)
		case storelink.OutcomeFailed:
			res, err = tx.ExecContext(ctx, failedSQL, append([]any{now}, held...)...)
		case storelink.OutcomeGone:
			res, err = tx.ExecContext(ctx, goneSQL, append([]any{now, now}, held...)...)
			if n, _ := rowsAffected(res, err); n > 0 {
				_, err = tx.ExecContext(ctx, `UPDATE endpoints SET enabled = 0, disabled_reason = ?, updated_at = ? WHERE id = ?`,
					"The endpoint answered 410 Gone at "+a.At.UTC().Format(time.RFC3339)+".", now, r.Job.EndpointID)
			}
		}
		if err != nil {
			return fmt.Errorf("record outcome of delivery %s: %w", r.Job.DeliveryID, err)
		}
	}
	return tx.Commit()
}

// Redeliver makes a delivery pending again, due now, with a fresh schedule.
// A delivery being attempted right now is left to that attempt: dropping
// its lease would send the event twice at once.
func (db *DB) Redeliver(ctx context.Context, id string) error {
	now := ms(db.now())
	if err := exists(ctx, db.read, `SELECT 1 FROM deliveries WHERE id = ?`, id); err != nil {
		return notFound(err, "delivery %q", id)
	}
	_, err := db.write.ExecContext(ctx, `UPDATE deliveries SET state = 'pending', tries = 0, next_attempt_at = ?,
		lease_owner = NULL, lease_until = NULL, updated_at = ?
		WHERE id = ? AND NOT (state = 'pending' AND coalesce(lease_until, 0) >= ?)`, now, now, id, now)
	return err
}

// Deliveries lists deliveries, newest first, each with its attempts.
func (db *DB) Deliveries(ctx context.Context, f storelink.DeliveryFilter) ([]storelink.Delivery, error) {
	q := `SELECT id, event_id, endpoint_id, client_id, order_id, event_state, state, next_attempt_at, created_at, updated_at
		FROM deliveries WHERE 1 = 1`
	var args []any
	if f.ClientID != "" {
		q, args = q+` AND client_id = ?`, append(args, f.ClientID)
	}
	if f.State != "" {
		q, args = q+` AND state = ?`, append(args, f.State)
	}
	if f.Before != "" {
		q, args = q+` AND seq < (SELECT seq FROM deliveries WHERE id = ?)`, append(args, f.Before)
	}
	q, args = q+` ORDER BY seq DESC LIMIT ?`, append(args, f.Limit)
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

// bookTx is a write transaction for delivery bookkeeping (claims and attempt
// records) whose commit is not fsynced: synchronous=NORMAL on a connection
// pinned for it. In WAL mode a crash of the process loses none of it; a power
// cut may lose the last few, and then an event is sent again, which
// at-least-once delivery allows. Everything that must survive a power cut
// (uploads, orders, events and the deliveries queued with them) commits with
// synchronous=FULL, as the connection is set back before it is released.
type bookTx struct {
	orderTx
	conn *sql.Conn
}

func (db *DB) beginBookkeeping(ctx context.Context) (*bookTx, error) {
	conn, err := db.write.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, `PRAGMA synchronous = NORMAL`); err != nil {
		conn.Close()
		return nil, err
	}
	b := &bookTx{conn: conn}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		b.release()
		return nil, err
	}
	b.orderTx = orderTx{Tx: tx, prepared: db.prepared}
	return b, nil
}

// release sets the connection back to synchronous=FULL and returns it to the
// pool, or, should that fail, has the pool throw it away: a connection that
// commits without fsync must never serve a durable write.
func (b *bookTx) release() {
	if b.conn == nil {
		return
	}
	if _, err := b.conn.ExecContext(context.Background(), `PRAGMA synchronous = FULL`); err != nil {
		_ = b.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	b.conn.Close()
	b.conn = nil
}

// Commit commits and releases the connection.
func (b *bookTx) Commit() error {
	err := b.Tx.Commit()
	b.release()
	return err
}

// Rollback rolls back (if not yet committed) and releases the connection.
func (b *bookTx) Rollback() error {
	var err error
	if b.Tx != nil {
		err = b.Tx.Rollback()
	}
	b.release()
	return err
}
