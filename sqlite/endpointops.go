package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"storelink"
	"storelink/service"
)

// The rows of an endpoint's operations: its stats, deletion and recovery,
// and a test send's keys. Reads go to the read pool; the stats read the
// covering index delivery_attempts_endpoint (endpoint, outcome, time,
// duration) and never a row.

// The stats' statements: ?1 is the endpoint, ?2 the start of the window.
// "succeeded IN (0, 1)" lets the index's time order serve both outcomes'
// ranges.
const (
	attemptCountsSQL = `SELECT
		(SELECT count(*) FROM delivery_attempts WHERE endpoint_id = ?1 AND succeeded IN (0, 1) AND at >= ?2),
		(SELECT count(*) FROM delivery_attempts WHERE endpoint_id = ?1 AND succeeded = 1 AND at >= ?2),
		(SELECT max(at) FROM delivery_attempts WHERE endpoint_id = ?1 AND succeeded = 1),
		(SELECT max(at) FROM delivery_attempts WHERE endpoint_id = ?1 AND succeeded = 0)`
	// attemptDurationsSQL ranks the window's durations; ?3 is a JSON array
	// of the ranks wanted.
	attemptDurationsSQL = `SELECT r, duration_ms FROM (
			SELECT duration_ms, row_number() OVER (ORDER BY duration_ms) - 1 AS r FROM delivery_attempts
			WHERE endpoint_id = ?1 AND succeeded IN (0, 1) AND at >= ?2)
		WHERE r IN (SELECT value FROM json_each(?3))`
)

// GetEndpoint reads an endpoint, deleted or not, on the read pool.
func (d *webhooks) GetEndpoint(ctx context.Context, id string) (*storelink.Endpoint, error) {
	return loadEndpoint(ctx, d.db.read, id)
}

// EndpointKeys reads an endpoint's sealed key and secrets on the read pool.
func (d *webhooks) EndpointKeys(ctx context.Context, id string) (service.SealedKeys, error) {
	var k service.SealedKeys
	var until int64
	err := d.db.read.QueryRowContext(ctx, `SELECT api_key, secret, previous_secret, coalesce(previous_secret_until, 0)
		FROM endpoints WHERE id = ?`, id).Scan(&k.APIKey, &k.Secret, &k.Previous, &until)
	if err != nil {
		return service.SealedKeys{}, noRow(err)
	}
	if until > 0 {
		k.PreviousUntil = fromMS(until)
	}
	return k, nil
}

// EndpointStats reads the counts (attemptCounts, deliveryCounts) when p asks
// for them, and the durations at p's ranks (attemptDurations) when it gives
// any.
func (d *webhooks) EndpointStats(ctx context.Context, p service.EndpointStatsParams) (service.EndpointFigures, error) {
	var f service.EndpointFigures
	if p.Counts {
		var err error
		if f, err = d.attemptCounts(ctx, p.EndpointID, p.Since); err != nil {
			return f, err
		}
		if f.Pending, f.Failed, err = d.deliveryCounts(ctx, p.EndpointID); err != nil {
			return f, err
		}
	}
	if len(p.Ranks) > 0 {
		var err error
		if f.Durations, err = d.attemptDurations(ctx, p.EndpointID, p.Since, p.Ranks); err != nil {
			return f, err
		}
	}
	return f, nil
}

// attemptCounts reads the counts by ranges of the index, and the last
// success and failure by its max of each outcome.
func (d *webhooks) attemptCounts(ctx context.Context, endpointID string, since time.Time) (service.EndpointFigures, error) {
	var c service.EndpointFigures
	var success, failure sql.NullInt64
	err := d.db.read.QueryRowContext(ctx, attemptCountsSQL, endpointID, ms(since)).Scan(&c.Attempts, &c.Succeeded, &success, &failure)
	c.LastSuccess, c.LastFailure = fromNullMS(success), fromNullMS(failure)
	return c, err
}

// attemptDurations sorts the window's durations once and picks the ranks.
func (d *webhooks) attemptDurations(ctx context.Context, endpointID string, since time.Time, ranks []int64) (map[int64]int64, error) {
	rows, err := d.db.read.QueryContext(ctx, attemptDurationsSQL, endpointID, ms(since), jsonInts(ranks))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	byRank := map[int64]int64{}
	for rows.Next() {
		var r, ms int64
		if err := rows.Scan(&r, &ms); err != nil {
			return nil, err
		}
		byRank[r] = ms
	}
	return byRank, rows.Err()
}

// deliveryCounts counts the pending deliveries in the index of every
// pending one (an index of them by endpoint would cost a write on every
// delivery's way through the queue), and the failed ones in their index by
// endpoint.
func (d *webhooks) deliveryCounts(ctx context.Context, endpointID string) (pending, failed int, err error) {
	err = d.db.read.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM deliveries INDEXED BY deliveries_pending WHERE state = 'pending' AND endpoint_id = ?1),
		(SELECT count(*) FROM deliveries INDEXED BY deliveries_failed_endpoint WHERE state = 'failed' AND endpoint_id = ?1)`,
		endpointID).Scan(&pending, &failed)
	return pending, failed, err
}

// GetDelivery reads a delivery on the read pool.
func (d *webhooks) GetDelivery(ctx context.Context, id string) (*storelink.Delivery, error) {
	dl, err := scanDelivery(d.db.read.QueryRowContext(ctx, `SELECT `+deliveryColumns+` FROM deliveries WHERE id = ?`, id))
	if err != nil {
		return nil, noRow(err)
	}
	dl.Attempts = []storelink.Attempt{}
	return dl, nil
}

// LockEndpoint reads the endpoint in the transaction, which holds the one
// write connection: no other writer runs until it ends.
func (tx *endpointTx) LockEndpoint(ctx context.Context, id string) (*storelink.Endpoint, error) {
	return loadEndpoint(ctx, tx.w, id)
}

// LockClientEvents has nothing to lock: the transaction holds the one
// write connection, and no event is written until it ends.
func (tx *endpointTx) LockClientEvents(context.Context, string) error { return nil }

// CancelDeliveries cancels on the write connection and drops the
// deliverer's queue (deliveryQueue), held in memory, which the next round
// reads again from the file: the transaction holds the write connection,
// so no round runs in between.
func (tx *endpointTx) CancelDeliveries(ctx context.Context, p service.MoveDeliveriesParams) (int, error) {
	res, err := tx.w.ExecContext(ctx, `UPDATE deliveries INDEXED BY deliveries_pending SET state = ?, next_attempt_at = NULL,
		updated_at = ? WHERE state = 'pending' AND endpoint_id = ?`, p.To, ms(p.At), p.EndpointID)
	n, err := rowsAffected(res, err)
	if err != nil {
		return 0, fmt.Errorf("cancel deliveries: %w", err)
	}
	tx.w.db.queue.reset()
	return int(n), nil
}

// RecoverDeliveries updates on the write connection and drops the
// deliverer's queue, as CancelDeliveries does: the next round reads the
// recovered deliveries into their orders' lines, in their events' places.
// Their leases ended when they failed, so the lease book has nothing of
// them to forget.
func (tx *endpointTx) RecoverDeliveries(ctx context.Context, p service.MoveDeliveriesParams) (int, error) {
	res, err := tx.w.ExecContext(ctx, `UPDATE deliveries INDEXED BY deliveries_failed_endpoint SET state = ?4, tries = 0,
		next_attempt_at = ?1, updated_at = ?1 WHERE state = 'failed' AND endpoint_id = ?2 AND created_at >= ?3`,
		ms(p.At), p.EndpointID, ms(p.Since), p.To)
	n, err := rowsAffected(res, err)
	if err != nil {
		return 0, fmt.Errorf("recover deliveries: %w", err)
	}
	if n > 0 {
		tx.w.db.queue.reset()
	}
	return int(n), nil
}
