// Package feed decodes and checks partners' stock feeds: the
// encoding, the separator and quoting, the header, and every row, turning
// what it finds into valid StockRows and a report a partner can act on.
//
// It is the hot path of an import, so the row loop formats nothing, matches
// no regexp and allocates little: valid rows keep the strings encoding/csv
// made for their record (one allocation per record, which StockRow can hold
// on to), and problems are only formatted once per file.
package feed

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"

	"storelink"
)

// Check decodes and checks a stock feed. It calls put for every valid row in
// file order (a later row for the same store+EAN overrides an earlier one; put
// is still called for both), and returns the report. stores is the set of the
// client's registered store ids (nil = none). The returned error is only for
// I/O errors of r or an error returned by put — never for problems of the
// feed, which go into the report. When report.FileError is true the caller
// applies nothing (Check may already have called put for earlier rows; the
// caller rolls back). Row problems found before a file-level problem stay in
// the report, so a partner sees as much as could be checked, but RowsApplied
// is then 0. A nil put only checks, for a dry run.
//
// Whatever r holds, Check keeps one record in memory (maxRecordBytes,
// maxFields: a file with a longer one is rejected), a report of at most
// storelink.MaxLineRefs lines per problem, and one key per valid store and
// EAN, the duplicate detection the apply relies on, which grows with the
// file's rows by design. The rows put are put's to keep or let go.
func Check(r io.Reader, stores map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
	return check(r, stores, put, nil)
}

// CheckWithErrorFile is Check that also makes the feed's error file
// (report.ErrorFile, errors.csv) of at most about limit bytes: past it, a
// last row says how many dropped rows it leaves out.
func CheckWithErrorFile(r io.Reader, stores map[string]bool, put func(storelink.StockRow) error, limit int) (storelink.FeedReport, error) {
	return check(r, stores, put, newErrorFile(limit))
}

func check(r io.Reader, stores map[string]bool, put func(storelink.StockRow) error, errs *errorFile) (storelink.FeedReport, error) {
	if put == nil {
		put = func(storelink.StockRow) error { return nil }
	}
	c := &checker{
		errs:   errs,
		col:    newCollector(),
		stores: make(map[string]uint32, len(stores)),
		seen:   newLineTable(),
		put:    put,
	}
	for id, ok := range stores {
		if ok {
			c.stores[id] = uint32(len(c.stores))
		}
	}
	err := c.run(r)
	if !c.rep.FileError {
		c.rep.RowsApplied = c.seen.len() // nothing of a rejected file is applied
	}
	c.col.report(&c.rep)
	if c.rep.FileError {
		c.errs.rejected(c.fileErrs)
	}
	c.rep.ErrorFile = c.errs.bytes()
	return c.rep, err
}

// rowKey identifies a store and EAN without building a string per row: the
// store is its index among the client's stores, the EAN its digits as a
// number with its length on top (so "012345678905" and "0012345678905",
// different strings, stay different keys).
type rowKey struct {
	store uint32
	ean   uint64
}

// checker holds the state of one Check.
type checker struct {
	rep  storelink.FeedReport
	col  *collector
	errs *errorFile
	// fileErrs are the problems that reject the file, for its error file.
	fileErrs []storelink.Problem
	h        header
	stores   map[string]uint32
	seen     *lineTable // line of the last valid row of each store and EAN
	// lastStore caches the latest store lookup: feeds list a store's rows
	// together, and comparing two short strings beats hashing one.
	lastStore   string
	lastStoreOK bool
	lastStoreID uint32
	put         func(storelink.StockRow) error
	// prices backs RetailPrice pointers a slab at a time, so a row with a
	// retail price costs no allocation of its own.
	prices []storelink.Money
}

func (c *checker) run(r io.Reader) error {
	sniff := bufio.NewReaderSize(newDecoder(r), sniffSize)
	comma, crOnly := detectSeparator(sniff)
	if crOnly {
		c.fileError(storelink.ProblemFile, msgCROnly, 1)
		return nil
	}
	cr := csv.NewReader(bufio.NewReaderSize(newRecordLimiter(sniff, comma), rawBufSize))
	cr.Comma = comma
	cr.FieldsPerRecord = -1 // a row of another width is a row problem, not a file error
	cr.ReuseRecord = true
	// Values are trimmed anyway; trimming before parsing also lets
	// `S1; "4006381333931"` through, which strict RFC 4180 would reject
	// as a bare quote and so reject the whole file.
	cr.TrimLeadingSpace = true

	rec, err := cr.Read()
	if err == io.EOF {
		c.fileError(storelink.ProblemEmpty, msgNoBytes, 1)
		return nil
	} else if err != nil {
		return c.readError(err)
	}
	headerLine, _ := cr.FieldPos(0)
	c.errs.start(rec, comma)
	h, errs, warn := parseHeader(rec)
	if warn != "" {
		c.col.add(storelink.ProblemUnknownColumns, warn, true, storelink.LineRef{LineNumber: headerLine})
	}
	if len(errs) > 0 {
		for _, e := range errs {
			c.fileError(e.typ, e.msg, headerLine)
		}
		return nil
	}
	c.h = h

	for {
		rec, err = cr.Read()
		if err == io.EOF {
			break
		} else if err != nil {
			return c.readError(err)
		}
		line, _ := cr.FieldPos(0)
		c.rep.RowsTotal++
		if err := c.row(rec, line); err != nil {
			return err
		}
	}
	if c.rep.RowsTotal == 0 {
		c.fileError(storelink.ProblemEmpty, msgHeaderOnly, headerLine)
	}
	return nil
}

// fileError records a problem that rejects the file.
func (c *checker) fileError(typ, msg string, line int) {
	c.rep.FileError = true
	c.fileErrs = append(c.fileErrs, storelink.Problem{Type: typ, Message: msg})
	c.col.fileError(typ, msg, line)
}

// readError sorts an error of encoding/csv into a problem of the feed or an
// I/O error of the input, which is the caller's to handle.
func (c *checker) readError(err error) error {
	if e, ok := isEncodingError(err); ok {
		c.fileError(storelink.ProblemEncoding,
			"Invalid encoding on line "+strconv.Itoa(e.line)+": the file has "+e.what+".", e.line)
		return nil
	}
	var re *recordError
	if errors.As(err, &re) {
		c.fileError(storelink.ProblemFile, re.message(), re.line)
		return nil
	}
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		c.fileError(storelink.ProblemFile, quotingMessage(pe), pe.StartLine)
		return nil
	}
	return fmt.Errorf("read stock feed: %w", err)
}

// quotingMessage explains a quoting error in a partner's terms. The line
// reference is the line the record starts on, where the stray or unclosed
// quote usually is; the message adds the line where parsing failed.
func quotingMessage(pe *csv.ParseError) string {
	where := "on line " + strconv.Itoa(pe.Line)
	if pe.StartLine != pe.Line {
		where = "in the row starting on line " + strconv.Itoa(pe.StartLine) +
			" (parsing failed on line " + strconv.Itoa(pe.Line) + ")"
	}
	if errors.Is(pe.Err, csv.ErrBareQuote) {
		return "Quoting cannot be parsed " + where + `: a field that does not start with a quote contains one. ` +
			`Quote the whole field and double the quotes inside it.`
	}
	return "Quoting cannot be parsed " + where + `: a quoted field is not closed, or has text after its closing quote. ` +
		`Double the quotes inside a quoted field.`
}

// ref is the line reference of a row, with its store and EAN when it has them.
func (c *checker) ref(rec []string, line int) storelink.LineRef {
	ref := storelink.LineRef{LineNumber: line}
	if i := c.h.idx[colStore]; i < len(rec) {
		ref.StoreID = trim(rec[i])
	}
	if i := c.h.idx[colEAN]; i < len(rec) {
		ref.EAN = trim(rec[i])
	}
	return ref
}

// trim drops surrounding spaces and tabs, the padding spreadsheets leave.
func trim(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// store looks a store id up among the client's stores.
func (c *checker) store(id string) (uint32, bool) {
	if id != c.lastStore || id == "" {
		c.lastStoreID, c.lastStoreOK = c.stores[id]
		c.lastStore = id
	}
	return c.lastStoreID, c.lastStoreOK
}

// retailPrice returns a pointer to m from the current slab.
func (c *checker) retailPrice(m storelink.Money) *storelink.Money {
	if len(c.prices) == cap(c.prices) {
		c.prices = make([]storelink.Money, 0, 256)
	}
	c.prices = append(c.prices, m)
	return &c.prices[len(c.prices)-1]
}
