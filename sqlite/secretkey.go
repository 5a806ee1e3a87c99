package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"storelink/service"
)

// secretKeys is the driver of the secret-key calls
// (service.SecretKeyDriver): the check value in settings and the sealed
// columns of endpoints. Reads go to the read pool, writes to the write
// pool.
type secretKeys struct{ db *DB }

var _ service.SecretKeyDriver = secretKeys{}

// Begin starts a write transaction (BEGIN IMMEDIATE: the write lock) on
// the write pool, waiting for its connection until ctx ends.
func (d secretKeys) Begin(ctx context.Context) (service.SecretKeyTx, error) {
	tx, err := d.db.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return secretKeyTx{tx: tx}, nil
}

// Transient is always false: with one writer no transaction is ever a
// deadlock's victim.
func (secretKeys) Transient(error) bool { return false }

// SealingKeyCheck is always "": one process holds the file (its lock), and
// storelink secret-key rotate must hold it too, so the key cannot change
// under a running process and nothing is read.
func (secretKeys) SealingKeyCheck(context.Context) (string, error) { return "", nil }

// SecretKeyCheck reads the check value from the read pool.
func (d secretKeys) SecretKeyCheck(ctx context.Context) (string, error) {
	return keyCheck(ctx, d.db.read)
}

func keyCheck(ctx context.Context, q querier) (string, error) {
	var v string
	err := q.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = 'secret_key_check'`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

// RecordSecretKeyCheck inserts and reads back on the write pool.
func (d secretKeys) RecordSecretKeyCheck(ctx context.Context, check string) (string, error) {
	if _, err := d.db.write.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES ('secret_key_check', ?) ON CONFLICT (name) DO NOTHING`,
		check); err != nil {
		return "", err
	}
	return keyCheck(ctx, d.db.write)
}

// SealedEndpoints reads from the read pool.
func (d secretKeys) SealedEndpoints(ctx context.Context) ([]service.SealedEndpoint, error) {
	return sealedEndpoints(ctx, d.db.read)
}

// sealedColumns reads every endpoint's sealed values; a previous secret's
// overlap is kept in milliseconds, 0 for none.
const sealedColumns = `SELECT id, api_key, secret, previous_secret, coalesce(previous_secret_until, 0) FROM endpoints ORDER BY id`

func sealedEndpoints(ctx context.Context, q querier) ([]service.SealedEndpoint, error) {
	rows, err := q.QueryContext(ctx, sealedColumns)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []service.SealedEndpoint
	for rows.Next() {
		var e service.SealedEndpoint
		var until int64
		if err := rows.Scan(&e.ID, &e.APIKey, &e.Secret, &e.PreviousSecret, &until); err != nil {
			return nil, err
		}
		if until != 0 {
			t := fromMS(until)
			e.PreviousUntil = &t
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// secretKeyTx is a transaction of the secret-key calls, on the one write
// connection.
type secretKeyTx struct{ tx *sql.Tx }

// Commit commits.
func (t secretKeyTx) Commit(context.Context) error { return t.tx.Commit() }

// Rollback rolls back; after Commit it does nothing.
func (t secretKeyTx) Rollback(context.Context) error { return rollbackUnlessDone(t.tx) }

// LockSealed does nothing: the transaction holds the one write connection,
// so nobody else writes until it ends.
func (secretKeyTx) LockSealed(context.Context) error { return nil }

// SecretKeyCheck reads the check value on the write connection.
func (t secretKeyTx) SecretKeyCheck(ctx context.Context) (string, error) { return keyCheck(ctx, t.tx) }

// SealedEndpoints reads on the write connection.
func (t secretKeyTx) SealedEndpoints(ctx context.Context) ([]service.SealedEndpoint, error) {
	return sealedEndpoints(ctx, t.tx)
}

// ResealEndpoints updates the endpoints one statement each: a statement
// costs no round trip here.
func (t secretKeyTx) ResealEndpoints(ctx context.Context, eps []service.SealedEndpoint, check string) error {
	for _, e := range eps {
		if _, err := t.tx.ExecContext(ctx, `UPDATE endpoints SET api_key = ?, secret = ?, previous_secret = ? WHERE id = ?`,
			e.APIKey, e.Secret, e.PreviousSecret, e.ID); err != nil {
			return fmt.Errorf("seal the secrets of endpoint %s again: %w", e.ID, err)
		}
	}
	_, err := t.tx.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES ('secret_key_check', ?)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, check)
	return err
}
