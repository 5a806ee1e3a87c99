package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
)

// Redeliver looks the delivery up and updates it in one transaction, the
// lease looked at in the UPDATE's own WHERE (leases are columns here), and
// wakes the deliverers of every process (NOTIFY, sent at commit) when it
// changed it.
func (d *Driver) Redeliver(ctx context.Context, id string, at time.Time) error {
	return d.db.inTx(ctx, func(tx pgx.Tx) error {
		if err := exists(ctx, tx, `SELECT 1 FROM deliveries WHERE id = $1`, id); err != nil {
			return noRow(err)
		}
		tag, err := tx.Exec(ctx, `UPDATE deliveries SET state = 'pending', tries = 0, next_attempt_at = $1,
			lease_owner = NULL, lease_until = NULL, updated_at = $1
			WHERE id = $2 AND NOT (state = 'pending' AND lease_until IS NOT NULL AND lease_until >= $1)`, at, id)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		return notify(ctx, tx, ChannelDeliveries)
	})
}

// ListDeliveries reads the page, then the attempts of the whole page in
// one query.
func (d *Driver) ListDeliveries(ctx context.Context, f storelink.DeliveryFilter) ([]storelink.Delivery, error) {
	var a args
	q := `SELECT id, event_id, endpoint_id, client_id, order_id, event_state, state, next_attempt_at, created_at, updated_at
		FROM deliveries WHERE true`
	if f.ClientID != "" {
		q += ` AND client_id = ` + a.add(f.ClientID)
	}
	if f.State != "" {
		q += ` AND state = ` + a.add(f.State)
	}
	if f.Before != "" {
		q += ` AND seq < (SELECT seq FROM deliveries WHERE id = ` + a.add(f.Before) + `)`
	}
	q += ` ORDER BY seq DESC LIMIT ` + a.add(f.Limit)
	rows, err := d.db.pool.Query(ctx, q, a...)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (storelink.Delivery, error) {
		dl := storelink.Delivery{Attempts: []storelink.Attempt{}}
		err := row.Scan(&dl.ID, &dl.EventID, &dl.EndpointID, &dl.ClientID, &dl.OrderID, &dl.EventState, &dl.State, &dl.NextAttemptAt,
			&dl.CreatedAt, &dl.UpdatedAt)
		return dl, err
	})
	if err != nil || len(out) == 0 {
		return []storelink.Delivery{}, err
	}
	ids := make([]string, len(out))
	index := make(map[string]int, len(out))
	for i, dl := range out {
		ids[i], index[dl.ID] = dl.ID, i
	}
	rows, err = d.db.pool.Query(ctx, `SELECT delivery_id, number, at, duration_ms, coalesce(status_code, 0), error, response
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
		dl := &out[index[id]]
		dl.Attempts = append(dl.Attempts, at)
	}
	return out, rows.Err()
}

// PendingDeliveries counts on the pool.
func (d *Driver) PendingDeliveries(ctx context.Context) (int, *time.Time, error) {
	var n int
	var oldest *time.Time
	err := d.db.pool.QueryRow(ctx, `SELECT count(*), min(created_at) FROM deliveries WHERE state = 'pending'`).Scan(&n, &oldest)
	return n, oldest, err
}
