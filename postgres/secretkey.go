package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"storelink/service"
)

// settingKeyCheck is the settings row of the secret key's check value,
// which the delivery claims read too.
const settingKeyCheck = "secret_key_check"

// secretKeys is the driver of the secret-key calls
// (service.SecretKeyDriver): the check value in settings and the sealed
// columns of endpoints, on the pool or in a transaction of their own.
type secretKeys struct{ db *DB }

var _ service.SecretKeyDriver = secretKeys{}

// Begin starts a transaction at READ COMMITTED on a connection of the
// pool, waiting for one until ctx ends.
func (d secretKeys) Begin(ctx context.Context) (service.SecretKeyTx, error) {
	tx, err := d.db.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return secretKeyTx{tx: tx}, nil
}

// Transient tells deadlock victims and serialization failures.
func (secretKeys) Transient(err error) bool { return retryable(err) }

// SealingKeyCheck reads the recorded check value: another process may have
// moved the database to a new key (storelink secret-key rotate) while this
// one ran.
func (d secretKeys) SealingKeyCheck(ctx context.Context) (string, error) {
	return keyCheck(ctx, d.db.pool)
}

// SecretKeyCheck reads the check value on the pool.
func (d secretKeys) SecretKeyCheck(ctx context.Context) (string, error) {
	return keyCheck(ctx, d.db.pool)
}

func keyCheck(ctx context.Context, q querier) (string, error) {
	var v string
	err := q.QueryRow(ctx, `SELECT value FROM settings WHERE name = $1`, settingKeyCheck).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return v, err
}

// RecordSecretKeyCheck inserts and reads back on the pool: of processes
// starting at once with different keys, the first to insert wins and the
// others read its value.
func (d secretKeys) RecordSecretKeyCheck(ctx context.Context, check string) (string, error) {
	if _, err := d.db.pool.Exec(ctx, `INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`,
		settingKeyCheck, check); err != nil {
		return "", err
	}
	return keyCheck(ctx, d.db.pool)
}

// SealedEndpoints reads on the pool.
func (d secretKeys) SealedEndpoints(ctx context.Context) ([]service.SealedEndpoint, error) {
	return sealedEndpoints(ctx, d.db.pool)
}

func sealedEndpoints(ctx context.Context, q querier) ([]service.SealedEndpoint, error) {
	rows, err := q.Query(ctx, `SELECT id, api_key, secret, previous_secret, previous_secret_until FROM endpoints ORDER BY id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (service.SealedEndpoint, error) {
		var e service.SealedEndpoint
		err := row.Scan(&e.ID, &e.APIKey, &e.Secret, &e.PreviousSecret, &e.PreviousUntil)
		return e, err
	})
}

// secretKeyTx is a transaction of the secret-key calls.
type secretKeyTx struct{ tx pgx.Tx }

// Commit commits.
func (t secretKeyTx) Commit(ctx context.Context) error { return t.tx.Commit(ctx) }

// Rollback rolls back; after Commit it does nothing.
func (t secretKeyTx) Rollback(ctx context.Context) error { return rollbackUnlessDone(ctx, t.tx) }

// LockSealed locks the check value and the endpoints against writes until
// the transaction ends, since other processes write them too; reads go on.
func (t secretKeyTx) LockSealed(ctx context.Context) error {
	_, err := t.tx.Exec(ctx, `LOCK TABLE settings, endpoints IN EXCLUSIVE MODE`)
	return err
}

// SecretKeyCheck reads the check value as committed when it runs.
func (t secretKeyTx) SecretKeyCheck(ctx context.Context) (string, error) { return keyCheck(ctx, t.tx) }

// SealedEndpoints reads the endpoints as LockSealed left them.
func (t secretKeyTx) SealedEndpoints(ctx context.Context) ([]service.SealedEndpoint, error) {
	return sealedEndpoints(ctx, t.tx)
}

// ResealEndpoints sends the updates and the check value in one batch: one
// round trip however many endpoints there are.
func (t secretKeyTx) ResealEndpoints(ctx context.Context, eps []service.SealedEndpoint, check string) error {
	b := &pgx.Batch{}
	for _, e := range eps {
		b.Queue(`UPDATE endpoints SET api_key = $1, secret = $2, previous_secret = $3 WHERE id = $4`,
			e.APIKey, e.Secret, e.PreviousSecret, e.ID)
	}
	b.Queue(`INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = excluded.value`,
		settingKeyCheck, check)
	if err := t.tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("seal the secrets again: %w", err)
	}
	return nil
}
