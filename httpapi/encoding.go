package httpapi

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"storelink"
)

// A stock file comes as the CSV itself or compressed with gzip
// (Content-Encoding: gzip), which a large feed of repeated values shrinks
// to a tenth of its size on the wire. Limits and capacity count the CSV
// bytes, so compression saves the partner time, never quota.

var csvTypes = map[string]bool{"application/csv": true, "text/csv": true, "text/plain": true, "application/octet-stream": true}

// checkBodyHeaders refuses with 415 a Content-Type that is not a CSV's and
// a Content-Encoding other than gzip, before any of the body is read.
func checkBodyHeaders(r *http.Request) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !csvTypes[mt] {
			return storelink.Errorf(storelink.EUNSUPPORTED,
				"Content-Type %q is not accepted; send application/csv, text/csv, text/plain or application/octet-stream.", ct)
		}
	}
	switch enc := contentEncoding(r); enc {
	case "", "identity", "gzip", "x-gzip":
	default:
		return storelink.Errorf(storelink.EUNSUPPORTED,
			"Content-Encoding %q is not accepted; send the CSV file as it is, or compressed with gzip and Content-Encoding: gzip.", enc)
	}
	return nil
}

// contentEncoding is the request's Content-Encoding in lower case; several
// headers or codings come back as one list, which no case accepts.
func contentEncoding(r *http.Request) string {
	return strings.ToLower(strings.TrimSpace(strings.Join(r.Header.Values("Content-Encoding"), ", ")))
}

func gzipped(r *http.Request) bool {
	enc := contentEncoding(r)
	return enc == "gzip" || enc == "x-gzip"
}

// declaredCSVLength is the length of the CSV file as the request declares
// it, or -1 when it does not: a gzip body's Content-Length is that of the
// compressed bytes.
func declaredCSVLength(r *http.Request) int64 {
	if gzipped(r) || r.ContentLength <= 0 {
		return -1
	}
	return r.ContentLength
}

// csvReader returns the CSV bytes of r's body: the body, or the body
// decompressed. The compressed bytes are bounded by max as well, so that a
// body of endless empty gzip members cannot keep the request busy.
func csvReader(r *http.Request, max int64) (io.Reader, error) {
	if !gzipped(r) {
		return r.Body, nil
	}
	zr, err := gzip.NewReader(&compressedBody{r: r.Body, max: max})
	switch {
	case err == io.EOF:
		return nil, storelink.Errorf(storelink.EINVALID, "The body is empty; send the CSV file, compressed with gzip, as the request body.")
	case err != nil:
		var e *storelink.Error
		if errors.As(err, &e) {
			return nil, err
		}
		return nil, badGzip(err)
	}
	return zr, nil
}

// compressedBody counts the compressed bytes of a gzip body and refuses
// them beyond max: no CSV of at most max bytes compresses to more.
type compressedBody struct {
	r   io.Reader
	n   int64
	max int64
}

func (c *compressedBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.n += int64(n); c.n > c.max {
		return n, storelink.Errorf(storelink.ETOOLARGE,
			"The compressed body is larger than the maximum file size of %d bytes.", c.max)
	}
	return n, err
}

// badGzip is the 400 of a body sent as gzip that is not: a bad header, a
// corrupt stream, a wrong checksum or a stream cut short.
func badGzip(err error) error {
	what := err.Error()
	if errors.Is(err, io.ErrUnexpectedEOF) {
		what = "it ends before the compressed data does"
	}
	return storelink.Errorf(storelink.EINVALID,
		"The body is sent with Content-Encoding: gzip but is not valid gzip (%s); nothing was kept.", what)
}

// gzipMagic starts every gzip stream; no CSV file starts with it (0x8b
// cannot start a UTF-8 character, and UTF-16 needs its BOM).
var gzipMagic = []byte{0x1f, 0x8b}

// notGzipped refuses a gzip stream sent without its Content-Encoding,
// which would otherwise be accepted and then rejected as not UTF-8.
func notGzipped(r *http.Request, body []byte) error {
	if !gzipped(r) && bytes.HasPrefix(body, gzipMagic) {
		return storelink.Errorf(storelink.EINVALID,
			"The body is gzip-compressed but was sent without Content-Encoding: gzip; send it with that header, or send the CSV uncompressed.")
	}
	return nil
}
