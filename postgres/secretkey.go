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

// SecretKeyCheck reads the check value on the pool.
func (d *Driver) SecretKeyCheck(ctx context.Context) (string, error) {
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
func (d *Driver) RecordSecretKeyCheck(ctx context.Context, check string) (string, error) {
	if _, err := d.db.pool.Exec(ctx, `INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`,
		settingKeyCheck, check); err != nil {
		return "", err
	}
	return keyCheck(ctx, d.db.pool)
}

// SealedEndpoints reads on the pool.
func (d *Driver) SealedEndpoints(ctx context.Context) ([]service.SealedEndpoint, error) {
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

// LockSealed locks the check value and the endpoints against writes until
// the transaction ends, since other processes write them too; reads go on.
func (t *pgTx) LockSealed(ctx context.Context) error {
	_, err := t.tx.Exec(ctx, `LOCK TABLE settings, endpoints IN EXCLUSIVE MODE`)
	return err
}

// SecretKeyCheck reads the check value as committed when it runs.
func (t *pgTx) SecretKeyCheck(ctx context.Context) (string, error) { return keyCheck(ctx, &t.tx) }

// SealedEndpoints reads the endpoints as LockSealed left them.
func (t *pgTx) SealedEndpoints(ctx context.Context) ([]service.SealedEndpoint, error) {
	return sealedEndpoints(ctx, &t.tx)
}

// ResealEndpoints sends the updates and the check value in one batch: one
// round trip however many endpoints there are.
func (t *pgTx) ResealEndpoints(ctx context.Context, eps []service.SealedEndpoint, check string) error {
	b := &pgx.Batch{}
	for _, e := range eps {
		b.Queue(`UPDATE endpoints SET api_key = $1, secret = $2, previous_secret = $3 WHERE id = $4`,
			e.APIKey, e.Secret, e.PreviousSecret, e.ID)
	}
	b.Queue(`INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = excluded.value`,
		settingKeyCheck, check)
	t.tx.queueBatch(b)
	if err := t.tx.send(ctx); err != nil {
		return fmt.Errorf("seal the secrets again: %w", err)
	}
	return nil
}
