package storelink

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
)

// Sealer encrypts the secrets the service must be able to read back (webhook
// signing secrets, the x-api-key sent to an endpoint) before they are
// stored, so that the database never holds them in clear. API keys, which
// only need checking, are hashed instead.
type Sealer struct{ aead cipher.AEAD }

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
	return &Sealer{aead: aead}, nil
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
