package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"storelink/service"
)

// SecretKeyCheck reads the check value from the read pool.
func (d *Driver) SecretKeyCheck(ctx context.Context) (string, error) {
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
func (d *Driver) RecordSecretKeyCheck(ctx context.Context, check string) (string, error) {
	if _, err := d.db.write.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES ('secret_key_check', ?) ON CONFLICT (name) DO NOTHING`,
		check); err != nil {
		return "", err
	}
	return keyCheck(ctx, d.db.write)
}

// SealedEndpoints reads from the read pool.
func (d *Driver) SealedEndpoints(ctx context.Context) ([]service.SealedEndpoint, error) {
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

// LockSealed does nothing: the transaction holds the one write connection,
// so nobody else writes until it ends.
func (tx *writeTx) LockSealed(context.Context) error { return nil }

// SecretKeyCheck reads the check value on the write connection.
func (tx *writeTx) SecretKeyCheck(ctx context.Context) (string, error) { return keyCheck(ctx, tx) }

// SealedEndpoints reads on the write connection.
func (tx *writeTx) SealedEndpoints(ctx context.Context) ([]service.SealedEndpoint, error) {
	return sealedEndpoints(ctx, tx)
}

// ResealEndpoints updates the endpoints one statement each: a statement
// costs no round trip here.
func (tx *writeTx) ResealEndpoints(ctx context.Context, eps []service.SealedEndpoint, check string) error {
	for _, e := range eps {
		if _, err := tx.ExecContext(ctx, `UPDATE endpoints SET api_key = ?, secret = ?, previous_secret = ? WHERE id = ?`,
			e.APIKey, e.Secret, e.PreviousSecret, e.ID); err != nil {
			return fmt.Errorf("seal the secrets of endpoint %s again: %w", e.ID, err)
		}
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES ('secret_key_check', ?)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, check)
	return err
}
