package feed

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// rawBufSize is the decoders' read size. Reads of this size keep the syscall
// and copy overhead negligible while the memory held stays constant however
// large the feed is.
const rawBufSize = 64 << 10

// encodingError marks bytes that are not valid in the file's encoding. It is
// returned by the decoders in place of data, so that encoding/csv hands it on
// to Check unchanged and Check can tell it from an I/O error of the input.
type encodingError struct {
	line int    // line of the decoded text the bad bytes are on
	what string // what was wrong, for the partner
}

func (e *encodingError) Error() string {
	return fmt.Sprintf("line %d: %s", e.line, e.what)
}

// Encoding problems, written for a partner who has to fix the export.
const (
	whatUTF8 = "bytes that are not valid UTF-8. Save the file as UTF-8, or as UTF-16 with a byte order mark"
	whatNUL  = "a NUL byte. A stock feed is text; UTF-16 needs a byte order mark"
	whatSurr = "an unpaired UTF-16 surrogate"
	whatOdd  = "an odd number of bytes, which UTF-16 cannot have"
)

// newDecoder sniffs the byte order mark and returns a reader of the feed as
// UTF-8 without BOM. The feed is transcoded and checked while it streams, so
// a 10 MiB file never sits in memory as a whole.
func newDecoder(r io.Reader) io.Reader {
	var head [3]byte
	n, err := io.ReadFull(r, head[:])
	if err == io.ErrUnexpectedEOF {
		err = io.EOF
	}
	b := head[:n]
	switch {
	case bytes.HasPrefix(b, []byte{0xEF, 0xBB, 0xBF}):
		return newUTF8Reader(r, nil, err)
	case bytes.HasPrefix(b, []byte{0xFF, 0xFE}):
		return newUTF16Reader(r, b[2:], err, binary.LittleEndian)
	case bytes.HasPrefix(b, []byte{0xFE, 0xFF}):
		return newUTF16Reader(r, b[2:], err, binary.BigEndian)
	}
	return newUTF8Reader(r, b, err)
}

// utf8Reader passes UTF-8 through, refusing invalid sequences and NUL bytes
// rather than replacing them: a silently altered EAN or store id would be
// applied as if the partner had sent it.
type utf8Reader struct {
	r      io.Reader
	buf    []byte
	start  int   // first byte not yet returned
	valid  int   // end of the bytes checked and found valid
	end    int   // end of the bytes read
	rawErr error // error of r (io.EOF at the end); no more reads after it
	err    error // returned once buf[start:valid] is drained; sticky
	lines  int   // newlines returned so far, to place an encoding error
}

func newUTF8Reader(r io.Reader, head []byte, rawErr error) *utf8Reader {
	d := &utf8Reader{r: r, buf: make([]byte, rawBufSize), rawErr: rawErr}
	d.end = copy(d.buf, head)
	return d
}

func (d *utf8Reader) Read(p []byte) (int, error) {
	for d.start == d.valid {
		if d.err != nil {
			return 0, d.err
		}
		if d.rawErr != nil && d.valid == d.end {
			d.err = d.rawErr
			continue
		}
		d.fill()
		d.scan()
	}
	n := copy(p, d.buf[d.start:d.valid])
	d.lines += bytes.Count(p[:n], newline)
	d.start += n
	return n, nil
}

var newline = []byte{'\n'}

// fill moves the unreturned bytes to the front and reads once more.
func (d *utf8Reader) fill() {
	if d.rawErr != nil {
		return
	}
	if d.start > 0 {
		d.end = copy(d.buf, d.buf[d.start:d.end])
		d.valid -= d.start
		d.start = 0
	}
	n, err := d.r.Read(d.buf[d.end:])
	d.end += n
	if err != nil {
		d.rawErr = err
	}
}

// scan extends buf[:valid] over the newly read bytes. A rune cut by the end
// of the read is held back until the next read completes it.
func (d *utf8Reader) scan() {
	b := d.buf[d.valid:d.end]
	if d.rawErr == nil {
		b = b[:completeRunes(b)]
	}
	nul := bytes.IndexByte(b, 0)
	if nul >= 0 {
		b = b[:nul]
	}
	if !utf8.Valid(b) {
		i := 0
		for i < len(b) {
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			i += size
		}
		d.valid += i
		d.err = d.errorAt(whatUTF8)
		return
	}
	d.valid += len(b)
	if nul >= 0 {
		d.err = d.errorAt(whatNUL)
	} else if d.rawErr != nil && d.valid < d.end {
		d.err = d.errorAt(whatUTF8) // cut rune at the end of the input
	}
}

// errorAt reports a problem found at buf[valid].
func (d *utf8Reader) errorAt(what string) error {
	line := d.lines + bytes.Count(d.buf[d.start:d.valid], newline) + 1
	return &encodingError{line: line, what: what}
}

// completeRunes returns the length of b without a trailing incomplete UTF-8
// sequence. Invalid bytes are left in, to be found by the check.
func completeRunes(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return len(b)
			}
			return i
		}
	}
	return len(b)
}

// utf16Reader transcodes UTF-16 with a known byte order to UTF-8. Unpaired
// surrogates, a NUL code unit and an odd trailing byte are errors, not U+FFFD.
type utf16Reader struct {
	r      io.Reader
	order  binary.ByteOrder
	raw    []byte
	rs, re int    // raw[rs:re] not yet decoded
	out    []byte // decoded, not yet returned
	outBuf []byte
	rawErr error
	err    error
	lines  int
}

func newUTF16Reader(r io.Reader, head []byte, rawErr error, order binary.ByteOrder) *utf16Reader {
	d := &utf16Reader{r: r, order: order, raw: make([]byte, rawBufSize),
		outBuf: make([]byte, 0, rawBufSize*3/2+utf8.UTFMax), rawErr: rawErr}
	d.re = copy(d.raw, head)
	return d
}

func (d *utf16Reader) Read(p []byte) (int, error) {
	for len(d.out) == 0 {
		if d.err != nil {
			return 0, d.err
		}
		d.fill()
		d.decode()
	}
	n := copy(p, d.out)
	d.lines += bytes.Count(p[:n], newline)
	d.out = d.out[n:]
	return n, nil
}

func (d *utf16Reader) fill() {
	if d.rawErr != nil {
		return
	}
	if d.rs > 0 {
		d.re = copy(d.raw, d.raw[d.rs:d.re])
		d.rs = 0
	}
	n, err := d.r.Read(d.raw[d.re:])
	d.re += n
	if err != nil {
		d.rawErr = err
	}
}

// decode turns the complete code units of raw into out. One raw buffer
// (64 KiB, so at most 32Ki units of at most 3 bytes each) always fits outBuf.
func (d *utf16Reader) decode() {
	out := d.outBuf[:0]
	b := d.raw[d.rs:d.re]
	i := 0
	for ; i+1 < len(b); i += 2 {
		u := rune(d.order.Uint16(b[i:]))
		switch {
		case u < utf8.RuneSelf && u != 0:
			out = append(out, byte(u))
			continue
		case u == 0:
			d.fail(out, whatNUL)
			return
		case utf16.IsSurrogate(u):
			if u >= 0xDC00 { // a low surrogate with no high one before it
				d.fail(out, whatSurr)
				return
			}
			if i+3 >= len(b) {
				if d.rawErr == nil {
					d.rs += i // wait for the low surrogate
					d.out = out
					return
				}
				d.fail(out, whatSurr)
				return
			}
			lo := rune(d.order.Uint16(b[i+2:]))
			r := utf16.DecodeRune(u, lo)
			if r == utf8.RuneError {
				d.fail(out, whatSurr)
				return
			}
			out = utf8.AppendRune(out, r)
			i += 2
			continue
		}
		out = utf8.AppendRune(out, u)
	}
	d.rs += i
	d.out = out
	if d.rawErr != nil {
		if d.rs < d.re {
			d.fail(out, whatOdd)
		} else {
			d.err = d.rawErr
		}
	}
}

// fail keeps the text decoded before the problem, to be returned first, and
// the error after it.
func (d *utf16Reader) fail(out []byte, what string) {
	d.out = out
	d.err = &encodingError{line: d.lines + bytes.Count(out, newline) + 1, what: what}
}

// isEncodingError tells a problem of the feed's bytes from an I/O error.
func isEncodingError(err error) (*encodingError, bool) {
	var e *encodingError
	ok := errors.As(err, &e)
	return e, ok
}
