package feed

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"storelink"
)

// TestCheckReadSizes: the decoders hold back runes, surrogate pairs and NUL
// checks across reads, so the outcome must not depend on how the input is
// cut. Every fixture is read whole, a byte at a time, and in halves.
func TestCheckReadSizes(t *testing.T) {
	files, err := filepath.Glob("testdata/*.csv")
	if err != nil || len(files) == 0 {
		t.Fatal("no fixtures", err)
	}
	cuts := map[string]func(io.Reader) io.Reader{
		"one byte": iotest.OneByteReader,
		"half":     iotest.HalfReader,
		"data+EOF": iotest.DataErrReader,
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		wantRep, wantRows := run(t, bytes.NewReader(data))
		for name, cut := range cuts {
			rep, rows := run(t, cut(bytes.NewReader(data)))
			if !reflect.DeepEqual(rep, wantRep) || !reflect.DeepEqual(rows, wantRows) {
				t.Errorf("%s read %s: got %+v %q, want %+v %q", file, name, rep, rows, wantRep, wantRows)
			}
		}
	}
}

func run(tb testing.TB, r io.Reader) (storelink.FeedReport, []string) {
	tb.Helper()
	var rows []string
	rep, err := Check(r, testStores, func(row storelink.StockRow) error {
		rows = append(rows, rowString(row))
		return nil
	})
	if err != nil {
		tb.Fatalf("Check: %v", err)
	}
	return rep, rows
}

// TestCheckErrors: only the input's I/O errors and put's errors come back as
// errors, wrapped so that errors.Is still finds them.
func TestCheckErrors(t *testing.T) {
	feed := "store;ean;article_number;quantity;price\nS1;4006381333931;A;1;1\nS1;5901234123457;B;1;1\n"
	errIO := errors.New("disk on fire")
	_, err := Check(io.MultiReader(strings.NewReader(feed), iotest.ErrReader(errIO)), testStores,
		func(storelink.StockRow) error { return nil })
	if !errors.Is(err, errIO) {
		t.Errorf("I/O error: got %v, want %v", err, errIO)
	}
	_, err = Check(iotest.ErrReader(errIO), testStores, func(storelink.StockRow) error { return nil })
	if !errors.Is(err, errIO) {
		t.Errorf("I/O error at once: got %v, want %v", err, errIO)
	}

	errPut := errors.New("database gone")
	calls := 0
	_, err = Check(strings.NewReader(feed), testStores, func(storelink.StockRow) error {
		calls++
		return errPut
	})
	if !errors.Is(err, errPut) || calls != 1 {
		t.Errorf("put error: got %v after %d calls, want %v after 1", err, calls, errPut)
	}
}

// TestCheckNoStores: with no stores registered every row is rejected, and a
// nil map is allowed.
func TestCheckNoStores(t *testing.T) {
	rep, err := Check(strings.NewReader("store;ean;article_number;quantity;price\nS1;4006381333931;A;1;1\n"),
		nil, func(storelink.StockRow) error { t.Error("put called"); return nil })
	if err != nil || rep.RowsRejected != 1 || len(rep.Errors) != 1 || rep.Errors[0].Type != storelink.ProblemUnknownStore {
		t.Errorf("got %+v, %v; want one unknown store", rep, err)
	}
}

func TestDetectSeparator(t *testing.T) {
	tests := []struct {
		header string
		want   rune
		crOnly bool
	}{
		{"store;ean;article_number;quantity;price\n", ';', false},
		{"store,ean,article_number,quantity,price\n", ',', false},
		{"store,ean;article_number;quantity,price\n", ';', false}, // 2 to 2: tie
		{"store\n", ';', false},
		{"", ';', false},
		{`"a;b;c",ean,article_number` + "\n", ',', false}, // quoted separators do not count
		{"\n\r\nstore,ean\n", ',', false},                 // blank lines before the header
		{"store,ean\nx;y;z;w\n", ',', false},              // only the header line counts
		{"store,ean\r\nx\ry\r\n", ',', false},             // CRLF; a CR in a later line is not the header's
		{`"st` + "\r" + `ore",ean` + "\r\n", ',', false},  // a CR inside quotes is data
		{"store,ean\r", ',', false},                       // a CR at the end: nothing follows it
		{"store,ean\rS1,4006381333931\r", ',', true},
		{"\rstore;ean\r", ';', true}, // a blank CR-only line first
	}
	for _, tt := range tests {
		if got, crOnly := detectSeparator(bufioReader(tt.header)); got != tt.want || crOnly != tt.crOnly {
			t.Errorf("detectSeparator(%q) = %q, %v; want %q, %v", tt.header, got, crOnly, tt.want, tt.crOnly)
		}
	}
}

// TestCheckLineRefCap: a problem on more than MaxLineRefs lines lists the
// first MaxLineRefs and counts them all; duplicates, found out of order, list
// the first lines of the file too.
func TestCheckLineRefCap(t *testing.T) {
	const n = storelink.MaxLineRefs + 500
	var b strings.Builder
	b.WriteString("store;ean;article_number;quantity;price\n")
	for i := range n {
		fmt.Fprintf(&b, "S9;%s;A;1;1\n", makeEAN(i))
	}
	// n keys, then the same keys backwards: the overrides are found last
	// line first.
	for i := range n {
		fmt.Fprintf(&b, "S1;%s;A;1;1\n", makeEAN(i))
	}
	for i := n - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "S1;%s;A;1;1\n", makeEAN(i))
	}
	rep, _ := run(t, strings.NewReader(b.String()))
	if len(rep.Errors) != 1 || len(rep.Warnings) != 1 {
		t.Fatalf("got %d errors, %d warnings; want 1, 1", len(rep.Errors), len(rep.Warnings))
	}
	for _, p := range []storelink.Problem{rep.Errors[0], rep.Warnings[0]} {
		if p.Count != n || len(p.LineNumbers) != storelink.MaxLineRefs || p.Details == "" {
			t.Errorf("%s: count %d, %d lines, details %q; want %d, %d, set",
				p.Type, p.Count, len(p.LineNumbers), p.Details, n, storelink.MaxLineRefs)
		}
	}
	first := n + 2 // line of the first S1 row
	for i, ref := range rep.Warnings[0].LineNumbers {
		if ref.LineNumber != first+i || ref.EAN != makeEAN(i) {
			t.Fatalf("duplicate ref %d = %+v, want line %d EAN %s", i, ref, first+i, makeEAN(i))
		}
	}
	if rep.RowsApplied != n || rep.RowsValid != 2*n {
		t.Errorf("applied %d valid %d, want %d %d", rep.RowsApplied, rep.RowsValid, n, 2*n)
	}
}

// TestCheckLongRefValue: a huge store value is cut in the line reference.
func TestCheckLongRefValue(t *testing.T) {
	store := strings.Repeat("é", 1000)
	rep, _ := run(t, strings.NewReader("store;ean;article_number;quantity;price\n"+store+";4006381333931;A;1;1\n"))
	got := rep.Errors[0].LineNumbers[0].StoreID
	if len(got) > maxRefValue || !strings.HasPrefix(store, got) || got == "" {
		t.Errorf("ref store = %q (%d bytes), want a prefix of at most %d bytes", got, len(got), maxRefValue)
	}
}

func bufioReader(s string) *bufio.Reader {
	return bufio.NewReaderSize(strings.NewReader(s), rawBufSize)
}
