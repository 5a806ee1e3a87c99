package storelink

import (
	"errors"
	"strconv"
	"strings"
)

// Money is an amount in hundredths of the currency unit. Prices travel as
// exact decimals (CSV "19.99", JSON 19.99) and never through a float, so
// nothing is ever written as 19.989999999999998.
type Money int64

// maxMoneyDigits bounds the integer part so that cents fit an int64 with room
// to add prices up.
const maxMoneyDigits = 12

var errMoney = errors.New("not a decimal number with at most 2 decimals and '.' as separator")

// ParseMoney reads a non-negative decimal with at most two decimals and '.'
// as the separator: "19", "19.9", "19.99". Signs, exponents, thousands
// separators and a bare "." are refused.
func ParseMoney(s string) (Money, error) {
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" || len(whole) > maxMoneyDigits || (hasDot && (frac == "" || len(frac) > 2)) {
		return 0, errMoney
	}
	if !allDigits(whole) || !allDigits(frac) {
		return 0, errMoney
	}
	w, _ := strconv.ParseInt(whole, 10, 64)
	cents := w * 100
	if len(frac) == 1 {
		cents += int64(frac[0]-'0') * 10
	} else if len(frac) == 2 {
		cents += int64(frac[0]-'0')*10 + int64(frac[1]-'0')
	}
	return Money(cents), nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// String writes the shortest exact decimal: 1999 → "19.99", 1990 → "19.9",
// 2000 → "20".
func (m Money) String() string {
	neg := m < 0
	if neg {
		m = -m
	}
	s := strconv.FormatInt(int64(m/100), 10)
	if c := int64(m % 100); c != 0 {
		f := strconv.FormatInt(c+100, 10)[1:] // two digits
		s += "." + strings.TrimSuffix(f, "0")
	}
	if neg {
		s = "-" + s
	}
	return s
}

// MarshalJSON writes the amount as a JSON number, exactly.
func (m Money) MarshalJSON() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalJSON reads a JSON number (or a string holding one) exactly.
func (m *Money) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := ParseMoney(s)
	if err != nil {
		return Errorf(EUNPROCESSABLE, "price %s: %v", s, err)
	}
	*m = v
	return nil
}
