package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink/service"
)

// The sessions' rows, the operator's (client_id NULL) and the partners';
// expiry times are timestamptz.

// GetSession reads on the pool. A partner's session counts only while its
// key is still one of its client's (api_keys.hash is unique).
func (d partners) GetSession(ctx context.Context, idHash []byte, now time.Time) (string, error) {
	var clientID *string
	err := d.db.pool.QueryRow(ctx, `SELECT s.client_id FROM dashboard_sessions s
		WHERE s.id_hash = $1 AND s.expires_at > $2
		  AND (s.client_id IS NULL OR EXISTS (SELECT 1 FROM api_keys k WHERE k.hash = s.key_hash AND k.client_id = s.client_id))`,
		idHash, now).Scan(&clientID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", service.ErrNotFound
	} else if err != nil {
		return "", err
	}
	if clientID == nil {
		return "", nil
	}
	return *clientID, nil
}

// DeleteSession deletes on the pool.
func (d partners) DeleteSession(ctx context.Context, idHash []byte) error {
	_, err := d.db.pool.Exec(ctx, `DELETE FROM dashboard_sessions WHERE id_hash = $1`, idHash)
	return err
}

// DeleteExpiredSessions deletes the rows committed when it runs.
func (t partnerTx) DeleteExpiredSessions(ctx context.Context, now time.Time) error {
	_, err := t.tx.Exec(ctx, `DELETE FROM dashboard_sessions WHERE expires_at <= $1`, now)
	return err
}

// InsertSession inserts; the id hash is the primary key, "" is NULL.
func (t partnerTx) InsertSession(ctx context.Context, s service.SessionRow) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO dashboard_sessions (id_hash, client_id, key_hash, expires_at) VALUES ($1, $2, $3, $4)`,
		s.IDHash, nullString(s.ClientID), nullString(s.KeyHash), s.Expires)
	return err
}
