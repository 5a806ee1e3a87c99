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

// csvSource is a stock file's bytes as they arrive, and how to speak of
// them in errors: a request's body (requestCSV), or the file of the
// portal's upload form (formCSV).
type csvSource struct {
	body io.Reader
	gzip bool
	// declared is the length of the CSV as declared, -1 when unknown.
	declared int64
	// noun names the bytes ("body", "file"); gzipSaid says how they were
	// said to be gzip ("sent with Content-Encoding: gzip"); empty and
	// unsaid are the ends of the errors of an empty file and of a gzip
	// stream sent without saying so.
	noun, gzipSaid, empty, unsaid string
}

// requestCSV is the CSV of a request's body, gzip when its
// Content-Encoding says so.
func requestCSV(r *http.Request) csvSource {
	return csvSource{body: r.Body, gzip: gzipped(r), declared: declaredCSVLength(r), noun: "body",
		gzipSaid: "sent with Content-Encoding: gzip", empty: "send the CSV file as the request body",
		unsaid: "was sent without Content-Encoding: gzip; send it with that header, or send the CSV uncompressed"}
}

// formCSV is the CSV of a file chosen in a form, gzip when its name ends
// in .gz.
func formCSV(body io.Reader, gz bool) csvSource {
	return csvSource{body: body, gzip: gz, declared: -1, noun: "file",
		gzipSaid: "named .gz", empty: "choose the CSV file to upload",
		unsaid: "its name does not end in .gz; name it .csv.gz, or upload the CSV uncompressed"}
}

// csvReader returns the CSV bytes of src: its body, or the body
// decompressed. The compressed bytes are bounded by max as well, so that a
// body of endless empty gzip members cannot keep the request busy.
func (src csvSource) csvReader(max int64) (io.Reader, error) {
	if !src.gzip {
		return src.body, nil
	}
	zr, err := gzip.NewReader(&compressedBody{r: src.body, max: max, noun: src.noun})
	switch {
	case err == io.EOF:
		return nil, storelink.Errorf(storelink.EINVALID, "The %s is empty; %s, compressed with gzip.", src.noun, src.empty)
	case err != nil:
		var e *storelink.Error
		if errors.As(err, &e) {
			return nil, err
		}
		return nil, src.badGzip(err)
	}
	return zr, nil
}

// emptyError is the 400 of a file without a byte.
func (src csvSource) emptyError() error {
	return storelink.Errorf(storelink.EINVALID, "The %s is empty; %s.", src.noun, src.empty)
}

// compressedBody counts the compressed bytes of a gzip body and refuses
// them beyond max: no CSV of at most max bytes compresses to more.
type compressedBody struct {
	r    io.Reader
	n    int64
	max  int64
	noun string
}

func (c *compressedBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.n += int64(n); c.n > c.max {
		return n, storelink.Errorf(storelink.ETOOLARGE,
			"The compressed %s is larger than the maximum file size of %d bytes.", c.noun, c.max)
	}
	return n, err
}

// badGzip is the 400 of a body sent as gzip that is not: a bad header,
// a corrupt stream, a wrong checksum or a stream cut short.
func (src csvSource) badGzip(err error) error {
	what := err.Error()
	if errors.Is(err, io.ErrUnexpectedEOF) {
		what = "it ends before the compressed data does"
	}
	return storelink.Errorf(storelink.EINVALID,
		"The %s is %s but is not valid gzip (%s); nothing was kept.", src.noun, src.gzipSaid, what)
}

// gzipMagic starts every gzip stream; no CSV file starts with it (0x8b
// cannot start a UTF-8 character, and UTF-16 needs its BOM).
var gzipMagic = []byte{0x1f, 0x8b}

// notGzipped refuses a gzip stream sent without saying so, which would
// otherwise be accepted and then rejected as not UTF-8.
func (src csvSource) notGzipped(head []byte) error {
	if !src.gzip && bytes.HasPrefix(head, gzipMagic) {
		return storelink.Errorf(storelink.EINVALID, "The %s is gzip-compressed but %s.", src.noun, src.unsaid)
	}
	return nil
}

// readError is the answer to a body that could not be read to its end: a
// storelink.Error (a timeout, a size limit) as it is, a broken gzip stream
// as such, anything else as unreadable.
func (src csvSource) readError(err error) error {
	var e *storelink.Error
	switch {
	case errors.As(err, &e):
		return e
	case src.gzip:
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		return src.badGzip(err)
	}
	return storelink.Errorf(storelink.EINVALID, "The %s could not be read to its end: %v.", src.noun, err)
}
