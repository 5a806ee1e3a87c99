package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"storelink"
)

// claimSQL picks due deliveries: pending, due, not leased, to an enabled
// endpoint; per order and endpoint only the oldest pending event (so events
// of one order arrive in order); per endpoint no more than a cap in flight,
// counting those already leased (so a slow endpoint holds few workers).
const claimSQL = `
WITH due AS (
	SELECT d.id, d.endpoint_id, d.next_attempt_at, d.event_seq,
	       ROW_NUMBER() OVER (PARTITION BY d.endpoint_id ORDER BY d.next_attempt_at, d.event_seq) AS rn
	FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id
	WHERE d.state = 'pending' AND d.next_attempt_at <= ?1 AND (d.lease_until IS NULL OR d.lease_until < ?1)
	  AND e.enabled = 1
	  AND NOT EXISTS (SELECT 1 FROM deliveries p WHERE p.endpoint_id = d.endpoint_id AND p.order_id = d.order_id
	                  AND p.state = 'pending' AND p.event_seq < d.event_seq)
), inflight AS (
	SELECT endpoint_id, count(*) AS n FROM deliveries WHERE state = 'pending' AND lease_until >= ?1 GROUP BY endpoint_id
)
UPDATE deliveries SET lease_owner = ?2, lease_until = ?3, attempts = attempts + 1, tries = tries + 1
WHERE id IN (SELECT due.id FROM due LEFT JOIN inflight ON inflight.endpoint_id = due.endpoint_id
             WHERE due.rn + coalesce(inflight.n, 0) <= ?4
             ORDER BY due.next_attempt_at, due.event_seq LIMIT ?5)
RETURNING id`

// ClaimDeliveries leases due deliveries and reads what their attempts need.
func (db *DB) ClaimDeliveries(ctx context.Context, owner string, lease time.Duration, limit, perEndpoint int) ([]storelink.DeliveryJob, error) {
	sealer, err := db.sealer()
	if err != nil {
		return nil, err
	}
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	now := db.now()
	rows, err := tx.QueryContext(ctx, claimSQL, ms(now), owner, ms(now.Add(lease)), perEndpoint, limit)
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	var ids []any
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return nil, err
	}
	rows, err = tx.QueryContext(ctx, `SELECT d.id, d.event_id, d.endpoint_id, d.attempts, d.tries, ev.payload,
		e.url, e.api_key, e.secret, e.previous_secret, coalesce(e.previous_secret_until, 0)
		FROM deliveries d JOIN events ev ON ev.id = d.event_id JOIN endpoints e ON e.id = d.endpoint_id
		WHERE d.id IN (`+placeholders(len(ids))+`) ORDER BY d.next_attempt_at, d.event_seq`, ids...)
	if err != nil {
		return nil, fmt.Errorf("read claimed deliveries: %w", err)
	}
	defer rows.Close()
	var jobs []storelink.DeliveryJob
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

// rowsAffected reads a result's count, or 0 after an error.
func rowsAffected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func placeholders(n int) string { return strings.TrimSuffix(strings.Repeat("?,", n), ",") }

// RecordAttempts records finished attempts and moves their deliveries on.
func (db *DB) RecordAttempts(ctx context.Context, results []storelink.AttemptResult) error {
	if len(results) == 0 {
		return nil
	}
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	now := db.now()
	for _, r := range results {
		a := r.Attempt
		var code any
		if a.StatusCode != 0 {
			code = a.StatusCode
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO delivery_attempts (delivery_id, number, at, duration_ms, status_code, error, response)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, r.Job.DeliveryID, a.Number, ms(a.At), a.DurationMS, code, a.Error, a.Response); err != nil {
			return fmt.Errorf("record attempt: %w", err)
		}
		// Only the lease holder moves the delivery on: the same owner and
		// the same attempt, since a lease that ran out may have been taken
		// again, even by this owner.
		held := ` WHERE id = ? AND lease_owner = ? AND attempts = ? AND state = 'pending'`
		job := []any{r.Job.DeliveryID, r.Job.Owner, r.Job.Attempt}
		var res sql.Result
		switch r.Outcome {
		case storelink.OutcomeSucceeded:
			res, err = tx.ExecContext(ctx, `UPDATE deliveries SET state = 'succeeded', next_attempt_at = NULL, lease_owner = NULL,
				lease_until = NULL, updated_at = ?`+held, append([]any{ms(now)}, job...)...)
		case storelink.OutcomeRetry:
			res, err = tx.ExecContext(ctx, `UPDATE deliveries SET next_attempt_at = ?, lease_owner = NULL, lease_until = NULL,
				updated_at = ?`+held, append([]any{ms(r.NextAt), ms(now)}, job...)...)
		case storelink.OutcomeFailed:
			res, err = tx.ExecContext(ctx, `UPDATE deliveries SET state = 'failed', next_attempt_at = NULL, lease_owner = NULL,
				lease_until = NULL, updated_at = ?`+held, append([]any{ms(now)}, job...)...)
		case storelink.OutcomeGone:
			// Parked, not failed: the try does not count, and the delivery
			// goes out again as soon as the endpoint is enabled.
			res, err = tx.ExecContext(ctx, `UPDATE deliveries SET next_attempt_at = ?, tries = max(tries - 1, 0), lease_owner = NULL,
				lease_until = NULL, updated_at = ?`+held, append([]any{ms(now), ms(now)}, job...)...)
			if n, _ := rowsAffected(res, err); n > 0 {
				_, err = tx.ExecContext(ctx, `UPDATE endpoints SET enabled = 0, disabled_reason = ?, updated_at = ? WHERE id = ?`,
					"The endpoint answered 410 Gone at "+a.At.UTC().Format(time.RFC3339)+".", ms(now), r.Job.EndpointID)
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
