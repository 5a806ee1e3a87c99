package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"storelink"
)

// checkRequestText refuses a request whose path or query holds text that no
// id, cursor or filter can be: bytes that are not UTF-8 (after percent
// decoding) or control characters other than tab. It runs before routing,
// so that no handler, store or dashboard page sees such a value, and both
// stores answer alike (PostgreSQL would otherwise fail on NUL or invalid
// UTF-8 where SQLite finds nothing). A query string that cannot be parsed is
// refused too: the parameters it drops would silently widen a filter. So is
// a parameter given twice: no parameter is a list, and which of the values a
// handler would take is not for the caller to guess.
func checkRequestText(r *http.Request) error {
	for i, seg := range strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/") {
		if p := storelink.TextProblem(seg); p != "" {
			return storelink.Errorf(storelink.EINVALID, "Path segment %d (%s) %s.", i+1, quoteShort(seg), p)
		}
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return storelink.Errorf(storelink.EINVALID, "The query string cannot be parsed: %v.", err)
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the same parameter is named whatever the map's order
	for _, k := range keys {
		vs := q[k]
		if p := storelink.TextProblem(k); p != "" {
			return storelink.Errorf(storelink.EINVALID, "The query parameter name %s %s.", quoteShort(k), p)
		}
		for _, v := range vs {
			if p := storelink.TextProblem(v); p != "" {
				return storelink.Errorf(storelink.EINVALID, "Query parameter %s %s.", quoteShort(k), p)
			}
		}
		if len(vs) > 1 {
			return storelink.Errorf(storelink.EINVALID, "Query parameter %s is given %d times; each parameter may be given once.", quoteShort(k), len(vs))
		}
	}
	return nil
}

// quoteShort quotes s for a message, escaping what is not printable and
// cutting it at 64 bytes.
func quoteShort(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "…"
	}
	return strconv.Quote(s)
}

// readJSON reads a JSON body from r, which bounds its size, and refuses what
// encoding/json would take silently: bytes that are not UTF-8 (it replaces
// them with U+FFFD), a key given twice in one object (it keeps the last;
// keys are matched to fields without regard to case, so "name" and "Name"
// are the same key), a NUL character (\u0000, which PostgreSQL cannot store)
// and an escaped UTF-16 surrogate without its pair (replaced with U+FFFD);
// and what would cost more than the body: nesting past maxJSONDepth, more
// than maxJSONValues values in one array or object. It walks
// the tokens as they arrive, so a problem ends the read there, however much
// is sent after it. Syntax errors are left to the decoder, which describes
// them: the rest of the body is then read as it is. It returns the body read,
// an error of r, or EINVALID saying where.
func readJSON(r io.Reader) ([]byte, error) {
	var raw bytes.Buffer
	err := walkJSON(io.TeeReader(r, &raw), &raw)
	if err == nil {
		_, err = raw.ReadFrom(r)
	}
	var domain *storelink.Error
	if (err == nil || errors.As(err, &domain)) && !utf8.Valid(raw.Bytes()) {
		// Bytes that are not text come first, as when the body is whole.
		i := invalidUTF8At(raw.Bytes())
		return nil, storelink.Errorf(storelink.EINVALID, "The body is not valid UTF-8: byte %d is 0x%02x.", i+1, raw.Bytes()[i])
	}
	if err != nil {
		return nil, err
	}
	return raw.Bytes(), nil
}

// walkJSON walks the tokens of r, whose bytes so far are in raw, and stops
// at the first problem of readJSON's. It returns nil at the end and at a
// syntax error, and the error of a read that fails.
//
// The tokens come from jsontext, which reads them without an allocation
// each (encoding/json's Token costs about sixty bytes of garbage per byte
// of small tokens), told to let through what the walk checks itself.
func walkJSON(r io.Reader, raw *bytes.Buffer) error {
	dec := jsontext.NewDecoder(r, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	var stack []*jsonFrame
	for {
		start := dec.InputOffset()
		tok, err := dec.ReadToken()
		if err != nil {
			var syntax *jsontext.SyntacticError
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &syntax) {
				return nil // the end, or a syntax error, which the decoder reports
			}
			return err
		}
		kind := tok.Kind()
		var top *jsonFrame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		isKey := top != nil && top.object && top.wantKey
		if top != nil && kind != ']' && kind != '}' &&
			(isKey && len(top.keys) == maxJSONValues || !top.object && top.index == maxJSONValues) {
			return storelink.Errorf(storelink.EINVALID, "The body has more than %d values in one array or object, at byte %d (%s); no call takes so many.",
				maxJSONValues, dec.InputOffset(), jsonPath(stack))
		}
		if kind == '"' {
			s := tok.String()
			// The path is spelled out only for an answer: it costs a string
			// per token otherwise.
			what := func() string {
				if isKey {
					return "A key in " + objectName(jsonPath(stack))
				}
				return "The value at " + jsonPath(stack)
			}
			if i := strings.IndexByte(s, 0); i >= 0 {
				return storelink.Errorf(storelink.EINVALID, "%s holds a NUL character (\\u0000); no text may hold one.", what())
			}
			if strings.ContainsRune(s, utf8.RuneError) && loneSurrogate(raw.Bytes()[start:dec.InputOffset()]) {
				return storelink.Errorf(storelink.EINVALID, "%s holds an escaped UTF-16 surrogate (\\uD800 to \\uDFFF) without its pair, which is not a character.", what())
			}
			if isKey {
				k := foldKey(s)
				if first, dup := top.keys[k]; dup {
					if first == s {
						return storelink.Errorf(storelink.EINVALID, "The key %s appears twice in %s; each key may appear once.", strconv.Quote(s), objectName(jsonPath(stack)))
					}
					return storelink.Errorf(storelink.EINVALID, "The keys %s and %s in %s are the same key (keys are matched without regard to case); each key may appear once.",
						strconv.Quote(first), strconv.Quote(s), objectName(jsonPath(stack)))
				}
				top.keys[k] = s
				top.key, top.wantKey = s, false
				continue
			}
		}
		switch kind {
		case '{', '[':
			if len(stack) == maxJSONDepth {
				return storelink.Errorf(storelink.EINVALID, "The body is nested deeper than %d levels at byte %d (in %s); no call takes a body nested so deep.",
					maxJSONDepth, dec.InputOffset(), jsonPath(stack))
			}
			valueDone(top)
			f := &jsonFrame{object: kind == '{', wantKey: true, index: -1}
			if f.object {
				f.keys = map[string]string{}
			} else {
				f.index = 0
			}
			stack = append(stack, f)
			continue
		case '}', ']':
			stack = stack[:len(stack)-1]
			continue
		}
		valueDone(top)
	}
}

// jsonFrame is an object or array being walked by checkJSON.
type jsonFrame struct {
	object  bool
	wantKey bool              // in an object: the next string is a key
	key     string            // in an object: the key of the value being read
	keys    map[string]string // in an object: folded key → the key as given
	index   int               // in an array: the index of the value being read
}

// valueDone moves the enclosing frame past one value. It is called when a
// value starts, for containers, so that the path of their contents is right;
// the index then points at the container until it ends, which is all
// jsonPath needs.
func valueDone(f *jsonFrame) {
	switch {
	case f == nil:
	case f.object:
		f.wantKey = true
	default:
		f.index++
	}
}

// jsonPath names the value being read, as items[0].ean; "the top level" for
// the body itself.
func jsonPath(stack []*jsonFrame) string {
	var b strings.Builder
	for i, f := range stack {
		if f.object {
			if f.wantKey && i == len(stack)-1 {
				break // a key is being read: the object itself is the place
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
			continue
		}
		idx := f.index
		if i < len(stack)-1 {
			idx-- // the container inside was counted when it started
		}
		fmt.Fprintf(&b, "[%d]", idx)
	}
	if b.Len() == 0 {
		return "the top level"
	}
	return b.String()
}

func objectName(path string) string {
	if path == "the top level" {
		return "the top-level object"
	}
	return "the object at " + path
}

// foldKey maps a key to one representative of its case-folding class, the
// way encoding/json matches keys to struct fields.
func foldKey(s string) string {
	return strings.Map(func(r rune) rune {
		min := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < min {
				min = f
			}
		}
		return min
	}, s)
}

// loneSurrogate reports whether the JSON text lit (a string literal, with
// whatever separators precede it) escapes a UTF-16 surrogate that is not
// part of a pair.
func loneSurrogate(lit []byte) bool {
	i := bytes.IndexByte(lit, '"')
	if i < 0 {
		return false
	}
	pendingHigh := false
	for i++; i < len(lit); i++ {
		if lit[i] != '\\' {
			if pendingHigh {
				return true
			}
			continue
		}
		i++
		if i >= len(lit) {
			return false
		}
		if lit[i] != 'u' || i+4 >= len(lit) {
			if pendingHigh {
				return true
			}
			continue
		}
		v, err := strconv.ParseUint(string(lit[i+1:i+5]), 16, 16)
		i += 4
		if err != nil {
			return false
		}
		r := rune(v)
		switch {
		case pendingHigh && r >= 0xDC00 && r <= 0xDFFF:
			pendingHigh = false
		case pendingHigh:
			return true
		case r >= 0xD800 && r <= 0xDBFF:
			pendingHigh = true
		case utf16.IsSurrogate(r):
			return true
		}
	}
	return pendingHigh
}

// invalidUTF8At is the offset of the first byte of b that is not valid UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(b)
}
