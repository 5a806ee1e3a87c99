package feed

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

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
			if !ValidEAN(r.EAN) {
				t.Errorf("line %d: put EAN %q, not valid", r.Line, r.EAN)
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
