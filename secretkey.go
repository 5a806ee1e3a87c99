package storelink

import (
	"context"
	"fmt"
	"strings"
)

// Sealed values as a store lists them for the secret key's check and
// rotation: every column that holds something Sealer.Seal made.
const (
	SealedSecret         = "secret"          // an endpoint's signing secret
	SealedPreviousSecret = "previous_secret" // the one before it, signing during a rotation's overlap
	SealedAPIKey         = "api_key"         // the x-api-key sent to an endpoint
)

// SealedValue is one sealed value in the database.
type SealedValue struct {
	EndpointID string
	Field      string // SealedSecret, SealedPreviousSecret or SealedAPIKey
	Value      string
	// Live is false for a previous secret whose overlap is over: it is
	// never used again, and a rotation of the key drops it.
	Live bool
}

// SecretKeyStore is what the check and the rotation of the secret key need
// of a store, row by row; the rules are SecretKeyVerify's and
// RotateSecretKey's.
type SecretKeyStore interface {
	// SecretKeyCheck returns the check value (Sealer.Check) of the key the
	// database's secrets are sealed with, "" when none is recorded.
	SecretKeyCheck(ctx context.Context) (string, error)
	// RecordSecretKeyCheck records check unless a check value is recorded
	// already, and returns the one recorded then: check, or the other.
	RecordSecretKeyCheck(ctx context.Context, check string) (string, error)
	// SealedValues lists every non-empty sealed value.
	SealedValues(ctx context.Context) ([]SealedValue, error)
	// ResealSecrets replaces, in one transaction, every sealed value v by
	// reseal(v) and records newCheck, unless the recorded check value is
	// no longer oldCheck ("" for none), which is an ECONFLICT. An error of
	// reseal rolls everything back. It returns how many values it replaced.
	ResealSecrets(ctx context.Context, oldCheck, newCheck string, reseal func(SealedValue) (string, error)) (int, error)
}

// SecretKeyMismatch is the error of a key that is not the one the
// database's secrets are sealed with.
type SecretKeyMismatch struct {
	// Key is the fingerprint of the key given, Database that of the
	// database's key, "" when none is recorded and the key opens none of
	// its Sealed secrets.
	Key, Database string
	Sealed        int
}

func (e *SecretKeyMismatch) Error() string {
	if e.Database == "" {
		return fmt.Sprintf("the secret key (fingerprint %s) opens none of the database's %d sealed secrets", e.Key, e.Sealed)
	}
	return fmt.Sprintf("the secret key (fingerprint %s) is not the database's (fingerprint %s)", e.Key, e.Database)
}

// VerifySecretKey checks that s is the key the database's secrets are
// sealed with, and records its check value the first time. A database with
// no check value recorded (made before there was one) takes s if s opens
// one of its sealed secrets, or it has none: a wrong key opens none (AES-GCM
// authenticates), while one secret corrupted, or sealed by a process that
// had another key, must not keep the service down. The secrets s cannot
// open are returned, so that the operator can be told whose: their
// deliveries fail alone (DeliveryJob.Unsealable).
func VerifySecretKey(ctx context.Context, db SecretKeyStore, s *Sealer) ([]SealedValue, error) {
	recorded, err := db.SecretKeyCheck(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the secret key's check value: %w", err)
	}
	if recorded == s.Check() {
		return nil, nil
	}
	if recorded != "" {
		return nil, &SecretKeyMismatch{Key: s.Fingerprint(), Database: KeyFingerprint(recorded)}
	}
	values, err := db.SealedValues(ctx)
	if err != nil {
		return nil, fmt.Errorf("read sealed secrets: %w", err)
	}
	var closed []SealedValue
	for _, v := range values {
		if _, err := s.Open(v.Value); err != nil && v.Live {
			closed = append(closed, v)
		}
	}
	if live := countLive(values); live > 0 && len(closed) == live {
		return nil, &SecretKeyMismatch{Key: s.Fingerprint(), Sealed: live}
	}
	if recorded, err = db.RecordSecretKeyCheck(ctx, s.Check()); err != nil {
		return nil, fmt.Errorf("record the secret key's check value: %w", err)
	}
	if recorded != s.Check() {
		// Another process recorded its key first.
		return nil, &SecretKeyMismatch{Key: s.Fingerprint(), Database: KeyFingerprint(recorded)}
	}
	return closed, nil
}

func countLive(values []SealedValue) int {
	n := 0
	for _, v := range values {
		if v.Live {
			n++
		}
	}
	return n
}

// RotateSecretKey seals every secret again with next instead of current
// and records next's check value, in one transaction: either all of the
// database is on the new key or none of it. current must be the database's
// key (SecretKeyMismatch otherwise) and open every secret in use; previous
// secrets whose overlap is over are dropped rather than sealed again. It
// returns how many values were sealed again.
func RotateSecretKey(ctx context.Context, db SecretKeyStore, current, next *Sealer) (int, error) {
	recorded, err := db.SecretKeyCheck(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the secret key's check value: %w", err)
	}
	if recorded != "" && recorded != current.Check() {
		return 0, &SecretKeyMismatch{Key: current.Fingerprint(), Database: KeyFingerprint(recorded)}
	}
	// Looked at first, to name every secret in the way; the transaction
	// checks each again.
	values, err := db.SealedValues(ctx)
	if err != nil {
		return 0, fmt.Errorf("read sealed secrets: %w", err)
	}
	var closed []string
	for _, v := range values {
		if _, err := current.Open(v.Value); err != nil && v.Live {
			closed = append(closed, fmt.Sprintf("endpoint %s (%s)", v.EndpointID, v.Field))
		}
	}
	if len(closed) > 0 {
		return 0, Errorf(EUNPROCESSABLE, "the secret key (fingerprint %s) cannot open the stored secrets of %s: nothing was changed; "+
			"rotate those endpoints' secrets (and set their api_key again) first", current.Fingerprint(), strings.Join(closed, ", "))
	}
	return db.ResealSecrets(ctx, recorded, next.Check(), func(v SealedValue) (string, error) {
		if !v.Live {
			return "", nil
		}
		plain, err := current.Open(v.Value)
		if err != nil {
			return "", fmt.Errorf("endpoint %s (%s): %w", v.EndpointID, v.Field, err)
		}
		return next.Seal(plain), nil
	})
}
