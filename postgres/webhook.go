package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
)

var _ storelink.EndpointService = (*DB)(nil)

func (db *DB) sealer() (*storelink.Sealer, error) {
	if db.Sealer == nil {
		return nil, errors.New("postgres: no Sealer set: webhook secrets cannot be stored or read")
	}
	return db.Sealer, nil
}

// writeSealer is the sealer of a call that seals a secret into the
// database: refused when the database has moved to another key since this
// process started (storelink secret-key rotate while it ran), since what it
// sealed could not be opened by the processes on the new key.
func (db *DB) writeSealer(ctx context.Context) (*storelink.Sealer, error) {
	sealer, err := db.sealer()
	if err != nil {
		return nil, err
	}
	check, err := keyCheck(ctx, db.pool)
	if err != nil {
		return nil, err
	}
	if check != "" && check != sealer.Check() {
		return nil, fmt.Errorf("this process's secret key (fingerprint %s) is no longer the database's (fingerprint %s): "+
			"nothing is sealed; restart it with the database's key", sealer.Fingerprint(), storelink.KeyFingerprint(check))
	}
	return sealer, nil
}

// statesColumn is the states filter as stored: a text array (SQLite keeps a
// comma-separated string), empty for every state.
func statesColumn(states []storelink.OrderState) []string {
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return out
}

func parseStates(col []string) []storelink.OrderState {
	out := make([]storelink.OrderState, len(col))
	for i, s := range col {
		out[i] = storelink.OrderState(s)
	}
	return out
}

// CreateEndpoint registers an endpoint; its secret and key are sealed.
func (db *DB) CreateEndpoint(ctx context.Context, clientID string, n storelink.NewEndpoint, secret string) (*storelink.Endpoint, error) {
	sealer, err := db.writeSealer(ctx)
	if err != nil {
		return nil, err
	}
	if err := storelink.CheckStates(n.States); err != nil {
		return nil, err
	}
	if err := exists(ctx, db.pool, `SELECT 1 FROM clients WHERE id = $1`, clientID); err != nil {
		return nil, notFound(err, "client %q", clientID)
	}
	now := db.now()
	e, err := scanEndpoint(db.pool.QueryRow(ctx, `INSERT INTO endpoints (id, client_id, url, states, api_key, secret, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $7) RETURNING `+endpointColumns,
		storelink.NewID(now), clientID, n.URL, statesColumn(n.States), sealer.Seal(n.APIKey), sealer.Seal(secret), now))
	if err != nil {
		return nil, fmt.Errorf("insert endpoint: %w", err)
	}
	return e, nil
}

const endpointColumns = `id, client_id, url, states, enabled, disabled_reason, api_key <> '', previous_secret_until, created_at, updated_at`

func scanEndpoint(row interface{ Scan(...any) error }) (*storelink.Endpoint, error) {
	e := &storelink.Endpoint{}
	var states []string
	if err := row.Scan(&e.ID, &e.ClientID, &e.URL, &states, &e.Enabled, &e.DisabledReason, &e.HasAPIKey, &e.PreviousSecretUntil,
		&e.CreatedAt, &e.UpdatedAt); err != nil {
		return nil, err
	}
	e.States = parseStates(states)
	return e, nil
}

// Endpoints lists a client's endpoints.
func (db *DB) Endpoints(ctx context.Context, clientID string) ([]storelink.Endpoint, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+endpointColumns+` FROM endpoints WHERE client_id = $1 ORDER BY created_at, id`, clientID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []storelink.Endpoint{}
	for rows.Next() {
		e, err := scanEndpoint(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *e)
	}
	return out, rows.Err()
}

// UpdateEndpoint changes URL, states, key or the enabled flag. Enabling an
// endpoint clears the reason it was disabled; its parked deliveries resume,
// and the deliverers of every process are woken for them.
func (db *DB) UpdateEndpoint(ctx context.Context, id string, p storelink.EndpointPatch) (*storelink.Endpoint, error) {
	sealer, err := db.writeSealer(ctx)
	if err != nil {
		return nil, err
	}
	if p.States != nil {
		if err := storelink.CheckStates(*p.States); err != nil {
			return nil, err
		}
	}
	var e *storelink.Endpoint
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		var a args
		sets := []string{"updated_at = " + a.add(db.now())}
		if p.URL != nil {
			sets = append(sets, "url = "+a.add(*p.URL))
		}
		if p.States != nil {
			sets = append(sets, "states = "+a.add(statesColumn(*p.States)))
		}
		if p.APIKey != nil {
			sets = append(sets, "api_key = "+a.add(sealer.Seal(*p.APIKey)))
		}
		if p.Enabled != nil {
			sets = append(sets, "enabled = "+a.add(*p.Enabled), "disabled_reason = ''")
		}
		var err error
		e, err = scanEndpoint(tx.QueryRow(ctx, `UPDATE endpoints SET `+strings.Join(sets, ", ")+` WHERE id = `+a.add(id)+
			` RETURNING `+endpointColumns, a...))
		if err != nil {
			return notFound(err, "webhook endpoint %q", id)
		}
		if p.Enabled != nil && *p.Enabled {
			return notify(ctx, tx, ChannelDeliveries)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// RotateSecret makes secret current and keeps the old one signing until the
// overlap ends.
func (db *DB) RotateSecret(ctx context.Context, id, secret string, overlap time.Duration) (*storelink.Endpoint, error) {
	sealer, err := db.writeSealer(ctx)
	if err != nil {
		return nil, err
	}
	now := db.now()
	// One statement: the old secret moved aside is the one it replaces,
	// whatever another process does meanwhile.
	e, err := scanEndpoint(db.pool.QueryRow(ctx, `UPDATE endpoints SET previous_secret = secret, previous_secret_until = $1,
		secret = $2, updated_at = $3 WHERE id = $4 RETURNING `+endpointColumns, now.Add(overlap), sealer.Seal(secret), now, id))
	if err != nil {
		return nil, notFound(err, "webhook endpoint %q", id)
	}
	return e, nil
}
