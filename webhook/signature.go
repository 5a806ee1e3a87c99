// Package webhook signs, verifies and sends the order events that serve delivers
// to partners' endpoints: Standard Webhooks 1.0 signatures, and an HTTP dispatcher that
// bounds every attempt in time and size and refuses to reach the service's
// own network unless told otherwise.
package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The headers of Standard Webhooks, written in lower case as the
// specification spells them.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every signing secret, so that a secret pasted into the
// wrong place is recognisable as one.
const SecretPrefix = "whsec_"

// secretSize is the key size of NewSecret: the specification asks for 24 to
// 64 bytes; 32 is the size of the HMAC-SHA256 block's natural key.
const secretSize = 32

// Verification errors. A receiver answers 401 to each of them; they are
// distinct so that it can also say why, and none carries a key.
var (
	// ErrMissingHeaders: webhook-id, webhook-timestamp or webhook-signature
	// is absent, or the timestamp is not a whole number of Unix seconds.
	ErrMissingHeaders = errors.New("webhook: missing or malformed webhook-id, webhook-timestamp or webhook-signature header")
	// ErrStaleTimestamp: the signature is right but the timestamp is outside
	// the tolerance, as a replayed message's would be.
	ErrStaleTimestamp = errors.New("webhook: timestamp outside the tolerance")
	// ErrBadSignature: no v1 signature matches any of the keys.
	ErrBadSignature = errors.New("webhook: no matching signature")
)

// NewSecret returns a fresh signing secret: whsec_ and the base64 of 32
// random bytes, in the form the official libraries read.
func NewSecret() string {
	key := make([]byte, secretSize)
	if _, err := rand.Read(key); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// ParseSecret returns the key bytes of a secret, with or without its whsec_
// prefix. The error never repeats the secret, so it can be shown or logged.
func ParseSecret(s string) ([]byte, error) {
	s = strings.TrimPrefix(strings.TrimSpace(s), SecretPrefix)
	if s == "" {
		return nil, errors.New("webhook secret is empty: expected whsec_ followed by base64")
	}
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		// Accept unpadded base64 too: padding is easily lost in copy-paste.
		key, err = base64.RawStdEncoding.DecodeString(s)
	}
	if err != nil || len(key) == 0 {
		return nil, errors.New("webhook secret is not valid: expected whsec_ followed by standard base64")
	}
	return key, nil
}

// ParseSecrets parses the secrets of a rotation, current first. The error
// names the position of a bad secret, never its value.
func ParseSecrets(secrets []string) ([][]byte, error) {
	keys := make([][]byte, 0, len(secrets))
	for i, s := range secrets {
		k, err := ParseSecret(s)
		if err != nil {
			return nil, fmt.Errorf("secret %d of %d: %w", i+1, len(secrets), err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// signers makes webhook-signature values: for every key, "v1," and the
// base64 of HMAC-SHA256(key, "<msgID>.<unix seconds>.<body>"),
// space-separated, so that during a rotation a receiver that knows either
// the old or the new secret accepts it. An HMAC is kept for each key and
// reset for each message rather than made anew, with no copies of the
// message: it is what Client sends with. The body is signed as the exact
// bytes sent, so it must not be re-encoded after signing.
type signers struct {
	mu    sync.RWMutex
	pools map[string]*sync.Pool // by key
}

// pool returns the pool of HMACs of key.
func (s *signers) pool(key []byte) *sync.Pool {
	s.mu.RLock()
	p := s.pools[string(key)] // no copy of key to look it up
	s.mu.RUnlock()
	if p != nil {
		return p
	}
	k := string(key)
	p = &sync.Pool{New: func() any { return &macState{h: hmac.New(sha256.New, []byte(k))} }}
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.pools[k]; q != nil {
		return q
	}
	if s.pools == nil {
		s.pools = map[string]*sync.Pool{}
	}
	if len(s.pools) < maxMemo {
		s.pools[k] = p
	}
	return p
}

// macState is one HMAC of a key, with room for what is signed before the
// body and for the sum.
type macState struct {
	h      hash.Hash
	prefix []byte
	sum    [sha256.Size]byte
}

// header returns the webhook-signature value of a message for keys.
func (s *signers) header(keys [][]byte, msgID string, unix int64, body []byte) string {
	const sigLen = len("v1,") + (sha256.Size+2)/3*4
	out := make([]byte, 0, len(keys)*(sigLen+1))
	for i, k := range keys {
		pool := s.pool(k)
		m := pool.Get().(*macState)
		m.h.Reset()
		m.prefix = append(strconv.AppendInt(append(append(m.prefix[:0], msgID...), '.'), unix, 10), '.')
		m.h.Write(m.prefix)
		m.h.Write(body)
		sum := m.h.Sum(m.sum[:0])
		if i > 0 {
			out = append(out, ' ')
		}
		out = base64.StdEncoding.AppendEncode(append(out, "v1,"...), sum)
		pool.Put(m)
	}
	return string(out)
}

func mac(key []byte, msgID string, unix int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msgID))
	h.Write([]byte{'.'})
	h.Write(strconv.AppendInt(nil, unix, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks a received message: the three headers are present, one of
// the v1 signatures matches one of the keys (compared in constant time), and
// the timestamp is within tolerance of now. The signature is checked before
// the time, so ErrStaleTimestamp means an authentic message that is too old
// or too new (a replay, or a skewed clock), and a forgery is always
// ErrBadSignature.
func Verify(keys [][]byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id, tsText := header(h, HeaderID), header(h, HeaderTimestamp)
	sigText := strings.Join(headerValues(h, HeaderSignature), " ")
	if id == "" || tsText == "" || sigText == "" {
		return ErrMissingHeaders
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return ErrMissingHeaders
	}
	if !matches(keys, id, ts, body, sigText) {
		return ErrBadSignature
	}
	tol := int64(tolerance / time.Second)
	if n := now.Unix(); ts < n-tol || ts > n+tol {
		return ErrStaleTimestamp
	}
	return nil
}

// matches tells whether any "v1,<base64>" entry of the space-separated
// header is the signature of the message under any key. Other versions
// (v1a, asymmetric) are skipped, as the specification asks.
func matches(keys [][]byte, id string, ts int64, body []byte, sigText string) bool {
	want := make([][]byte, len(keys))
	for i, k := range keys {
		sum := mac(k, id, ts, body)
		want[i] = make([]byte, base64.StdEncoding.EncodedLen(len(sum)))
		base64.StdEncoding.Encode(want[i], sum)
	}
	ok := false
	for _, entry := range strings.Fields(sigText) {
		version, sig, found := strings.Cut(entry, ",")
		if !found || version != "v1" {
			continue
		}
		for _, w := range want {
			// No early return: the time taken does not depend on which
			// entry or key matched.
			if hmac.Equal([]byte(sig), w) {
				ok = true
			}
		}
	}
	return ok
}

// headerValues reads a header by its canonical name, and also by the
// lower-case name under which a caller may have put it directly into the map.
func headerValues(h http.Header, name string) []string {
	if vs := h.Values(name); len(vs) > 0 {
		return vs
	}
	return h[name]
}

func header(h http.Header, name string) string {
	if vs := headerValues(h, name); len(vs) > 0 {
		return vs[0]
	}
	return ""
}
