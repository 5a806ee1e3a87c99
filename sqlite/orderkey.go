package sqlite

import (
	"context"
	"fmt"
	"time"

	"storelink"
)

// The statements of idempotency keys, prepared with the order statements.
const (
	orderKeySQL = `SELECT request_hash, order_id, created_at FROM order_keys WHERE client_id = ? AND idempotency_key = ?`
	// An existing row can only be an expired one (a live one is replayed
	// instead): the key starts afresh.
	insertOrderKeySQL = `INSERT INTO order_keys (client_id, idempotency_key, request_hash, order_id, created_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (client_id, idempotency_key) DO UPDATE SET
		request_hash = excluded.request_hash, order_id = excluded.order_id, created_at = excluded.created_at`
	sweepOrderKeysSQL = `DELETE FROM order_keys WHERE (client_id, idempotency_key) IN
		(SELECT client_id, idempotency_key FROM order_keys WHERE created_at <= ? ORDER BY created_at LIMIT ?)`
)

var orderKeyStatements = []string{orderKeySQL, insertOrderKeySQL, sweepOrderKeysSQL}

// LockOrderKey does nothing: the transaction holds the one write
// connection, so no other call with the key can come between its read and
// its write.
func (tx *writeTx) LockOrderKey(context.Context, string, string) error { return nil }

// GetOrderKey reads a remembered key.
func (tx *writeTx) GetOrderKey(ctx context.Context, clientID, key string) (*storelink.OrderKey, error) {
	k := &storelink.OrderKey{ClientID: clientID, Key: key}
	var created int64
	if err := tx.QueryRowContext(ctx, orderKeySQL, clientID, key).Scan(&k.RequestHash, &k.OrderID, &created); err != nil {
		return nil, noRow(err)
	}
	k.CreatedAt = fromMS(created)
	return k, nil
}

// PutOrderKey deletes expired keys, then writes k.
func (tx *writeTx) PutOrderKey(ctx context.Context, k storelink.OrderKey, expired time.Time, sweep int) error {
	if _, err := tx.ExecContext(ctx, sweepOrderKeysSQL, ms(expired), sweep); err != nil {
		return fmt.Errorf("delete expired idempotency keys: %w", err)
	}
	_, err := tx.ExecContext(ctx, insertOrderKeySQL, k.ClientID, k.Key, k.RequestHash, k.OrderID, ms(k.CreatedAt))
	return err
}
