package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
)

// lockKey takes the lock of a client's idempotency key until the
// transaction ends. Two calls with one key at once would otherwise both
// find no key and both make an order (the primary key would refuse the
// second only at its end, after it had done all the work). With the lock
// the second waits, then reads the key the first committed (READ COMMITTED
// takes a new snapshot for every statement) and answers with its order.
// It is taken before the routing lock, always, so the two never deadlock.
func lockKey(ctx context.Context, tx pgx.Tx, clientID, key string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, lockOrderKey, clientID+" "+key); err != nil {
		return fmt.Errorf("take idempotency key lock: %w", err)
	}
	return nil
}

// replay looks the client's key up, under its lock. It returns the order
// the key stands for when the key is live and hash is the request that
// brought it, the error of Replays when hash is another request, and nil,
// nil when the key is not remembered (never seen, or expired): then the
// call goes ahead.
func replay(ctx context.Context, tx pgx.Tx, clientID, key string, hash []byte, now time.Time) (*storelink.Order, error) {
	k := storelink.OrderKey{ClientID: clientID, Key: key}
	err := tx.QueryRow(ctx, `SELECT request_hash, order_id, created_at FROM order_keys WHERE client_id = $1 AND idempotency_key = $2`,
		clientID, key).Scan(&k.RequestHash, &k.OrderID, &k.CreatedAt)
	if noRows(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read idempotency key: %w", err)
	}
	if !k.Live(now) {
		return nil, nil
	}
	if err := k.Replays(hash); err != nil {
		return nil, err
	}
	o, err := loadOrder(ctx, tx, k.OrderID, false)
	if err != nil {
		return nil, fmt.Errorf("load order %s of an idempotency key: %w", k.OrderID, err)
	}
	o.Replayed = true
	return o, nil
}

// rememberKey writes a key with the order its call made, inside the
// transaction that wrote the order, and deletes a few expired keys: the
// calls that add keys keep the table to about a day's worth of them. Rows
// another transaction holds are skipped, not waited for. An existing row of
// the key can only be an expired one (a live one is replayed instead): the
// key starts afresh.
func rememberKey(ctx context.Context, tx pgx.Tx, k storelink.OrderKey) error {
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM order_keys WHERE (client_id, idempotency_key) IN (SELECT client_id, idempotency_key FROM order_keys
		WHERE created_at <= $1 ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		k.CreatedAt.Add(-storelink.IdempotencyKeyTTL), storelink.KeySweep)
	b.Queue(`INSERT INTO order_keys (client_id, idempotency_key, request_hash, order_id, created_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (client_id, idempotency_key) DO UPDATE SET
		request_hash = excluded.request_hash, order_id = excluded.order_id, created_at = excluded.created_at`,
		k.ClientID, k.Key, k.RequestHash, k.OrderID, k.CreatedAt)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("save idempotency key of order %s: %w", k.OrderID, err)
	}
	return nil
}
