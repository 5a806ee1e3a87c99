package worker

import (
	"runtime"
	"strings"
	"testing"

	"storelink"
)

// TestCheckInBackgroundRecordBound: the processor's check holds one bounded
// record whatever the file, as feed.Check does: a file of one line of
// separators, or one quoted field over many lines, costs the same few hundred
// KiB at 2 and 16 MiB (beyond the body, which is the processor's already),
// and is rejected with a CSV File Error naming the line.
func TestCheckInBackgroundRecordBound(t *testing.T) {
	const header = "store;ean;article_number;quantity;price\n"
	for _, tt := range []struct {
		name string
		make func(size int) string
		want string
	}{
		{"a line of separators", func(n int) string { return header + strings.Repeat(";", n) + "\n" },
			"The row starting on line 2 has more than 1024 fields"},
		{"a quoted field over many lines", func(n int) string {
			return header + "S1;\"" + strings.Repeat("ab;\n", n/4) + "\";A;1;1\n"
		}, "The row starting on line 2 is longer than 64 KiB"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, size := range []int{2 << 20, 16 << 20} {
				body := []byte(tt.make(size))
				puts := 0
				var rep storelink.FeedReport
				var err error
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				rep, err = checkInBackground(storelink.ChunksOf(body), checkStores, func(storelink.StockRow) error { puts++; return nil })
				runtime.ReadMemStats(&after)
				if err != nil {
					t.Fatal(err)
				}
				n := after.TotalAlloc - before.TotalAlloc
				t.Logf("%d MiB: %d KiB allocated", size>>20, n>>10)
				if n > 2<<20 {
					t.Errorf("%d MiB: the check allocated %d bytes, want at most 2 MiB whatever the size", size>>20, n)
				}
				if !rep.FileError || len(rep.Errors) != 1 || rep.Errors[0].Type != storelink.ProblemFile ||
					!strings.HasPrefix(rep.Errors[0].Message, tt.want) || puts != 0 || !strings.Contains(string(rep.ErrorFile), tt.want) {
					t.Errorf("%d MiB: %d rows put, report %+v; want the file rejected: %q", size>>20, puts, rep, tt.want)
				}
			}
		})
	}
}

// An error file may be twice its file, at least 1 MiB and at most 2 MiB:
// a large file of bad rows does not make an error file of tens of
// megabytes inside the apply's transaction.
func TestErrorFileLimit(t *testing.T) {
	for size, want := range map[int64]int{0: 1 << 20, 100: 1 << 20, 600 << 10: 1200 << 10, 1 << 20: 2 << 20, 10 << 20: 2 << 20} {
		if got := errorFileLimit(size); got != want {
			t.Errorf("errorFileLimit(%d) = %d, want %d", size, got, want)
		}
	}
}
