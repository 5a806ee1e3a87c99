package storelink

import (
	"fmt"
	"unicode/utf8"
)

// TextProblem says what makes s unfit to be stored as a name, number or id,
// or "" when nothing does: bytes that are not UTF-8, or a control character
// other than tab (C0, DEL or C1). PostgreSQL refuses invalid UTF-8 and NUL
// outright, and no name or number a person types holds a control character,
// so such text is refused before it reaches any store, the same on each. The
// problem names the position, counted in characters from 1.
func TextProblem(s string) string {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f { // printable ASCII, the common case
			i++
			n++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		n++
		switch {
		case r == utf8.RuneError && size == 1:
			return fmt.Sprintf("is not valid UTF-8 (byte 0x%02x at character %d)", c, n)
		case IsControl(r):
			return fmt.Sprintf("holds the control character U+%04X at character %d; only tab is allowed", r, n)
		}
		i += size
	}
	return ""
}

// IsControl reports whether r is a control character other than tab: C0,
// DEL or C1.
func IsControl(r rune) bool {
	return (r < 0x20 && r != '\t') || (r >= 0x7f && r < 0xa0)
}

// CheckText applies TextProblem to a field of a request body or form.
// Errors: EUNPROCESSABLE, naming the field.
func CheckText(field, s string) error {
	if p := TextProblem(s); p != "" {
		return Errorf(EUNPROCESSABLE, "%s %s.", field, p)
	}
	return nil
}
