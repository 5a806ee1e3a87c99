package httpapi

import (
	"io"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"storelink"
)

// Every timestamp in every answer is RFC 3339 UTC with exactly three
// fractional digits, as in order events: 2026-11-21T07:54:21.600Z, never
// 07:54:21.6Z or 07:54:21Z. encoding/json writes a time.Time as RFC 3339
// with as many digits as it needs, and lets no caller change that; the
// JSON v2 library (the encoding/json/v2 to come) does, through a marshaler
// for time.Time that holds for a whole answer. Everything else is encoded
// as encoding/json encodes it (its v1 options), without escaping HTML.
var answerOptions = jsonv2.JoinOptions(
	jsonv1.DefaultOptionsV1(),
	jsontext.EscapeForHTML(false),
	jsonv2.WithMarshalers(jsonv2.MarshalToFunc(func(e *jsontext.Encoder, t time.Time) error {
		return e.WriteToken(jsontext.String(t.UTC().Format(storelink.EventTimeLayout)))
	})),
)

// EncodeJSON writes v as one line of JSON as answers are written: with
// every time in RFC 3339 UTC and milliseconds.
func EncodeJSON(w io.Writer, v any) error {
	b, err := marshalAnswer(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// marshalAnswer is v as EncodeJSON writes it.
func marshalAnswer(v any) ([]byte, error) {
	b, err := jsonv2.Marshal(v, answerOptions)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
