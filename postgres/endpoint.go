package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
	"storelink/service"
)

// endpointColumns show whether the endpoint has a key, never the key. The
// states are a text array, which pgx reads into the state type itself.
const endpointColumns = `id, client_id, url, states, enabled, disabled_reason, api_key <> '', previous_secret_until, created_at, updated_at`

func scanEndpoint(row pgx.Row) (*storelink.Endpoint, error) {
	var e storelink.Endpoint
	if err := row.Scan(&e.ID, &e.ClientID, &e.URL, &e.States, &e.Enabled, &e.DisabledReason, &e.HasAPIKey, &e.PreviousSecretUntil,
		&e.CreatedAt, &e.UpdatedAt); err != nil {
		return nil, noRow(err)
	}
	if e.States == nil {
		e.States = []storelink.OrderState{}
	}
	return &e, nil
}

// ClientExists looks the client up on the pool.
func (d *Driver) ClientExists(ctx context.Context, id string) (bool, error) {
	return found(exists(ctx, d.db.pool, `SELECT 1 FROM clients WHERE id = $1`, id))
}

// SealingKeyCheck reads the recorded check value: another process may have
// moved the database to a new key (storelink secret-key rotate) while this
// one ran.
func (d *Driver) SealingKeyCheck(ctx context.Context) (string, error) {
	return keyCheck(ctx, d.db.pool)
}

// InsertEndpoint inserts and reads the endpoint back in one statement.
func (d *Driver) InsertEndpoint(ctx context.Context, n service.NewEndpoint) (*storelink.Endpoint, error) {
	return scanEndpoint(d.db.pool.QueryRow(ctx, `INSERT INTO endpoints (id, client_id, url, states, api_key, secret, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $7) RETURNING `+endpointColumns,
		n.ID, n.ClientID, n.URL, statesArg(&n.States), n.APIKey, n.Secret, n.At))
}

// RotateSecret is one statement, outside a transaction: the secret it moves
// aside is the one it replaces, whatever another process does meanwhile.
func (d *Driver) RotateSecret(ctx context.Context, id, sealed string, until, at time.Time) (*storelink.Endpoint, error) {
	return scanEndpoint(d.db.pool.QueryRow(ctx, `UPDATE endpoints SET previous_secret = secret, previous_secret_until = $1,
		secret = $2, updated_at = $3 WHERE id = $4 RETURNING `+endpointColumns, until, sealed, at, id))
}

// ListEndpoints reads a client's endpoints on the pool.
func (d *Driver) ListEndpoints(ctx context.Context, clientID string) ([]storelink.Endpoint, error) {
	rows, err := d.db.pool.Query(ctx, `SELECT `+endpointColumns+` FROM endpoints WHERE client_id = $1 ORDER BY created_at, id`, clientID)
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
func (t *pgTx) UpdateEndpoint(ctx context.Context, id string, c service.EndpointChange) (*storelink.Endpoint, error) {
	e, err := scanEndpoint(t.tx.QueryRow(ctx, `UPDATE endpoints SET url = coalesce($2, url), states = coalesce($3, states),
		api_key = coalesce($4, api_key), enabled = coalesce($5, enabled), disabled_reason = coalesce($6, disabled_reason), updated_at = $7
		WHERE id = $1 RETURNING `+endpointColumns, id, c.URL, statesArg(c.States), c.APIKey, c.Enabled, c.DisabledReason, c.At))
	if err != nil {
		return nil, err
	}
	if c.Enabled != nil && *c.Enabled {
		return e, notify(ctx, t.tx, ChannelDeliveries)
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
