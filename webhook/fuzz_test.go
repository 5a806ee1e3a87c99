package webhook

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"storelink"
)

func FuzzWebhookParseSecret(f *testing.F) {
	for _, s := range []string{specSecret, otherSecret, "", "whsec_", "whsec_=", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", " whsec_AAAA \n", "whsec_AA", "whsec_\x00\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		key, err := ParseSecret(s)
		if err != nil {
			if key != nil {
				t.Fatalf("ParseSecret(%q) = %x with error %v", s, key, err)
			}
			return
		}
		if len(key) == 0 {
			t.Fatalf("ParseSecret(%q) = an empty key", s)
		}
		again, err := ParseSecret(SecretPrefix + base64.StdEncoding.EncodeToString(key))
		if err != nil || !bytes.Equal(again, key) {
			t.Fatalf("ParseSecret does not round-trip %q: %x, %v", s, again, err)
		}
	})
}

// FuzzWebhookVerify feeds arbitrary headers and bodies to Verify: it never
// panics, accepts only a header that carries the right signature, and always
// accepts what signatureHeader made.
func FuzzWebhookVerify(f *testing.F) {
	key := []byte("fuzzing key, 28 bytes long..")
	now := time.Unix(1763713200, 0)
	good := sign(key, eventID, now, []byte(eventBody))
	f.Add(eventID, "1763713200", good, []byte(eventBody))
	f.Add(eventID, "1763713200", "v1a,xyz "+good+" v1,", []byte(eventBody))
	f.Add("", "", "", []byte{})
	f.Add("id", "-9223372036854775808", "v1,,,, ,v1", []byte("{}"))
	f.Add("id", "9223372036854775807", "v1", []byte("{}"))
	f.Add("id", "+1763713200", "v1,"+strings.Repeat("A", 44), []byte(nil))
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set(HeaderID, id)
		h.Set(HeaderTimestamp, ts)
		h.Set(HeaderSignature, sig)
		err := Verify([][]byte{key}, h, body, now, 5*time.Minute)
		if err != nil && !errors.Is(err, ErrMissingHeaders) && !errors.Is(err, ErrStaleTimestamp) && !errors.Is(err, ErrBadSignature) {
			t.Fatalf("Verify returned an untyped error: %v", err)
		}
		if err == nil {
			n, perr := strconv.ParseInt(ts, 10, 64)
			if perr != nil {
				t.Fatalf("Verify accepted the timestamp %q", ts)
			}
			want := sign(key, id, time.Unix(n, 0), body)
			found := false
			for _, entry := range strings.Fields(sig) {
				found = found || entry == want
			}
			if !found {
				t.Fatalf("Verify accepted %q without the signature %s", sig, want)
			}
		}
		if id != "" {
			h.Set(HeaderTimestamp, "1763713200")
			h.Set(HeaderSignature, signatureHeader([][]byte{[]byte("other"), key}, id, now, body))
			if err := Verify([][]byte{key}, h, body, now, 5*time.Minute); err != nil {
				t.Fatalf("Verify refused its own signature for id %q: %v", id, err)
			}
		}
	})
}

// FuzzWebhookValidateURL: never panics, answers only nil or an
// EUNPROCESSABLE error, and never accepts a literal address it would refuse
// to dial.
func FuzzWebhookValidateURL(f *testing.F) {
	for _, s := range []string{"https://partner.example.com/hooks/${eventId}", "http://169.254.169.254/", "http://[::ffff:127.0.0.1]/",
		"http://[fe80::1%25eth0]:80/", "http://user:pw@h/", "ftp://x", "http://0x7f.1/", "http://%31%32%37.0.0.1/", "http://[::1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		err := ValidateURL(raw, false)
		if err != nil {
			var e *storelink.Error
			if !errors.As(err, &e) || e.Code != storelink.EUNPROCESSABLE {
				t.Fatalf("ValidateURL(%q) = %v, want an unprocessable *storelink.Error", raw, err)
			}
			return
		}
		u, perr := url.Parse(strings.ReplaceAll(raw, "${eventId}", sampleEventID))
		if perr != nil {
			t.Fatalf("ValidateURL accepted %q, which does not parse: %v", raw, perr)
		}
		if a, aerr := netip.ParseAddr(u.Hostname()); aerr == nil && dialGuard("tcp", netip.AddrPortFrom(a, 80).String(), nil) != nil {
			t.Fatalf("ValidateURL accepted %q, whose address the dial guard refuses", raw)
		}
	})
}
