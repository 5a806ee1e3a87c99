package storelink

import (
	"fmt"
	"unicode"
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

// NameProblem is TextProblem for text that people read and tell apart by
// eye (a partner's or store's name): it also refuses what InvisibleProblem
// refuses.
func NameProblem(s string) string {
	if p := TextProblem(s); p != "" {
		return p
	}
	return InvisibleProblem(s)
}

// CheckName applies NameProblem to a name field of a request body or form.
// Errors: EUNPROCESSABLE, naming the field, as CheckText.
func CheckName(field, s string) error {
	if p := NameProblem(s); p != "" {
		return Errorf(EUNPROCESSABLE, "%s %s.", field, p)
	}
	return nil
}

// InvisibleProblem says which invisible character s holds, or "" when none:
// a format character (Unicode category Cf: the bidirectional embeddings,
// overrides, isolates and marks, the zero-width characters, the byte order
// mark, the soft hyphen, tags) or a line or paragraph separator. They show
// nothing, or reorder what is shown around them (a file name
// "invoice\u202Evsc.exe" reads as "invoiceexe.csv"), so that two names or
// ids that differ look alike; no name, store id or file name needs one.
func InvisibleProblem(s string) string {
	n := 0
	for _, r := range s {
		n++
		if IsInvisible(r) {
			return fmt.Sprintf("contains %s at character %d, an invisible format character", describeRune(r), n)
		}
	}
	return ""
}

// IsInvisible reports whether r is a format character (Unicode category
// Cf) or a line or paragraph separator (U+2028, U+2029).
func IsInvisible(r rune) bool {
	if r < 0xad {
		return false // ASCII, C1 and Latin-1 up to the soft hyphen: the common case
	}
	return r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Cf, r)
}

// invisibleNames names the invisible characters met in practice; others are
// given by code point alone.
var invisibleNames = map[rune]string{
	0x00AD: "SOFT HYPHEN", 0x061C: "ARABIC LETTER MARK", 0x180E: "MONGOLIAN VOWEL SEPARATOR",
	0x200B: "ZERO WIDTH SPACE", 0x200C: "ZERO WIDTH NON-JOINER", 0x200D: "ZERO WIDTH JOINER",
	0x200E: "LEFT-TO-RIGHT MARK", 0x200F: "RIGHT-TO-LEFT MARK",
	0x2028: "LINE SEPARATOR", 0x2029: "PARAGRAPH SEPARATOR",
	0x202A: "LEFT-TO-RIGHT EMBEDDING", 0x202B: "RIGHT-TO-LEFT EMBEDDING", 0x202C: "POP DIRECTIONAL FORMATTING",
	0x202D: "LEFT-TO-RIGHT OVERRIDE", 0x202E: "RIGHT-TO-LEFT OVERRIDE",
	0x2060: "WORD JOINER", 0x2061: "FUNCTION APPLICATION", 0x2062: "INVISIBLE TIMES",
	0x2063: "INVISIBLE SEPARATOR", 0x2064: "INVISIBLE PLUS",
	0x2066: "LEFT-TO-RIGHT ISOLATE", 0x2067: "RIGHT-TO-LEFT ISOLATE", 0x2068: "FIRST STRONG ISOLATE",
	0x2069: "POP DIRECTIONAL ISOLATE", 0xFEFF: "ZERO WIDTH NO-BREAK SPACE",
}

// describeRune is U+202E (RIGHT-TO-LEFT OVERRIDE), or U+E0041 for a
// character without a name in invisibleNames.
func describeRune(r rune) string {
	if name, ok := invisibleNames[r]; ok {
		return fmt.Sprintf("U+%04X (%s)", r, name)
	}
	return fmt.Sprintf("U+%04X", r)
}
