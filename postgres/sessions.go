package postgres

import (
	"context"
	"time"
)

// The dashboard sessions' rows; expiry times are timestamptz.

// SessionActive reads on the pool.
func (d *Driver) SessionActive(ctx context.Context, idHash []byte, now time.Time) (bool, error) {
	var active bool
	err := d.db.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM dashboard_sessions WHERE id_hash = $1 AND expires_at > $2)`,
		idHash, now).Scan(&active)
	return active, err
}

// DeleteSession deletes on the pool.
func (d *Driver) DeleteSession(ctx context.Context, idHash []byte) error {
	_, err := d.db.pool.Exec(ctx, `DELETE FROM dashboard_sessions WHERE id_hash = $1`, idHash)
	return err
}

// DeleteExpiredSessions deletes the rows committed when it runs.
func (t *pgTx) DeleteExpiredSessions(ctx context.Context, now time.Time) error {
	_, err := t.tx.Exec(ctx, `DELETE FROM dashboard_sessions WHERE expires_at <= $1`, now)
	return err
}

// InsertSession inserts; the id hash is the primary key.
func (t *pgTx) InsertSession(ctx context.Context, idHash []byte, expires time.Time) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO dashboard_sessions (id_hash, expires_at) VALUES ($1, $2)`, idHash, expires)
	return err
}
