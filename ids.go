package storelink

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// NewID returns a UUID version 7 (RFC 9562): random, but ordered by the time
// it was made, so ids sort in creation order and index well.
func NewID(now time.Time) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	ms := uint64(now.UnixMilli())
	var t [8]byte
	binary.BigEndian.PutUint64(t[:], ms)
	copy(b[0:6], t[2:8])
	b[6] = (b[6] & 0x0f) | 0x70 // version 7
	b[8] = (b[8] & 0x3f) | 0x80 // variant 10
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// apiKeyPrefix marks storelink keys so that secret scanners and people can
// recognise one in a leaked file.
const apiKeyPrefix = "slk_"

// NewAPIKeySecret returns a fresh API key: 32 random bytes, hex, prefixed.
func NewAPIKeySecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return apiKeyPrefix + hex.EncodeToString(b[:])
}

// HashAPIKey is what the database keeps of a key. Keys are 256 random bits,
// so a plain SHA-256 is as strong as a slow hash here and keeps lookups fast.
func HashAPIKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// KeyPrefix is the part of a key that may be shown again to tell keys apart.
func KeyPrefix(key string) string {
	if len(key) > len(apiKeyPrefix)+6 {
		return key[:len(apiKeyPrefix)+6]
	}
	return key
}

// ValidCountryCode reports whether s looks like ISO 3166-1 alpha-2.
func ValidCountryCode(s string) bool { return len(s) == 2 && isUpper(s) }

// ValidCurrency reports whether s looks like ISO 4217.
func ValidCurrency(s string) bool { return len(s) == 3 && isUpper(s) }

func isUpper(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < 'A' || r > 'Z' }) < 0
}

// ValidateStoreID checks a store id as the operator registers it. It must be
// exactly what partners write in the feed's store column, which is trimmed,
// so surrounding spaces could never match; and what the operator reads on a
// page, so it holds no invisible character.
func ValidateStoreID(id string) error {
	switch {
	case id == "" || len(id) > 64:
		return Errorf(EINVALID, "store_id must be 1 to 64 characters.")
	case strings.TrimSpace(id) != id:
		return Errorf(EINVALID, "store_id must not start or end with spaces.")
	case !utf8.ValidString(id):
		return Errorf(EINVALID, "store_id is not valid UTF-8.")
	case strings.IndexFunc(id, func(r rune) bool { return r == '\t' || IsControl(r) || r == '/' }) >= 0:
		return Errorf(EINVALID, "store_id must not contain control characters or '/'.")
	}
	if p := InvisibleProblem(id); p != "" {
		return Errorf(EINVALID, "store_id %s.", p)
	}
	return nil
}
