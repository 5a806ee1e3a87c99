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
	d Driver
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
	err := inTx(ctx, s.d, func(tx Tx) error {
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
