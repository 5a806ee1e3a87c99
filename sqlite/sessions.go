package sqlite

import (
	"context"
	"database/sql"
	"time"

	"storelink/service"
)

// The sessions' rows, the operator's (client_id NULL) and the partners';
// expiry times are kept in milliseconds.

// GetSession reads from the read pool. A partner's session counts only
// while its key is still one of its client's (api_keys.hash is unique).
func (d partners) GetSession(ctx context.Context, idHash []byte, now time.Time) (string, error) {
	var clientID sql.NullString
	err := d.db.read.QueryRowContext(ctx, `SELECT s.client_id FROM dashboard_sessions s
		WHERE s.id_hash = ? AND s.expires_at > ?
		  AND (s.client_id IS NULL OR EXISTS (SELECT 1 FROM api_keys k WHERE k.hash = s.key_hash AND k.client_id = s.client_id))`,
		idHash, ms(now)).Scan(&clientID)
	if err != nil {
		return "", noRow(err)
	}
	return clientID.String, nil
}

// DeleteSession deletes on the write pool.
func (d partners) DeleteSession(ctx context.Context, idHash []byte) error {
	_, err := d.db.write.ExecContext(ctx, `DELETE FROM dashboard_sessions WHERE id_hash = ?`, idHash)
	return err
}

// DeleteExpiredSessions deletes in the transaction.
func (t partnerTx) DeleteExpiredSessions(ctx context.Context, now time.Time) error {
	_, err := t.tx.ExecContext(ctx, `DELETE FROM dashboard_sessions WHERE expires_at <= ?`, ms(now))
	return err
}

// InsertSession inserts in the transaction; "" is NULL.
func (t partnerTx) InsertSession(ctx context.Context, s service.SessionRow) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO dashboard_sessions (id_hash, client_id, key_hash, expires_at) VALUES (?, ?, ?, ?)`,
		s.IDHash, nullString(s.ClientID), nullString(s.KeyHash), ms(s.Expires))
	return err
}
