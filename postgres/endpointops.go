package postgres

import (
	"context"
	"fmt"
	"time"

	"storelink"
	"storelink/service"
)

// The rows of an endpoint's operations: its stats, deletion and recovery,
// and a test send's keys. The stats read the covering index
// delivery_attempts_endpoint (endpoint, outcome, time, with the duration)
// and the partial indexes of pending and failed deliveries by endpoint.

// GetEndpoint reads an endpoint, deleted or not, on the pool.
func (d *webhooks) GetEndpoint(ctx context.Context, id string) (*storelink.Endpoint, error) {
	return scanEndpoint(d.db.pool.QueryRow(ctx, `SELECT `+endpointColumns+` FROM endpoints WHERE id = $1`, id))
}

// EndpointKeys reads an endpoint's sealed key and secrets on the pool.
func (d *webhooks) EndpointKeys(ctx context.Context, id string) (service.SealedKeys, error) {
	var k service.SealedKeys
	var until *time.Time
	err := d.db.pool.QueryRow(ctx, `SELECT api_key, secret, previous_secret, previous_secret_until FROM endpoints WHERE id = $1`, id).
		Scan(&k.APIKey, &k.Secret, &k.Previous, &until)
	if err != nil {
		return service.SealedKeys{}, noRow(err)
	}
	if until != nil {
		k.PreviousUntil = *until
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

// endpointCounts reads, for each endpoint of ids, the counts by ranges of
// the index and the last success and failure by its max of each outcome,
// and counts its deliveries in the partial indexes of pending deliveries
// by endpoint and order (deliveries_order) and of failed ones by endpoint,
// in one statement. "succeeded IN (false, true)" makes the start of the
// window a bound of the index's scan, not a filter of every attempt of
// the endpoint.
func (d *webhooks) endpointCounts(ctx context.Context, out map[string]service.EndpointFigures, ids []string, since time.Time) error {
	rows, err := d.db.pool.Query(ctx, `SELECT ids.id,
		(SELECT count(*) FROM delivery_attempts WHERE endpoint_id = ids.id AND succeeded IN (false, true) AND at >= $2),
		(SELECT count(*) FROM delivery_attempts WHERE endpoint_id = ids.id AND succeeded AND at >= $2),
		(SELECT max(at) FROM delivery_attempts WHERE endpoint_id = ids.id AND succeeded),
		(SELECT max(at) FROM delivery_attempts WHERE endpoint_id = ids.id AND NOT succeeded),
		(SELECT count(*) FROM deliveries WHERE state = 'pending' AND endpoint_id = ids.id),
		(SELECT count(*) FROM deliveries WHERE state = 'failed' AND endpoint_id = ids.id)
		FROM unnest($1::text[]) AS ids (id)`, ids, since)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var c service.EndpointFigures
		if err := rows.Scan(&id, &c.Attempts, &c.Succeeded, &c.LastSuccess, &c.LastFailure, &c.Pending, &c.Failed); err != nil {
			return err
		}
		out[id] = c
	}
	return rows.Err()
}

// endpointDurations sorts each endpoint's durations in the window once and
// picks its ranks, setting them in out; the window is read as
// endpointCounts reads it.
func (d *webhooks) endpointDurations(ctx context.Context, out map[string]service.EndpointFigures, since time.Time, ranks map[string][]int64) error {
	var es []string
	var rs []int64
	for id, list := range ranks {
		for _, r := range list {
			es, rs = append(es, id), append(rs, r)
		}
	}
	rows, err := d.db.pool.Query(ctx, `SELECT w.e, w.r, ranked.duration_ms FROM (
			SELECT endpoint_id, duration_ms, row_number() OVER (PARTITION BY endpoint_id ORDER BY duration_ms) - 1 AS r
			FROM delivery_attempts WHERE endpoint_id = ANY ($1) AND succeeded IN (false, true) AND at >= $3) AS ranked
		JOIN unnest($1::text[], $2::bigint[]) AS w (e, r) ON ranked.endpoint_id = w.e AND ranked.r = w.r`, es, rs, since)
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

// GetDelivery reads a delivery on the pool.
func (d *webhooks) GetDelivery(ctx context.Context, id string) (*storelink.Delivery, error) {
	dl, err := scanDelivery(d.db.pool.QueryRow(ctx, `SELECT `+deliveryColumns+` FROM deliveries WHERE id = $1`, id))
	if err != nil {
		return nil, noRow(err)
	}
	return dl, nil
}

// LockEndpoint reads the endpoint FOR NO KEY UPDATE: the lock of an update
// of its columns, which the deliveries that order calls queue to it (their
// foreign key takes KEY SHARE) do not wait for.
func (t *endpointTx) LockEndpoint(ctx context.Context, id string) (*storelink.Endpoint, error) {
	return scanEndpoint(t.tx.QueryRow(ctx, `SELECT `+endpointColumns+` FROM endpoints WHERE id = $1 FOR NO KEY UPDATE`, id))
}

// LockClientEvents locks the client's event counter row (making it when the
// client has written no event yet), which every transaction that writes
// an event of the client updates first (insertEventSQL) and holds until it
// ends: those after wait, and this transaction's later statements see what
// those before committed.
func (t *endpointTx) LockClientEvents(ctx context.Context, clientID string) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO event_counters (client_id, last_seq) VALUES ($1, 0)
		ON CONFLICT (client_id) DO UPDATE SET last_seq = event_counters.last_seq`, clientID)
	return err
}

// CancelDeliveries cancels in one statement; the leases of attempts in
// flight go with it, so that their results move nothing.
func (t *endpointTx) CancelDeliveries(ctx context.Context, p service.MoveDeliveriesParams) (int, error) {
	tag, err := t.tx.Exec(ctx, `UPDATE deliveries SET state = $3, next_attempt_at = NULL, lease_owner = NULL, lease_until = NULL,
		updated_at = $2 WHERE state = 'pending' AND endpoint_id = $1`, p.EndpointID, p.At, p.To)
	if err != nil {
		return 0, fmt.Errorf("cancel deliveries: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// RecoverDeliveries updates in one statement and wakes the deliverers of
// every process (NOTIFY, sent at commit) when it changed any.
func (t *endpointTx) RecoverDeliveries(ctx context.Context, p service.MoveDeliveriesParams) (int, error) {
	tag, err := t.tx.Exec(ctx, `UPDATE deliveries SET state = $4, tries = 0, next_attempt_at = $3, lease_owner = NULL,
		lease_until = NULL, updated_at = $3 WHERE state = 'failed' AND endpoint_id = $1 AND created_at >= $2`, p.EndpointID, p.Since, p.At, p.To)
	if err != nil {
		return 0, fmt.Errorf("recover deliveries: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return 0, nil
	}
	return int(tag.RowsAffected()), notify(ctx, &t.tx, ChannelDeliveries)
}
