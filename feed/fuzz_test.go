package feed

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf16"
	"unicode/utf8"

	"storelink"
)

// FuzzCheck feeds Check arbitrary bytes, starting from every fixture, and
// holds it to what the rest of the service relies on: no panic, no error that
// is not the input's or put's, line numbers that point into the file, counts
// that add up, and only rows that passed the checks put.
func FuzzCheck(f *testing.F) {
	files, err := filepath.Glob("testdata/*.csv")
	if err != nil || len(files) == 0 {
		f.Fatal("no fixtures", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	// CR-only line ends in UTF-16, where the CR is a code unit.
	f.Add(encodeUTF16("store;ean;article_number;quantity;price\rS1;4006381333931;A;1;1\r", binary.LittleEndian, true))
	// Records past maxRecordBytes and maxFields, plain and in quotes.
	f.Add([]byte(limitHeader + "S1;\"" + strings.Repeat("a;\n", maxRecordBytes/3) + "\";A;1;1\n"))
	f.Add([]byte(limitHeader + strings.Repeat(`"";`, maxFields) + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var rows []storelink.StockRow
		rep, err := Check(bytes.NewReader(data), testStores, func(r storelink.StockRow) error {
			rows = append(rows, r)
			return nil
		})
		if err != nil {
			t.Fatalf("Check returned an error for in-memory input: %v", err)
		}
		lines := decodedLines(data)
		if rep.RowsTotal > lines-1 {
			t.Errorf("RowsTotal %d > %d lines - 1", rep.RowsTotal, lines)
		}
		if !rep.FileError && rep.RowsValid+rep.RowsRejected != rep.RowsTotal {
			t.Errorf("valid %d + rejected %d != total %d", rep.RowsValid, rep.RowsRejected, rep.RowsTotal)
		}
		if len(rows) != rep.RowsValid {
			t.Errorf("%d rows put, RowsValid %d", len(rows), rep.RowsValid)
		}
		if rep.Errors == nil || rep.Warnings == nil {
			t.Errorf("nil Errors or Warnings")
		}
		if rep.FileError && rep.RowsApplied != 0 {
			t.Errorf("RowsApplied %d in a rejected file", rep.RowsApplied)
		}
		for _, p := range append(append([]storelink.Problem{}, rep.Errors...), rep.Warnings...) {
			if p.Count < len(p.LineNumbers) || len(p.LineNumbers) > storelink.MaxLineRefs || len(p.LineNumbers) == 0 {
				t.Errorf("%s: count %d with %d refs", p.Type, p.Count, len(p.LineNumbers))
			}
			prev := 0
			for _, ref := range p.LineNumbers {
				if ref.LineNumber < 1 || ref.LineNumber > lines {
					t.Errorf("%s %q: line %d outside 1..%d", p.Type, p.Message, ref.LineNumber, lines)
				}
				if ref.LineNumber <= prev {
					t.Errorf("%s: line %d after %d, not in file order", p.Type, ref.LineNumber, prev)
				}
				prev = ref.LineNumber
			}
		}
		prev := 0
		for _, r := range rows {
			if r.Line < 1 || r.Line > lines || r.Line <= prev {
				t.Errorf("row line %d outside 1..%d or not after %d", r.Line, lines, prev)
			}
			prev = r.Line
			if !testStores[r.StoreID] {
				t.Errorf("line %d: put store %q, not registered", r.Line, r.StoreID)
			}
			if !storelink.ValidGTIN(r.EAN) {
				t.Errorf("line %d: put EAN %q, not valid", r.Line, r.EAN)
			}
			if strings.ContainsFunc(r.ArticleNumber, storelink.IsControl) {
				t.Errorf("line %d: put article number %q, with a control character", r.Line, r.ArticleNumber)
			}
			for _, s := range []string{r.ArticleLocation, r.ProductName, r.ProductNumber, r.ArticleColor, r.ArticleSize} {
				if strings.ContainsFunc(s, func(c rune) bool { return storelink.IsControl(c) && c != '\n' && c != '\r' }) {
					t.Errorf("line %d: put text %q, with a control character other than a line break", r.Line, s)
				}
			}
			if r.Quantity < 0 || r.Quantity > maxQuantity || r.Price <= 0 ||
				(r.RetailPrice != nil && *r.RetailPrice < r.Price) {
				t.Errorf("line %d: put %+v, breaks a value rule", r.Line, r)
			}
		}
	})
}

// decodedLines counts the lines of data as text, independently of the
// decoders under test: newlines in UTF-16 are counted as code units after a
// byte order mark, in anything else as bytes. It ignores whether the bytes
// are valid, which only shortens what Check reads.
func decodedLines(data []byte) int {
	var be bool
	switch {
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE}):
	case bytes.HasPrefix(data, []byte{0xFE, 0xFF}):
		be = true
	default:
		return bytes.Count(data, []byte{'\n'}) + 1
	}
	n := 1
	for i := 2; i+1 < len(data); i += 2 {
		if (!be && data[i] == '\n' && data[i+1] == 0) || (be && data[i] == 0 && data[i+1] == '\n') {
			n++
		}
	}
	return n
}

// FuzzDecode holds the streaming decoders to a whole-input reference: the
// same text out, an encoding error exactly when the reference finds one, on
// the line the reference finds it, whatever the size of the reads.
func FuzzDecode(f *testing.F) {
	for name, gen := range generatedFixtures {
		if !strings.HasPrefix(name, "ok_") {
			f.Add(gen(), uint8(0))
		}
	}
	f.Add(encodeUTF16("a\n🙂\nb", binary.BigEndian, true), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, cut uint8) {
		want, wantBad := referenceDecode(data)
		var r io.Reader = newDecoder(bytes.NewReader(data))
		if cut%2 == 1 {
			r = iotest.OneByteReader(newDecoder(iotest.HalfReader(bytes.NewReader(data))))
		}
		got, err := io.ReadAll(r)
		e, isEnc := isEncodingError(err)
		switch {
		case err != nil && !isEnc:
			t.Fatalf("error %v is not an encoding error", err)
		case wantBad != isEnc:
			t.Fatalf("encoding error %v, want one: %v (output %q)", err, wantBad, got)
		case !bytes.Equal(got, want):
			t.Fatalf("output %q, want %q", got, want)
		case isEnc && e.line != bytes.Count(got, []byte{'\n'})+1:
			t.Fatalf("error on line %d, after %d newlines", e.line, bytes.Count(got, []byte{'\n'}))
		}
	})
}

// referenceDecode decodes the whole input at once: the UTF-8 text up to the
// first invalid byte, and whether there was one.
func referenceDecode(data []byte) (text []byte, bad bool) {
	var order binary.ByteOrder
	switch {
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE}):
		order = binary.LittleEndian
	case bytes.HasPrefix(data, []byte{0xFE, 0xFF}):
		order = binary.BigEndian
	default:
		data = bytes.TrimPrefix(data, []byte{0xEF, 0xBB, 0xBF})
		for len(data) > 0 {
			r, size := utf8.DecodeRune(data)
			if r == 0 || (r == utf8.RuneError && size == 1) {
				return text, true
			}
			text, data = append(text, data[:size]...), data[size:]
		}
		return text, false
	}
	data = data[2:]
	for len(data) >= 2 {
		u := rune(order.Uint16(data))
		switch {
		case u == 0 || (u >= 0xDC00 && u < 0xE000):
			return text, true
		case u >= 0xD800 && u < 0xDC00:
			if len(data) < 4 {
				return text, true
			}
			r := utf16.DecodeRune(u, rune(order.Uint16(data[2:])))
			if r == utf8.RuneError {
				return text, true
			}
			text, data = utf8.AppendRune(text, r), data[4:]
			continue
		}
		text, data = utf8.AppendRune(text, u), data[2:]
	}
	return text, len(data) == 1
}
