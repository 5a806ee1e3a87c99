package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
	"storelink/service"
)

// endpointColumns show whether the endpoint has a key, never the key. The
// states are a text array, which pgx reads into the state type itself.
const endpointColumns = `id, client_id, url, states, enabled, disabled_reason, api_key <> '', previous_secret_until, deleted_at,
	created_at, updated_at, description`

func scanEndpoint(row pgx.Row) (*storelink.Endpoint, error) {
	var e storelink.Endpoint
	if err := row.Scan(&e.ID, &e.ClientID, &e.URL, &e.States, &e.Enabled, &e.DisabledReason, &e.HasAPIKey, &e.PreviousSecretUntil,
		&e.DeletedAt, &e.CreatedAt, &e.UpdatedAt, &e.Description); err != nil {
		return nil, noRow(err)
	}
	if e.States == nil {
		e.States = []storelink.OrderState{}
	}
	return &e, nil
}

// insertEndpointSQL inserts an endpoint unless its client has $9 that are
// not deleted, counted from endpoints_live, however many it deleted.
const insertEndpointSQL = `INSERT INTO endpoints (id, client_id, url, states, api_key, secret, created_at, updated_at, description)
	SELECT $1, $2, $3, $4, $5, $6, $7, $7, $8
	WHERE (SELECT count(*) FROM endpoints WHERE client_id = $2 AND deleted_at IS NULL) < $9 RETURNING ` + endpointColumns

// InsertEndpoint inserts and reads the endpoint back, in a transaction
// that first locks the client's row (FOR NO KEY UPDATE: the inserts of
// rows that reference the client go on), so that inserts of one client's
// endpoints take turns and each counts the endpoints the one before it
// committed.
func (d *webhooks) InsertEndpoint(ctx context.Context, n service.NewEndpoint) (*storelink.Endpoint, error) {
	var e *storelink.Endpoint
	err := pgx.BeginFunc(ctx, d.db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT FROM clients WHERE id = $1 FOR NO KEY UPDATE`, n.ClientID); err != nil {
			return err
		}
		var err error
		e, err = scanEndpoint(tx.QueryRow(ctx, insertEndpointSQL,
			n.ID, n.ClientID, n.URL, statesArg(&n.States), n.APIKey, n.Secret, n.At, n.Description, n.Max))
		if errors.Is(err, service.ErrNotFound) || errors.Is(err, pgx.ErrNoRows) {
			return service.ErrFull
		}
		return err
	})
	return e, err
}

// RotateSecret is one statement, outside a transaction: the secret it moves
// aside is the one it replaces, whatever another process does meanwhile.
func (d *webhooks) RotateSecret(ctx context.Context, p service.RotateSecretParams) (*storelink.Endpoint, error) {
	id, sealed, until, at := p.ID, p.Sealed, p.Until, p.At
	return scanEndpoint(d.db.pool.QueryRow(ctx, `UPDATE endpoints SET previous_secret = secret, previous_secret_until = $1,
		secret = $2, updated_at = $3 WHERE id = $4 RETURNING `+endpointColumns, until, sealed, at, id))
}

// ListEndpoints reads the clients' endpoints on the pool.
func (d *webhooks) ListEndpoints(ctx context.Context, clientIDs []string) ([]storelink.Endpoint, error) {
	rows, err := d.db.pool.Query(ctx, `SELECT `+endpointColumns+` FROM endpoints WHERE client_id = ANY ($1) AND deleted_at IS NULL
		ORDER BY created_at, id`, clientIDs)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (storelink.Endpoint, error) {
		e, err := scanEndpoint(row)
		if err != nil {
			return storelink.Endpoint{}, err
		}
		return *e, nil
	})
}

// UpdateEndpoint writes the fields c sets and reads the endpoint back in
// one statement, which finds no row for an unknown id: a field left nil is
// NULL, which keeps the column as it is. An endpoint enabled wakes the
// deliverers of every process (NOTIFY, sent at commit) for its parked
// deliveries.
func (t *endpointTx) UpdateEndpoint(ctx context.Context, id string, c service.EndpointChange) (*storelink.Endpoint, error) {
	e, err := scanEndpoint(t.tx.QueryRow(ctx, `UPDATE endpoints SET url = coalesce($2, url), states = coalesce($3, states),
		api_key = coalesce($4, api_key), enabled = coalesce($5, enabled), disabled_reason = coalesce($6, disabled_reason),
		deleted_at = coalesce($8, deleted_at), description = coalesce($9, description), updated_at = $7
		WHERE id = $1 RETURNING `+endpointColumns, id, c.URL, statesArg(c.States), c.APIKey, c.Enabled, c.DisabledReason, c.At, c.DeletedAt,
		c.Description))
	if err != nil {
		return nil, err
	}
	if c.Enabled != nil && *c.Enabled {
		return e, notify(ctx, &t.tx, ChannelDeliveries)
	}
	return e, nil
}

// statesArg is a states filter as a parameter: NULL for none (a nil
// pointer), else a text array, empty (not NULL) for every state.
func statesArg(states *[]storelink.OrderState) any {
	switch {
	case states == nil:
		return nil
	case *states == nil:
		return []storelink.OrderState{}
	}
	return *states
}

// Redeliver looks the delivery up and updates it in one transaction, the
// lease and the endpoint's deletion looked at in the UPDATE's own WHERE
// (leases are columns here), and wakes the deliverers of every process
// (NOTIFY, sent at commit) when it changed it.
func (d *webhooks) Redeliver(ctx context.Context, p service.RedeliverParams) error {
	id, at := p.ID, p.At
	return d.db.inTx(ctx, func(tx pgx.Tx) error {
		if err := exists(ctx, tx, `SELECT 1 FROM deliveries WHERE id = $1`, id); err != nil {
			return noRow(err)
		}
		tag, err := tx.Exec(ctx, `UPDATE deliveries SET state = $3, tries = 0, next_attempt_at = $1,
			lease_owner = NULL, lease_until = NULL, updated_at = $1
			WHERE id = $2 AND NOT (state = $3 AND lease_until IS NOT NULL AND lease_until >= $1)
			AND NOT EXISTS (SELECT 1 FROM endpoints e WHERE e.id = deliveries.endpoint_id AND e.deleted_at IS NOT NULL)`, at, id, p.Pending)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		return notify(ctx, tx, ChannelDeliveries)
	})
}

// deliveryColumns are what a delivery shows of its row.
const deliveryColumns = `id, event_id, endpoint_id, client_id, order_id, event_state, state, next_attempt_at, created_at, updated_at`

func scanDelivery(row pgx.Row) (*storelink.Delivery, error) {
	dl := storelink.Delivery{Attempts: []storelink.Attempt{}}
	if err := row.Scan(&dl.ID, &dl.EventID, &dl.EndpointID, &dl.ClientID, &dl.OrderID, &dl.EventState, &dl.State, &dl.NextAttemptAt,
		&dl.CreatedAt, &dl.UpdatedAt); err != nil {
		return nil, err
	}
	return &dl, nil
}

// ListDeliveries reads the page, then the attempts of the whole page in
// one query.
func (d *webhooks) ListDeliveries(ctx context.Context, f storelink.DeliveryFilter) ([]storelink.Delivery, error) {
	var a args
	q := `SELECT ` + deliveryColumns + ` FROM deliveries WHERE true`
	if f.ClientID != "" {
		q += ` AND client_id = ` + a.add(f.ClientID)
	}
	if f.EndpointID != "" {
		q += ` AND endpoint_id = ` + a.add(f.EndpointID)
	}
	if f.State != "" {
		q += ` AND state = ` + a.add(f.State)
	}
	// An order's or an event's deliveries are read by their order
	// (deliveries_order_seq); an event is found by its order, an order
	// number among the client's orders.
	if f.OrderID != "" {
		q += ` AND order_id = ` + a.add(f.OrderID)
	}
	if f.OrderNumber != "" {
		q += ` AND order_id IN (SELECT id FROM orders WHERE order_number = ` + a.add(f.OrderNumber)
		if f.ClientID != "" {
			q += ` AND client_id = ` + a.add(f.ClientID)
		}
		q += `)`
	}
	if f.EventID != "" {
		id := a.add(f.EventID)
		q += ` AND order_id = (SELECT coalesce(order_id, upload_id) FROM events WHERE id = ` + id + `) AND event_id = ` + id
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
		dl, err := scanDelivery(row)
		if err != nil {
			return storelink.Delivery{}, err
		}
		return *dl, nil
	})
	if err != nil || len(out) == 0 {
		return []storelink.Delivery{}, err
	}
	ids := make([]string, len(out))
	index := make(map[string]int, len(out))
	for i, dl := range out {
		ids[i], index[dl.ID] = dl.ID, i
	}
	rows, err = d.db.pool.Query(ctx, `SELECT delivery_id, number, at, duration_ms, coalesce(status_code, 0), error, response, url
		FROM delivery_attempts WHERE delivery_id = ANY ($1) ORDER BY delivery_id, number`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var at storelink.Attempt
		if err := rows.Scan(&id, &at.Number, &at.At, &at.DurationMS, &at.StatusCode, &at.Error, &at.Response, &at.URL); err != nil {
			return nil, err
		}
		dl := &out[index[id]]
		dl.Attempts = append(dl.Attempts, at)
	}
	return out, rows.Err()
}

// FailedDeliveries counts on the pool; the partial index of failed
// deliveries holds just those.
func (d *webhooks) FailedDeliveries(ctx context.Context) (int, error) {
	var n int
	err := d.db.pool.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE state = 'failed'`).Scan(&n)
	return n, err
}

// PendingDeliveries counts on the pool.
func (d *webhooks) PendingDeliveries(ctx context.Context) (service.Backlog, error) {
	var n int
	var oldest *time.Time
	err := d.db.pool.QueryRow(ctx, `SELECT count(*), min(created_at) FROM deliveries WHERE state = 'pending'`).Scan(&n, &oldest)
	return service.Backlog{Pending: n, Oldest: oldest}, err
}
