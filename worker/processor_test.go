package worker

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"storelink"
	"storelink/feed"
)

// checkFeed is a feed of n rows over three stores with retail prices,
// repeated keys, rows with problems and, when badAt > 0, bytes that are not
// UTF-8 on that row: the file is then rejected after rows were put.
func checkFeed(n, badAt int) []byte {
	var b strings.Builder
	b.WriteString("store;ean;article_number;quantity;price;retail_price\n")
	eans := []string{"4006381333931", "4000417025005", "4005500006100", "96385074", "012345678905"}
	for i := 1; i <= n; i++ {
		store := fmt.Sprintf("S%d", i%3+1)
		switch {
		case i == badAt:
			b.WriteString("S1;4006381333931;A\xff;1;1.00;1.00\n")
		case i%97 == 0:
			fmt.Fprintf(&b, "S9;%s;A-%d;1;1.00;\n", eans[i%len(eans)], i) // unknown store
		case i%89 == 0:
			fmt.Fprintf(&b, "%s;%s;A-%d;1;2.00;1.50\n", store, eans[i%len(eans)], i) // retail below price
		default:
			// 1000 EANs over 3 stores: keys repeat, and a later row wins.
			fmt.Fprintf(&b, "%s;%s;A-%d;%d;%d.%02d;%d.99\n", store, ean13(i%1000), i, i%50, 1+i%200, i%100, 201+i%300)
		}
	}
	return []byte(b.String())
}

// ean13 is a valid EAN-13 made from n.
func ean13(n int) string {
	s := fmt.Sprintf("400%09d", n)
	sum := 0
	for i := range 12 {
		d := int(s[i] - '0')
		if i%2 == 1 {
			d *= 3
		}
		sum += d
	}
	return s + fmt.Sprint((10-sum%10)%10)
}

var checkStores = map[string]bool{"S1": true, "S2": true, "S3": true}

// rowValue is a row with its retail price read, so that rows kept from
// different calls compare by value.
type rowValue struct {
	storelink.StockRow
	Retail storelink.Money
}

func values(rows []storelink.StockRow) []rowValue {
	out := make([]rowValue, len(rows))
	for i, r := range rows {
		out[i] = rowValue{StockRow: r}
		out[i].RetailPrice = nil
		if r.RetailPrice != nil {
			out[i].Retail = *r.RetailPrice
		}
	}
	return out
}

// checkInBackground must put exactly what feed.Check puts, in the same order, and
// report the same; the rows are compared after the whole file, so a row
// whose memory the check reused would show.
func TestCheckInBackgroundPutsWhatCheckPuts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rows     int
		badAt    int
		fileErr  bool
		wantRows bool
	}{
		{"empty", 0, 0, true, false},
		{"less than a batch", checkBatch - 1, 0, false, true},
		{"exactly a batch", checkBatch, 0, false, true},
		{"many batches", 10*checkBatch + 7, 0, false, true},
		{"file error after rows were put", 5*checkBatch + 3, 4 * checkBatch, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := checkFeed(tc.rows, tc.badAt)
			var direct, ahead []storelink.StockRow
			wantReport, err := feed.CheckWithErrorFile(bytes.NewReader(body), checkStores, func(r storelink.StockRow) error {
				direct = append(direct, r)
				return nil
			}, errorFileLimit(int64(len(body))))
			if err != nil {
				t.Fatal(err)
			}
			wantRows := values(direct) // read now, before anything could reuse memory
			report, err := checkInBackground(storelink.ChunksOf(body), checkStores, func(r storelink.StockRow) error {
				ahead = append(ahead, r)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(report, wantReport) {
				t.Errorf("report:\n got %+v\nwant %+v", report, wantReport)
			}
			if report.FileError != tc.fileErr || (len(ahead) > 0) != tc.wantRows {
				t.Errorf("file error %v with %d rows put; want %v, rows %v", report.FileError, len(ahead), tc.fileErr, tc.wantRows)
			}
			if got := values(ahead); !reflect.DeepEqual(got, wantRows) {
				t.Errorf("put %d rows, want %d; first difference at %d", len(got), len(wantRows), firstDiff(got, wantRows))
			}
		})
	}
}

func firstDiff(a, b []rowValue) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// An error of put ends the apply at once: put is not called again, the error
// comes back with the row's line, and the checking goroutine ends.
func TestCheckInBackgroundPutError(t *testing.T) {
	before := runtime.NumGoroutine()
	boom := errors.New("disk full")
	calls := 0
	_, err := checkInBackground(storelink.ChunksOf(checkFeed(20*checkBatch, 0)), checkStores, func(r storelink.StockRow) error {
		calls++
		if calls == 3*checkBatch+5 {
			return boom
		}
		if calls > 3*checkBatch+5 {
			t.Fatal("put called after it failed")
		}
		return nil
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "line ") {
		t.Fatalf("err = %v, want %v with the line", err, boom)
	}
	waitGoroutines(t, before)
}

// A panic of put goes up to the caller, as it did when Check called put
// directly (the processor turns it into an error), and the checking
// goroutine does not stay blocked behind it.
func TestCheckInBackgroundPutPanic(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		defer func() {
			if r := recover(); r != "put broke" {
				t.Fatalf("recovered %v, want the panic of put", r)
			}
		}()
		calls := 0
		_, _ = checkInBackground(storelink.ChunksOf(checkFeed(20*checkBatch, 0)), checkStores, func(storelink.StockRow) error {
			if calls++; calls == 2*checkBatch {
				panic("put broke")
			}
			return nil
		})
	}()
	waitGoroutines(t, before)
}

func waitGoroutines(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > want {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, want %d: the checker did not end", runtime.NumGoroutine(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
