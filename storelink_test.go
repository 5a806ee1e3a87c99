package storelink_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"storelink"
)

func TestMoney(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // "" when refused
	}{
		{"19.99", "19.99"}, {"19.9", "19.9"}, {"19.90", "19.9"}, {"20", "20"}, {"0.01", "0.01"}, {"007.50", "7.5"},
		{"999999999999.99", "999999999999.99"},
		{"", ""}, {".5", ""}, {"5.", ""}, {"1.999", ""}, {"-1", ""}, {"+1", ""}, {"1,99", ""}, {"1e3", ""},
		{"1 000", ""}, {"١٢", ""}, {"1000000000000", ""},
	} {
		m, err := storelink.ParseMoney(c.in)
		if c.want == "" {
			if err == nil {
				t.Errorf("ParseMoney(%q) = %v, want an error", c.in, m)
			}
			continue
		}
		if err != nil || m.String() != c.want {
			t.Errorf("ParseMoney(%q) = %v, %v; want %s", c.in, m, err, c.want)
		}
		b, _ := json.Marshal(struct{ P storelink.Money }{m})
		if string(b) != `{"P":`+c.want+`}` {
			t.Errorf("JSON of %q = %s", c.in, b)
		}
	}
	var v struct{ P storelink.Money }
	if err := json.Unmarshal([]byte(`{"P":19.99}`), &v); err != nil || v.P != 1999 {
		t.Fatalf("unmarshal 19.99 = %v, %v", v.P, err)
	}
	if err := json.Unmarshal([]byte(`{"P":19.999}`), &v); storelink.ErrorCode(err) != storelink.EUNPROCESSABLE {
		t.Fatalf("unmarshal 19.999 = %v, want unprocessable", err)
	}
}

func TestNewID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	now := time.Now()
	a, b := storelink.NewID(now), storelink.NewID(now.Add(time.Millisecond))
	if !re.MatchString(a) || !re.MatchString(b) || a >= b {
		t.Fatalf("ids %s, %s: want UUIDv7, ordered by time", a, b)
	}
}

func TestAPIKeys(t *testing.T) {
	k1, k2 := storelink.NewAPIKeySecret(), storelink.NewAPIKeySecret()
	if k1 == k2 || len(k1) != 68 || storelink.HashAPIKey(k1) == storelink.HashAPIKey(k2) {
		t.Fatal("keys must be distinct, 256-bit, with distinct hashes")
	}
	if h := storelink.HashAPIKey(k1); len(h) != 64 || h == k1 {
		t.Fatalf("hash = %q", h)
	}
	if p := storelink.KeyPrefix(k1); p != k1[:10] {
		t.Fatalf("prefix = %q", p)
	}
}

func TestCapacityTake(t *testing.T) {
	p := storelink.CapacityPolicy{Base: 20 << 20, PerStore: 2 << 20, Window: time.Hour}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// A new client with 3 stores starts with a full bucket of 26 MiB.
	b, c, err := p.Take(nil, 3, 10<<20, now)
	if err != nil || c.BytesPerWindow != 26<<20 || c.BytesLeft != 16<<20 {
		t.Fatalf("first take = %+v, %v", c, err)
	}
	b, c, err = p.Take(&b, 3, 10<<20, now)
	if err != nil || c.BytesLeft != 6<<20 {
		t.Fatalf("second take = %+v, %v", c, err)
	}
	// 4 MiB short at 26 MiB/h: 4/26 h = 553.8 s → 554.
	_, _, err = p.Take(&b, 3, 10<<20, now)
	var e *storelink.Error
	if storelink.ErrorCode(err) != storelink.ERATELIMIT || !asErr(err, &e) || e.RetryAfter != 554 {
		t.Fatalf("third take = %v, want 429 after 554 s", err)
	}
	if _, _, err := p.Take(&b, 3, 10<<20, now.Add(553*time.Second)); storelink.ErrorCode(err) != storelink.ERATELIMIT {
		t.Fatal("fits one second early: Retry-After is too generous")
	}
	if _, _, err := p.Take(&b, 3, 10<<20, now.Add(554*time.Second)); err != nil {
		t.Fatalf("does not fit after Retry-After: %v", err)
	}
	// Refill never exceeds the bucket size.
	if c := p.Peek(&b, 3, now.Add(48*time.Hour)); c.BytesLeft != 26<<20 || c.FullIn != 0 {
		t.Fatalf("after two days = %+v", c)
	}
	if _, _, err := p.Take(nil, 3, 26<<20+1, now); storelink.ErrorCode(err) != storelink.ETOOLARGE {
		t.Fatalf("larger than the bucket = %v, want too large", err)
	}
}

func asErr(err error, target **storelink.Error) bool {
	e, ok := err.(*storelink.Error)
	*target = e
	return ok
}

// A delivery attempt's outcome is logged as a word, not as its number.
func TestOutcomeLoggedInWords(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	for _, o := range storelink.Outcomes {
		logger.Info("attempt", "outcome", o)
	}
	want := `"outcome":"succeeded"` + `"outcome":"retry"` + `"outcome":"failed"` + `"outcome":"gone"`
	var got strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		i := strings.Index(line, `"outcome":`)
		got.WriteString(strings.TrimSuffix(line[i:], "}"))
	}
	if got.String() != want {
		t.Fatalf("logged outcomes %s, want %s", got.String(), want)
	}
}
