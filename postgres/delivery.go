package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
)

// Redeliver makes a delivery pending again, due now, with a fresh schedule,
// and wakes the deliverers of every process. A delivery being attempted
// right now is left to that attempt: dropping its lease would send the
// event twice at once.
func (db *DB) Redeliver(ctx context.Context, id string) error {
	return db.inTx(ctx, func(tx pgx.Tx) error {
		now := db.now()
		if err := exists(ctx, tx, `SELECT 1 FROM deliveries WHERE id = $1`, id); err != nil {
			return notFound(err, "delivery %q", id)
		}
		tag, err := tx.Exec(ctx, `UPDATE deliveries SET state = 'pending', tries = 0, next_attempt_at = $1,
			lease_owner = NULL, lease_until = NULL, updated_at = $1
			WHERE id = $2 AND NOT (state = 'pending' AND lease_until IS NOT NULL AND lease_until >= $1)`, now, id)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		return notify(ctx, tx, ChannelDeliveries)
	})
}

// Deliveries lists deliveries, newest first, each with its attempts.
func (db *DB) Deliveries(ctx context.Context, f storelink.DeliveryFilter) ([]storelink.Delivery, error) {
	var a args
	q := `SELECT id, event_id, endpoint_id, client_id, order_id, event_state, state, next_attempt_at, created_at, updated_at
		FROM deliveries WHERE true`
	if f.ClientID != "" {
		q += ` AND client_id = ` + a.add(f.ClientID)
	}
	if f.State != "" {
		q += ` AND state = ` + a.add(string(f.State))
	}
	if f.Before != "" {
		q += ` AND seq < (SELECT seq FROM deliveries WHERE id = ` + a.add(f.Before) + `)`
	}
	q += ` ORDER BY seq DESC LIMIT ` + a.add(f.Limit)
	rows, err := db.pool.Query(ctx, q, a...)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (storelink.Delivery, error) {
		d := storelink.Delivery{Attempts: []storelink.Attempt{}}
		err := row.Scan(&d.ID, &d.EventID, &d.EndpointID, &d.ClientID, &d.OrderID, &d.EventState, &d.State, &d.NextAttemptAt,
			&d.CreatedAt, &d.UpdatedAt)
		return d, err
	})
	if err != nil || len(out) == 0 {
		return []storelink.Delivery{}, err
	}
	// The attempts of the whole page in one query.
	ids := make([]string, len(out))
	index := make(map[string]int, len(out))
	for i, d := range out {
		ids[i], index[d.ID] = d.ID, i
	}
	rows, err = db.pool.Query(ctx, `SELECT delivery_id, number, at, duration_ms, coalesce(status_code, 0), error, response
		FROM delivery_attempts WHERE delivery_id = ANY ($1) ORDER BY delivery_id, number`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var at storelink.Attempt
		if err := rows.Scan(&id, &at.Number, &at.At, &at.DurationMS, &at.StatusCode, &at.Error, &at.Response); err != nil {
			return nil, err
		}
		d := &out[index[id]]
		d.Attempts = append(d.Attempts, at)
	}
	return out, rows.Err()
}

// PendingDeliveries counts pending deliveries and the age of the oldest.
func (db *DB) PendingDeliveries(ctx context.Context) (int, time.Duration, error) {
	var n int
	var oldest *time.Time
	err := db.pool.QueryRow(ctx, `SELECT count(*), min(created_at) FROM deliveries WHERE state = 'pending'`).Scan(&n, &oldest)
	if err != nil || oldest == nil {
		return n, 0, err
	}
	return n, db.now().Sub(*oldest), nil
}
