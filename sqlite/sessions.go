package sqlite

import (
	"context"
	"time"
)

// The dashboard sessions' rows; expiry times are kept in milliseconds.

// SessionActive reads from the read pool.
func (d *Driver) SessionActive(ctx context.Context, idHash []byte, now time.Time) (bool, error) {
	var active bool
	err := d.db.read.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM dashboard_sessions WHERE id_hash = ? AND expires_at > ?)`,
		idHash, ms(now)).Scan(&active)
	return active, err
}

// DeleteSession deletes on the write pool.
func (d *Driver) DeleteSession(ctx context.Context, idHash []byte) error {
	_, err := d.db.write.ExecContext(ctx, `DELETE FROM dashboard_sessions WHERE id_hash = ?`, idHash)
	return err
}

// DeleteExpiredSessions deletes on the write connection.
func (tx *writeTx) DeleteExpiredSessions(ctx context.Context, now time.Time) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM dashboard_sessions WHERE expires_at <= ?`, ms(now))
	return err
}

// InsertSession inserts on the write connection.
func (tx *writeTx) InsertSession(ctx context.Context, idHash []byte, expires time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO dashboard_sessions (id_hash, expires_at) VALUES (?, ?)`, idHash, ms(expires))
	return err
}
