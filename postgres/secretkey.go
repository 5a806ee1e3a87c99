package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
)

var _ storelink.SecretKeyStore = (*DB)(nil)

// settingKeyCheck is the settings row of the secret key's check value.
const settingKeyCheck = "secret_key_check"

// SecretKeyCheck returns the recorded check value of the secret key, "" for
// none.
func (db *DB) SecretKeyCheck(ctx context.Context) (string, error) {
	return keyCheck(ctx, db.pool)
}

func keyCheck(ctx context.Context, q querier) (string, error) {
	var v string
	err := q.QueryRow(ctx, `SELECT value FROM settings WHERE name = $1`, settingKeyCheck).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return v, err
}

// RecordSecretKeyCheck records check unless one is recorded, and returns the
// one recorded: of processes starting at once with different keys, the
// first to insert wins and the others see its value.
func (db *DB) RecordSecretKeyCheck(ctx context.Context, check string) (string, error) {
	if _, err := db.pool.Exec(ctx, `INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`,
		settingKeyCheck, check); err != nil {
		return "", err
	}
	return keyCheck(ctx, db.pool)
}

// sealedEndpoint is one endpoint's sealed values.
type sealedEndpoint struct {
	id                       string
	apiKey, secret, previous string
	previousUntil            *time.Time
}

func (e sealedEndpoint) values(now time.Time) []storelink.SealedValue {
	var out []storelink.SealedValue
	for _, v := range []storelink.SealedValue{
		{EndpointID: e.id, Field: storelink.SealedAPIKey, Value: e.apiKey, Live: true},
		{EndpointID: e.id, Field: storelink.SealedSecret, Value: e.secret, Live: true},
		{EndpointID: e.id, Field: storelink.SealedPreviousSecret, Value: e.previous, Live: e.previousUntil != nil && e.previousUntil.After(now)},
	} {
		if v.Value != "" {
			out = append(out, v)
		}
	}
	return out
}

func sealedEndpoints(ctx context.Context, q querier) ([]sealedEndpoint, error) {
	rows, err := q.Query(ctx, `SELECT id, api_key, secret, previous_secret, previous_secret_until FROM endpoints ORDER BY id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (sealedEndpoint, error) {
		var e sealedEndpoint
		err := row.Scan(&e.id, &e.apiKey, &e.secret, &e.previous, &e.previousUntil)
		return e, err
	})
}

// SealedValues lists every sealed value.
func (db *DB) SealedValues(ctx context.Context) ([]storelink.SealedValue, error) {
	eps, err := sealedEndpoints(ctx, db.pool)
	if err != nil {
		return nil, err
	}
	now := db.now()
	var out []storelink.SealedValue
	for _, e := range eps {
		out = append(out, e.values(now)...)
	}
	return out, nil
}

// ResealSecrets seals every value again, in one transaction, and records
// newCheck. The endpoints table is locked against writes meanwhile, so that
// no endpoint is made or changed with the old key while the others move to
// the new one; reads go on.
func (db *DB) ResealSecrets(ctx context.Context, oldCheck, newCheck string, reseal func(storelink.SealedValue) (string, error)) (int, error) {
	n := 0
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		n = 0
		if _, err := tx.Exec(ctx, `LOCK TABLE settings, endpoints IN EXCLUSIVE MODE`); err != nil {
			return err
		}
		if recorded, err := keyCheck(ctx, tx); err != nil {
			return err
		} else if recorded != oldCheck {
			return storelink.Errorf(storelink.ECONFLICT, "the database's secret key changed meanwhile (fingerprint %s)", storelink.KeyFingerprint(recorded))
		}
		eps, err := sealedEndpoints(ctx, tx)
		if err != nil {
			return err
		}
		now := db.now()
		b := &pgx.Batch{}
		for _, e := range eps {
			next := map[string]string{storelink.SealedAPIKey: e.apiKey, storelink.SealedSecret: e.secret, storelink.SealedPreviousSecret: e.previous}
			for _, v := range e.values(now) {
				if next[v.Field], err = reseal(v); err != nil {
					return err
				}
				if v.Live {
					n++
				}
			}
			b.Queue(`UPDATE endpoints SET api_key = $1, secret = $2, previous_secret = $3 WHERE id = $4`,
				next[storelink.SealedAPIKey], next[storelink.SealedSecret], next[storelink.SealedPreviousSecret], e.id)
		}
		b.Queue(`INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = excluded.value`,
			settingKeyCheck, newCheck)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("seal the secrets again: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// SetSealer gives the database the sealer of webhook secrets, before it
// serves: the secret key is known only once the database is open and its
// check value read.
func (db *DB) SetSealer(s *storelink.Sealer) { db.Sealer = s }

// sealer is the Sealer that ClaimDeliveries opens the claimed endpoints'
// secrets with. Package service seals with its own (service.WithSealer).
func (db *DB) sealer() (*storelink.Sealer, error) {
	if db.Sealer == nil {
		return nil, errors.New("postgres: no Sealer set: webhook secrets cannot be stored or read")
	}
	return db.Sealer, nil
}
