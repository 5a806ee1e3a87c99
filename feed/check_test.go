package feed

import (
	"bytes"
	"encoding/binary"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"storelink"
)

// testStores are the stores registered for the client in every test.
var testStores = map[string]bool{"S1": true, "S2": true, "S3": false}

// want is one expected problem group: its type, a part of its message (""
// to skip) and its lines in order.
type want struct {
	typ   string
	msg   string
	lines []int
}

// counts are RowsTotal, RowsValid, RowsRejected, RowsApplied.
type counts [4]int

func TestCheck(t *testing.T) {
	const none = "-|||||"
	tests := []struct {
		file      string
		fileError bool
		counts    counts
		errs      []want
		warns     []want
		// rows put, as rowString writes them
		rows []string
	}{
		// Files that are fine, in every encoding and dialect.
		{file: "ok_semicolon.csv", counts: counts{2, 2, 0, 2}, rows: []string{
			"2|S1|4006381333931|SKU-123|5|19.99|29.99|Dept 3||||",
			"3|S2|5901234123457|SKU-124|0|7|" + none,
		}},
		{file: "ok_comma.csv", counts: counts{3, 3, 0, 3}, rows: []string{
			"2|S1|96385074|A-1|12|0.5|-||Socks|P-9|blue|42",
			"3|S1|036000291452|A-2|1000000|1000000.01|-||Shirt, long|P-10|red|XL",
			"4|S2|10012345678902|A-3|3|2.1|-||Box of 12|||",
		}},
		{file: "ok_crlf.csv", counts: counts{2, 2, 0, 2}, rows: []string{
			"2|S1|4006381333931|SKU-1|1|1|" + none,
			"3|S2|4006381333931|SKU-1|2|2.5|" + none,
		}},
		{file: "ok_quoted.csv", counts: counts{3, 3, 0, 3}, rows: []string{
			"2|S1|4006381333931|SKU;1|1|1.99|-|Aisle 3\nShelf 2|Jacket \"Alpine\" 2-in-1|||",
			"4|S1|5901234123457|SKU-2|2|2.99|-|multi\n\nline||||",
			"7|S2|8712345678906|SKU-3|3|3.99|-||Plain|||",
		}},
		{file: "ok_crlf_quoted_cr.csv", counts: counts{2, 2, 0, 2}, rows: []string{
			"2|S1|4006381333931|SKU-1|1|1|-||one\rtwo|||", // a bare CR inside quotes is data
			"3|S2|5901234123457|SKU-2|2|2|-||three\nfour|||",
		}},
		{file: "ok_blank_lines.csv", counts: counts{2, 2, 0, 2}, rows: []string{
			"2|S1|4006381333931|SKU-1|1|1|" + none,
			"4|S1|5901234123457|SKU-2|2|2|" + none,
		}},
		{file: "ok_header_case.csv", counts: counts{1, 1, 0, 1}, rows: []string{
			"2|S1|4006381333931|SKU-1|7|9.9|9.9|Back room||||",
		}},
		{file: "ok_space_before_quote.csv", counts: counts{1, 1, 0, 1}, rows: []string{
			"2|S1|4006381333931|SKU 1|1|1|" + none,
		}},
		{file: "ok_bom_utf8.csv", counts: counts{2, 2, 0, 2}, rows: unicodeRows},
		{file: "ok_utf16le.csv", counts: counts{2, 2, 0, 2}, rows: unicodeRows},
		{file: "ok_utf16be.csv", counts: counts{2, 2, 0, 2}, rows: unicodeRows},

		// Bytes that are not text in the encoding reject the file.
		{file: "err_invalid_utf8.csv", fileError: true, counts: counts{1, 1, 0, 0},
			errs: []want{{storelink.ProblemEncoding, "line 3: the file has bytes that are not valid UTF-8", []int{3}}},
			rows: []string{"2|S1|4006381333931|SKU-1|1|1|-||ok|||"}},
		{file: "err_nul.csv", fileError: true,
			errs: []want{{storelink.ProblemEncoding, "NUL byte", []int{2}}}},
		{file: "err_utf16_no_bom.csv", fileError: true,
			errs: []want{{storelink.ProblemEncoding, "NUL byte", []int{1}}}},
		{file: "err_utf16_surrogate.csv", fileError: true, counts: counts{1, 1, 0, 0},
			errs: []want{{storelink.ProblemEncoding, "unpaired UTF-16 surrogate", []int{3}}},
			rows: []string{"2|S1|4006381333931|SKU-1|1|1|-||ok|||"}},
		{file: "err_utf16_odd.csv", fileError: true, counts: counts{1, 1, 0, 0},
			errs: []want{{storelink.ProblemEncoding, "odd number of bytes", []int{3}}},
			rows: []string{"2|S1|4006381333931|SKU-1|1|1|" + none}},

		// No header, or quoting that cannot be parsed.
		{file: "err_no_header.csv", fileError: true,
			errs: []want{{storelink.ProblemFile, "No header line", []int{1}}}},
		{file: "err_duplicate_column.csv", fileError: true,
			errs: []want{{storelink.ProblemFile, `more than once in the header: "ean", "store_article_location".`, []int{1}}}},
		{file: "err_quote_bare.csv", fileError: true, counts: counts{1, 1, 0, 0},
			errs: []want{{storelink.ProblemFile, "Quoting cannot be parsed on line 3", []int{3}}},
			rows: []string{"2|S1|4006381333931|SKU-1|1|1|" + none}},
		{file: "err_quote_unclosed.csv", fileError: true, counts: counts{1, 1, 0, 0},
			errs: []want{{storelink.ProblemFile, "in the row starting on line 3", []int{3}}},
			rows: []string{"2|S1|4006381333931|SKU-1|1|1|" + none}},
		{file: "err_cr_only.csv", fileError: true,
			errs: []want{{storelink.ProblemFile, "CR-only line ends are not supported", []int{1}}}},
		{file: "err_quote_after.csv", fileError: true,
			errs: []want{{storelink.ProblemFile, "text after its closing quote", []int{2}}}},

		// Header only, or no bytes.
		{file: "err_empty.csv", fileError: true, errs: []want{{storelink.ProblemEmpty, msgNoBytes, []int{1}}}},
		{file: "err_only_bom.csv", fileError: true, errs: []want{{storelink.ProblemEmpty, msgNoBytes, []int{1}}}},
		{file: "err_blank_lines.csv", fileError: true, errs: []want{{storelink.ProblemEmpty, msgNoBytes, []int{1}}}},
		{file: "err_header_only.csv", fileError: true, errs: []want{{storelink.ProblemEmpty, msgHeaderOnly, []int{1}}}},

		// Mandatory column missing; unknown columns.
		{file: "err_missing_columns.csv", fileError: true,
			errs:  []want{{storelink.ProblemMissingColumns, `Missing mandatory columns: "quantity".`, []int{1}}},
			warns: []want{{storelink.ProblemUnknownColumns, `"qty"`, []int{1}}}},
		{file: "warn_unknown_columns.csv", counts: counts{1, 1, 0, 1},
			warns: []want{{storelink.ProblemUnknownColumns, `ignored: "comment", "colour".`, []int{1}}},
			rows:  []string{"2|S1|4006381333931|SKU-1|1|1.99|" + none}},

		// Row problems.
		{file: "row_columns_mismatch.csv", counts: counts{3, 1, 2, 1},
			errs: []want{{storelink.ProblemColumnsMismatch, "does not have the 5 fields", []int{2, 4}}},
			rows: []string{"3|S1|5901234123457|SKU-2|2|2|" + none}},
		{file: "row_missing_values.csv", counts: counts{5, 1, 4, 1},
			errs: []want{
				{storelink.ProblemMissingValues, `column "store"`, []int{2}},
				{storelink.ProblemMissingValues, `column "ean"`, []int{3}},
				{storelink.ProblemMissingValues, `column "article_number"`, []int{4}},
				{storelink.ProblemMissingValues, `column "quantity"`, []int{5}},
				{storelink.ProblemMissingValues, `column "price"`, []int{5}},
			},
			rows: []string{"6|S1|5901234123457|SKU-5|5|5|" + none}},
		{file: "row_unknown_store.csv", counts: counts{3, 1, 2, 1},
			errs: []want{{storelink.ProblemUnknownStore, "", []int{2, 3}}},
			rows: []string{"4|S1|8712345678906|SKU-3|3|3|" + none}},
		{file: "row_invalid_values.csv", counts: counts{16, 3, 13, 3},
			errs: []want{
				{storelink.ProblemInvalidValue, `"ean": must be 8, 12, 13 or 14 digits`, []int{2, 3, 4}},
				{storelink.ProblemInvalidValue, `"quantity": must be a whole number from 0 to 1000000.`, []int{5, 6, 7}},
				{storelink.ProblemInvalidValue, `"price": must be a decimal number greater than 0`, []int{8, 9, 10, 11}},
				{storelink.ProblemInvalidValue, `"article_number": must be at most 64 characters.`, []int{12}},
				{storelink.ProblemInvalidValue, `"retail_price": must be a decimal`, []int{14}},
				{storelink.ProblemInvalidValue, `"product_name": must be at most 255 characters.`, []int{15}},
			},
			rows: []string{
				"13|S1|4006381333931|" + strings.Repeat("é", 64) + "|1|1|" + none,
				"16|S1|5901234123457|SKU-16|1|1|-||" + strings.Repeat("é", 255) + "|||",
				"17|S1|8712345678906|SKU-17|7|1|" + none,
			}},
		{file: "row_control_characters.csv", counts: counts{7, 1, 6, 1},
			errs: []want{
				{storelink.ProblemInvalidValue, `"article_number": must not hold control characters (only tab is allowed).`, []int{2, 3}},
				{storelink.ProblemInvalidValue, `"product_name": must not hold control characters (only tab and line breaks are allowed).`, []int{5}},
				{storelink.ProblemInvalidValue, `"article_color": must not hold control characters`, []int{6}},
				{storelink.ProblemInvalidValue, `"article_size": must not hold control characters`, []int{7}},
				{storelink.ProblemInvalidValue, `"store_article_location": must not hold control characters`, []int{8}},
			},
			rows: []string{"9|S2|4006381333931|SKU\tG|1|1|-|Aisle 3\nShelf 2|Two\nlines|P\t1||"}},
		{file: "row_minimum_price.csv", counts: counts{3, 2, 1, 2},
			errs: []want{{storelink.ProblemMinimumPrice, `"retail_price" must be at least "price"`, []int{2}}},
			rows: []string{
				"3|S1|5901234123457|SKU-2|5|19.99|19.99|||||",
				"4|S1|8712345678906|SKU-3|5|19.99|" + none,
			}},
		{file: "row_several_problems.csv", counts: counts{4, 1, 3, 1},
			errs: []want{
				{storelink.ProblemUnknownStore, "", []int{2}},
				{storelink.ProblemInvalidValue, `"ean"`, []int{2}},
				{storelink.ProblemInvalidValue, `"article_number"`, []int{2}},
				{storelink.ProblemInvalidValue, `"quantity"`, []int{2}},
				{storelink.ProblemInvalidValue, `"price"`, []int{2}},
				{storelink.ProblemInvalidValue, `"retail_price"`, []int{2}},
				{storelink.ProblemMissingValues, `"store"`, []int{3}},
				{storelink.ProblemMissingValues, `"ean"`, []int{3}},
				{storelink.ProblemMissingValues, `"quantity"`, []int{3}},
				{storelink.ProblemMissingValues, `"price"`, []int{3}},
				{storelink.ProblemMinimumPrice, "", []int{4}},
			},
			rows: []string{"5|S1|4006381333931|SKU-1|1|5|5.01|||||"}},
		{file: "warn_duplicated.csv", counts: counts{6, 6, 0, 3},
			warns: []want{{storelink.ProblemDuplicated, "overrides these rows", []int{2, 3, 5}}},
			rows: []string{
				"2|S1|4023456789011|A|1|1|" + none,
				"3|S2|4006381333931|B|2|2|" + none,
				"4|S2|4006381333931|C|3|3|" + none + " (repeats)",
				"5|S1|4023456789011|D|4|4|" + none + " (repeats)",
				"6|S1|4006381333931|E|5|5|" + none,
				"7|S1|4023456789011|F|6|6|" + none + " (repeats)",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			rep, rows := checkFile(t, filepath.Join("testdata", tt.file))
			if rep.FileError != tt.fileError {
				t.Errorf("FileError = %v, want %v", rep.FileError, tt.fileError)
			}
			got := counts{rep.RowsTotal, rep.RowsValid, rep.RowsRejected, rep.RowsApplied}
			if got != tt.counts {
				t.Errorf("counts (total, valid, rejected, applied) = %v, want %v", got, tt.counts)
			}
			assertProblems(t, "error", rep.Errors, tt.errs)
			assertProblems(t, "warning", rep.Warnings, tt.warns)
			if strings.Join(rows, "\n---\n") != strings.Join(tt.rows, "\n---\n") {
				t.Errorf("rows put:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(tt.rows, "\n"))
			}
		})
	}
}

var unicodeRows = []string{
	"2|S1|4006381333931|SKU-1|5|19.99|-||Größe 🙂 Schuh||Grün|",
	"3|S2|5901234123457|SKU-2|1|2|-||Zwei\nZeilen|||",
}

// checkFile runs Check on a fixture and returns the report and the rows put.
func checkFile(tb testing.TB, path string) (storelink.FeedReport, []string) {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var rows []string
	rep, err := Check(f, testStores, func(r storelink.StockRow) error {
		rows = append(rows, rowString(r))
		return nil
	})
	if err != nil {
		tb.Fatalf("Check: %v", err)
	}
	if rep.Errors == nil || rep.Warnings == nil {
		tb.Errorf("Errors or Warnings is nil; they must encode as []")
	}
	return rep, rows
}

// rowString writes every field of a row, "-" standing for no retail price.
func rowString(r storelink.StockRow) string {
	retail := "-"
	if r.RetailPrice != nil {
		retail = r.RetailPrice.String()
	}
	s := strings.Join([]string{strconv.Itoa(r.Line), r.StoreID, r.EAN, r.ArticleNumber,
		strconv.Itoa(r.Quantity), r.Price.String(), retail, r.ArticleLocation,
		r.ProductName, r.ProductNumber, r.ArticleColor, r.ArticleSize}, "|")
	if r.Repeats {
		s += " (repeats)"
	}
	return s
}

func assertProblems(tb testing.TB, kind string, got []storelink.Problem, want []want) {
	tb.Helper()
	if len(got) != len(want) {
		tb.Errorf("%d %ss, want %d: %+v", len(got), kind, len(want), got)
		return
	}
	for i, w := range want {
		p := got[i]
		var lines []int
		for _, ref := range p.LineNumbers {
			lines = append(lines, ref.LineNumber)
		}
		if p.Type != w.typ || !strings.Contains(p.Message, w.msg) ||
			!slices.Equal(lines, w.lines) || p.Count != len(w.lines) {
			tb.Errorf("%s %d = %q %q lines %v count %d, want %q containing %q lines %v",
				kind, i, p.Type, p.Message, lines, p.Count, w.typ, w.msg, w.lines)
		}
	}
}

// The fixtures below hold bytes an editor would mangle (byte order marks,
// UTF-16, invalid UTF-8, NUL), so they are written by this code and committed;
// TestGeneratedFixtures keeps the committed files and the code in step.
// Regenerate with: go test ./feed -run TestGeneratedFixtures -update
var update = flag.Bool("update", false, "rewrite the generated fixtures in testdata")

// unicodeFeed has non-ASCII text, including a character outside the BMP, so
// the UTF-16 fixtures exercise surrogate pairs.
const unicodeFeed = "store;ean;article_number;quantity;price;product_name;article_color\r\n" +
	"S1;4006381333931;SKU-1;5;19.99;Größe 🙂 Schuh;Grün\r\n" +
	"S2;5901234123457;SKU-2;1;2.00;\"Zwei\r\nZeilen\";\r\n"

var generatedFixtures = map[string]func() []byte{
	"ok_bom_utf8.csv": func() []byte { return append([]byte{0xEF, 0xBB, 0xBF}, unicodeFeed...) },
	"ok_utf16le.csv":  func() []byte { return encodeUTF16(unicodeFeed, binary.LittleEndian, true) },
	"ok_utf16be.csv":  func() []byte { return encodeUTF16(unicodeFeed, binary.BigEndian, true) },
	"err_only_bom.csv": func() []byte {
		return []byte{0xEF, 0xBB, 0xBF}
	},
	// Latin-1 "ü" (0xFC) on line 3: the usual export mistake.
	"err_invalid_utf8.csv": func() []byte {
		return []byte("store;ean;article_number;quantity;price;product_name\n" +
			"S1;4006381333931;SKU-1;1;1.00;ok\n" +
			"S1;5901234123457;SKU-2;1;1.00;Gr\xFCn\n")
	},
	"err_nul.csv": func() []byte {
		return []byte("store;ean;article_number;quantity;price\n" +
			"S1;4006381333931;SKU-1;1;1.00\x00\n")
	},
	// UTF-16 without a byte order mark reads as UTF-8 full of NUL bytes.
	"err_utf16_no_bom.csv": func() []byte {
		return encodeUTF16("store;ean;article_number;quantity;price\n", binary.LittleEndian, false)
	},
	// A lone high surrogate (0xD83D) on line 3.
	"err_utf16_surrogate.csv": func() []byte {
		b := encodeUTF16("store;ean;article_number;quantity;price;product_name\n"+
			"S1;4006381333931;SKU-1;1;1.00;ok\nS1;5901234123457;SKU-2;1;1.00;", binary.LittleEndian, true)
		b = binary.LittleEndian.AppendUint16(b, 0xD83D)
		return append(b, encodeUTF16("x\n", binary.LittleEndian, false)...)
	},
	"err_utf16_odd.csv": func() []byte {
		b := encodeUTF16("store;ean;article_number;quantity;price\nS1;4006381333931;SKU-1;1;1.00\n",
			binary.BigEndian, true)
		return append(b, 'S')
	},
}

func encodeUTF16(s string, order binary.AppendByteOrder, bom bool) []byte {
	var b []byte
	if bom {
		b = order.AppendUint16(b, 0xFEFF)
	}
	for _, u := range utf16.Encode([]rune(s)) {
		b = order.AppendUint16(b, u)
	}
	return b
}

func TestGeneratedFixtures(t *testing.T) {
	for name, gen := range generatedFixtures {
		path := filepath.Join("testdata", name)
		want := gen()
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to write it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from its generator; run with -update", path)
		}
	}
}
