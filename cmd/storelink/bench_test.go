package main

// The stock-import benchmarks of issues 2 and 15. They measure the whole
// path (HTTP PUT, accept, process, apply) against a separate `storelink
// serve` process, and in the same run the bare upserts of the same rows:
//
//   - the raw Go baseline (issue 2): a bare SQLite table of the stock
//     table's shape and pragmas, through the same Go SQLite library, by
//     batched multi-row INSERT … ON CONFLICT in one transaction, at the
//     fastest batch size;
//   - the C baseline (issue 15, bench_csqlite_test.go): the same table
//     through the C SQLite library (python3's sqlite3), one upsert run for
//     every row in one transaction. Without python3 the benchmark says so
//     and skips the ratios to it; it installs nothing.
//
// Run it with bench/stock-import, or
//
//	go test ./cmd/storelink -run '^$' -bench '^BenchmarkStockImport$' -benchtime 5x
//
// The 10 MiB feed (168,928 rows over 50 stores) is first imported into an
// empty table (against the C baseline: target ≥ 0.4). Then each of the N
// rounds imports a feed that changes every row (against the raw Go
// baseline: target ≥ 0.7), and that feed again with one row in 50 given
// another quantity (against the C baseline: target ≥ 1.0, since the rows a
// feed holds as they are cost only a comparison); every import checks
// rows_unchanged. N x 21 uploads of a 100-row feed follow. A ratio is the
// median of the per-import ratios, so that both sides of a pair see the same
// load on the machine. The targets (and a 10 MiB feed applied within 2 s of
// its 200 under 100 MiB peak RSS, a 100-row feed within 200 ms median) are
// printed next to the figures, MET or MISSED; a benchmark never fails on
// speed.
//
// BenchmarkStockApply runs accept, claim and apply in this process, for
// `go test -cpuprofile` (STORELINK_BENCH_RESEND=1: of the feed sent again
// with one row in 50 changed; STORELINK_BENCH_FIRST=1: of the first import,
// each into an empty database; STORELINK_BENCH_ORDER: in another row order
// of feedOrders, such as "shuffled"); the serve process itself can be profiled
// with `perf record -g -p PID`.

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"storelink"
	"storelink/service"
	"storelink/sqlite" // also registers the "sqlite" driver the baseline uses
	"storelink/worker"
)

const (
	benchStores       = 50
	benchCatalog      = 8000     // products a store may carry
	benchCarried      = 43       // percent of the catalogue each store carries
	benchFeedBytes    = 10 << 20 // the largest file the default --max-file-size takes
	benchSmallRows    = 100
	benchSmallUploads = 21

	// bigPoll is how often the status of a 10 MiB upload is polled. A poll
	// costs the server about 0.3 ms of CPU, which it takes from the apply:
	// every 2 ms would slow the import it measures by several percent, every
	// 5 ms adds at most 5 ms to an import of about a second.
	bigPoll = 5 * time.Millisecond
)

// benchRow is one feed row as the generator made it: what the baseline
// binds, without parsing.
type benchRow struct {
	store, ean, article string
	qty                 int
	price, retail       int64 // cents
	location            string
}

// benchFeedData is a generated feed: the CSV bytes and the same rows.
type benchFeedData struct {
	csv  []byte
	rows []benchRow
}

// mix is SplitMix64: a fixed, fast hash, so the feed is the same on every run.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// benchEAN is the EAN-13 of product p: a German GS1 prefix, the product
// number and the GS1 check digit.
func benchEAN(p int) string {
	body := fmt.Sprintf("40%010d", 1_000_003+p*7919)
	sum := 0
	for i := range 12 { // weights 1,3,1,3… from the left for 13 digits
		d := int(body[i] - '0')
		if i%2 == 1 {
			d *= 3
		}
		sum += d
	}
	return body + strconv.Itoa((10-sum%10)%10)
}

func cents(c int64) string { return fmt.Sprintf("%d.%02d", c/100, c%100) }

// benchFeed generates a feed of up to maxBytes and maxRows: stores S01…S50
// in turn, each with the part of the catalogue it carries, one row per store
// and EAN. variant changes quantities, prices and locations but no key, so
// that successive imports of different variants update every row.
func benchFeed(maxBytes, maxRows int, variant uint64) benchFeedData {
	var buf bytes.Buffer
	buf.WriteString("store;ean;article_number;quantity;price;retail_price;store_article_location\n")
	var rows []benchRow
	line := make([]byte, 0, 128)
	for s := 1; s <= benchStores; s++ {
		store := fmt.Sprintf("S%02d", s)
		for p := range benchCatalog {
			if mix(uint64(s)<<32|uint64(p))%100 >= benchCarried {
				continue
			}
			h := mix(variant<<48 ^ uint64(s)<<32 ^ uint64(p) ^ 0x5eed)
			r := benchRow{
				store:   store,
				ean:     benchEAN(p),
				article: fmt.Sprintf("ART-%06d", 100_000+p*37%900_000),
				qty:     int(h % 40),
				price:   int64(99 + mix(uint64(p))%29_900 + h>>20%50), // 0.99 … 299.99, a little per store
			}
			switch {
			case h%10 < 2:
				r.qty = 0 // sold out
			case h%10 == 9:
				r.qty = int(h >> 8 % 1000)
			}
			r.retail = r.price
			if h>>12%3 != 0 {
				r.retail += r.price * int64(h>>16%60) / 100
			}
			r.location = fmt.Sprintf("Aisle %02d Shelf %d", 1+h>>24%40, 1+h>>32%6)
			line = r.appendCSV(line[:0])
			if buf.Len()+len(line) > maxBytes || len(rows) == maxRows {
				return benchFeedData{csv: buf.Bytes(), rows: rows}
			}
			buf.Write(line)
			rows = append(rows, r)
		}
	}
	return benchFeedData{csv: buf.Bytes(), rows: rows}
}

func (r benchRow) appendCSV(line []byte) []byte {
	return fmt.Appendf(line, "%s;%s;%s;%d;%s;%s;%s\n", r.store, r.ean, r.article, r.qty,
		cents(r.price), cents(r.retail), r.location)
}

// benchChanged is f with the quantity of about one row in every changed
// rows different, picked by variant: the same full feed sent again after a
// few articles sold or arrived.
func benchChanged(f benchFeedData, every int, variant uint64) benchFeedData {
	rows := slices.Clone(f.rows)
	var buf bytes.Buffer
	buf.Grow(len(f.csv) + len(f.csv)/100)
	buf.WriteString("store;ean;article_number;quantity;price;retail_price;store_article_location\n")
	line := make([]byte, 0, 128)
	for i := range rows {
		if mix(variant<<40^uint64(i))%uint64(every) == 0 {
			// Another quantity of as many digits: the file keeps its size.
			lo, hi := 0, 10
			for hi <= rows[i].qty {
				lo, hi = hi, hi*10
			}
			rows[i].qty = lo + (rows[i].qty-lo+1+int(variant%7))%(hi-lo)
		}
		buf.Write(rows[i].appendCSV(line[:0]))
	}
	return benchFeedData{csv: buf.Bytes(), rows: rows}
}

// importResult is one measured import.
type importResult struct {
	rows       int
	total      time.Duration // start of the PUT (or BEGIN) to applied (or end of COMMIT)
	put        time.Duration // start of the PUT to its 200
	after200   time.Duration // the 200 to the first poll that saw "applied"
	queued     time.Duration // server clock: received_at to started_at
	processing time.Duration // server clock: started_at to finished_at
	cpu        time.Duration // CPU time the serve process (or this one, for the baseline) spent
}

func (r importResult) rowsPerSec() float64 { return float64(r.rows) / r.total.Seconds() }

// bigFigures is what the 10 MiB benchmark hands to the summary.
type bigFigures struct {
	ok                bool
	rows, bytes       int
	first, firstRaw   importResult // the imports into an empty table
	batch             int          // the baseline's fastest batch size
	rate, rawRate     float64      // medians, rows/s
	ratio             float64      // median of the per-import ratios
	cpu, rawCPU       time.Duration
	after200, max200  time.Duration
	peakRSS           float64 // MiB, VmHWM of the serve process
	loadBefore, after string

	// Issue 15: against the C library (nil c when it is missing).
	c                    string // the C library's version, or why there is none
	firstC               importResult
	resent, resentC      float64 // medians, rows/s, of the re-sent feed and its C baseline
	resentRatio          float64 // median of the per-import ratios
	changedC, changedRat float64 // every row changed: the C baseline's median rows/s, the whole path's ratio to it
	resentCPU, resentCCP time.Duration
	changedRows          int // rows of a re-sent feed that differ
	resent200            time.Duration
}

// smallFigures is what the 100-row benchmark hands to the summary.
type smallFigures struct {
	ok               bool
	n                int
	median, p90, max time.Duration
}

// BenchmarkStockImport is the benchmark of issues 2 and 15; see the top of
// the file.
func BenchmarkStockImport(b *testing.B) {
	var big bigFigures
	var small smallFigures
	b.Run("10MiB", func(b *testing.B) { big = benchBig(b) })
	b.Run("100rows", func(b *testing.B) { small = benchSmall(b) })
	var orders []orderFigures
	b.Run("roworders", func(b *testing.B) { orders = benchRowOrders(b) })

	fmt.Println("--- stock import (issues 2 and 15) ---")
	if big.ok {
		// The line bench/ab reads, e.g. bench/ab A B 3 BenchmarkStockImport 'rows/s every'.
		fmt.Printf("run 1: %.0f rows/s every row changed, %.0f rows/s first import, %.0f rows/s re-sent, %d ms applied after its 200, %.1f MiB peak RSS\n",
			big.rate, big.first.rowsPerSec(), big.resent, big.after200.Milliseconds(), big.peakRSS)
	}
	if big.ok {
		fmt.Printf("feed: %d bytes, %d rows over %d stores; machine load average before %s, after %s\n",
			big.bytes, big.rows, benchStores, big.loadBefore, big.after)
		fmt.Printf("every row changed, whole path (PUT to applied):  %7.0f rows/s   (serve CPU %.2f s per import)\n", big.rate, big.cpu.Seconds())
		fmt.Printf("  raw Go SQLite baseline (batch %4d):           %7.0f rows/s   (CPU %.2f s per import)\n", big.batch, big.rawRate, big.rawCPU.Seconds())
		fmt.Printf("  ratio whole path / raw Go SQLite:              %7.3f          target >= 0.70: %s\n", big.ratio, verdict(big.ratio >= 0.7))
		fmt.Printf("10 MiB applied after its 200: %7d ms median, %d ms max; target <= 2000 ms: %s\n",
			big.after200.Milliseconds(), big.max200.Milliseconds(), verdict(big.after200 <= 2*time.Second))
		fmt.Printf("peak RSS of storelink serve (10 MiB applies):  %7.1f MiB; target < 100 MiB: %s\n", big.peakRSS, verdict(big.peakRSS < 100))
		if big.firstC.rows == 0 {
			fmt.Printf("C SQLite baseline: none: %s\n", big.c)
			fmt.Printf("first import into an empty table: whole path %.0f rows/s\n", big.first.rowsPerSec())
			fmt.Printf("re-sent feed (%d of %d rows changed): whole path %.0f rows/s, applied %d ms after its 200\n",
				big.changedRows, big.rows, big.resent, big.resent200.Milliseconds())
		} else {
			firstRatio := big.first.rowsPerSec() / big.firstC.rowsPerSec()
			fmt.Printf("C SQLite baseline: SQLite %s through python3's sqlite3, executemany of one upsert, one transaction\n", big.c)
			fmt.Printf("first import into an empty table: whole path %7.0f rows/s, C baseline %7.0f rows/s, ratio %.3f; target >= 0.40: %s\n",
				big.first.rowsPerSec(), big.firstC.rowsPerSec(), firstRatio, verdict(firstRatio >= 0.4))
			fmt.Printf("re-sent feed (%d of %d rows changed): whole path %7.0f rows/s, C baseline %7.0f rows/s, ratio %.3f; target >= 1.00: %s\n",
				big.changedRows, big.rows, big.resent, big.resentC, big.resentRatio, verdict(big.resentRatio >= 1))
			fmt.Printf("  re-sent: applied %d ms after its 200 (median); serve CPU %.2f s, C baseline CPU %.2f s per import\n",
				big.resent200.Milliseconds(), big.resentCPU.Seconds(), big.resentCCP.Seconds())
			fmt.Printf("every row changed against the C baseline: %.0f rows/s, ratio %.3f (no target)\n", big.changedC, big.changedRat)
		}
	}
	if orders != nil {
		printRowOrders("stock import on SQLite against the C baseline of the same rows in the same order", orders, 0.5, 1.2)
	}
	if small.ok {
		fmt.Printf("%d-row feed applied after its 200 (%d uploads): median %.1f ms, p90 %.1f ms, max %.1f ms; target median <= 200 ms: %s\n",
			benchSmallRows, small.n, ms(small.median), ms(small.p90), ms(small.max), verdict(small.median <= 200*time.Millisecond))
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func verdict(met bool) string {
	if met {
		return "MET"
	}
	return "MISSED"
}

// benchServer is a serve process with the 50 stores registered.
type benchServer struct {
	*proc
	client *http.Client
}

func startBenchServer(b *testing.B) *benchServer {
	b.Helper()
	return newBenchServer(b, startServe(b, b.TempDir(), "--demo", "--capacity-base", "1GiB"))
}

// newBenchServer registers the 50 stores on the demo client of p, a serve
// process started with --demo.
func newBenchServer(b *testing.B, p *proc) *benchServer {
	b.Helper()
	if p.ClientID == "" || p.APIKey == "" || p.AdminToken == "" {
		b.Fatalf("serve printed no demo credentials or admin token:\n%s", p.stdout)
	}
	s := &benchServer{proc: p, client: &http.Client{Timeout: time.Minute}}
	for i := 1; i <= benchStores; i++ {
		body := strings.NewReader(fmt.Sprintf(`{"name":"Bench Store %02d"}`, i))
		req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("%s/admin/clients/%s/stores/S%02d", p.URL, p.ClientID, i), body)
		req.Header.Set("Authorization", "Bearer "+p.AdminToken)
		req.Header.Set("Content-Type", "application/json")
		code, v := doJSON(b, req)
		if code != http.StatusOK && code != http.StatusCreated {
			b.Fatalf("register store S%02d: %d %v", i, code, v)
		}
	}
	return s
}

type benchStatus struct {
	Status        string     `json:"status"`
	RowsApplied   int        `json:"rows_applied"`
	RowsUnchanged int        `json:"rows_unchanged"`
	RowsRejected  int        `json:"rows_rejected"`
	ReceivedAt    time.Time  `json:"received_at"`
	StartedAt     *time.Time `json:"started_at"`
	FinishedAt    *time.Time `json:"finished_at"`
	Errors        []any      `json:"errors"`
}

// importFeed PUTs one feed, polls its status every poll until it is final,
// and checks that every row was applied.
func (s *benchServer) importFeed(b *testing.B, name string, f benchFeedData, poll time.Duration) importResult {
	return s.importFeedUnchanged(b, name, f, poll, -1)
}

// importFeedUnchanged is importFeed that also checks rows_unchanged, when
// unchanged is not negative.
func (s *benchServer) importFeedUnchanged(b *testing.B, name string, f benchFeedData, poll time.Duration, unchanged int) importResult {
	b.Helper()
	req, _ := http.NewRequest(http.MethodPut, s.URL+"/stock/"+s.ClientID+"/"+name, bytes.NewReader(f.csv))
	req.Header.Set("x-api-key", s.APIKey)
	req.Header.Set("Content-Type", "application/csv")
	cpu := cpuTime(b, s.PID())
	start := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		b.Fatalf("PUT %s: %v", name, err)
	}
	got200 := time.Now()
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("PUT %s: %d %s", name, resp.StatusCode, body)
	}
	var accepted struct {
		StatusURL string `json:"status_url"`
	}
	if err := json.Unmarshal(body, &accepted); err != nil || accepted.StatusURL == "" {
		b.Fatalf("PUT %s: no status_url in %s", name, body)
	}
	statusReq, _ := http.NewRequest(http.MethodGet, s.URL+accepted.StatusURL, nil)
	statusReq.Header.Set("x-api-key", s.APIKey)
	deadline := got200.Add(time.Minute)
	var st benchStatus
	for {
		resp, err := s.client.Do(statusReq)
		if err != nil {
			b.Fatalf("GET %s: %v", accepted.StatusURL, err)
		}
		st = benchStatus{}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d %v", accepted.StatusURL, resp.StatusCode, err)
		}
		if st.Status == "applied" || st.Status == "rejected" {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("upload %s still %s a minute after its 200", name, st.Status)
		}
		time.Sleep(poll)
	}
	applied := time.Now()
	if st.Status != "applied" || st.RowsApplied != len(f.rows) || st.RowsRejected != 0 {
		b.Fatalf("upload %s: %s, %d of %d rows applied, %d rejected: %v\nserver log:\n%s",
			name, st.Status, st.RowsApplied, len(f.rows), st.RowsRejected, st.Errors, tail(s.stderr.String(), 4000))
	}
	if unchanged >= 0 && st.RowsUnchanged != unchanged {
		b.Fatalf("upload %s: rows_unchanged %d, want %d", name, st.RowsUnchanged, unchanged)
	}
	r := importResult{rows: st.RowsApplied, total: applied.Sub(start), put: got200.Sub(start), after200: applied.Sub(got200),
		cpu: cpuTime(b, s.PID()) - cpu}
	if st.StartedAt != nil && st.FinishedAt != nil {
		r.queued, r.processing = st.StartedAt.Sub(st.ReceivedAt), st.FinishedAt.Sub(*st.StartedAt)
	}
	return r
}

func tail(s string, n int) string { return s[max(len(s)-n, 0):] }

// procStatus reads one "Name: value kB" line of /proc/PID/status, in MiB.
func procStatus(b *testing.B, pid int, name string) float64 {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				b.Fatalf("%s %q: %v", name, v, err)
			}
			return float64(kb) / 1024
		}
	}
	b.Fatalf("no %s in /proc/%d/status", name, pid)
	return 0
}

// cpuTime is the user and system time a process has used, from
// /proc/PID/stat (clock ticks of 10 ms).
func cpuTime(b *testing.B, pid int) time.Duration {
	b.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	_, rest, _ := bytes.Cut(stat, []byte(") ")) // the command name may hold spaces
	f := strings.Fields(string(rest))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, stat)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func loadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// benchBig imports the 10 MiB feed through the whole path and, right after
// each, upserts the same rows into the bare tables, so that both see the same
// machine: the figure that counts is the ratio of each pair. First the feed
// goes into an empty table; then each round sends a feed that changes every
// row (against the raw Go SQLite upsert, and the C one) and the same feed
// again with one row in 50 changed (against the C upsert).
func benchBig(b *testing.B) bigFigures {
	fig := bigFigures{loadBefore: loadAverage()}
	feeds := [3]benchFeedData{}
	for v := range feeds {
		feeds[v] = benchFeed(benchFeedBytes, -1, uint64(v))
	}
	fig.rows, fig.bytes = len(feeds[0].rows), len(feeds[0].csv)
	s := startBenchServer(b)
	raw := openBaseline(b)
	c, why := openCBaseline(b)
	fig.c = why
	if c != nil {
		fig.c = c.version
	}

	// unchanged tells how many rows of a feed the server should find
	// unchanged, from the stock it holds.
	unchanged := heldStock{}.unchanged
	fig.first = s.importFeedUnchanged(b, "first.csv", feeds[0], bigPoll, unchanged(feeds[0]))
	fig.firstRaw = raw.upsert(b, feeds[0].rows, 500)
	if c != nil {
		fig.firstC = c.upsert(b, feeds[0].rows)
	}
	b.Logf("first import (empty table): whole path %.0f rows/s (PUT %d ms, applied %d ms after the 200), raw Go baseline %.0f rows/s, C baseline %.0f rows/s",
		fig.first.rowsPerSec(), fig.first.put.Milliseconds(), fig.first.after200.Milliseconds(), fig.firstRaw.rowsPerSec(), fig.firstC.rowsPerSec())
	fig.batch = raw.fastestBatch(b, feeds[1].rows, feeds[2].rows)

	var whole, base, resent, resentC, changedC []importResult
	var ratios, resentRatios, changedRatios []float64
	i := 0
	for b.Loop() {
		f := feeds[1+i%2]
		w := s.importFeedUnchanged(b, fmt.Sprintf("feed-%d.csv", i), f, bigPoll, unchanged(f))
		r := raw.upsert(b, f.rows, fig.batch)
		whole, base = append(whole, w), append(base, r)
		ratios = append(ratios, w.rowsPerSec()/r.rowsPerSec())
		b.Logf("import %d, every row changed: whole path %.0f rows/s (PUT %d ms, applied %d ms after the 200; server: queued %d ms, processing %d ms; CPU %.2f s) | raw Go baseline %.0f rows/s (CPU %.2f s) | ratio %.2f",
			i+1, w.rowsPerSec(), w.put.Milliseconds(), w.after200.Milliseconds(), w.queued.Milliseconds(), w.processing.Milliseconds(),
			w.cpu.Seconds(), r.rowsPerSec(), r.cpu.Seconds(), ratios[i])

		again := benchChanged(f, 50, uint64(i+1))
		fig.changedRows = 0
		for j := range again.rows {
			if again.rows[j] != f.rows[j] {
				fig.changedRows++
			}
		}
		if c != nil {
			cr := c.upsert(b, f.rows)
			changedC, changedRatios = append(changedC, cr), append(changedRatios, w.rowsPerSec()/cr.rowsPerSec())
		}
		w = s.importFeedUnchanged(b, fmt.Sprintf("again-%d.csv", i), again, bigPoll, unchanged(again))
		resent = append(resent, w)
		line := fmt.Sprintf("import %d, the same with %d rows changed: whole path %.0f rows/s (PUT %d ms, applied %d ms after the 200; server: queued %d ms, processing %d ms; CPU %.2f s)",
			i+1, fig.changedRows, w.rowsPerSec(), w.put.Milliseconds(), w.after200.Milliseconds(), w.queued.Milliseconds(), w.processing.Milliseconds(), w.cpu.Seconds())
		if c != nil {
			cr := c.upsert(b, again.rows)
			resentC, resentRatios = append(resentC, cr), append(resentRatios, w.rowsPerSec()/cr.rowsPerSec())
			line += fmt.Sprintf(" | C baseline %.0f rows/s (CPU %.2f s) | ratio %.2f", cr.rowsPerSec(), cr.cpu.Seconds(), resentRatios[i])
		}
		b.Log(line)
		i++
	}
	fig.peakRSS = procStatus(b, s.PID(), "VmHWM")
	fig.rate = median(whole, importResult.rowsPerSec)
	fig.rawRate = median(base, importResult.rowsPerSec)
	fig.ratio = medianOf(ratios)
	fig.cpu = time.Duration(median(whole, func(r importResult) float64 { return float64(r.cpu) }))
	fig.rawCPU = time.Duration(median(base, func(r importResult) float64 { return float64(r.cpu) }))
	fig.after200 = time.Duration(median(whole, func(r importResult) float64 { return float64(r.after200) }))
	for _, w := range whole {
		fig.max200 = max(fig.max200, w.after200)
	}
	fig.resent = median(resent, importResult.rowsPerSec)
	fig.resent200 = time.Duration(median(resent, func(r importResult) float64 { return float64(r.after200) }))
	fig.resentCPU = time.Duration(median(resent, func(r importResult) float64 { return float64(r.cpu) }))
	if c != nil {
		fig.resentC = median(resentC, importResult.rowsPerSec)
		fig.resentCCP = time.Duration(median(resentC, func(r importResult) float64 { return float64(r.cpu) }))
		fig.resentRatio = medianOf(resentRatios)
		fig.changedC = median(changedC, importResult.rowsPerSec)
		fig.changedRat = medianOf(changedRatios)
		b.ReportMetric(fig.resentRatio, "resent-ratio-C")
		b.ReportMetric(fig.first.rowsPerSec()/fig.firstC.rowsPerSec(), "first-ratio-C")
	}
	fig.after = loadAverage()
	b.ReportMetric(fig.rate, "rows/s")
	b.ReportMetric(fig.rawRate, "raw-rows/s")
	b.ReportMetric(fig.ratio, "ratio")
	b.ReportMetric(fig.resent, "resent-rows/s")
	b.ReportMetric(float64(fig.after200.Milliseconds()), "ms-after-200")
	b.ReportMetric(fig.peakRSS, "peak-RSS-MiB")
	fig.ok = true
	return fig
}

// benchSmall uploads 100-row feeds one after the other to a service that
// already holds the stock of a 10 MiB feed, and measures how long after its
// 200 each is applied.
func benchSmall(b *testing.B) smallFigures {
	s := startBenchServer(b)
	s.importFeed(b, "preload.csv", benchFeed(benchFeedBytes, -1, 0), bigPoll)
	var after, processing []time.Duration
	n := 0
	for b.Loop() {
		for range benchSmallUploads {
			b.StopTimer()
			f := benchFeed(benchFeedBytes, benchSmallRows, uint64(n%50+1))
			time.Sleep(20 * time.Millisecond) // an idle service between uploads
			b.StartTimer()
			r := s.importFeed(b, fmt.Sprintf("small-%d.csv", n), f, time.Millisecond)
			after, processing = append(after, r.after200), append(processing, r.processing)
			n++
		}
	}
	slices.Sort(after)
	slices.Sort(processing)
	fig := smallFigures{ok: true, n: len(after), median: after[len(after)/2],
		p90: after[(len(after)*9+9)/10-1], max: after[len(after)-1]}
	b.Logf("%d uploads: applied after the 200: median %.1f ms, p90 %.1f ms, max %.1f ms; server processing median %d ms",
		fig.n, ms(fig.median), ms(fig.p90), ms(fig.max), processing[len(processing)/2].Milliseconds())
	b.ReportMetric(ms(fig.median), "ms-after-200-median")
	b.ReportMetric(ms(fig.p90), "ms-after-200-p90")
	return fig
}

func median(rs []importResult, f func(importResult) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	return medianOf(v)
}

func medianOf(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// The raw baseline: a bare table of the stock table's shape, the pragmas
// sqlite.Open sets, and nothing else.
const baselineTable = `CREATE TABLE stock (
    client_id        TEXT NOT NULL,
    store_id         TEXT NOT NULL,
    ean              TEXT NOT NULL,
    article_number   TEXT NOT NULL,
    quantity         INTEGER NOT NULL,
    price            INTEGER NOT NULL,
    retail_price     INTEGER,
    article_location TEXT NOT NULL DEFAULT '',
    product_name     TEXT NOT NULL DEFAULT '',
    product_number   TEXT NOT NULL DEFAULT '',
    article_color    TEXT NOT NULL DEFAULT '',
    article_size     TEXT NOT NULL DEFAULT '',
    upload_id        TEXT NOT NULL,
    updated_at       INTEGER NOT NULL,
    PRIMARY KEY (client_id, store_id, ean)
) WITHOUT ROWID`

func baselineSQL(n int) string {
	var q strings.Builder
	q.WriteString(`INSERT INTO stock (client_id, store_id, ean, article_number, quantity, price, retail_price,
	article_location, product_name, product_number, article_color, article_size, upload_id, updated_at) VALUES `)
	for i := range n {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
	}
	q.WriteString(` ON CONFLICT (client_id, store_id, ean) DO UPDATE SET
	article_number = excluded.article_number, quantity = excluded.quantity, price = excluded.price,
	retail_price = excluded.retail_price, article_location = excluded.article_location,
	product_name = excluded.product_name, product_number = excluded.product_number,
	article_color = excluded.article_color, article_size = excluded.article_size,
	upload_id = excluded.upload_id, updated_at = excluded.updated_at`)
	return q.String()
}

// baseline is the bare table the whole path is compared with.
type baseline struct {
	db       *sql.DB
	clientID string
}

// openBaseline creates the bare table with the pragmas sqlite.Open sets.
func openBaseline(b *testing.B) *baseline {
	b.Helper()
	path := filepath.Join(b.TempDir(), "baseline.db")
	db, err := sql.Open("sqlite", "file:"+path+
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(ON)&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(baselineTable); err != nil {
		b.Fatal(err)
	}
	return &baseline{db: db, clientID: storelink.NewID(time.Now())}
}

// fastestBatch tries batch sizes on updates, as the measured imports are,
// each twice (machines are noisy), and returns the fastest.
func (raw *baseline) fastestBatch(b *testing.B, rowsA, rowsB []benchRow) int {
	b.Helper()
	best, batch := 0.0, 0
	var line strings.Builder
	for _, n := range []int{50, 100, 200, 500, 1000, 2000} { // 2000 × 14 values stays under SQLite's 32766
		rate := max(raw.upsert(b, rowsA, n).rowsPerSec(), raw.upsert(b, rowsB, n).rowsPerSec())
		fmt.Fprintf(&line, " %d: %.0f;", n, rate)
		if rate > best {
			best, batch = rate, n
		}
	}
	b.Logf("baseline batch sizes (rows/s, best of two):%s fastest %d", line.String(), batch)
	return batch
}

// upsert writes rows in one transaction, batch rows per prepared
// statement, and measures BEGIN to the end of COMMIT.
func (raw *baseline) upsert(b *testing.B, rows []benchRow, batch int) importResult {
	b.Helper()
	ctx := context.Background()
	// The values that are the same on every row are converted to any once,
	// as the product's stockWriter does.
	var clientID, uploadID, now any = raw.clientID, storelink.NewID(time.Now()), time.Now().UnixMilli()
	args := make([]any, 0, batch*14)
	add := func(rows []benchRow) []any {
		args = args[:0]
		for _, r := range rows {
			args = append(args, clientID, r.store, r.ean, r.article, r.qty, r.price, r.retail,
				r.location, "", "", "", "", uploadID, now)
		}
		return args
	}
	cpu := selfCPU()
	start := time.Now()
	tx, err := raw.db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, baselineSQL(batch))
	if err != nil {
		b.Fatal(err)
	}
	full := len(rows) / batch * batch
	for i := 0; i < full; i += batch {
		if _, err := stmt.ExecContext(ctx, add(rows[i:i+batch])...); err != nil {
			b.Fatal(err)
		}
	}
	stmt.Close()
	if rest := rows[full:]; len(rest) > 0 {
		if _, err := tx.ExecContext(ctx, baselineSQL(len(rest)), add(rest)...); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	return importResult{rows: len(rows), total: time.Since(start), cpu: selfCPU() - cpu}
}

// selfCPU is the user and system time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStockApply runs accept, claim and apply of the 10 MiB feed in
// this process, on the product's code, so that a profile shows where the
// whole path spends its time:
//
//	go test ./cmd/storelink -run '^$' -bench StockApply -benchtime 3x -cpuprofile cpu.out
func BenchmarkStockApply(b *testing.B) {
	feeds := [3]benchFeedData{}
	order := cmp.Or(os.Getenv("STORELINK_BENCH_ORDER"), feedOrders[0])
	for v := range feeds {
		feeds[v] = inOrder(benchFeed(benchFeedBytes, -1, uint64(v)), order)
	}
	apply := openStockApply(b)
	resend, first := os.Getenv("STORELINK_BENCH_RESEND") != "", os.Getenv("STORELINK_BENCH_FIRST") != ""
	if !first {
		apply(feeds[0])
	}
	i := 0
	var took time.Duration
	for b.Loop() {
		b.StopTimer()
		f := feeds[1+i%2]
		switch {
		case resend:
			f = benchChanged(feeds[0], 50, uint64(i+1))
		case first:
			apply, f = openStockApply(b), feeds[0]
		}
		start := time.Now()
		b.StartTimer()
		apply(f)
		took += time.Since(start)
		i++
	}
	b.ReportMetric(float64(i*len(feeds[1].rows))/took.Seconds(), "rows/s")
}

// openStockApply opens an empty database in a temporary folder with a client
// and the benchmark's stores, and returns a function that accepts, claims and
// applies a feed there.
func openStockApply(b *testing.B) func(benchFeedData) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "storelink.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	admin := service.New(sqlite.NewDrivers(db))
	partner, err := admin.Partners.CreatePartner(ctx, "Bench")
	if err != nil {
		b.Fatal(err)
	}
	client, err := admin.Partners.CreateClient(ctx, partner.ID, "DE", "EUR")
	if err != nil {
		b.Fatal(err)
	}
	for i := 1; i <= benchStores; i++ {
		if _, _, err := admin.Partners.PutStore(ctx, client.ID, fmt.Sprintf("S%02d", i), "Bench store"); err != nil {
			b.Fatal(err)
		}
	}
	policy := storelink.CapacityPolicy{Base: 1 << 40, PerStore: 0, Window: time.Hour}
	svc := service.New(sqlite.NewDrivers(db))
	p := worker.NewProcessor(svc.Uploads, slog.New(slog.NewTextHandler(io.Discard, nil)), "bench", prometheus.NewRegistry())
	return func(f benchFeedData) {
		u, _, err := svc.Uploads.Accept(ctx, storelink.NewUpload{ClientID: client.ID, FileName: "f.csv", Body: storelink.ChunksOf(f.csv)}, policy)
		if err != nil {
			b.Fatal(err)
		}
		if worked, err := p.RunOnce(ctx); !worked || err != nil {
			b.Fatalf("process: %v %v", worked, err)
		}
		got, err := svc.Uploads.Upload(ctx, client.ID, u.ID)
		if err != nil || got.Status != storelink.UploadApplied || got.RowsApplied != len(f.rows) {
			b.Fatalf("upload: %v %+v", err, got)
		}
	}
}

// heldStock is the stock a server holds after the feeds given to
// unchanged, by store and EAN.
type heldStock map[[2]string]benchRow

// unchanged records the rows of f as held and returns how many of them
// were held already as they are: the rows the apply should find unchanged.
func (h heldStock) unchanged(f benchFeedData) int {
	n := 0
	for _, r := range f.rows {
		if h[[2]string{r.store, r.ean}] == r {
			n++
		}
		h[[2]string{r.store, r.ean}] = r
	}
	return n
}
