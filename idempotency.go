package storelink

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"time"
)

// Idempotency keys (IETF draft "The Idempotency-Key HTTP Header Field"):
// the marketplace retries an order's creation after a timeout without knowing
// whether the first request got through, and order numbers are not unique
// (a re-assigned order shares its number), so without a key a retry makes a
// second order. A create call that carries a key is remembered, with the
// hash of its request and the order it made, in the transaction that writes
// the order and its event; a later call with the same key answers with that
// order and writes nothing.

// IdempotencyKeyTTL is how long a key is remembered. A day covers any
// sensible retry schedule (it is what Stripe keeps); an older key is
// ignored, and a call that brings it again creates a new order.
const IdempotencyKeyTTL = 24 * time.Hour

// MaxIdempotencyKey bounds a key's length: a UUID is 36 characters, and a
// longer key is a mistake, not more uniqueness.
const MaxIdempotencyKey = 255

// KeyedCall names a call that takes an idempotency key. Its name goes into
// the hash of its request, so that a key sent to one call and then to the
// other is a different request, not a replay.
type KeyedCall string

// The calls that take an idempotency key: the creation of an order and of
// a warehouse order. Their names are the strings hashed into every key
// recorded so far, which happen to read as the routes of the API: another
// string would make a retry of a key recorded before an upgrade look like
// another request, so they stay as they are.
const (
	CreateOrderCall          KeyedCall = "POST /orders"
	CreateWarehouseOrderCall KeyedCall = "POST /warehouse-orders"
)

// CheckIdempotencyKey refuses a key that is empty, longer than
// MaxIdempotencyKey or not printable ASCII: the key travels in an HTTP header
// and is shown back in messages, so control characters and other bytes
// have no place in it.
func CheckIdempotencyKey(key string) error {
	if key == "" || len(key) > MaxIdempotencyKey {
		return Errorf(EINVALID, "Idempotency-Key must be 1 to %d characters; it has %d.", MaxIdempotencyKey, len(key))
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return Errorf(EINVALID, "Idempotency-Key must be printable ASCII; byte %d is 0x%02x.", i+1, key[i])
		}
	}
	return nil
}

// RequestHash is the SHA-256 of a create request in canonical form: the
// call's name and the JSON of the body as the service read it. Spacing,
// field order and the spelling of numbers ("5" or "5.00") do not make two
// requests different; any value that the service acts on does. The key
// itself is not part of it. A field added to NewOrder must be omitempty:
// otherwise the retries of keys remembered before the release would hash
// differently and be refused.
func (n *NewOrder) RequestHash(call KeyedCall) []byte {
	body, _ := json.Marshal(n) // a NewOrder always encodes
	h := sha256.New()
	h.Write([]byte(call))
	h.Write([]byte{'\n'})
	h.Write(body)
	return h.Sum(nil)
}

// OrderKey is a remembered idempotency key: the client it belongs to, the
// hash of the request that brought it first and the order that request made.
type OrderKey struct {
	ClientID    string
	Key         string
	RequestHash []byte
	OrderID     string
	CreatedAt   time.Time
}

// Live tells whether the key is still remembered at now.
func (k *OrderKey) Live(now time.Time) bool { return now.Before(k.CreatedAt.Add(IdempotencyKeyTTL)) }

// Replays tells whether a request with hash is a retry of the one that
// brought the key: the same request gives the same answer, but a key
// cannot stand for two different requests (EUNPROCESSABLE), since the
// caller would then believe an order made that never was.
func (k *OrderKey) Replays(hash []byte) error {
	if !bytes.Equal(k.RequestHash, hash) {
		return Errorf(EUNPROCESSABLE, "Idempotency-Key %q was already used for a different request (another call or body) of client %s; send a new key for a new request.", k.Key, k.ClientID)
	}
	return nil
}

// KeySweep is how many expired keys a call that remembers a key deletes.
// More than one, so that the expired keys never pile up for long while
// keys are in use; few, so that a call never does much of it.
const KeySweep = 4
