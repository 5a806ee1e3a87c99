package main

// The stock-import benchmark of issue 2. It measures the whole path (HTTP
// PUT, accept, process, apply) against a separate `storelink serve` process,
// and in the same run the raw baseline: the same rows upserted straight into
// a bare SQLite table of the same shape by batched multi-row INSERT … ON
// CONFLICT in one transaction. Run it with
//
//	go test ./cmd/storelink -run '^$' -bench StockImport -benchtime 3x
//
// The targets (whole path ≥ 0.7 of the baseline, a 10 MiB feed applied
// within 2 s of its 200 under 100 MiB peak RSS, a 100-row feed within 200 ms
// median) are printed next to the figures; a benchmark never fails on speed.
// BenchmarkStockApply runs the accept-claim-apply part in this process, for
// `go test -cpuprofile`.

import (
	"bytes"
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
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"storelink"
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
			line = line[:0]
			line = fmt.Appendf(line, "%s;%s;%s;%d;%s;%s;%s\n", r.store, r.ean, r.article, r.qty,
				cents(r.price), cents(r.retail), r.location)
			if buf.Len()+len(line) > maxBytes || len(rows) == maxRows {
				return benchFeedData{csv: buf.Bytes(), rows: rows}
			}
			buf.Write(line)
			rows = append(rows, r)
		}
	}
	return benchFeedData{csv: buf.Bytes(), rows: rows}
}

// importResult is one measured import.
type importResult struct {
	rows       int
	total      time.Duration // start of the PUT (or BEGIN) to applied (or COMMIT)
	put        time.Duration // start of the PUT to its 200
	after200   time.Duration // the 200 to the first poll that saw "applied"
	queued     time.Duration // server clock: received_at to started_at
	processing time.Duration // server clock: started_at to finished_at
}

func (r importResult) rowsPerSec() float64 { return float64(r.rows) / r.total.Seconds() }

// benchFigures is what a sub-benchmark hands to the summary.
type benchFigures struct {
	first    importResult   // the import into an empty table
	runs     []importResult // the measured imports, each updating every row
	peakRSS  float64        // MiB, VmHWM of the serve process
	batch    int            // baseline: the fastest batch size
	ok       bool
	medRate  float64
	med200   time.Duration
	p90After time.Duration
}

func BenchmarkStockImport(b *testing.B) {
	var whole, raw, small benchFigures
	b.Run("whole_path", func(b *testing.B) { whole = benchWholePath(b) })
	b.Run("raw_baseline", func(b *testing.B) { raw = benchRawBaseline(b) })
	b.Run("small_feed", func(b *testing.B) { small = benchSmallFeed(b) })

	fmt.Println("--- stock import, issue 2 ---")
	if whole.ok {
		fmt.Printf("whole path, 10 MiB (%d rows): %.0f rows/s median, applied %d ms after its 200 (median), peak RSS %.1f MiB\n",
			whole.runs[0].rows, whole.medRate, whole.med200.Milliseconds(), whole.peakRSS)
		fmt.Printf("  target: applied within 2000 ms of the 200: %s; peak RSS under 100 MiB: %s\n",
			verdict(whole.med200 <= 2*time.Second), verdict(whole.peakRSS < 100))
	}
	if raw.ok {
		fmt.Printf("raw baseline (multi-row upsert, batch %d, one transaction): %.0f rows/s median\n", raw.batch, raw.medRate)
	}
	if whole.ok && raw.ok {
		ratio := whole.medRate / raw.medRate
		fmt.Printf("ratio whole path / raw baseline: %.2f (target >= 0.70: %s)\n", ratio, verdict(ratio >= 0.7))
		fmt.Printf("  first import into an empty table: whole path %.0f rows/s, baseline %.0f rows/s, ratio %.2f\n",
			whole.first.rowsPerSec(), raw.first.rowsPerSec(), whole.first.rowsPerSec()/raw.first.rowsPerSec())
	}
	if small.ok {
		fmt.Printf("small feed, %d rows x %d: applied %d ms after its 200 median, p90 %d ms (target median <= 200 ms: %s)\n",
			benchSmallRows, len(small.runs), small.med200.Milliseconds(), small.p90After.Milliseconds(),
			verdict(small.med200 <= 200*time.Millisecond))
	}
}

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
	p := startServe(b, b.TempDir(), "--demo", "--capacity-base", "1GiB")
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
	Status       string     `json:"status"`
	RowsTotal    int        `json:"rows_total"`
	RowsApplied  int        `json:"rows_applied"`
	RowsRejected int        `json:"rows_rejected"`
	ReceivedAt   time.Time  `json:"received_at"`
	StartedAt    *time.Time `json:"started_at"`
	FinishedAt   *time.Time `json:"finished_at"`
	Errors       []any      `json:"errors"`
}

// importFeed PUTs one feed, polls its status every poll until it is final,
// and checks that every row was applied.
func (s *benchServer) importFeed(b *testing.B, name string, f benchFeedData, poll time.Duration) importResult {
	b.Helper()
	req, _ := http.NewRequest(http.MethodPut, s.URL+"/stock/"+s.ClientID+"/"+name, bytes.NewReader(f.csv))
	req.Header.Set("x-api-key", s.APIKey)
	req.Header.Set("Content-Type", "application/csv")
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
		b.Fatalf("upload %s: %s, %d of %d rows applied, %d rejected: %v",
			name, st.Status, st.RowsApplied, len(f.rows), st.RowsRejected, st.Errors)
	}
	r := importResult{rows: st.RowsApplied, total: applied.Sub(start), put: got200.Sub(start), after200: applied.Sub(got200)}
	if st.StartedAt != nil && st.FinishedAt != nil {
		r.queued, r.processing = st.StartedAt.Sub(st.ReceivedAt), st.FinishedAt.Sub(*st.StartedAt)
	}
	return r
}

// peakRSS is the high-water mark of a process's resident set, in MiB.
func peakRSS(b *testing.B, pid int) float64 {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				b.Fatalf("VmHWM %q: %v", v, err)
			}
			return float64(kb) / 1024
		}
	}
	b.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

func logImport(b *testing.B, what string, r importResult) {
	b.Logf("%s: %d rows, %.0f rows/s; PUT %d ms, applied %d ms after the 200 (server: queued %d ms, processing %d ms)",
		what, r.rows, r.rowsPerSec(), r.put.Milliseconds(), r.after200.Milliseconds(),
		r.queued.Milliseconds(), r.processing.Milliseconds())
}

func benchWholePath(b *testing.B) benchFigures {
	feeds := [3]benchFeedData{}
	for v := range feeds {
		feeds[v] = benchFeed(benchFeedBytes, -1, uint64(v))
	}
	s := startBenchServer(b)
	fig := benchFigures{first: s.importFeed(b, "first.csv", feeds[0], 2*time.Millisecond)}
	logImport(b, "first import (empty table)", fig.first)

	i := 0
	for b.Loop() {
		r := s.importFeed(b, fmt.Sprintf("feed-%d.csv", i), feeds[1+i%2], 2*time.Millisecond)
		logImport(b, fmt.Sprintf("import %d", i+1), r)
		fig.runs = append(fig.runs, r)
		i++
	}
	fig.peakRSS = peakRSS(b, s.PID())
	fig.medRate = median(fig.runs, func(r importResult) float64 { return r.rowsPerSec() })
	fig.med200 = time.Duration(median(fig.runs, func(r importResult) float64 { return float64(r.after200) }))
	b.ReportMetric(fig.medRate, "rows/s")
	b.ReportMetric(float64(fig.med200.Milliseconds()), "ms-after-200")
	b.ReportMetric(fig.peakRSS, "peak-RSS-MiB")
	b.Logf("feed: %d bytes, %d rows over %d stores; peak RSS of serve %.1f MiB", len(feeds[0].csv), len(feeds[0].rows), benchStores, fig.peakRSS)
	fig.ok = true
	return fig
}

func benchSmallFeed(b *testing.B) benchFigures {
	s := startBenchServer(b)
	// The service holds a full stock already, as it would in production.
	logImport(b, "preload 10 MiB", s.importFeed(b, "preload.csv", benchFeed(benchFeedBytes, -1, 0), 2*time.Millisecond))
	var fig benchFigures
	n := 0
	for b.Loop() {
		for range benchSmallUploads {
			i := n
			n++
			b.StopTimer()
			f := benchFeed(benchFeedBytes, benchSmallRows, uint64(i%50+1))
			time.Sleep(20 * time.Millisecond) // an idle service between uploads
			b.StartTimer()
			fig.runs = append(fig.runs, s.importFeed(b, fmt.Sprintf("small-%d.csv", i), f, time.Millisecond))
		}
	}
	after := make([]time.Duration, len(fig.runs))
	for i, r := range fig.runs {
		after[i] = r.after200
	}
	slices.Sort(after)
	fig.med200 = after[len(after)/2]
	fig.p90After = after[(len(after)*9+9)/10-1]
	proc := make([]time.Duration, len(fig.runs))
	for i, r := range fig.runs {
		proc[i] = r.processing
	}
	slices.Sort(proc)
	b.Logf("small feed: applied after the 200: median %d ms, p90 %d ms, max %d ms; server processing median %d ms",
		fig.med200.Milliseconds(), fig.p90After.Milliseconds(), after[len(after)-1].Milliseconds(), proc[len(proc)/2].Milliseconds())
	b.ReportMetric(float64(fig.med200.Microseconds())/1000, "ms-after-200-median")
	b.ReportMetric(float64(fig.p90After.Microseconds())/1000, "ms-after-200-p90")
	fig.ok = true
	return fig
}

func median(rs []importResult, f func(importResult) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
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

// baselineUpsert writes rows in one transaction, batch rows per statement,
// and returns the time from BEGIN to the end of COMMIT.
func baselineUpsert(b *testing.B, db *sql.DB, clientID string, rows []benchRow, batch int) importResult {
	b.Helper()
	ctx := context.Background()
	uploadID := storelink.NewID(time.Now())
	now := time.Now().UnixMilli()
	args := make([]any, 0, batch*14)
	add := func(r benchRow) {
		args = append(args, clientID, r.store, r.ean, r.article, r.qty, r.price, r.retail,
			r.location, "", "", "", "", uploadID, now)
	}
	start := time.Now()
	tx, err := db.BeginTx(ctx, nil)
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
		args = args[:0]
		for _, r := range rows[i : i+batch] {
			add(r)
		}
		if _, err := stmt.ExecContext(ctx, args...); err != nil {
			b.Fatal(err)
		}
	}
	stmt.Close()
	if rest := rows[full:]; len(rest) > 0 {
		args = args[:0]
		for _, r := range rest {
			add(r)
		}
		if _, err := tx.ExecContext(ctx, baselineSQL(len(rest)), args...); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	return importResult{rows: len(rows), total: time.Since(start)}
}

func benchRawBaseline(b *testing.B) benchFigures {
	feeds := [3][]benchRow{}
	for v := range feeds {
		feeds[v] = benchFeed(benchFeedBytes, -1, uint64(v)).rows
	}
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
	clientID := storelink.NewID(time.Now())

	var fig benchFigures
	fig.first = baselineUpsert(b, db, clientID, feeds[0], 500)
	b.Logf("first import (empty table), batch 500: %.0f rows/s", fig.first.rowsPerSec())
	// Find the fastest batch size on updates, as the imports below are.
	best := 0.0
	for i, n := range []int{50, 100, 200, 500, 1000, 2000} {
		rate := baselineUpsert(b, db, clientID, feeds[1+i%2], n).rowsPerSec()
		b.Logf("batch %4d: %.0f rows/s", n, rate)
		if rate > best {
			best, fig.batch = rate, n
		}
	}
	i := 0
	for b.Loop() {
		r := baselineUpsert(b, db, clientID, feeds[1+i%2], fig.batch)
		b.Logf("import %d, batch %d: %.0f rows/s", i+1, fig.batch, r.rowsPerSec())
		fig.runs = append(fig.runs, r)
		i++
	}
	fig.medRate = median(fig.runs, func(r importResult) float64 { return r.rowsPerSec() })
	b.ReportMetric(fig.medRate, "rows/s")
	b.ReportMetric(float64(fig.batch), "batch")
	fig.ok = true
	return fig
}

// BenchmarkStockApply runs accept, claim and apply of the 10 MiB feed in
// this process, on the product's code, so that a profile shows where the
// whole path spends its time:
//
//	go test ./cmd/storelink -run '^$' -bench StockApply -benchtime 3x -cpuprofile cpu.out
func BenchmarkStockApply(b *testing.B) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "storelink.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	partner, err := db.CreatePartner(ctx, "Bench")
	if err != nil {
		b.Fatal(err)
	}
	client, err := db.CreateClient(ctx, partner.ID, "DE", "EUR")
	if err != nil {
		b.Fatal(err)
	}
	for i := 1; i <= benchStores; i++ {
		if _, _, err := db.PutStore(ctx, client.ID, fmt.Sprintf("S%02d", i), "Bench store"); err != nil {
			b.Fatal(err)
		}
	}
	policy := storelink.CapacityPolicy{Base: 1 << 40, PerStore: 0, Window: time.Hour}
	p := worker.NewProcessor(db, slog.New(slog.NewTextHandler(io.Discard, nil)), "bench", prometheus.NewRegistry())
	feeds := [3]benchFeedData{}
	for v := range feeds {
		feeds[v] = benchFeed(benchFeedBytes, -1, uint64(v))
	}
	apply := func(f benchFeedData) {
		u, _, err := db.Accept(ctx, storelink.NewUpload{ClientID: client.ID, FileName: "f.csv", Body: f.csv}, policy)
		if err != nil {
			b.Fatal(err)
		}
		if worked, err := p.RunOnce(ctx); !worked || err != nil {
			b.Fatalf("process: %v %v", worked, err)
		}
		got, err := db.Upload(ctx, client.ID, u.ID)
		if err != nil || got.Status != storelink.UploadApplied || got.RowsApplied != len(f.rows) {
			b.Fatalf("upload: %v %+v", err, got)
		}
	}
	apply(feeds[0])
	i := 0
	start := time.Now()
	for b.Loop() {
		apply(feeds[1+i%2])
		i++
	}
	b.ReportMetric(float64(i*len(feeds[1].rows))/time.Since(start).Seconds(), "rows/s")
}
