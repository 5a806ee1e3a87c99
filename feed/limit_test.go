package feed

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"storelink"
)

const limitHeader = "store;ean;article_number;quantity;price\n"

// hostileFeeds are the shapes of file that make a CSV parser hold a record
// many times over, each built to about size bytes, with the line of the
// record the checker must name.
var hostileFeeds = []struct {
	name   string
	make   func(size int) string
	line   int
	fields bool // rejected for its fields rather than its bytes
}{
	{"a header line of separators", func(n int) string { return strings.Repeat(";", n) + "\n" }, 1, true},
	{"a row of separators", func(n int) string { return limitHeader + strings.Repeat(";", n) + "\n" }, 2, true},
	{"a row of quoted separators", func(n int) string {
		return limitHeader + strings.Repeat(`";";`, n/4) + "\n"
	}, 2, true},
	{"a row of empty quoted fields", func(n int) string { return limitHeader + strings.Repeat(`"";`, n/3) + "\n" }, 2, true},
	{"a row of doubled quotes", func(n int) string {
		return limitHeader + "S1;4006381333931;\"" + strings.Repeat(`""`, n/2) + "\";1;1\n"
	}, 2, false},
	{"a quoted field over many lines", func(n int) string {
		return limitHeader + "S1;4006381333931;A;1;1\nS1;\"" + strings.Repeat("ab;\n", n/4) + "\";A;1;1\n"
	}, 3, false},
	{"an unclosed quote", func(n int) string {
		return limitHeader + "S1;4006381333931;\"A;1;1\n" + strings.Repeat("S1;4006381333931;A;1;1\n", n/23)
	}, 2, false},
	{"a long line", func(n int) string {
		return limitHeader + "S1;4006381333931;" + strings.Repeat("x", n) + ";1;1\n"
	}, 2, false},
	{"a long header name", func(n int) string {
		return "store;ean;article_number;quantity;price;" + strings.Repeat("x", n) + "\nS1;4006381333931;A;1;1;x\n"
	}, 1, false},
	{"a long line after good rows", func(n int) string {
		return limitHeader + strings.Repeat("S1;4006381333931;A;1;1\n", 1000) + strings.Repeat(",", n) + "\n"
	}, 1002, false},
}

// allocated runs f and returns the bytes it allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestRecordLimiterHostileFeeds: whatever the shape of a file, the checker
// holds one bounded record: 2 MiB and 16 MiB of the same shape cost the same
// few hundred KiB, with and without an error file, and the file is rejected
// with a CSV File Error naming the line the record starts on.
func TestRecordLimiterHostileFeeds(t *testing.T) {
	const bound = 1 << 20
	for _, tt := range hostileFeeds {
		t.Run(tt.name, func(t *testing.T) {
			for _, size := range []int{2 << 20, 16 << 20} {
				data := []byte(tt.make(size))
				for _, withErrorFile := range []bool{false, true} {
					var rep storelink.FeedReport
					var err error
					n := allocated(func() {
						if withErrorFile {
							rep, err = CheckWithErrorFile(bytes.NewReader(data), testStores, nil, 1<<20)
						} else {
							rep, err = Check(bytes.NewReader(data), testStores, nil)
						}
					})
					if err != nil {
						t.Fatal(err)
					}
					t.Logf("%d MiB, error file %v: %d KiB allocated", len(data)>>20, withErrorFile, n>>10)
					if n > bound {
						t.Errorf("%d MiB, error file %v: Check allocated %d bytes, want at most %d whatever the size",
							len(data)>>20, withErrorFile, n, bound)
					}
					wantRecordError(t, rep, tt.line, tt.fields)
				}
			}
		})
	}
}

// wantRecordError checks that rep rejects the file for the record starting
// on line.
func wantRecordError(t *testing.T, rep storelink.FeedReport, line int, fields bool) {
	t.Helper()
	want := "The row starting on line " + strconv.Itoa(line) + " is longer than 64 KiB"
	if fields {
		want = "The row starting on line " + strconv.Itoa(line) + " has more than 1024 fields"
	}
	var found bool
	for _, p := range rep.Errors {
		if p.Type == storelink.ProblemFile && strings.HasPrefix(p.Message, want) &&
			len(p.LineNumbers) == 1 && p.LineNumbers[0].LineNumber == line {
			found = true
		}
	}
	if !rep.FileError || !found || rep.RowsApplied != 0 {
		t.Errorf("report %+v, want the file rejected with a CSV File Error %q at line %d", rep, want, line)
	}
}

// TestRecordLimiterBounds: a record at the bounds is read as any other, one
// byte or field past them rejects the file, and separators and line breaks
// inside quotes do not count as fields or records, however the input is cut.
func TestRecordLimiterBounds(t *testing.T) {
	const head = "store;ean;article_number;quantity;price;note\n"
	// row makes a valid row of exactly size bytes, its line end included,
	// padding the ignored column (quoted when quoted is true) with fill.
	row := func(size int, quoted bool, fill string) string {
		prefix, suffix := "S1;4006381333931;A;1;1;", "\n"
		if quoted {
			prefix, suffix = prefix+`"`, `"`+suffix
		}
		n := size - len(prefix) - len(suffix)
		return prefix + strings.Repeat(fill, n/len(fill)) + strings.Repeat("x", n%len(fill)) + suffix
	}
	columns := func(n int) string {
		names := []string{"store", "ean", "article_number", "quantity", "price"}
		for i := len(names); i < n; i++ {
			names = append(names, "x"+strconv.Itoa(i))
		}
		return strings.Join(names, ";") + "\n"
	}
	fields := func(n int) string { return "S1;4006381333931;A;1;1" + strings.Repeat(";", n-5) + "\n" }
	tests := []struct {
		name   string
		data   string
		line   int // 0: valid, with one row put
		fields bool
	}{
		{"a row of the most bytes", head + row(maxRecordBytes, false, "x"), 0, false},
		{"a row a byte longer", head + row(maxRecordBytes+1, false, "x"), 2, false},
		{"a quoted row of the most bytes, over many lines", head + row(maxRecordBytes, true, "a;b\r\n"), 0, false},
		{"a quoted row a byte longer, over many lines", head + row(maxRecordBytes+1, true, "a;b\r\n"), 2, false},
		{"separators inside quotes", head + row(8<<10, true, `;"";`), 0, false},
		{"a header and a row of the most fields", columns(maxFields) + fields(maxFields), 0, false},
		{"a header of a field more", columns(maxFields+1) + fields(maxFields+1), 1, true},
		{"a row of a field more", columns(maxFields) + fields(maxFields+1), 2, true},
		{"a record past the bounds after a long valid one", head + row(maxRecordBytes, false, "x") + fields(maxFields+1), 3, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for cut, r := range map[string]func() io.Reader{
				"whole":    func() io.Reader { return strings.NewReader(tt.data) },
				"one byte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(tt.data)) },
				"half":     func() io.Reader { return iotest.HalfReader(strings.NewReader(tt.data)) },
			} {
				rows := 0
				rep, err := Check(r(), testStores, func(storelink.StockRow) error { rows++; return nil })
				if err != nil {
					t.Fatal(err)
				}
				if tt.line > 0 {
					wantRecordError(t, rep, tt.line, tt.fields)
					continue
				}
				if rep.FileError || len(rep.Errors) > 0 || rows != 1 {
					t.Errorf("read %s: %d rows put, report %+v; want the row put", cut, rows, rep)
				}
			}
		})
	}
}

// TestParseHeaderUnknownColumns: the warning names the first unknown columns,
// each cut short, and counts the rest, so that its size does not follow the
// header's.
func TestParseHeaderUnknownColumns(t *testing.T) {
	names := []string{"store", "ean", "article_number", "quantity", "price"}
	for i := range 500 {
		names = append(names, strings.Repeat("y", 100)+strconv.Itoa(i))
	}
	data := strings.Join(names, ";") + "\n" + "S1;4006381333931;A;1;1" + strings.Repeat(";", 500) + "\n"
	rep, err := Check(strings.NewReader(data), testStores, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Warnings) != 1 || rep.Warnings[0].Type != storelink.ProblemUnknownColumns || rep.RowsValid != 1 {
		t.Fatalf("report %+v, want one valid row and the unknown columns warning", rep)
	}
	msg := rep.Warnings[0].Message
	if !strings.HasPrefix(msg, `Unknown columns, ignored: "`+strings.Repeat("y", maxRefValue)+`", "`) ||
		!strings.HasSuffix(msg, " and 480 more.") || len(msg) > 2<<10 {
		t.Errorf("warning of %d bytes: %q, want 20 names of %d bytes and \" and 480 more.\"", len(msg), msg, maxRefValue)
	}
}

// TestCheckManyBadRows: a file of bad rows costs what its rows are (the
// string encoding/csv makes per record, let go at once) and a report and
// error file of bounded size: 2 MiB and 16 MiB of them keep as much.
func TestCheckManyBadRows(t *testing.T) {
	const errorFileLimit = 256 << 10
	for _, bad := range []string{"=1;x;y;z;w\n", "a;b\n", "S9;4006381333931;A;1;1\n", "S1;4006381333931;A;1;1\n"} {
		var kept [2]uint64
		for i, size := range []int{2 << 20, 16 << 20} {
			data := []byte(limitHeader + strings.Repeat(bad, size/len(bad)))
			var rep storelink.FeedReport
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			total := allocated(func() {
				rep, _ = CheckWithErrorFile(bytes.NewReader(data), testStores, nil, errorFileLimit)
			})
			runtime.GC()
			runtime.ReadMemStats(&after)
			kept[i] = after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)
			if rep.RowsTotal != size/len(bad) {
				t.Fatalf("%q: %d rows, want %d", bad, rep.RowsTotal, size/len(bad))
			}
			if total > uint64(len(data))+4<<20 {
				t.Errorf("%q, %d MiB: %d bytes allocated, want at most the file and 4 MiB", bad, size>>20, total)
			}
			if len(rep.ErrorFile) > errorFileLimit+1<<10 {
				t.Errorf("%q, %d MiB: error file of %d bytes, limit %d", bad, size>>20, len(rep.ErrorFile), errorFileLimit)
			}
			for _, p := range append(rep.Errors, rep.Warnings...) {
				if len(p.LineNumbers) > storelink.MaxLineRefs {
					t.Errorf("%s: %d line refs", p.Type, len(p.LineNumbers))
				}
			}
		}
		if kept[1] > kept[0]+256<<10 {
			t.Errorf("%q: report and error file keep %d bytes for 2 MiB, %d for 16 MiB", bad, kept[0], kept[1])
		}
	}
}

// TestRecordLimiterModel holds the limiter's vectorised paths to a plain
// byte-by-byte model of the same rules, on random files with records near
// the bounds, read whole and in random pieces: the error names the first
// record past a bound, and what came through of it stays within the bounds.
func TestRecordLimiterModel(t *testing.T) {
	rnd := rand.New(rand.NewPCG(24, 1))
	for i := range 300 {
		data := randomRecords(rnd)
		want := modelLimit(data, ';')
		for _, cut := range []string{"whole", "pieces"} {
			var r io.Reader = bytes.NewReader(data)
			if cut == "pieces" {
				r = &piecesReader{data: data, rnd: rnd}
			}
			got, err := io.ReadAll(newRecordLimiter(r, ';'))
			if !bytes.Equal(got, data[:len(got)]) {
				t.Fatalf("file %d read %s: the bytes read are not the file's", i, cut)
			}
			var re *recordError
			if !errors.As(err, &re) {
				if err != nil || want.line != 0 || len(got) != len(data) {
					t.Fatalf("file %d read %s: %d of %d bytes, then %v; want %+v", i, cut, len(got), len(data), err, want)
				}
				continue
			}
			if want.line == 0 || re.line != want.line || !re.fields && !want.tooLong || re.fields && !want.tooMany {
				t.Fatalf("file %d read %s: %+v, want %+v", i, cut, *re, want)
			}
			if of := modelLimit(data[want.at:len(got)], ';'); len(got) < want.at || of.line != 0 {
				t.Fatalf("file %d read %s: %d bytes read, the record starts at %d; past the bounds within them: %+v", i, cut, len(got), want.at, of)
			}
		}
	}
}

// modelRecord is the first record past a bound: its offset and line (0 when
// none) and which bounds it is past.
type modelRecord struct {
	at, line         int
	tooLong, tooMany bool
}

// modelLimit applies the limiter's rules a byte at a time.
func modelLimit(data []byte, comma byte) modelRecord {
	var m modelRecord
	line, start, at, size, seps, quoted := 1, 1, 0, 0, 0, false
	for i, c := range data {
		size++
		switch {
		case c == '"':
			quoted = !quoted
		case c == comma && !quoted:
			seps++
		}
		if size > maxRecordBytes || seps >= maxFields {
			m = modelRecord{at: at, line: start, tooLong: m.tooLong || size > maxRecordBytes, tooMany: m.tooMany || seps >= maxFields}
		}
		if c == '\n' {
			line++
			if !quoted {
				if m.line != 0 {
					return m
				}
				start, at, size, seps = line, i+1, 0, 0
			}
		}
	}
	return m
}

// randomRecords makes a file of a few records of random length, density of
// separators and quoting, some of them near or past the bounds.
func randomRecords(rnd *rand.Rand) []byte {
	var b []byte
	for range 1 + rnd.IntN(8) {
		size, sepEvery := rnd.IntN(200), 1+rnd.IntN(80)
		switch rnd.IntN(4) {
		case 0:
			size = rnd.IntN(2 * maxRecordBytes)
		case 1: // at the bounds, give or take a byte or a field
			size = maxRecordBytes - 3 + rnd.IntN(5)
			if rnd.IntN(2) == 0 {
				size, sepEvery = maxFields-3+rnd.IntN(5), 1
			}
		}
		quoteEvery := 0
		if rnd.IntN(2) == 0 {
			quoteEvery = 1 + rnd.IntN(4000)
		}
		for j := range size {
			switch {
			case quoteEvery > 0 && rnd.IntN(quoteEvery) == 0:
				b = append(b, '"')
			case j%sepEvery == 0:
				b = append(b, ';')
			case sepEvery > 1 && rnd.IntN(200) == 0:
				b = append(b, '\n')
			default:
				b = append(b, 'x')
			}
		}
		b = append(b, '\n')
	}
	return b
}

// piecesReader returns data in pieces of random size.
type piecesReader struct {
	data []byte
	rnd  *rand.Rand
}

func (r *piecesReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 1+r.rnd.IntN(3*maxFields))], r.data)
	r.data = r.data[n:]
	return n, nil
}
