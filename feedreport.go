package storelink

// Problem types of a stock feed, exactly as partners see them in the report
// (docs: the stock feed). The first four reject the whole file.
const (
	ProblemEncoding        = "CSV Encoding Error"
	ProblemFile            = "CSV File Error"
	ProblemEmpty           = "Empty stock feed file"
	ProblemMissingColumns  = "Missing mandatory columns"
	ProblemUnknownColumns  = "Unknown columns"
	ProblemColumnsMismatch = "CSV header and row columns do not match"
	ProblemMissingValues   = "Missing values"
	ProblemUnknownStore    = "Store does not exist"
	ProblemInvalidValue    = "Invalid column value"
	ProblemMinimumPrice    = "Minimum price"
	ProblemDuplicated      = "Duplicated value"
	// ProblemProcessing is set when the service could not process the file
	// at all (it failed every attempt); nothing of it was applied.
	ProblemProcessing = "Processing failed"
)

// MaxLineRefs bounds the line references kept per problem, so that a file of
// a million bad rows still has a report of sensible size. Details then says
// how many lines there were in all.
const MaxLineRefs = 1000

// MaxRefValue bounds, in runes, the offending value a line reference
// shows: enough to recognise it, and a garbage field of a megabyte does
// not end up a thousand times in the report.
const MaxRefValue = 50

// LineRef points at one line of the file; StoreID and EAN are the row's
// values as far as they could be read. Value is, for a problem caused by
// one field's value, that value, cut to its first MaxRefValue runes; it is
// empty when the problem is of no one value (a missing value, a row with
// the wrong number of fields, a duplicate).
type LineRef struct {
	LineNumber int    `json:"line_number"`
	StoreID    string `json:"store_id,omitempty"`
	EAN        string `json:"ean,omitempty"`
	Value      string `json:"value,omitempty"`
}

// Problem is one kind of problem found in a feed, with the lines that have it.
// Problems of one type and message are grouped, so that a partner reads "price
// must be ... : lines 4, 9, 12" once, not three times.
type Problem struct {
	Type        string    `json:"type"`
	Message     string    `json:"message"`
	LineNumbers []LineRef `json:"line_numbers"`
	// Count is the number of lines with this problem; it exceeds
	// len(LineNumbers) when the list was cut at MaxLineRefs.
	Count   int    `json:"count"`
	Details string `json:"details,omitempty"`
}

// FeedReport is the outcome of decoding and checking a feed.
type FeedReport struct {
	// RowsTotal counts data rows read (the header is not a row).
	RowsTotal int
	// RowsValid counts rows that passed every check and were put, including
	// earlier duplicates that a later row overrode.
	RowsValid int
	// RowsRejected counts rows dropped by an error.
	RowsRejected int
	// RowsApplied counts distinct store and EAN pairs put: RowsValid minus
	// the earlier duplicates.
	RowsApplied int
	Errors      []Problem
	Warnings    []Problem
	// FileError is set when the file as a whole is rejected; nothing of it
	// may be applied.
	FileError bool
	// ErrorFile is the feed's error file (errors.csv): every row dropped by
	// an error as it stood in the file, with its line and problems, or for
	// a file rejected as a whole its problem at line 0.
	ErrorFile []byte
}
