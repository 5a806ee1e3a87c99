package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"storelink"
)

// maxJSONBody bounds operator request bodies: an order of the most items
// allowed is well under it.
const maxJSONBody = 1 << 20

// maxJSONDepth bounds the nesting of a JSON body: the deepest body any call
// takes, an order with its items, is 3 levels. Past it a body is refused at
// the first level too deep, before the rest is read.
const maxJSONDepth = 32

// maxJSONValues bounds the values of one array, and the keys of one object,
// of a JSON body: the longest list any call takes is an order's 500 items.
// Decoded, a value can take a hundred times its bytes in the body.
const maxJSONValues = 1000

// decode reads a JSON body into v, refusing unknown fields so that a typo is
// an error rather than a silently ignored setting, and a body of another
// Content-Type (checkJSONType, which sets the headers of its 415 on w).
// The body is read outside the request's database phases (OutsideDB): the
// handler goes on with the request returned, also after an error.
func decode(w http.ResponseWriter, r *http.Request, v any) (*http.Request, error) {
	return decodeBody(w, r, v, false)
}

// decodeOptional is decode for calls whose whole body is optional.
func decodeOptional(w http.ResponseWriter, r *http.Request, v any) (*http.Request, error) {
	return decodeBody(w, r, v, true)
}

// decodeBody checks the body's type, then the body while it streams
// (readJSON), so that its bytes are seen as sent, before encoding/json
// replaces or drops anything, and a body too deep is refused before more
// of it is read or anything is looked up; it then decodes the bytes read.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) (*http.Request, error) {
	if err := checkJSONType(w, r); err != nil {
		return r, err
	}
	var raw []byte
	var err error
	r = OutsideDB(r, func(context.Context) { raw, err = readJSON(http.MaxBytesReader(nil, r.Body, maxJSONBody)) })
	return r, decodeJSON(raw, err, v, optional)
}

// decodeJSON decodes raw, the body readJSON read (with its error), into v.
func decodeJSON(raw []byte, err error, v any, optional bool) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err == nil {
		err = dec.Decode(v)
	}
	var tooBig *http.MaxBytesError
	var domain *storelink.Error
	switch {
	case err == nil:
		if dec.More() {
			return storelink.Errorf(storelink.EINVALID, "The body holds more than one JSON value.")
		}
		return nil
	case errors.Is(err, io.EOF) && optional:
		return nil
	case errors.Is(err, io.EOF):
		return storelink.Errorf(storelink.EINVALID, "A JSON body is required.")
	case errors.As(err, &tooBig):
		return storelink.Errorf(storelink.ETOOLARGE, "The body is larger than %d bytes.", maxJSONBody)
	case errors.As(err, &domain):
		return err
	}
	return storelink.Errorf(storelink.EINVALID, "The body is not valid JSON for this call: %v.", err)
}
