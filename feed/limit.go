package feed

import (
	"bytes"
	"io"
	"strconv"
)

// Bounds of one record: the header or a row, with the line breaks inside its
// quoted fields. encoding/csv holds a whole record in memory, several times
// over (the line, the unquoted bytes, the string made of them, and an index,
// a position and a string header per field), so without them one line of
// separators costs about forty times its size. A real stock row is well under
// 1 KiB with at most 11 columns; these bounds are far above any real row.
const (
	// maxRecordBytes bounds the bytes of one record, its line end included.
	maxRecordBytes = 64 << 10
	// maxFields bounds the fields of one record: the header's columns, ignored
	// ones included, and so the fields of any row that matches it.
	maxFields = 1024
)

// sniffSize is how much of the file the separator is told from. A header is
// far shorter; reads past it go straight from the decoder to the parser.
const sniffSize = 4 << 10

// recordError rejects a file with a record past maxRecordBytes or maxFields.
// It is returned by recordLimiter in place of the record's bytes, so that
// encoding/csv hands it on to Check as it does an encodingError.
type recordError struct {
	line   int  // line the record starts on
	fields bool // too many fields, not too many bytes
}

func (e *recordError) Error() string { return e.message() }

// message explains the problem in a partner's terms: a real row is far from
// the bound, so the file's separators, quoting or line ends must be broken.
func (e *recordError) message() string {
	where := "The row starting on line " + strconv.Itoa(e.line)
	if e.fields {
		return where + " has more than " + strconv.Itoa(maxFields) + " fields, and a stock row has at most 11 " +
			"columns plus any ignored ones: its separators or quoting are broken, so the file is not read further."
	}
	return where + " is longer than " + strconv.Itoa(maxRecordBytes>>10) + " KiB, and a stock row is well under 1 KiB: " +
		"its line ends or quoting are broken (a quoted field that is not closed runs on through the lines after it), " +
		"so the file is not read further."
}

// recordLimiter sits between the decoder and encoding/csv and fails the feed
// at the first record past the bounds, before encoding/csv has read more of
// it than the bounds allow. It follows records as encoding/csv does: a line
// feed ends one unless it is inside quotes, and a quote starts or ends a
// quoted field (a doubled quote inside one flips twice). Where a file breaks
// these rules, encoding/csv reports the quoting problem before the limiter's
// view of the record can differ from its own.
type recordLimiter struct {
	r      io.Reader
	comma  byte
	err    error // returned once the bytes before the bound are read; sticky
	line   int   // line of the next byte
	start  int   // line the current record starts on
	bytes  int   // bytes of the current record read so far
	seps   int   // separators outside quotes in the current record so far
	quoted bool  // the next byte is inside a quoted field
}

func newRecordLimiter(r io.Reader, comma rune) *recordLimiter {
	return &recordLimiter{r: r, comma: byte(comma), line: 1, start: 1}
}

func (l *recordLimiter) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.r.Read(p)
	if k := l.scan(p[:n]); k < n {
		if k > 0 {
			return k, nil
		}
		return 0, l.err
	}
	return n, err
}

// scan follows b, a line at a time, and returns how many of its bytes stay
// within the bounds; when fewer than all, l.err says why. Most lines are
// records with no quote, which cost two byte searches; lines with quotes are
// walked a byte at a time.
func (l *recordLimiter) scan(b []byte) int {
	done := 0
	for done < len(b) {
		seg := b[done:]
		nl := bytes.IndexByte(seg, '\n')
		if nl >= 0 {
			seg = seg[:nl+1]
		}
		if l.bytes+len(seg) > maxRecordBytes {
			l.err = &recordError{line: l.start}
			return done
		}
		switch {
		case !l.quoted && bytes.IndexByte(seg, '"') < 0:
			// Unquoted: a separator here counts whatever comes after it.
			// A segment shorter than the fields left cannot reach the
			// bound unless it is the start of a longer line.
			if nl < 0 || l.seps+len(seg) >= maxFields {
				if l.seps += bytes.Count(seg, []byte{l.comma}); l.seps >= maxFields {
					l.err = &recordError{line: l.start, fields: true}
					return done
				}
			}
		case l.quoted && bytes.IndexByte(seg, '"') < 0:
			// All inside a quoted field: no separator counts.
		default:
			for i, c := range seg {
				if c == '"' {
					l.quoted = !l.quoted
				} else if c == l.comma && !l.quoted {
					if l.seps++; l.seps >= maxFields {
						l.err = &recordError{line: l.start, fields: true}
						return done + i
					}
				}
			}
		}
		done += len(seg)
		l.bytes += len(seg)
		if nl >= 0 {
			l.line++
			if !l.quoted {
				l.start, l.bytes, l.seps = l.line, 0, 0
			}
		}
	}
	return done
}
