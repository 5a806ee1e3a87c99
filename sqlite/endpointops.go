package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"storelink"
	"storelink/service"
)

// The rows of an endpoint's operations: its stats, deletion and recovery,
// and a test send's keys. Reads go to the read pool; the stats read the
// covering index delivery_attempts_endpoint (endpoint, outcome, time,
// duration) and never a row.

// The stats' statements read the figures of many endpoints at once, each
// endpoint's by seeks of the indexes as one endpoint's would be.
const (
	// endpointCountsSQL counts the attempts and deliveries of the
	// endpoints of ?1, a JSON array of ids, with attempts since ?2, and
	// reads the times of their last successes and failures. "succeeded
	// IN (0, 1)" lets the index's time order serve both outcomes' ranges.
	// The pending deliveries are counted in one pass over the index of
	// every pending one (an index of them by endpoint would cost a write
	// on every delivery's way through the queue); the failed ones in
	// their index by endpoint.
	endpointCountsSQL = `WITH ids(id) AS (SELECT value FROM json_each(?1)),
		pending(id, n) AS (SELECT endpoint_id, count(*) FROM deliveries INDEXED BY deliveries_pending
			WHERE state = 'pending' AND endpoint_id IN (SELECT id FROM ids) GROUP BY endpoint_id)
		SELECT ids.id,
		(SELECT count(*) FROM delivery_attempts WHERE endpoint_id = ids.id AND succeeded IN (0, 1) AND at >= ?2),
		(SELECT count(*) FROM delivery_attempts WHERE endpoint_id = ids.id AND succeeded = 1 AND at >= ?2),
		(SELECT max(at) FROM delivery_attempts WHERE endpoint_id = ids.id AND succeeded = 1),
		(SELECT max(at) FROM delivery_attempts WHERE endpoint_id = ids.id AND succeeded = 0),
		coalesce(pending.n, 0),
		(SELECT count(*) FROM deliveries INDEXED BY deliveries_failed_endpoint WHERE state = 'failed' AND endpoint_id = ids.id)
		FROM ids LEFT JOIN pending ON pending.id = ids.id`
	// endpointDurationsSQL ranks the window's durations of each endpoint
	// asked; ?2 is a JSON array of [endpoint, rank] pairs wanted.
	endpointDurationsSQL = `WITH want(e, r) AS (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?2))
		SELECT e, r, duration_ms FROM (
			SELECT endpoint_id AS e, duration_ms, row_number() OVER (PARTITION BY endpoint_id ORDER BY duration_ms) - 1 AS r
			FROM delivery_attempts WHERE endpoint_id IN (SELECT e FROM want) AND succeeded IN (0, 1) AND at >= ?1)
		WHERE (e, r) IN (SELECT e, r FROM want)`
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

// EndpointStats reads the counts of p's endpoints (endpointCounts) when p
// asks for them, and the durations at p's ranks (endpointDurations) when it
// gives any: a statement each.
func (d *webhooks) EndpointStats(ctx context.Context, p service.EndpointStatsParams) (map[string]service.EndpointFigures, error) {
	out := map[string]service.EndpointFigures{}
	if p.Counts && len(p.EndpointIDs) > 0 {
		if err := d.endpointCounts(ctx, out, p.EndpointIDs, p.Since); err != nil {
			return nil, err
		}
	}
	if len(p.Ranks) > 0 {
		if err := d.endpointDurations(ctx, out, p.Since, p.Ranks); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// endpointCounts sets the counts of the endpoints ids in out.
func (d *webhooks) endpointCounts(ctx context.Context, out map[string]service.EndpointFigures, ids []string, since time.Time) error {
	rows, err := d.db.read.QueryContext(ctx, endpointCountsSQL, jsonList(ids), ms(since))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var c service.EndpointFigures
		var success, failure sql.NullInt64
		if err := rows.Scan(&id, &c.Attempts, &c.Succeeded, &success, &failure, &c.Pending, &c.Failed); err != nil {
			return err
		}
		c.LastSuccess, c.LastFailure = fromNullMS(success), fromNullMS(failure)
		out[id] = c
	}
	return rows.Err()
}

// endpointDurations sorts each endpoint's durations in the window once and
// picks its ranks, setting them in out.
func (d *webhooks) endpointDurations(ctx context.Context, out map[string]service.EndpointFigures, since time.Time, ranks map[string][]int64) error {
	b := []byte{'['}
	for id, rs := range ranks {
		for _, r := range rs {
			if len(b) > 1 {
				b = append(b, ',')
			}
			b = append(appendJSONString(append(b, '['), id), ',')
			b = append(strconv.AppendInt(b, r, 10), ']')
		}
	}
	rows, err := d.db.read.QueryContext(ctx, endpointDurationsSQL, ms(since), string(append(b, ']')))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var r, ms int64
		if err := rows.Scan(&id, &r, &ms); err != nil {
			return err
		}
		f := out[id]
		if f.Durations == nil {
			f.Durations = map[int64]int64{}
		}
		f.Durations[r] = ms
		out[id] = f
	}
	return rows.Err()
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
