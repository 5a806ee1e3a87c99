package feed

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"sync"
	"testing"

	"storelink"
)

// A feed of the size the service is built for: about 10 MiB, 170k rows over
// 50 stores, every store and EAN once. Made once and shared by the
// benchmarks, so that Check and the raw CSV baseline read the same bytes.
const (
	benchRows   = 170_000
	benchStores = 50
)

var benchFeed = sync.OnceValues(func() ([]byte, map[string]bool) {
	stores := make(map[string]bool, benchStores)
	for s := range benchStores {
		stores[benchStoreID(s)] = true
	}
	perStore := benchRows / benchStores
	eans := make([]string, perStore)
	for i := range eans {
		eans[i] = makeEAN(i)
	}
	var b bytes.Buffer
	b.WriteString("store;ean;article_number;quantity;price;retail_price;store_article_location\n")
	for i := range benchRows {
		s, e := i/perStore, i%perStore
		fmt.Fprintf(&b, "%s;%s;ART-%06d;%d;%d.%02d;%d.99;A%d-S%d\n",
			benchStoreID(s), eans[e], e, i%500, 10+i%90, i%100, 100+i%90, i%20, i%7)
	}
	return b.Bytes(), stores
})

func benchStoreID(i int) string { return "STORE-" + strconv.Itoa(100+i) }

// BenchmarkCheck measures the whole of Check: decoding, parsing, the checks
// and the put call per row. Compare its MB/s with BenchmarkRawCSV.
func BenchmarkCheck(b *testing.B) {
	data, stores := benchFeed()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		rep, err := Check(bytes.NewReader(data), stores, func(storelink.StockRow) error {
			n++
			return nil
		})
		if err != nil || n != benchRows {
			b.Fatalf("Check: %v, %d rows put, report %+v", err, n, rep)
		}
	}
	b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkCheckQuoted is BenchmarkCheck on the same feed with every field
// quoted, as some exporters write it: the quotes take the slower paths of
// encoding/csv and of the record bounds.
func BenchmarkCheckQuoted(b *testing.B) {
	data, stores := benchFeedQuoted()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		rep, err := Check(bytes.NewReader(data), stores, func(storelink.StockRow) error {
			n++
			return nil
		})
		if err != nil || n != benchRows {
			b.Fatalf("Check: %v, %d rows put, report %+v", err, n, rep)
		}
	}
	b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

var benchFeedQuoted = sync.OnceValues(func() ([]byte, map[string]bool) {
	data, stores := benchFeed()
	var b bytes.Buffer
	for line := range bytes.Lines(data) {
		b.WriteByte('"')
		b.Write(bytes.ReplaceAll(bytes.TrimSuffix(line, []byte{'\n'}), []byte{';'}, []byte(`";"`)))
		b.WriteString("\"\n")
	}
	return b.Bytes(), stores
})

// BenchmarkRawCSV is the baseline: encoding/csv reading the same bytes with
// the same settings and doing nothing with them. Check cannot be faster.
func BenchmarkRawCSV(b *testing.B) {
	data, _ := benchFeed()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r := csv.NewReader(bytes.NewReader(data))
		r.Comma = ';'
		r.FieldsPerRecord = -1
		r.ReuseRecord = true
		r.TrimLeadingSpace = true
		n := 0
		for {
			_, err := r.Read()
			if err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != benchRows+1 {
			b.Fatalf("%d records", n)
		}
	}
	b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// TestCheckAllocs guards the hot path: a valid row may cost the one string
// encoding/csv makes per record, and little else.
func TestCheckAllocs(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("store;ean;article_number;quantity;price;retail_price\n")
	const rows = 2000
	for i := range rows {
		fmt.Fprintf(&b, "S1;%s;A-%d;%d;9.99;19.99\n", makeEAN(i), i, i)
	}
	data := b.Bytes()
	allocs := testing.AllocsPerRun(5, func() {
		Check(bytes.NewReader(data), testStores, func(storelink.StockRow) error { return nil })
	})
	t.Logf("%.3f allocations per row", allocs/rows)
	if perRow := allocs / rows; perRow > 1.3 {
		t.Errorf("%.2f allocations per row, want at most 1.3", perRow)
	}
}

// BenchmarkRecordLimiter measures the record bounds alone on the plain and
// the quoted feed: their share of BenchmarkCheck.
func BenchmarkRecordLimiter(b *testing.B) {
	for name, feed := range map[string]func() ([]byte, map[string]bool){"plain": benchFeed, "quoted": benchFeedQuoted} {
		b.Run(name, func(b *testing.B) {
			data, _ := feed()
			b.SetBytes(int64(len(data)))
			buf := make([]byte, rawBufSize)
			for b.Loop() {
				l := newRecordLimiter(bytes.NewReader(data), ';')
				if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{l}, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
