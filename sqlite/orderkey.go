package sqlite

import (
	"context"
	"database/sql"
	"errors"
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

// replay looks the client's key up. It returns the order the key stands for
// when the key is live and hash is the request that brought it, the error
// of Replays when hash is another request, and nil, nil when the key is not
// remembered (never seen, or expired): then the call goes ahead. SQLite has
// one writer, so no other call with the key can be between this read and
// the write of the key.
func replay(ctx context.Context, tx orderTx, clientID, key string, hash []byte, now time.Time) (*storelink.Order, error) {
	k := storelink.OrderKey{ClientID: clientID, Key: key}
	var created int64
	err := tx.QueryRowContext(ctx, orderKeySQL, clientID, key).Scan(&k.RequestHash, &k.OrderID, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read idempotency key: %w", err)
	}
	k.CreatedAt = fromMS(created)
	if !k.Live(now) {
		return nil, nil
	}
	if err := k.Replays(hash); err != nil {
		return nil, err
	}
	o, err := loadOrder(ctx, tx, k.OrderID)
	if err != nil {
		return nil, fmt.Errorf("load order %s of an idempotency key: %w", k.OrderID, err)
	}
	o.Replayed = true
	return o, nil
}

// rememberKey writes a key with the order its call made, inside the
// transaction that wrote the order, and deletes a few expired keys: the
// calls that add keys keep the table to about a day's worth of them.
func rememberKey(ctx context.Context, tx orderTx, k storelink.OrderKey) error {
	if _, err := tx.ExecContext(ctx, sweepOrderKeysSQL, ms(k.CreatedAt.Add(-storelink.IdempotencyKeyTTL)), storelink.KeySweep); err != nil {
		return fmt.Errorf("delete expired idempotency keys: %w", err)
	}
	_, err := tx.ExecContext(ctx, insertOrderKeySQL, k.ClientID, k.Key, k.RequestHash, k.OrderID, ms(k.CreatedAt))
	if err != nil {
		return fmt.Errorf("save idempotency key of order %s: %w", k.OrderID, err)
	}
	return nil
}
