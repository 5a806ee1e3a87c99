package sqlite

import (
	"context"
	"database/sql"
	"time"
)

// The sessions' rows, the operator's (client_id NULL) and the partners';
// expiry times are kept in milliseconds.

// GetSession reads from the read pool. A partner's session counts only
// while its key is still one of its client's (api_keys.hash is unique).
func (d *Driver) GetSession(ctx context.Context, idHash []byte, now time.Time) (string, bool, error) {
	var clientID sql.NullString
	err := d.db.read.QueryRowContext(ctx, `SELECT s.client_id FROM dashboard_sessions s
		WHERE s.id_hash = ? AND s.expires_at > ?
		  AND (s.client_id IS NULL OR EXISTS (SELECT 1 FROM api_keys k WHERE k.hash = s.key_hash AND k.client_id = s.client_id))`,
		idHash, ms(now)).Scan(&clientID)
	if err == sql.ErrNoRows {
		return "", false, nil
	} else if err != nil {
		return "", false, err
	}
	return clientID.String, true, nil
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

// InsertSession inserts on the write connection; "" is NULL.
func (tx *writeTx) InsertSession(ctx context.Context, idHash []byte, clientID, keyHash string, expires time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO dashboard_sessions (id_hash, client_id, key_hash, expires_at) VALUES (?, ?, ?, ?)`,
		idHash, nullString(clientID), nullString(keyHash), ms(expires))
	return err
}
