package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
)

var _ storelink.SessionStore = (*DB)(nil)

// CreateSession records a dashboard session and deletes the expired ones,
// in one transaction.
func (db *DB) CreateSession(ctx context.Context, idHash []byte, expires time.Time) error {
	return db.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM dashboard_sessions WHERE expires_at <= $1`, db.now()); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO dashboard_sessions (id_hash, expires_at) VALUES ($1, $2)`, idHash, expires)
		return err
	})
}

// SessionActive tells whether a dashboard session exists and has not expired.
func (db *DB) SessionActive(ctx context.Context, idHash []byte) (bool, error) {
	var active bool
	err := db.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM dashboard_sessions WHERE id_hash = $1 AND expires_at > $2)`,
		idHash, db.now()).Scan(&active)
	return active, err
}

// DeleteSession ends a dashboard session.
func (db *DB) DeleteSession(ctx context.Context, idHash []byte) error {
	_, err := db.pool.Exec(ctx, `DELETE FROM dashboard_sessions WHERE id_hash = $1`, idHash)
	return err
}
