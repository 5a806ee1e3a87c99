package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
)

// GetOrderKey reads a remembered key; the caller holds its lock
// (LockOrderKey), so a racing call with the key has committed or waits.
func (t *pgTx) GetOrderKey(ctx context.Context, clientID, key string) (*storelink.OrderKey, error) {
	k := &storelink.OrderKey{ClientID: clientID, Key: key}
	err := t.tx.QueryRow(ctx, `SELECT request_hash, order_id, created_at FROM order_keys WHERE client_id = $1 AND idempotency_key = $2`,
		clientID, key).Scan(&k.RequestHash, &k.OrderID, &k.CreatedAt)
	if err != nil {
		return nil, noRow(err)
	}
	return k, nil
}

// PutOrderKey deletes expired keys and writes k in one batch. Expired rows
// another transaction holds are skipped (SKIP LOCKED), not waited for.
func (t *pgTx) PutOrderKey(ctx context.Context, k storelink.OrderKey, expired time.Time, sweep int) error {
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM order_keys WHERE (client_id, idempotency_key) IN (SELECT client_id, idempotency_key FROM order_keys
		WHERE created_at <= $1 ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)`, expired, sweep)
	b.Queue(`INSERT INTO order_keys (client_id, idempotency_key, request_hash, order_id, created_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (client_id, idempotency_key) DO UPDATE SET
		request_hash = excluded.request_hash, order_id = excluded.order_id, created_at = excluded.created_at`,
		k.ClientID, k.Key, k.RequestHash, k.OrderID, k.CreatedAt)
	return t.tx.SendBatch(ctx, b).Close()
}
