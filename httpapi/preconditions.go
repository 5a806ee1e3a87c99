package httpapi

import (
	"net/http"
	"strings"

	"storelink"
)

// Endpoints and clients carry an ETag, a strong entity tag of their
// version (storelink's Version), and a PATCH or DELETE of an endpoint is
// made only when its If-Match holds (RFC 9110 sections 8.8.3 and 13.1.1);
// otherwise it is answered 412 and changes nothing.

// setETag sets the answer's ETag to the version's strong entity tag.
func setETag(w http.ResponseWriter, version string) {
	w.Header().Set("ETag", `"`+version+`"`)
}

// ifMatch reads the request's If-Match: nil when it has none; "*"; or a
// list of entity tags, of which only the strong ones can match (the
// strong comparison of RFC 9110 section 8.8.3.2), so that a list of weak
// tags never holds. A field that is neither is an EINVALID that says what
// it found.
func ifMatch(h http.Header) (*storelink.IfMatch, error) {
	values := h.Values("If-Match")
	if len(values) == 0 {
		return nil, nil
	}
	m := &storelink.IfMatch{}
	tags := 0
	for _, v := range values {
		rest := strings.TrimSpace(v)
		if rest == "*" {
			m.Any = true
			continue
		}
		for rest != "" {
			weak := strings.HasPrefix(rest, "W/")
			if weak {
				rest = rest[2:]
			}
			opaque, after, ok := entityTag(rest)
			if !ok {
				return nil, storelink.Errorf(storelink.EINVALID,
					`If-Match must be * or a list of entity tags as ETag gives them, such as "%s"; found %s.`, exampleVersion, quoteShort(v))
			}
			tags++
			if !weak {
				m.Versions = append(m.Versions, opaque)
			}
			rest = strings.TrimLeft(after, " \t")
			if rest != "" {
				if rest[0] != ',' {
					return nil, storelink.Errorf(storelink.EINVALID, "If-Match: entity tags are separated by commas; found %s.", quoteShort(v))
				}
				rest = strings.TrimLeft(rest[1:], " \t,")
			}
		}
	}
	switch {
	case m.Any && tags > 0:
		return nil, storelink.Errorf(storelink.EINVALID, "If-Match is either * or a list of entity tags, not both.")
	case !m.Any && tags == 0:
		return nil, storelink.Errorf(storelink.EINVALID, `If-Match is empty; send * or the ETag of what you change, such as "%s".`, exampleVersion)
	}
	return m, nil
}

// exampleVersion is the shape of a version, for messages.
const exampleVersion = "3q2-7wXvb8JZyJ1pWm6s4A"

// entityTag reads the quoted opaque tag at the start of s (RFC 9110
// section 8.8.3: printable ASCII and obs-text but DQUOTE, between DQUOTEs)
// and returns it without its quotes, with what follows.
func entityTag(s string) (opaque, rest string, ok bool) {
	if len(s) < 2 || s[0] != '"' {
		return "", "", false
	}
	end := strings.IndexByte(s[1:], '"')
	if end < 0 {
		return "", "", false
	}
	opaque = s[1 : 1+end]
	for i := 0; i < len(opaque); i++ {
		if c := opaque[i]; c < 0x21 || c == 0x7f {
			return "", "", false
		}
	}
	return opaque, s[2+end:], true
}
