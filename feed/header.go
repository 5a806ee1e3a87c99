package feed

import (
	"bufio"
	"slices"
	"strconv"
	"strings"

	"storelink"
)

// Columns of a feed, as indexes into header.idx. The mandatory ones come
// first so that a loop over them is a range over a prefix.
const (
	colStore = iota
	colEAN
	colArticleNumber
	colQuantity
	colPrice
	numMandatory

	colRetailPrice = iota - 1
	colLocation
	colProductName
	colProductNumber
	colColor
	colSize
	numColumns
)

// columnNames are the canonical header names, by column.
var columnNames = [numColumns]string{
	"store", "ean", "article_number", "quantity", "price",
	"retail_price", "store_article_location", "product_name", "product_number",
	"article_color", "article_size",
}

// columnByName maps a normalised header name to its column, aliases included.
var columnByName = func() map[string]int {
	m := make(map[string]int, numColumns+1)
	for c, name := range columnNames {
		m[name] = c
	}
	m["article_location"] = colLocation
	return m
}()

// header is the decoded header line: where each column is, and the messages
// of the row checks, made once here so that the row loop formats nothing.
type header struct {
	idx    [numColumns]int // field index of each column; -1 when absent
	fields int             // number of fields every row must have
	names  [numColumns]string
	// messages by column, for the checks that name a column
	missing [numColumns]string
	invalid [numColumns]string
	control [numColumns]string // a control character in a text column
	// mismatch is the message for a row with another number of fields.
	mismatch string
}

// detectSeparator picks ';' or ',' from the first non-blank line: whichever
// occurs more often outside quotes; ';' when they tie, as most partner exports
// from European spreadsheets use it. It also reports whether that line ends
// in a bare CR (old Mac line ends), which encoding/csv does not take as a
// line end: the whole file would read as one line. It only peeks, so
// encoding/csv still reads the header itself and keeps its line count right.
func detectSeparator(br *bufio.Reader) (sep rune, crOnly bool) {
	b, _ := br.Peek(br.Size())
	for len(b) > 0 && (b[0] == '\n' || (b[0] == '\r' && len(b) > 1 && b[1] == '\n')) {
		if b[0] == '\r' {
			b = b[1:]
		}
		b = b[1:]
	}
	semi, comma, quoted := 0, 0, false
	for i, c := range b {
		switch {
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == '\n':
			return pickSeparator(semi, comma), false
		case c == '\r' && i+1 < len(b) && b[i+1] != '\n':
			return pickSeparator(semi, comma), true
		case c == ';':
			semi++
		case c == ',':
			comma++
		}
	}
	return pickSeparator(semi, comma), false
}

func pickSeparator(semi, comma int) rune {
	if comma > semi {
		return ','
	}
	return ';'
}

// maxUnknownListed bounds the unknown columns the warning names, each cut
// to maxRefValue bytes: the list is there to spot a misspelt name, and a
// header of a thousand columns would otherwise make a warning of its size.
const maxUnknownListed = 20

// parseHeader maps the header's fields to columns. It returns the problems
// that reject the file (errs) and the unknown columns warning (warn, "" when
// none). Only known columns count as named twice: an ignored column does no
// harm, and spreadsheets often add empty ones.
func parseHeader(rec []string) (h header, errs []problemKey, warn string) {
	for c := range h.idx {
		h.idx[c] = -1
		h.names[c] = columnNames[c]
	}
	h.fields = len(rec)
	var unknown, twice []string
	known, unknownCount := 0, 0
	for i, f := range rec {
		name := strings.ToLower(strings.TrimSpace(f))
		c, ok := columnByName[name]
		if !ok {
			if len(unknown) < maxUnknownListed {
				unknown = append(unknown, strconv.Quote(refValue(name)))
			}
			unknownCount++
			continue
		}
		known++
		if h.idx[c] >= 0 {
			if q := strconv.Quote(name); !slices.Contains(twice, q) { // each name once, however often repeated
				twice = append(twice, q)
			}
			continue
		}
		h.idx[c] = i
		h.names[c] = name
	}
	if known == 0 {
		errs = append(errs, problemKey{storelink.ProblemFile, "No header line: the first line names none of " +
			"the columns store, ean, article_number, quantity, price, separated by \";\" or \",\"."})
		return h, errs, ""
	}
	if len(twice) > 0 {
		errs = append(errs, problemKey{storelink.ProblemFile,
			"Columns named more than once in the header: " + strings.Join(twice, ", ") + "."})
	}
	var missing []string
	for c := range numMandatory {
		if h.idx[c] < 0 {
			missing = append(missing, strconv.Quote(columnNames[c]))
		}
	}
	if len(missing) > 0 {
		errs = append(errs, problemKey{storelink.ProblemMissingColumns,
			"Missing mandatory columns: " + strings.Join(missing, ", ") + "."})
	}
	if len(unknown) > 0 {
		warn = "Unknown columns, ignored: " + strings.Join(unknown, ", ")
		if more := unknownCount - len(unknown); more > 0 {
			warn += " and " + strconv.Itoa(more) + " more"
		}
		warn += "."
	}
	h.messages()
	return h, errs, warn
}

// messages writes the row check messages. Each names the column as the
// partner wrote it and the rule it breaks, so a report line is enough to fix
// the export without reading the contract.
func (h *header) messages() {
	for c := range numColumns {
		h.missing[c] = "Missing value in mandatory column " + strconv.Quote(h.names[c]) + "."
		rule := "must be at most 255 characters."
		switch c {
		case colEAN:
			rule = "must be 8, 12, 13 or 14 digits with a valid GS1 check digit."
		case colArticleNumber:
			rule = "must be at most 64 characters."
		case colQuantity:
			rule = "must be a whole number from 0 to 1000000."
		case colPrice:
			rule = "must be a decimal number greater than 0 with at most 2 decimals and \".\" as separator."
		case colRetailPrice:
			rule = "must be a decimal number with at most 2 decimals and \".\" as separator."
		}
		h.invalid[c] = "Invalid value in column " + strconv.Quote(h.names[c]) + ": " + rule
		allowed := "tab and line breaks are"
		if c == colArticleNumber {
			allowed = "tab is"
		}
		h.control[c] = "Invalid value in column " + strconv.Quote(h.names[c]) +
			": must not hold control characters (only " + allowed + " allowed)."
	}
	h.mismatch = "The row does not have the " + strconv.Itoa(h.fields) +
		" fields of the header; check separators and quoting."
}

const (
	msgUnknownStore = "Store does not exist: the value of column \"store\" is not a store registered for this client."
	msgMinimumPrice = "Retail price lower than price: \"retail_price\" must be at least \"price\"."
	msgDuplicated   = "Duplicated store and EAN: a later row for the same store and EAN overrides these rows."
	msgNoBytes      = "The file is empty: it has no header and no rows."
	msgHeaderOnly   = "The file has a header but no data rows."
	msgCROnly       = "The lines end in a carriage return (CR) alone, as on old Macs: CR-only line ends are not supported. Save the file with LF or CRLF line ends."
)
