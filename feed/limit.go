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

var quote = []byte{'"'}

// scan follows b and returns how many of its bytes stay within the bounds;
// when fewer than all, l.err says why.
func (l *recordLimiter) scan(b []byte) int {
	if !l.quoted && bytes.IndexByte(b, '"') < 0 {
		return l.plain(b)
	}
	return l.lines(b)
}

// plain follows b, which has no quote and starts outside quotes, so that its
// records are its lines. It looks at b a window of maxFields bytes at a
// time: a line within a window is too short to reach either bound, so only
// the record carried over from window to window is counted, which costs a
// few vectorised searches and counts per window whatever the lines.
func (l *recordLimiter) plain(b []byte) int {
	sep := []byte{l.comma}
	startAt := -1 // where in b the current record starts; -1: before b
	for done := 0; done < len(b); {
		w := b[done:min(len(b), done+maxFields)]
		head := w
		first := bytes.IndexByte(w, '\n')
		if first >= 0 {
			head = w[:first+1]
		}
		tooLong := l.bytes+len(head) > maxRecordBytes
		if !tooLong && (first < 0 || l.seps+len(head) >= maxFields) {
			l.seps += bytes.Count(head, sep)
		}
		if tooLong || l.seps >= maxFields {
			if startAt >= 0 {
				l.start = l.line + bytes.Count(b[:startAt], newline)
			}
			l.err = &recordError{line: l.start, fields: !tooLong}
			return done
		}
		if first < 0 {
			l.bytes += len(w)
		} else {
			last := bytes.LastIndexByte(w, '\n')
			tail := w[last+1:]
			l.bytes, l.seps = len(tail), bytes.Count(tail, sep)
			startAt = done + last + 1
		}
		done += len(w)
	}
	if startAt >= 0 {
		l.line += bytes.Count(b, newline)
		l.start = l.line
	}
	return len(b)
}

// lines follows b a line at a time. A line that is a record of its own
// costs two vectorised searches; the lines of a record that goes on over
// them, or that may have too many fields, are walked a byte at a time.
func (l *recordLimiter) lines(b []byte) int {
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
		// A record that ends on this line short of maxFields, whatever its
		// separators, needs no more than its quotes counted.
		if q := bytes.Count(seg, quote); q == 0 && l.quoted {
			// All inside a quoted field: no separator counts.
		} else if !(nl >= 0 && l.seps+len(seg) < maxFields && (q%2 == 0) != l.quoted) {
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
		} else {
			l.quoted = false
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
