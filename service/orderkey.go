package service

import (
	"context"
	"errors"
	"fmt"

	"storelink"
)

// replay looks the client's key up, under its lock. It returns the order
// the key stands for when the key is live and hash is the request that
// brought it, the error of Replays when hash is another request, and nil,
// nil when the key is not remembered (never seen, or expired): then the
// call goes ahead.
func (s *Service) replay(ctx context.Context, tx Tx, clientID, key string, hash []byte) (*storelink.Order, error) {
	k, err := tx.GetOrderKey(ctx, clientID, key)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read idempotency key: %w", err)
	}
	if !k.Live(s.now()) {
		return nil, nil
	}
	if err := k.Replays(hash); err != nil {
		return nil, err
	}
	o, err := tx.GetOrder(ctx, k.OrderID)
	if err != nil {
		return nil, fmt.Errorf("load order %s of an idempotency key: %w", k.OrderID, err)
	}
	o.Replayed = true
	return o, nil
}

// rememberKey writes a key with the order its call made, inside the
// transaction that wrote the order, and deletes a few expired keys: the
// calls that add keys keep the table to about a day's worth of them. An
// existing row of the key can only be an expired one (a live one is
// replayed instead): the key starts afresh.
func rememberKey(ctx context.Context, tx Tx, k storelink.OrderKey) error {
	if err := tx.PutOrderKey(ctx, k, k.CreatedAt.Add(-storelink.IdempotencyKeyTTL), storelink.KeySweep); err != nil {
		return fmt.Errorf("save idempotency key of order %s: %w", k.OrderID, err)
	}
	return nil
}
