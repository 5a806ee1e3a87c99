package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"storelink"
)

var _ storelink.SecretKeyStore = (*DB)(nil)

// settingKeyCheck is the settings row of the secret key's check value.
const settingKeyCheck = "secret_key_check"

// SecretKeyCheck returns the recorded check value of the secret key, "" for
// none.
func (db *DB) SecretKeyCheck(ctx context.Context) (string, error) {
	return keyCheck(ctx, db.read)
}

func keyCheck(ctx context.Context, q querier) (string, error) {
	var v string
	err := q.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = ?`, settingKeyCheck).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

// RecordSecretKeyCheck records check unless one is recorded, and returns the
// one recorded.
func (db *DB) RecordSecretKeyCheck(ctx context.Context, check string) (string, error) {
	if _, err := db.write.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`,
		settingKeyCheck, check); err != nil {
		return "", err
	}
	return keyCheck(ctx, db.write)
}

// sealedColumns reads every endpoint's sealed values.
const sealedColumns = `SELECT id, api_key, secret, previous_secret, coalesce(previous_secret_until, 0) FROM endpoints ORDER BY id`

// sealedEndpoint is one endpoint's sealed values.
type sealedEndpoint struct {
	id                       string
	apiKey, secret, previous string
	previousUntil            int64
}

func (e sealedEndpoint) values(now int64) []storelink.SealedValue {
	var out []storelink.SealedValue
	for _, v := range []storelink.SealedValue{
		{EndpointID: e.id, Field: storelink.SealedAPIKey, Value: e.apiKey, Live: true},
		{EndpointID: e.id, Field: storelink.SealedSecret, Value: e.secret, Live: true},
		{EndpointID: e.id, Field: storelink.SealedPreviousSecret, Value: e.previous, Live: e.previousUntil > now},
	} {
		if v.Value != "" {
			out = append(out, v)
		}
	}
	return out
}

func sealedEndpoints(ctx context.Context, q querier) ([]sealedEndpoint, error) {
	rows, err := q.QueryContext(ctx, sealedColumns)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sealedEndpoint
	for rows.Next() {
		var e sealedEndpoint
		if err := rows.Scan(&e.id, &e.apiKey, &e.secret, &e.previous, &e.previousUntil); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// SealedValues lists every sealed value.
func (db *DB) SealedValues(ctx context.Context) ([]storelink.SealedValue, error) {
	eps, err := sealedEndpoints(ctx, db.read)
	if err != nil {
		return nil, err
	}
	now := ms(db.now())
	var out []storelink.SealedValue
	for _, e := range eps {
		out = append(out, e.values(now)...)
	}
	return out, nil
}

// ResealSecrets seals every value again, in one transaction, and records
// newCheck.
func (db *DB) ResealSecrets(ctx context.Context, oldCheck, newCheck string, reseal func(storelink.SealedValue) (string, error)) (int, error) {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if recorded, err := keyCheck(ctx, tx); err != nil {
		return 0, err
	} else if recorded != oldCheck {
		return 0, storelink.Errorf(storelink.ECONFLICT, "the database's secret key changed meanwhile (fingerprint %s)", storelink.KeyFingerprint(recorded))
	}
	eps, err := sealedEndpoints(ctx, tx)
	if err != nil {
		return 0, err
	}
	now := ms(db.now())
	n := 0
	for _, e := range eps {
		next := map[string]string{storelink.SealedAPIKey: e.apiKey, storelink.SealedSecret: e.secret, storelink.SealedPreviousSecret: e.previous}
		for _, v := range e.values(now) {
			if next[v.Field], err = reseal(v); err != nil {
				return 0, err
			}
			if v.Live {
				n++
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE endpoints SET api_key = ?, secret = ?, previous_secret = ? WHERE id = ?`,
			next[storelink.SealedAPIKey], next[storelink.SealedSecret], next[storelink.SealedPreviousSecret], e.id); err != nil {
			return 0, fmt.Errorf("seal the secrets of endpoint %s again: %w", e.id, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value`,
		settingKeyCheck, newCheck); err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

// SetSealer gives the database the sealer of webhook secrets, before it
// serves: the secret key is known only once the database is open and its
// check value read.
func (db *DB) SetSealer(s *storelink.Sealer) { db.Sealer = s }

// sealer is the Sealer that RecordAndClaim opens the secrets of what it
// claims with; the endpoint calls of package service have theirs
// (service.WithSealer).
func (db *DB) sealer() (*storelink.Sealer, error) {
	if db.Sealer == nil {
		return nil, errors.New("sqlite: no Sealer set: webhook secrets cannot be stored or read")
	}
	return db.Sealer, nil
}
