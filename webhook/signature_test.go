package webhook

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Fixed test secrets: the specification's example secret and a second one
// for rotations.
const (
	specSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	otherSecret = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
)

// eventBody is an order event as the service sends it: compact, with
// non-ASCII text and an unescaped ampersand, signed byte for byte.
const eventBody = `{"event_id":"0b7c9d2e-5f1a-4c3b-9e8d-7a6f5e4d3c2b","order_id":"ord_01","order_number":"MP-1001",` +
	`"state":"shipped","store_id":"store-berlin","timestamp":"2025-11-21T08:20:00.000Z",` +
	`"customer_billing_address":{"name":"Jörg Müller","company":"M&S <Handel>"},` +
	`"items":[{"item_id":"it-1","ean":"4006381333931","price":19.99,"currency":"EUR","article_number":"A-1","marketplace_article_number":"MA-1"}]}`

const eventID = "0b7c9d2e-5f1a-4c3b-9e8d-7a6f5e4d3c2b"

func mustKey(tb testing.TB, secret string) []byte {
	tb.Helper()
	k, err := ParseSecret(secret)
	if err != nil {
		tb.Fatalf("ParseSecret: %v", err)
	}
	return k
}

// signedHeader returns the headers of a message signed with keys at ts.
func signedHeader(keys [][]byte, id string, ts time.Time, body []byte) http.Header {
	h := http.Header{}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, signatureHeader(keys, id, ts, body))
	return h
}

// TestWebhookSpecExample checks the example of the Standard Webhooks
// specification, written out by hand rather than generated.
func TestWebhookSpecExample(t *testing.T) {
	got := sign(mustKey(t, specSecret), "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

func TestWebhookSecret(t *testing.T) {
	seen := map[string]bool{}
	for range 20 {
		s := NewSecret()
		if !strings.HasPrefix(s, "whsec_") || seen[s] {
			t.Fatalf("NewSecret = %q: want a fresh whsec_ secret", s)
		}
		seen[s] = true
		key, err := ParseSecret(s)
		if err != nil || len(key) < 24 || len(key) > 64 {
			t.Fatalf("ParseSecret(NewSecret()) = %d bytes, %v; want 24-64 bytes", len(key), err)
		}
		bare, err := ParseSecret(strings.TrimPrefix(s, "whsec_"))
		if err != nil || !bytes.Equal(bare, key) {
			t.Fatalf("ParseSecret without prefix = %x, %v; want %x", bare, err, key)
		}
	}
	unpadded, err := ParseSecret(strings.TrimRight(otherSecret, "="))
	if err != nil || !bytes.Equal(unpadded, mustKey(t, otherSecret)) {
		t.Errorf("ParseSecret of unpadded base64 = %x, %v", unpadded, err)
	}
	for _, bad := range []string{"", "whsec_", "   ", "whsec_not*base64!", "whsec_AAAA=AAA", "whsec_s3cr3t-Pa$$"} {
		_, err := ParseSecret(bad)
		if err == nil {
			t.Errorf("ParseSecret(%q) succeeded, want an error", bad)
			continue
		}
		if secret := strings.TrimPrefix(strings.TrimSpace(bad), "whsec_"); len(secret) > 3 && strings.Contains(err.Error(), secret) {
			t.Errorf("ParseSecret(%q) error %q repeats the secret", bad, err)
		}
	}
	if _, err := ParseSecrets([]string{specSecret, "whsec_!!"}); err == nil || !strings.Contains(err.Error(), "secret 2 of 2") {
		t.Errorf("ParseSecrets with a bad second secret: %v, want it named by position", err)
	}
}

func TestWebhookVerify(t *testing.T) {
	k1, k2, k3 := mustKey(t, specSecret), mustKey(t, otherSecret), []byte("a key nobody was given......")
	now := time.Unix(1763713200, 0)
	body := []byte(eventBody)
	const tol = 5 * time.Minute

	tests := []struct {
		name   string
		keys   [][]byte // verifier's keys
		header func() http.Header
		body   []byte
		want   error
	}{
		{"signed", [][]byte{k1}, func() http.Header { return signedHeader([][]byte{k1}, eventID, now, body) }, body, nil},
		{"rotation, old key verifies", [][]byte{k1}, func() http.Header { return signedHeader([][]byte{k2, k1}, eventID, now, body) }, body, nil},
		{"rotation, new key verifies", [][]byte{k2}, func() http.Header { return signedHeader([][]byte{k2, k1}, eventID, now, body) }, body, nil},
		{"verifier rotating", [][]byte{k3, k1}, func() http.Header { return signedHeader([][]byte{k1}, eventID, now, body) }, body, nil},
		{"wrong key", [][]byte{k3}, func() http.Header { return signedHeader([][]byte{k1, k2}, eventID, now, body) }, body, ErrBadSignature},
		{"no keys", nil, func() http.Header { return signedHeader([][]byte{k1}, eventID, now, body) }, body, ErrBadSignature},
		{"altered body", [][]byte{k1}, func() http.Header { return signedHeader([][]byte{k1}, eventID, now, body) }, bytes.Replace(body, []byte("19.99"), []byte("1.99"), 1), ErrBadSignature},
		{"other id", [][]byte{k1}, func() http.Header {
			h := signedHeader([][]byte{k1}, eventID, now, body)
			h.Set(HeaderID, "another-event")
			return h
		}, body, ErrBadSignature},
		{"timestamp changed after signing", [][]byte{k1}, func() http.Header {
			h := signedHeader([][]byte{k1}, eventID, now, body)
			h.Set(HeaderTimestamp, strconv.FormatInt(now.Unix()+1, 10))
			return h
		}, body, ErrBadSignature},
		{"at the tolerance, past", [][]byte{k1}, func() http.Header { return signedHeader([][]byte{k1}, eventID, now.Add(-tol), body) }, body, nil},
		{"at the tolerance, future", [][]byte{k1}, func() http.Header { return signedHeader([][]byte{k1}, eventID, now.Add(tol), body) }, body, nil},
		{"stale", [][]byte{k1}, func() http.Header { return signedHeader([][]byte{k1}, eventID, now.Add(-tol-time.Second), body) }, body, ErrStaleTimestamp},
		{"from the future", [][]byte{k1}, func() http.Header { return signedHeader([][]byte{k1}, eventID, now.Add(tol+time.Second), body) }, body, ErrStaleTimestamp},
		{"stale and forged", [][]byte{k3}, func() http.Header { return signedHeader([][]byte{k1}, eventID, now.Add(-time.Hour), body) }, body, ErrBadSignature},
		{"missing id", [][]byte{k1}, func() http.Header {
			h := signedHeader([][]byte{k1}, eventID, now, body)
			h.Del(HeaderID)
			return h
		}, body, ErrMissingHeaders},
		{"missing timestamp", [][]byte{k1}, func() http.Header {
			h := signedHeader([][]byte{k1}, eventID, now, body)
			h.Del(HeaderTimestamp)
			return h
		}, body, ErrMissingHeaders},
		{"missing signature", [][]byte{k1}, func() http.Header {
			h := signedHeader([][]byte{k1}, eventID, now, body)
			h.Del(HeaderSignature)
			return h
		}, body, ErrMissingHeaders},
		{"timestamp not a number", [][]byte{k1}, func() http.Header {
			h := signedHeader([][]byte{k1}, eventID, now, body)
			h.Set(HeaderTimestamp, "2025-11-21T08:20:00Z")
			return h
		}, body, ErrMissingHeaders},
		{"timestamp in milliseconds", [][]byte{k1}, func() http.Header {
			h := signedHeader([][]byte{k1}, eventID, now, body)
			h.Set(HeaderTimestamp, strconv.FormatInt(now.UnixMilli(), 10))
			return h
		}, body, ErrBadSignature},
		{"other versions skipped", [][]byte{k1}, func() http.Header {
			h := signedHeader([][]byte{k1}, eventID, now, body)
			h.Set(HeaderSignature, "v1a,c29tZXRoaW5n v2,"+strings.TrimPrefix(h.Get(HeaderSignature), "v1,")+" garbage "+h.Get(HeaderSignature))
			return h
		}, body, nil},
		{"only another version", [][]byte{k1}, func() http.Header {
			h := signedHeader([][]byte{k1}, eventID, now, body)
			h.Set(HeaderSignature, "v2,"+strings.TrimPrefix(h.Get(HeaderSignature), "v1,"))
			return h
		}, body, ErrBadSignature},
		{"signature repeated over two header lines", [][]byte{k1}, func() http.Header {
			h := signedHeader([][]byte{k2}, eventID, now, body)
			h.Add(HeaderSignature, sign(k1, eventID, now, body))
			return h
		}, body, nil},
		{"lower-case map keys", [][]byte{k1}, func() http.Header {
			return http.Header{
				HeaderID:        {eventID},
				HeaderTimestamp: {strconv.FormatInt(now.Unix(), 10)},
				HeaderSignature: {sign(k1, eventID, now, body)},
			}
		}, body, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(tt.keys, tt.header(), tt.body, now, tol)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
			if err != nil {
				for _, k := range [][]byte{k1, k2} {
					if strings.Contains(err.Error(), base64.StdEncoding.EncodeToString(k)) {
						t.Fatalf("error %q holds a key", err)
					}
				}
			}
		})
	}
}
