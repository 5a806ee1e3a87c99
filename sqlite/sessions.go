package sqlite

import (
	"context"
	"time"

	"storelink"
)

var _ storelink.SessionStore = (*DB)(nil)

// CreateSession records a dashboard session and deletes the expired ones,
// in one transaction.
func (db *DB) CreateSession(ctx context.Context, idHash []byte, expires time.Time) error {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM dashboard_sessions WHERE expires_at <= ?`, ms(db.now())); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO dashboard_sessions (id_hash, expires_at) VALUES (?, ?)`,
		idHash, ms(expires)); err != nil {
		return err
	}
	return tx.Commit()
}

// SessionActive tells whether a dashboard session exists and has not expired.
func (db *DB) SessionActive(ctx context.Context, idHash []byte) (bool, error) {
	var active bool
	err := db.read.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM dashboard_sessions WHERE id_hash = ? AND expires_at > ?)`,
		idHash, ms(db.now())).Scan(&active)
	return active, err
}

// DeleteSession ends a dashboard session.
func (db *DB) DeleteSession(ctx context.Context, idHash []byte) error {
	_, err := db.write.ExecContext(ctx, `DELETE FROM dashboard_sessions WHERE id_hash = ?`, idHash)
	return err
}
