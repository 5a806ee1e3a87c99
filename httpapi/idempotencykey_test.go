package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"storelink"
)

// FuzzIdempotencyKey: any header value either is refused as EINVALID or
// gives a key that the domain takes; a valid key means the same bare and
// quoted as a Structured Field string.
func FuzzIdempotencyKey(f *testing.F) {
	for _, s := range []string{"8e03978e-40d5-43e8-bc93-6894a57f9324", `"k-1"`, `"a\"b\\c"`, `"a\b"`, `""`, `"`, "", "ключ", "tab\t", strings.Repeat("k", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		key, err := idempotencyKey(http.Header{"Idempotency-Key": {value}})
		if err != nil {
			if storelink.ErrorCode(err) != storelink.EINVALID {
				t.Fatalf("%q: error %v, want EINVALID", value, err)
			}
			return
		}
		if err := storelink.CheckIdempotencyKey(key); err != nil {
			t.Fatalf("%q gave key %q, which the domain refuses: %v", value, key, err)
		}
		if strings.HasPrefix(value, `"`) && strings.HasSuffix(value, `"`) {
			return
		}
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(value) + `"`
		if again, err := idempotencyKey(http.Header{"Idempotency-Key": {quoted}}); err != nil || again != key {
			t.Fatalf("%q quoted as %s gave %q, %v; want %q", value, quoted, again, err, key)
		}
	})
}

func TestIdempotencyKeyHeader(t *testing.T) {
	for _, c := range []struct {
		header http.Header
		want   string // "" with ok for no key
		ok     bool
	}{
		{http.Header{}, "", true},
		{http.Header{"Idempotency-Key": {"abc"}}, "abc", true},
		{http.Header{"Idempotency-Key": {`"abc"`}}, "abc", true},
		{http.Header{"Idempotency-Key": {`"a\"b\\c"`}}, `a"b\c`, true},
		{http.Header{"Idempotency-Key": {`a"b`}}, `a"b`, true},
		{http.Header{"Idempotency-Key": {""}}, "", false},
		{http.Header{"Idempotency-Key": {`""`}}, "", false},
		{http.Header{"Idempotency-Key": {`"a"b"`}}, "", false},
		{http.Header{"Idempotency-Key": {`"a\b"`}}, "", false},
		{http.Header{"Idempotency-Key": {"a", "b"}}, "", false},
		{http.Header{"Idempotency-Key": {strings.Repeat("k", 255)}}, strings.Repeat("k", 255), true},
		{http.Header{"Idempotency-Key": {strings.Repeat("k", 256)}}, "", false},
	} {
		got, err := idempotencyKey(c.header)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("%q: key %q, error %v; want %q, ok %v", c.header.Values("Idempotency-Key"), got, err, c.want, c.ok)
		}
	}
}
