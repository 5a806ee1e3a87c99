package main

// The PostgreSQL benchmarks of issue 5. Run them with bench/postgres, or
//
//	STORELINK_TEST_DATABASE_URL='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	go test ./cmd/storelink -run '^$' -bench '^BenchmarkPostgres' -benchtime 5x
//
// BenchmarkPostgresStockImport is BenchmarkStockImport's 10 MiB import on
// PostgreSQL: the whole path (HTTP PUT, accept, process, apply) against a
// separate `storelink serve --database postgres://…` on a fresh schema, and
// in the same run the raw baseline: the same rows COPYed by pgx into a
// temporary table and written by one INSERT … ON CONFLICT DO UPDATE into a
// bare table of the stock table's shape, in the same database. N x is N
// imports, each paired with a baseline pass (the pair's order alternates, so
// that neither side always runs after the other's writes); the ratio is the
// median of the per-pair ratios.
//
// BenchmarkPostgresUploadsScaleOut counts the 100-row uploads accepted per
// second by one serve process, and by two serve processes on one schema,
// from many uploaders at once over several clients with a capacity too large
// to refuse any. N x is N phases of each, taken in turn (in alternating
// order); the figures are medians. After each phase the uploads accepted in
// it are waited for until applied, so that no phase inherits the previous
// one's backlog.
//
// Both print their figures next to the targets, MET or MISSED; a benchmark
// never fails on speed. Both skip without STORELINK_TEST_DATABASE_URL.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
)

const (
	scaleClients   = 8
	scaleUploaders = 32 // at once, spread over the clients and processes
	scalePhase     = 3 * time.Second
)

func skipWithoutPostgres(b *testing.B) {
	b.Helper()
	if os.Getenv("STORELINK_TEST_DATABASE_URL") == "" {
		b.Skip("STORELINK_TEST_DATABASE_URL is not set: the PostgreSQL benchmarks are skipped " +
			"(bench/postgres sets it to the local test database)")
	}
}

// BenchmarkPostgresStockImport is the import benchmark of issue 5; see the
// top of the file.
func BenchmarkPostgresStockImport(b *testing.B) {
	skipWithoutPostgres(b)
	var fig pgBigFigures
	var orders []orderFigures
	b.Run("10MiB", func(b *testing.B) { fig = benchPostgresBig(b) })
	b.Run("roworders", func(b *testing.B) {
		orders = measureOrders(b, orderRun{start: func(b *testing.B) (*benchServer, func(*testing.B, []benchRow) importResult) {
			dbURL, _ := pgSchemaURL(b)
			p := startServe(b, b.TempDir(), pgArgs(dbURL, "--demo", "--capacity-base", "1GiB")...)
			p.AdminToken = pgTestToken
			return newBenchServer(b, p), openPgBaseline(b, dbURL).upsert
		}}, b.N)
	})
	if orders != nil {
		printRowOrders("stock import on PostgreSQL against COPY + one upsert of the same rows in the same order", orders, 0.7, 0.7)
	}
	if fig.n == 0 {
		return
	}
	fmt.Println("--- stock import on PostgreSQL (issue 5) ---")
	fmt.Printf("feed: %d bytes, %d rows over %d stores; %d imports; machine load average before %s, after %s\n",
		fig.bytes, fig.rows, benchStores, fig.n, fig.loadBefore, fig.after)
	fmt.Printf("whole path (PUT to applied):       %7.0f rows/s   (serve CPU %.2f s per import)\n", fig.rate, fig.cpu.Seconds())
	fmt.Printf("raw baseline (COPY + one upsert):  %7.0f rows/s\n", fig.rawRate)
	fmt.Printf("ratio whole path / baseline:       %7.3f          (median of the %d pairs) target >= 0.70: %s\n", fig.ratio, fig.n, verdict(fig.ratio >= 0.7))
	fmt.Printf("10 MiB applied after its 200: %d ms median, %d ms max; peak RSS of storelink serve %.1f MiB\n",
		fig.after200.Milliseconds(), fig.max200.Milliseconds(), fig.peakRSS)
	fmt.Printf("first import into an empty table: whole path %.0f rows/s, baseline %.0f rows/s, ratio %.2f\n",
		fig.first.rowsPerSec(), fig.firstRaw.rowsPerSec(), fig.first.rowsPerSec()/fig.firstRaw.rowsPerSec())
	fmt.Printf("the feed again with one row in 50 changed: whole path %.0f rows/s, ratio to the baseline %.2f (no target)\n",
		fig.resent, fig.resentRatio)
}

// pgBigFigures is what the import benchmark hands to its summary.
type pgBigFigures struct {
	bigFigures
	n int
}

func benchPostgresBig(b *testing.B) pgBigFigures {
	fig := pgBigFigures{bigFigures: bigFigures{loadBefore: loadAverage()}}
	feeds := [3]benchFeedData{}
	for v := range feeds {
		feeds[v] = benchFeed(benchFeedBytes, -1, uint64(v))
	}
	fig.rows, fig.bytes = len(feeds[0].rows), len(feeds[0].csv)
	dbURL, _ := pgSchemaURL(b)
	p := startServe(b, b.TempDir(), pgArgs(dbURL, "--demo", "--capacity-base", "1GiB")...)
	p.AdminToken = pgTestToken
	s := newBenchServer(b, p)
	raw := openPgBaseline(b, dbURL)

	fig.first = s.importFeed(b, "first.csv", feeds[0], bigPoll)
	fig.firstRaw = raw.upsert(b, feeds[0].rows)
	b.Logf("first import (empty table): whole path %.0f rows/s (PUT %d ms, applied %d ms after the 200), baseline %.0f rows/s",
		fig.first.rowsPerSec(), fig.first.put.Milliseconds(), fig.first.after200.Milliseconds(), fig.firstRaw.rowsPerSec())

	var whole, base, resent []importResult
	var ratios, resentRatios []float64
	i := 0
	for b.Loop() {
		f := feeds[1+i%2]
		var w, r importResult
		if i%2 == 0 {
			w = s.importFeed(b, fmt.Sprintf("feed-%d.csv", i), f, bigPoll)
			r = raw.upsert(b, f.rows)
		} else {
			r = raw.upsert(b, f.rows)
			w = s.importFeed(b, fmt.Sprintf("feed-%d.csv", i), f, bigPoll)
		}
		whole, base = append(whole, w), append(base, r)
		ratios = append(ratios, w.rowsPerSec()/r.rowsPerSec())
		b.Logf("import %d: whole path %.0f rows/s (PUT %d ms, applied %d ms after the 200; server: queued %d ms, processing %d ms; CPU %.2f s) | baseline %.0f rows/s | ratio %.2f",
			i+1, w.rowsPerSec(), w.put.Milliseconds(), w.after200.Milliseconds(), w.queued.Milliseconds(), w.processing.Milliseconds(),
			w.cpu.Seconds(), r.rowsPerSec(), ratios[i])
		// The same feed again with one row in 50 changed: only those are
		// written (issue 15), where the baseline writes every row.
		again := benchChanged(f, 50, uint64(i+1))
		if os.Getenv("NORESEND") != "" {
			i++
			continue
		}
		w = s.importFeed(b, fmt.Sprintf("again-%d.csv", i), again, bigPoll)
		r = raw.upsert(b, again.rows)
		resent, resentRatios = append(resent, w), append(resentRatios, w.rowsPerSec()/r.rowsPerSec())
		b.Logf("import %d again, one row in 50 changed: whole path %.0f rows/s (applied %d ms after the 200; CPU %.2f s) | baseline %.0f rows/s | ratio %.2f",
			i+1, w.rowsPerSec(), w.after200.Milliseconds(), w.cpu.Seconds(), r.rowsPerSec(), resentRatios[i])
		i++
	}
	if len(resent) > 0 {
		fig.resent, fig.resentRatio = median(resent, importResult.rowsPerSec), medianOf(resentRatios)
	}
	fig.n = i
	fig.peakRSS = procStatus(b, s.PID(), "VmHWM")
	fig.rate = median(whole, importResult.rowsPerSec)
	fig.rawRate = median(base, importResult.rowsPerSec)
	fig.ratio = medianOf(ratios)
	fig.cpu = time.Duration(median(whole, func(r importResult) float64 { return float64(r.cpu) }))
	fig.after200 = time.Duration(median(whole, func(r importResult) float64 { return float64(r.after200) }))
	for _, w := range whole {
		fig.max200 = max(fig.max200, w.after200)
	}
	fig.after = loadAverage()
	b.ReportMetric(fig.rate, "rows/s")
	b.ReportMetric(fig.rawRate, "raw-rows/s")
	b.ReportMetric(fig.ratio, "ratio")
	b.ReportMetric(float64(fig.after200.Milliseconds()), "ms-after-200")
	b.ReportMetric(fig.peakRSS, "peak-RSS-MiB")
	return fig
}

// The raw baseline on PostgreSQL: a bare table of the stock table's shape
// (00001_init.sql), in the schema the serve process uses, with nothing else.
const pgBaselineTable = `CREATE TABLE baseline_stock (
    client_id        text NOT NULL,
    store_id         text COLLATE "C" NOT NULL,
    ean              text COLLATE "C" NOT NULL,
    article_number   text NOT NULL,
    quantity         integer NOT NULL,
    price            bigint NOT NULL,
    retail_price     bigint,
    article_location text NOT NULL DEFAULT '',
    product_name     text NOT NULL DEFAULT '',
    product_number   text NOT NULL DEFAULT '',
    article_color    text NOT NULL DEFAULT '',
    article_size     text NOT NULL DEFAULT '',
    upload_id        text NOT NULL,
    updated_at       timestamptz NOT NULL,
    PRIMARY KEY (client_id, store_id, ean)
)`

// The rows of a feed are copied with the columns the feed has; the upsert
// sets the others to their defaults, as the product does for a feed without
// them.
var pgBaselineColumns = []string{"store_id", "ean", "article_number", "quantity", "price", "retail_price", "article_location"}

const pgBaselineUpsert = `INSERT INTO baseline_stock (client_id, store_id, ean, article_number, quantity, price,
	retail_price, article_location, upload_id, updated_at)
SELECT $1, store_id, ean, article_number, quantity, price, retail_price, article_location, $2, $3 FROM baseline_in
ON CONFLICT (client_id, store_id, ean) DO UPDATE SET
	article_number = excluded.article_number, quantity = excluded.quantity, price = excluded.price,
	retail_price = excluded.retail_price, article_location = excluded.article_location,
	product_name = excluded.product_name, product_number = excluded.product_number,
	article_color = excluded.article_color, article_size = excluded.article_size,
	upload_id = excluded.upload_id, updated_at = excluded.updated_at`

type pgBaseline struct {
	conn     *pgx.Conn
	clientID string
}

func openPgBaseline(b *testing.B, dbURL string) *pgBaseline {
	b.Helper()
	conn := pgConn(b, dbURL)
	if _, err := conn.Exec(context.Background(), pgBaselineTable); err != nil {
		b.Fatal(err)
	}
	return &pgBaseline{conn: conn, clientID: storelink.NewID(time.Now())}
}

// upsert writes rows in one transaction: COPY into a temporary table, one
// INSERT … ON CONFLICT, measured from BEGIN to the end of COMMIT.
func (raw *pgBaseline) upsert(b *testing.B, rows []benchRow) importResult {
	b.Helper()
	ctx := context.Background()
	uploadID, now := storelink.NewID(time.Now()), time.Now()
	cpu := selfCPU()
	start := time.Now()
	tx, err := raw.conn.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `CREATE TEMPORARY TABLE baseline_in (
		store_id text COLLATE "C" NOT NULL, ean text COLLATE "C" NOT NULL, article_number text NOT NULL,
		quantity integer NOT NULL, price bigint NOT NULL, retail_price bigint, article_location text NOT NULL
	) ON COMMIT DROP`); err != nil {
		b.Fatal(err)
	}
	n, err := tx.CopyFrom(ctx, pgx.Identifier{"baseline_in"}, pgBaselineColumns, pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
		r := &rows[i]
		return []any{r.store, r.ean, r.article, int32(r.qty), r.price, r.retail, r.location}, nil
	}))
	if err != nil || n != int64(len(rows)) {
		b.Fatalf("copy: %d of %d rows: %v", n, len(rows), err)
	}
	tag, err := tx.Exec(ctx, pgBaselineUpsert, raw.clientID, uploadID, now)
	if err != nil || tag.RowsAffected() != int64(len(rows)) {
		b.Fatalf("upsert: %v: %v", tag, err)
	}
	if err := tx.Commit(ctx); err != nil {
		b.Fatal(err)
	}
	return importResult{rows: len(rows), total: time.Since(start), cpu: selfCPU() - cpu}
}

// BenchmarkPostgresUploadsScaleOut is the scale-out benchmark of issue 5;
// see the top of the file.
func BenchmarkPostgresUploadsScaleOut(b *testing.B) {
	skipWithoutPostgres(b)
	// The accept rate of the processes is what is measured: the limits of
	// uploads waiting and in flight per client, which turn a flood of
	// small uploads away with 429, are lifted.
	capArgs := []string{"--capacity-base", "1GiB", "--max-waiting-uploads", "0", "--max-uploads-in-flight", "1000"}
	oneURL, _ := pgSchemaURL(b)
	single := startServe(b, b.TempDir(), pgArgs(oneURL, append([]string{"--demo"}, capArgs...)...)...)
	single.AdminToken = pgTestToken
	twoURL, _ := pgSchemaURL(b)
	a, c := startPair(b, twoURL, capArgs...)
	one := scaleSetup{procs: []*proc{single}, clients: smallClientsOf(b, single, scaleClients), conn: pgConn(b, oneURL)}
	two := scaleSetup{procs: []*proc{a, c}, clients: smallClientsOf(b, a, scaleClients), conn: pgConn(b, twoURL)}
	feeds := make([][]byte, 50)
	for v := range feeds {
		feeds[v] = benchFeed(benchFeedBytes, benchSmallRows, uint64(v+1)).csv
	}
	// A short phase each first: connections made, code paths warm.
	one.run(b, feeds, 500*time.Millisecond)
	two.run(b, feeds, 500*time.Millisecond)

	loadBefore := loadAverage()
	var ones, twos []scaleResult
	var ratios []float64
	i := 0
	for b.Loop() {
		var r1, r2 scaleResult
		if i%2 == 0 {
			r1, r2 = one.run(b, feeds, scalePhase), two.run(b, feeds, scalePhase)
		} else {
			r2, r1 = two.run(b, feeds, scalePhase), one.run(b, feeds, scalePhase)
		}
		ones, twos = append(ones, r1), append(twos, r2)
		ratios = append(ratios, r2.rate()/r1.rate())
		b.Logf("phase %d: one process %s | two processes %s | two/one %.2f", i+1, r1, r2, ratios[i])
		i++
	}
	rate := func(rs []scaleResult) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = r.rate()
		}
		return medianOf(v)
	}
	applied := func(rs []scaleResult) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = r.appliedRate()
		}
		return medianOf(v)
	}
	latency := func(rs []scaleResult) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = ms(r.p50)
		}
		return medianOf(v)
	}
	oneRate, twoRate, ratio := rate(ones), rate(twos), medianOf(ratios)
	b.ReportMetric(oneRate, "one-proc-uploads/s")
	b.ReportMetric(twoRate, "two-proc-uploads/s")
	b.ReportMetric(ratio, "two/one")

	fmt.Println("--- uploads accepted, one process vs two on PostgreSQL (issue 5) ---")
	fmt.Printf("%d-row feeds (%d bytes), %d uploaders at once over %d clients, %d phases of %s each; load average before %s, after %s\n",
		benchSmallRows, len(feeds[0]), scaleUploaders, scaleClients, i, scalePhase, loadBefore, loadAverage())
	fmt.Printf("one process:    %7.0f uploads/s accepted (PUT median %.1f ms); applied %.0f uploads/s\n", oneRate, latency(ones), applied(ones))
	fmt.Printf("two processes:  %7.0f uploads/s accepted (PUT median %.1f ms); applied %.0f uploads/s\n", twoRate, latency(twos), applied(twos))
	fmt.Printf("two / one:      %7.2f          (median of the %d pairs of phases) target two > one: %s\n", ratio, i, verdict(ratio > 1))
}

// scaleClient is one client's credentials.
type scaleClient struct{ id, key string }

// scaleSetup is the processes of one installation, its clients, and a
// connection to its schema.
type scaleSetup struct {
	procs   []*proc
	clients []scaleClient
	conn    *pgx.Conn
}

// scaleResult is one measured phase.
type scaleResult struct {
	accepted int
	applied  int           // of them, by the end of the phase
	elapsed  time.Duration // the phase: first PUT sent to last 200 received
	drained  time.Duration // first PUT sent to every accepted upload applied
	p50      time.Duration // of one PUT
	// busy is the share of the machine's cores that all processes used
	// during the phase: whether a second process had idle cores to use.
	busy float64
}

func (r scaleResult) rate() float64        { return float64(r.accepted) / r.elapsed.Seconds() }
func (r scaleResult) appliedRate() float64 { return float64(r.accepted) / r.drained.Seconds() }

func (r scaleResult) String() string {
	return fmt.Sprintf("%d accepted in %d ms: %.0f/s (PUT median %.1f ms; %d applied meanwhile; the cores %.0f%% busy), all applied after %d ms: %.0f/s",
		r.accepted, r.elapsed.Milliseconds(), r.rate(), ms(r.p50), r.applied, 100*r.busy, r.drained.Milliseconds(), r.appliedRate())
}

// run has scaleUploaders uploaders PUT feeds for d, each to one client and
// one process (so that every client is sent to every process), then waits
// until everything accepted is applied. Any answer but 200 fails the
// benchmark: the capacity is too large to refuse an upload.
func (s scaleSetup) run(b *testing.B, feeds [][]byte, d time.Duration) scaleResult {
	b.Helper()
	const applied = `storelink_uploads_processed_total{status="applied"}`
	appliedSum := func() int {
		n := 0.0
		for _, p := range s.procs {
			n += metric(b, p, applied)
		}
		return int(n)
	}
	appliedBefore := appliedSum()
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: scaleUploaders}}
	defer client.CloseIdleConnections()
	var (
		accepted atomic.Int64
		mu       sync.Mutex
		failure  error
		lat      []time.Duration
		wg       sync.WaitGroup
	)
	busy0 := machineCPU(b)
	start := time.Now()
	deadline := start.Add(d)
	for u := range scaleUploaders {
		cl := s.clients[u%len(s.clients)]
		p := s.procs[u/len(s.clients)%len(s.procs)]
		wg.Go(func() {
			var mine []time.Duration
			for i := 0; time.Now().Before(deadline); i++ {
				req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("%s/stock/%s/scale-%d-%d.csv", p.URL, cl.id, u, i),
					bytes.NewReader(feeds[(u+i)%len(feeds)]))
				req.Header.Set("x-api-key", cl.key)
				req.Header.Set("Content-Type", "application/csv")
				t0 := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("%d %s", resp.StatusCode, body)
					}
				}
				if err != nil {
					mu.Lock()
					failure = fmt.Errorf("PUT by uploader %d: %w", u, err)
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
				accepted.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	r := scaleResult{accepted: int(accepted.Load()), elapsed: time.Since(start)}
	r.busy = (machineCPU(b) - busy0).Seconds() / (r.elapsed.Seconds() * float64(runtime.NumCPU()))
	if failure != nil {
		b.Fatal(failure)
	}
	r.applied = appliedSum() - appliedBefore
	slices.Sort(lat)
	r.p50 = lat[len(lat)/2]
	// The queue is watched in the database, not on /metrics: a scrape
	// costs the serve process more CPU than this query costs PostgreSQL.
	if left := waitNone(b, s.conn, `SELECT count(*) FROM uploads WHERE status IN ('accepted', 'processing')`,
		2*time.Minute, 10*time.Millisecond); left > 0 {
		b.Fatalf("%d of %d uploads not applied two minutes after the phase", left, r.accepted)
	}
	r.drained = time.Since(start)
	var n float64
	for _, v := range appliedBy(b, float64(appliedBefore+r.accepted), s.procs...) {
		n += v
	}
	if int(n) != appliedBefore+r.accepted {
		b.Fatalf("%d uploads accepted, %d applied: some were rejected", r.accepted, int(n)-appliedBefore)
	}
	return r
}

// waitNone asks query, a count, every so often until it is 0 or within has
// passed, and returns the last count.
func waitNone(b *testing.B, conn *pgx.Conn, query string, within, every time.Duration) int {
	b.Helper()
	for wait := time.Now().Add(within); ; time.Sleep(every) {
		var left int
		if err := conn.QueryRow(context.Background(), query).Scan(&left); err != nil {
			b.Fatal(err)
		}
		if left == 0 || time.Now().After(wait) {
			return left
		}
	}
}
