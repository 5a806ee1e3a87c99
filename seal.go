package storelink

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
)

// Sealer encrypts the secrets the service must be able to read back (webhook
// signing secrets, the x-api-key sent to an endpoint) before they are
// stored, so that the database never holds them in clear. API keys, which
// only need checking, are hashed instead.
type Sealer struct {
	aead  cipher.AEAD
	check string
}

// SealKeySize is the size of the key: AES-256.
const SealKeySize = 32

const sealPrefix = "sealed:v1:"

// NewSealer returns a sealer with a 32-byte key.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != SealKeySize {
		return nil, errors.New("the secret key must be 32 bytes")
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(checkLabel))
	return &Sealer{aead: aead, check: hex.EncodeToString(mac.Sum(nil))}, nil
}

// checkLabel is what the key's check value is the HMAC of.
const checkLabel = "storelink secret-key check"

// Check is the key's check value, which the database keeps to tell at start
// whether a process was given the key its secrets are sealed with: the
// HMAC-SHA256 of a fixed text under the key, hex, from which the key cannot
// be found.
func (s *Sealer) Check() string { return s.check }

// Fingerprint is the short name of the key that operators are shown.
func (s *Sealer) Fingerprint() string { return KeyFingerprint(s.check) }

// KeyFingerprint is the short name of the key whose check value is check:
// its first 16 hex digits.
func KeyFingerprint(check string) string {
	if len(check) > 16 {
		return check[:16]
	}
	return check
}

// Seal encrypts s with a fresh nonce; "" stays "".
func (s *Sealer) Seal(plain string) string {
	if plain == "" {
		return ""
	}
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce)
	out := s.aead.Seal(nonce, nonce, []byte(plain), nil)
	return sealPrefix + base64.RawStdEncoding.EncodeToString(out)
}

// Open decrypts what Seal made. It fails when the key is not the one that
// sealed it, which is what an operator who changed the key needs to hear.
func (s *Sealer) Open(sealed string) (string, error) {
	if sealed == "" {
		return "", nil
	}
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimPrefix(sealed, sealPrefix))
	if err != nil || !strings.HasPrefix(sealed, sealPrefix) || len(b) < s.aead.NonceSize() {
		return "", errors.New("a stored secret is not in the sealed format")
	}
	plain, err := s.aead.Open(nil, b[:s.aead.NonceSize()], b[s.aead.NonceSize():], nil)
	if err != nil {
		return "", errors.New("a stored secret cannot be opened with this secret key (was --secret-key changed?)")
	}
	return string(plain), nil
}

// OpenEndpoint opens what an attempt to an endpoint needs: its x-api-key
// and the secrets to sign with, the previous one only if previous is given
// (its overlap lasts). When the key or the current secret cannot be opened
// the attempt cannot be made: ok is false, and the job says why
// (UnsealableReason). A previous secret that cannot be opened is left out:
// the current one signs, which is what receivers verify once the overlap
// is over.
func (s *Sealer) OpenEndpoint(apiKey, secret, previous string) (key string, secrets []string, ok bool) {
	key, errKey := s.Open(apiKey)
	current, errSecret := s.Open(secret)
	if errKey != nil || errSecret != nil {
		return "", nil, false
	}
	secrets = []string{current}
	if previous != "" {
		if p, err := s.Open(previous); err == nil {
			secrets = append(secrets, p)
		}
	}
	return key, secrets, true
}
