package webhook

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// These tests hold our implementation against the official Standard
// Webhooks library: each signs what the other verifies.

func officialWebhook(tb testing.TB, secret string) *standardwebhooks.Webhook {
	tb.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		tb.Fatal(err)
	}
	return wh
}

// TestWebhookOfficialVerifiesSend sends a real request through Client.Send,
// signed during a rotation, and has a receiver built on the official library
// verify it with either secret.
func TestWebhookOfficialVerifiesSend(t *testing.T) {
	oldSecret, newSecret := NewSecret(), NewSecret()
	verified := make(chan error, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		for _, s := range []string{oldSecret, newSecret} {
			verified <- officialWebhook(t, s).Verify(body, r.Header)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	c := NewClient(5*time.Second, true)
	keys := [][]byte{mustKey(t, newSecret), mustKey(t, oldSecret)}
	res := c.Send(context.Background(), Request{URL: srv.URL, EventID: eventID, Body: []byte(eventBody), Keys: keys}, time.Now())
	if !res.Success() {
		t.Fatalf("Send = %+v, want success", res)
	}
	for range 2 {
		if err := <-verified; err != nil {
			t.Errorf("official Verify: %v", err)
		}
	}
}

// TestWebhookOfficialSignsVerify signs with the official library, one
// signature per secret as a rotating sender would, and verifies with ours.
func TestWebhookOfficialSignsVerify(t *testing.T) {
	s1, s2, s3 := NewSecret(), NewSecret(), NewSecret()
	now := time.Now()
	body := []byte(eventBody)
	sig1, err1 := officialWebhook(t, s1).Sign(eventID, now, body)
	sig2, err2 := officialWebhook(t, s2).Sign(eventID, now, body)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set(standardwebhooks.HeaderWebhookID, eventID)
	h.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(standardwebhooks.HeaderWebhookSignature, sig1+" "+sig2)

	for _, tt := range []struct {
		name    string
		secrets []string
		want    error
	}{
		{"first secret", []string{s1}, nil},
		{"second secret", []string{s2}, nil},
		{"both", []string{s3, s2}, nil},
		{"neither", []string{s3}, ErrBadSignature},
	} {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := ParseSecrets(tt.secrets)
			if err != nil {
				t.Fatal(err)
			}
			if err := Verify(keys, h, body, now, 5*time.Minute); !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestWebhookOfficialSameSignatures compares Sign with the official Sign on
// random secrets, ids, times and bodies.
func TestWebhookOfficialSameSignatures(t *testing.T) {
	for i := range 200 {
		secret := NewSecret()
		body := make([]byte, i*7)
		rand.Read(body)
		id := fmt.Sprintf("msg_%d_%s", i, rand.Text())
		ts := time.Unix(1_600_000_000+int64(i)*86_413, 0)
		want, err := officialWebhook(t, secret).Sign(id, ts, body)
		if err != nil {
			t.Fatal(err)
		}
		if got := sign(mustKey(t, secret), id, ts, body); got != want {
			t.Fatalf("case %d: Sign = %s, official library = %s", i, got, want)
		}
	}
}
