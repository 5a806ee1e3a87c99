package service

import (
	"context"
	"time"

	"storelink"
)

var _ storelink.SecretKeyStore = (*SecretKeys)(nil)

// SecretKeys are the calls on the secret key that seals webhook secrets
// and endpoint keys: its check value as the database records it, and the
// move of every sealed value to another key.
type SecretKeys struct {
	config
	d SecretKeyDriver
}

// SecretKeyDriver is what the secret-key calls ask of a database: the
// recorded check value of the key, the endpoints' sealed values, and a
// write transaction (SecretKeyTx) to seal them all again.
type SecretKeyDriver interface {
	// Begin starts a write transaction; it returns ctx's error when ctx
	// ends before the transaction could begin. The caller ends it with
	// Commit or Rollback; Rollback after Commit does nothing.
	Begin(ctx context.Context) (SecretKeyTx, error)
	// Transient tells whether err ended a transaction for a reason that a
	// fresh try of the same work can avoid, such as a deadlock between
	// writers: the service then runs the transaction again.
	Transient(err error) bool

	// SecretKeyCheck returns the recorded check value of the secret key,
	// "" when none is recorded.
	SecretKeyCheck(ctx context.Context) (string, error)
	// SealingKeyCheck returns the check value of the key that the
	// database's secrets are sealed with as the database has it now, ""
	// when none is recorded or when no other process can change it (a
	// database one process holds).
	SealingKeyCheck(ctx context.Context) (string, error)
	// RecordSecretKeyCheck writes check unless a check value is recorded,
	// and returns the one recorded afterwards: of processes recording at
	// once, the first wins and the others see its value.
	RecordSecretKeyCheck(ctx context.Context, check string) (string, error)
	// SealedEndpoints returns every endpoint's sealed values, by id.
	SealedEndpoints(ctx context.Context) ([]SealedEndpoint, error)
}

// SecretKeyTx is one write transaction of a SecretKeyDriver. Its row
// methods see what it wrote; nothing of it is seen by others before
// Commit. An error is the answer of the call that returns it.
type SecretKeyTx interface {
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error

	// LockSealed keeps every other transaction from writing the check
	// value or an endpoint until this one ends; reads go on.
	LockSealed(ctx context.Context) error
	// SecretKeyCheck returns the check value as the transaction sees it,
	// "" when none is recorded.
	SecretKeyCheck(ctx context.Context) (string, error)
	// SealedEndpoints returns every endpoint's sealed values, by id, as
	// the transaction sees them.
	SealedEndpoints(ctx context.Context) ([]SealedEndpoint, error)
	// ResealEndpoints writes the sealed values of each endpoint in eps
	// (PreviousUntil is not written) and records check as the secret key's
	// check value, in place of any.
	ResealEndpoints(ctx context.Context, eps []SealedEndpoint, check string) error
}

// SealedEndpoint is one endpoint's sealed values as stored: each is what
// Sealer.Seal made, or "" for none.
type SealedEndpoint struct {
	ID                             string
	APIKey, Secret, PreviousSecret string
	// PreviousUntil ends the previous secret's overlap; nil for none.
	PreviousUntil *time.Time
}

// values lists the endpoint's non-empty sealed values; a previous secret
// is live until its overlap ends, at now.
func (e SealedEndpoint) values(now time.Time) []storelink.SealedValue {
	var out []storelink.SealedValue
	for _, v := range []storelink.SealedValue{
		{EndpointID: e.ID, Field: storelink.SealedAPIKey, Value: e.APIKey, Live: true},
		{EndpointID: e.ID, Field: storelink.SealedSecret, Value: e.Secret, Live: true},
		{EndpointID: e.ID, Field: storelink.SealedPreviousSecret, Value: e.PreviousSecret, Live: e.PreviousUntil != nil && e.PreviousUntil.After(now)},
	} {
		if v.Value != "" {
			out = append(out, v)
		}
	}
	return out
}

// SecretKeyCheck returns the recorded check value of the secret key, "" for
// none.
func (s *SecretKeys) SecretKeyCheck(ctx context.Context) (string, error) {
	return s.d.SecretKeyCheck(ctx)
}

// RecordSecretKeyCheck records check unless one is recorded, and returns the
// one recorded.
func (s *SecretKeys) RecordSecretKeyCheck(ctx context.Context, check string) (string, error) {
	return s.d.RecordSecretKeyCheck(ctx, check)
}

// SealedValues lists every sealed value.
func (s *SecretKeys) SealedValues(ctx context.Context) ([]storelink.SealedValue, error) {
	eps, err := s.d.SealedEndpoints(ctx)
	if err != nil {
		return nil, err
	}
	now := s.now()
	var out []storelink.SealedValue
	for _, e := range eps {
		out = append(out, e.values(now)...)
	}
	return out, nil
}

// ResealSecrets seals every value again, in one transaction, and records
// newCheck. The sealed rows are locked against writes meanwhile, so that no
// endpoint is made or changed with the old key while the others move to the
// new one.
func (s *SecretKeys) ResealSecrets(ctx context.Context, oldCheck, newCheck string, reseal func(storelink.SealedValue) (string, error)) (int, error) {
	n := 0
	err := inTx(ctx, s.d, func(tx SecretKeyTx) error {
		n = 0 // inTx may run this again
		if err := tx.LockSealed(ctx); err != nil {
			return err
		}
		if recorded, err := tx.SecretKeyCheck(ctx); err != nil {
			return err
		} else if recorded != oldCheck {
			return storelink.Errorf(storelink.ECONFLICT, "the database's secret key changed meanwhile (fingerprint %s)", storelink.KeyFingerprint(recorded))
		}
		eps, err := tx.SealedEndpoints(ctx)
		if err != nil {
			return err
		}
		now := s.now()
		for i, e := range eps {
			next := map[string]string{storelink.SealedAPIKey: e.APIKey, storelink.SealedSecret: e.Secret, storelink.SealedPreviousSecret: e.PreviousSecret}
			for _, v := range e.values(now) {
				if next[v.Field], err = reseal(v); err != nil {
					return err
				}
				if v.Live {
					n++
				}
			}
			eps[i].APIKey, eps[i].Secret, eps[i].PreviousSecret = next[storelink.SealedAPIKey], next[storelink.SealedSecret], next[storelink.SealedPreviousSecret]
		}
		return tx.ResealEndpoints(ctx, eps, newCheck)
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
