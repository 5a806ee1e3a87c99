package httpapi

import (
	"mime"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Attachment is the Content-Disposition of a download named name (RFC
// 6266): filename is ASCII, which every client reads, and a name that is
// not ASCII is given whole as filename* too, in UTF-8 (RFC 8187), which
// clients that read it prefer. The ASCII name is the name with its accents
// dropped (Köln.csv: Koln.csv) and any other character outside ASCII made
// "_".
func Attachment(name string) string {
	fallback := asciiName(name)
	cd := mime.FormatMediaType("attachment", map[string]string{"filename": fallback})
	if fallback == name {
		return cd
	}
	return cd + "; filename*=" + extValue(name)
}

// asciiName is name in printable ASCII: each character decomposed (NFD)
// and its combining marks dropped; what is still not printable ASCII is
// "_".
func asciiName(name string) string {
	var b strings.Builder
	for _, r := range norm.NFD.String(name) {
		switch {
		case unicode.Is(unicode.Mn, r):
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// extValue is s as an ext-value of RFC 8187: the charset UTF-8, an empty
// language between two apostrophes, and the bytes of s, those that are
// not attr-char percent-encoded.
func extValue(s string) string {
	const hex = "0123456789ABCDEF"
	b := []byte("UTF-8''")
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < utf8.RuneSelf && isAttrChar(c) {
			b = append(b, c)
		} else {
			b = append(b, '%', hex[c>>4], hex[c&0xf])
		}
	}
	return string(b)
}

// isAttrChar tells whether c may stand for itself in an ext-value: ALPHA,
// DIGIT and !#$&+-.^_`|~ (RFC 8187 section 3.2.1).
func isAttrChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$&+-.^_`|~", c) >= 0
}
