package feed

import (
	"bytes"
	"encoding/csv"
	"slices"
	"strconv"
	"strings"

	"storelink"
)

// The error file of a feed (errors.csv, as Mirakl gives one) is the file's
// own header and separator plus the columns line, problem_type and
// problem_detail, and one row per row dropped by an error, as it stood in
// the file: a partner fixes the rows in place and sends them again. A file
// rejected as a whole has one row instead, at line 0, with the file's
// problem. The report lists at most MaxLineRefs lines per problem; the
// error file lists every dropped row.

// Cells that a spreadsheet would run as a formula, those starting with = + -
// @ tab or CR, are written after a single quote (OWASP's advice against CSV
// injection), so that opening the error file runs nothing a partner's
// exporter, or whoever wrote the file, put in it. This holds for every cell
// of the file's own columns and for the problems; the line column is the
// service's own number. A plain number with a sign (a quantity of -5) is left
// as it is: a spreadsheet reads it as a number, and the partner needs to see
// it as sent.

// errorColumns are the columns the error file adds to the file's own.
var errorColumns = []string{"line", "problem_type", "problem_detail"}

// errorFile writes the error file while the feed is checked. The row loop
// pays for it only on rows that are dropped. A nil *errorFile writes
// nothing, for checks that need no error file (a validation).
type errorFile struct {
	buf    bytes.Buffer
	w      *csv.Writer
	header []string // the file's header, copied (records are reused)
	// types and details are the problems of the row being checked.
	types, details []string
	out            []string
	// limit bounds the file: a feed of short bad rows, each with a long
	// message, would otherwise make an error file many times its size.
	// omitted counts the dropped rows past it.
	limit   int
	omitted int
}

func newErrorFile(limit int) *errorFile {
	e := &errorFile{limit: limit}
	e.w = csv.NewWriter(&e.buf)
	e.w.Comma = ';'
	return e
}

// start writes the header: the file's, with its separator.
func (e *errorFile) start(header []string, comma rune) {
	if e == nil {
		return
	}
	e.header = make([]string, len(header))
	for i, h := range header {
		e.header[i] = inert(h)
	}
	e.w.Comma = comma
	_ = e.w.Write(append(append([]string(nil), e.header...), errorColumns...))
}

// problem notes a problem of the row being checked.
func (e *errorFile) problem(typ, detail string) {
	if e == nil {
		return
	}
	e.types = append(e.types, typ)
	e.details = append(e.details, detail)
}

// dropped writes the row being checked, whose problems were noted, and
// forgets them. A row shorter than the header is padded, so that the
// added columns stay under their names; a longer one is written whole.
func (e *errorFile) dropped(rec []string, line int) {
	if e == nil {
		return
	}
	if e.w.Flush(); e.buf.Len() >= e.limit {
		e.omitted++
		e.types, e.details = e.types[:0], e.details[:0]
		return
	}
	e.out = e.out[:0]
	for _, f := range rec {
		e.out = append(e.out, inert(f))
	}
	for len(e.out) < len(e.header) {
		e.out = append(e.out, "")
	}
	e.out = append(e.out, strconv.Itoa(line), inert(joinUnique(e.types)), inert(strings.Join(e.details, " ")))
	_ = e.w.Write(e.out)
	e.types, e.details = e.types[:0], e.details[:0]
}

// rejected makes the file the error file of a file rejected as a whole:
// the header, when it was read, and one row at line 0 per file problem.
func (e *errorFile) rejected(problems []storelink.Problem) {
	if e == nil {
		return
	}
	e.omitted = 0
	comma := e.w.Comma
	if e.header == nil {
		comma = ';'
	}
	e.buf.Reset()
	e.w = csv.NewWriter(&e.buf) // the old one may hold rows not yet flushed
	e.w.Comma = comma
	_ = e.w.Write(append(append([]string(nil), e.header...), errorColumns...))
	writeFileProblems(e.w, len(e.header), problems)
}

// bytes ends the file, saying how many rows it leaves out when it reached
// its limit, and returns it.
func (e *errorFile) bytes() []byte {
	if e == nil {
		return nil
	}
	if e.omitted > 0 {
		rec := make([]string, len(e.header), len(e.header)+3)
		_ = e.w.Write(append(rec, "", "Error file cut short",
			"The error file stops here, at its limit of "+strconv.Itoa(e.limit)+" bytes: "+strconv.Itoa(e.omitted)+
				" more dropped rows are not listed. The upload's report counts every problem."))
	}
	e.w.Flush()
	return e.buf.Bytes()
}

// writeFileProblems writes one row at line 0 per problem, after width
// empty fields.
func writeFileProblems(w *csv.Writer, width int, problems []storelink.Problem) {
	for _, p := range problems {
		rec := make([]string, width, width+3)
		_ = w.Write(append(rec, "0", inert(p.Type), inert(p.Message)))
	}
}

// ProblemFile is the error file of an upload rejected as a whole whose
// header is not known (it could not be processed at all): the added
// columns only, separated by ';', and one row at line 0 per problem.
func ProblemFile(problems []storelink.Problem) []byte {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	w.Comma = ';'
	_ = w.Write(errorColumns)
	writeFileProblems(w, 0, problems)
	w.Flush()
	return buf.Bytes()
}

// joinUnique joins the problem types of a row, each once, in the order
// they were found.
func joinUnique(types []string) string {
	if len(types) == 1 {
		return types[0]
	}
	var out []string
	for _, t := range types {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return strings.Join(out, "; ")
}

// inert returns s as a cell that a spreadsheet shows rather than runs: after
// a single quote when it starts as a formula would, unless it is a plain
// number.
func inert(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '@', '\t', '\r':
	case '+', '-':
		if plainNumber(s[1:]) {
			return s
		}
	default:
		return s
	}
	return "'" + s
}

// plainNumber reports whether s is digits with at most one decimal point
// among them: nothing a spreadsheet could read as more than a number.
func plainNumber(s string) bool {
	digits, points := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			points++
		default:
			return false
		}
	}
	return digits > 0 && points <= 1
}
