package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"storelink"
)

var _ storelink.EndpointService = (*DB)(nil)

func (db *DB) sealer() (*storelink.Sealer, error) {
	if db.Sealer == nil {
		return nil, errors.New("sqlite: no Sealer set: webhook secrets cannot be stored or read")
	}
	return db.Sealer, nil
}

func statesColumn(states []storelink.OrderState) string {
	parts := make([]string, len(states))
	for i, s := range states {
		parts[i] = string(s)
	}
	return strings.Join(parts, ",")
}

func parseStates(col string) []storelink.OrderState {
	out := []storelink.OrderState{}
	if col == "" {
		return out
	}
	for _, s := range strings.Split(col, ",") {
		out = append(out, storelink.OrderState(s))
	}
	return out
}

// CreateEndpoint registers an endpoint; its secret and key are sealed.
func (db *DB) CreateEndpoint(ctx context.Context, clientID string, n storelink.NewEndpoint, secret string) (*storelink.Endpoint, error) {
	sealer, err := db.sealer()
	if err != nil {
		return nil, err
	}
	if err := storelink.CheckStates(n.States); err != nil {
		return nil, err
	}
	if err := exists(ctx, db.read, `SELECT 1 FROM clients WHERE id = ?`, clientID); err != nil {
		return nil, notFound(err, "client %q", clientID)
	}
	now := db.now()
	id := storelink.NewID(now)
	_, err = db.write.ExecContext(ctx, `INSERT INTO endpoints (id, client_id, url, states, api_key, secret, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, id, clientID, n.URL, statesColumn(n.States), sealer.Seal(n.APIKey), sealer.Seal(secret), ms(now), ms(now))
	if err != nil {
		return nil, fmt.Errorf("insert endpoint: %w", err)
	}
	return db.endpoint(ctx, db.read, id)
}

const endpointColumns = `id, client_id, url, states, enabled, disabled_reason, api_key != '', previous_secret_until, created_at, updated_at`

func scanEndpoint(row interface{ Scan(...any) error }) (*storelink.Endpoint, error) {
	e := &storelink.Endpoint{}
	var states string
	var until sql.NullInt64
	var created, updated int64
	if err := row.Scan(&e.ID, &e.ClientID, &e.URL, &states, &e.Enabled, &e.DisabledReason, &e.HasAPIKey, &until, &created, &updated); err != nil {
		return nil, err
	}
	e.States, e.PreviousSecretUntil = parseStates(states), fromNullMS(until)
	e.CreatedAt, e.UpdatedAt = fromMS(created), fromMS(updated)
	return e, nil
}

func (db *DB) endpoint(ctx context.Context, q querier, id string) (*storelink.Endpoint, error) {
	e, err := scanEndpoint(q.QueryRowContext(ctx, `SELECT `+endpointColumns+` FROM endpoints WHERE id = ?`, id))
	if err != nil {
		return nil, notFound(err, "webhook endpoint %q", id)
	}
	return e, nil
}

// Endpoints lists a client's endpoints.
func (db *DB) Endpoints(ctx context.Context, clientID string) ([]storelink.Endpoint, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT `+endpointColumns+` FROM endpoints WHERE client_id = ? ORDER BY created_at, id`, clientID)
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
// endpoint clears the reason it was disabled; its parked deliveries resume.
func (db *DB) UpdateEndpoint(ctx context.Context, id string, p storelink.EndpointPatch) (*storelink.Endpoint, error) {
	sealer, err := db.sealer()
	if err != nil {
		return nil, err
	}
	if p.States != nil {
		if err := storelink.CheckStates(*p.States); err != nil {
			return nil, err
		}
	}
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if _, err := db.endpoint(ctx, tx, id); err != nil {
		return nil, err
	}
	sets, args := []string{"updated_at = ?"}, []any{ms(db.now())}
	if p.URL != nil {
		sets, args = append(sets, "url = ?"), append(args, *p.URL)
	}
	if p.States != nil {
		sets, args = append(sets, "states = ?"), append(args, statesColumn(*p.States))
	}
	if p.APIKey != nil {
		sets, args = append(sets, "api_key = ?"), append(args, sealer.Seal(*p.APIKey))
	}
	if p.Enabled != nil {
		sets, args = append(sets, "enabled = ?", "disabled_reason = ''"), append(args, *p.Enabled)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE endpoints SET `+strings.Join(sets, ", ")+` WHERE id = ?`, append(args, id)...); err != nil {
		return nil, fmt.Errorf("update endpoint %s: %w", id, err)
	}
	e, err := db.endpoint(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	if p.Enabled != nil {
		db.queue.endpointsChanged.Store(true)
	}
	return e, nil
}

// RotateSecret makes secret current and keeps the old one signing until the
// overlap ends.
func (db *DB) RotateSecret(ctx context.Context, id, secret string, overlap time.Duration) (*storelink.Endpoint, error) {
	sealer, err := db.sealer()
	if err != nil {
		return nil, err
	}
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if _, err := db.endpoint(ctx, tx, id); err != nil {
		return nil, err
	}
	now := db.now()
	_, err = tx.ExecContext(ctx, `UPDATE endpoints SET previous_secret = secret, previous_secret_until = ?, secret = ?, updated_at = ?
		WHERE id = ?`, ms(now.Add(overlap)), sealer.Seal(secret), ms(now), id)
	if err != nil {
		return nil, fmt.Errorf("rotate secret of endpoint %s: %w", id, err)
	}
	e, err := db.endpoint(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	return e, tx.Commit()
}
