package feed

import (
	"fmt"
	"math/rand/v2"
	"storelink"
	"testing"
	"unicode/utf8"
)

// validEAN is storelink.ValidGTIN by way of eanValue, the feed's fast path
// that also packs the EAN; the tests hold the two to the same answers.
func validEAN(s string) bool {
	_, ok := eanValue(s)
	return ok
}

func TestValidEAN(t *testing.T) {
	tests := []struct {
		ean  string
		want bool
	}{
		{"4006381333931", true},  // EAN-13 (Stabilo), the contract's example
		{"5901234123457", true},  // EAN-13, GS1's own example
		{"4006381333932", false}, // check digit changed
		{"4006381333831", false}, // a payload digit changed
		{"4006381339331", false}, // two digits swapped (3 and 9 at weights 3/1)
		{"96385074", true},       // EAN-8
		{"96385075", false},
		{"036000291452", true}, // UPC-A (12)
		{"036000291453", false},
		{"10012345678902", true}, // GTIN-14
		{"10012345678903", false},
		{"00000000", true}, // all zeros: check digit 0, valid by the rule
		{"", false},
		{"400638133393", false},    // 12 digits, but the 13-digit EAN cut short
		{"40063813339310", false},  // 14 digits with a wrong check digit
		{"4006381333931 ", false},  // callers trim; ValidEAN does not
		{"400638133393a", false},   // not a digit
		{"４００６３８１３３３９３１", false},   // full-width digits are not ASCII digits
		{"123456789", false},       // 9 digits: no GTIN has that length
		{"12345678901", false},     // 11
		{"123456789012345", false}, // 15
	}
	for _, tt := range tests {
		if got := validEAN(tt.ean); got != tt.want || storelink.ValidGTIN(tt.ean) != tt.want {
			t.Errorf("validEAN(%q) = %v, storelink.ValidGTIN = %v, want %v", tt.ean, got, storelink.ValidGTIN(tt.ean), tt.want)
		}
	}
}

// TestValidEANOneCheckDigit: of the ten digits that can end a payload, exactly
// one makes a valid EAN, for every length.
func TestValidEANOneCheckDigit(t *testing.T) {
	for _, payload := range []string{"9638507", "03600029145", "400638133393", "1001234567890"} {
		n := 0
		for d := '0'; d <= '9'; d++ {
			if validEAN(payload + string(d)) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: %d valid check digits, want 1", payload, n)
		}
	}
}

// TestEANKey: the same digits with another length are another key, so
// "012345678905" (UPC-A) and "0012345678905" (its EAN-13 spelling) are kept
// apart, as they are stored apart.
func TestEANKey(t *testing.T) {
	a, okA := eanValue("036000291452")
	b, okB := eanValue("0036000291452")
	if !okA || !okB || a == b {
		t.Errorf("eanValue: %x (%v), %x (%v); want two valid, different keys", a, okA, b, okB)
	}
}

// makeEAN returns the i-th valid EAN-13 of a series, for generated feeds.
func makeEAN(i int) string {
	payload := fmt.Sprintf("40%010d", i)
	for d := '0'; d <= '9'; d++ {
		if s := payload + string(d); validEAN(s) {
			return s
		}
	}
	panic("no check digit for " + payload)
}

func TestParseQuantity(t *testing.T) {
	tests := []struct {
		s    string
		want int
		ok   bool
	}{
		{"0", 0, true}, {"7", 7, true}, {"007", 7, true}, {"1000000", 1000000, true},
		{"1000001", 0, false}, {"99999999999999999999999", 0, false},
		{"", 0, false}, {"-1", 0, false}, {"+1", 0, false}, {"1.0", 0, false},
		{"1,000", 0, false}, {"1e3", 0, false}, {" 1", 0, false},
	}
	for _, tt := range tests {
		if got, ok := parseQuantity(tt.s); got != tt.want || ok != tt.ok {
			t.Errorf("parseQuantity(%q) = %d, %v; want %d, %v", tt.s, got, ok, tt.want, tt.ok)
		}
	}
}

// TestLineTable checks the table against a Go map over enough keys to grow
// it several times, with repeats, and keys that differ only in store or in
// EAN length.
func TestLineTable(t *testing.T) {
	tab := newLineTable()
	ref := map[rowKey]uint32{}
	rng := rand.New(rand.NewPCG(1, 2))
	for line := uint32(2); line < 50_000; line++ {
		k := rowKey{store: rng.Uint32N(5), ean: rng.Uint64N(20_000) | uint64(8+rng.IntN(2)*5)<<56}
		if got, want := tab.swap(k, line), ref[k]; got != want {
			t.Fatalf("swap(%v, %d) = %d, want %d", k, line, got, want)
		}
		ref[k] = line
	}
	if tab.len() != len(ref) {
		t.Errorf("len = %d, want %d", tab.len(), len(ref))
	}
}

// TestHasControl holds the row check's byte scan to storelink.IsControl for
// every rune, alone and between letters; line breaks pass only when allowed.
func TestHasControl(t *testing.T) {
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		for _, s := range []string{string(r), "a" + string(r) + "é"} {
			want := storelink.IsControl(r)
			if got := hasControl(s, false); got != want {
				t.Fatalf("hasControl(%q, false) = %v, want %v", s, got, want)
			}
			if r == '\n' || r == '\r' {
				want = false
			}
			if got := hasControl(s, true); got != want {
				t.Fatalf("hasControl(%q, true) = %v, want %v", s, got, want)
			}
		}
	}
}
