package main

// The grown-tables benchmark of issue 15 item 3: the same work on a stock
// table that other clients have filled with millions of rows as on one they
// have not. Run it with bench/grown-tables, or
//
//	go test ./cmd/storelink -run '^$' -bench '^BenchmarkGrownTables$/sqlite' -benchtime 3x
//
// For each size (STORELINK_BENCH_GROWN_SIZES, rows of other clients' stock;
// 0, 1,000,000 and 10,000,000 by default) a database is made once and kept
// as a template in a cache folder (STORELINK_BENCH_GROWN_CACHE, by default
// storelink-grown in the temporary folder; about 1.75 GB for 10 million
// rows on SQLite): other clients, each with 50 stores of 20,000 articles,
// made through the services (their ids made half before the benchmark's
// own clients, half after, so that its rows land inside the stock's key
// range, not at its end), and their stock written directly as an apply
// writes it (dbtest.SQLite.FillStock, digests included). The template is
// named after the migrations it was made with, and made again when they
// change. Each run copies every size's template to a data folder of its own
// and starts a `storelink serve` on each, all three running at once.
//
// BenchmarkGrownTables/postgres does the same on PostgreSQL (skipped without
// STORELINK_TEST_DATABASE_URL): the templates are databases of the test
// server, storelink_grown_<rows>_<migrations>, filled by COPY
// (dbtest.Postgres.FillStock) and vacuumed and analysed, as autovacuum
// would have; each run makes its databases from them (CREATE DATABASE …
// TEMPLATE) and drops them at the end.
//
// Each of the N rounds then takes the sizes in turn (in an order that
// rotates, so that no size always goes first) and on each:
//
//   - makes a new client with the 50 stores of BenchmarkStockImport and
//     imports the 10 MiB feed into its empty stock (PUT to applied), then a
//     feed that changes every row, then that feed again with one row in 50
//     changed (rows_unchanged checked on each);
//   - drives 500 orders through create, fulfil and return from 16 clients
//     (BenchmarkOrders' load, on an orders client of its own): the figure is
//     the p99 of POST /orders, which routes by stock;
//   - reads 200 pages of 100 rows of the round's client's stock
//     (GET /stock/{client}/stock, following next_cursor).
//
// STORELINK_BENCH_GROWN_PARTS (apply, orders, pages; comma-separated)
// measures some parts only, for a profile; the first import is always made.
//
// The figure of each size is set beside that of the size without other
// clients' rows (the baseline, measured in the same run): the ratio of the
// times, median of the per-round ratios (target at most 1.5 at 10 million
// rows; MET or MISSED, a benchmark never fails on speed), with serve's CPU
// time beside each (less swayed by other work on the machine, but a slower
// import is polled more). The load average is printed with every round. The
// bytes per stock row of each template are printed: the stock table and its
// indexes (SQLite's dbstat; pg_total_relation_size), and the whole database.

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
	"storelink/internal/dbtest"
	"storelink/postgres"
	"storelink/service"
	"storelink/sqlite"
)

const (
	grownStores      = 50     // stores of each other client
	grownArticles    = 20_000 // articles each of their stores carries
	grownOrders      = 500    // orders per round and size, 3 transitions each
	grownPages       = 200    // listing pages per round and size
	grownPageRows    = 100
	grownTarget      = 1.5
	grownFillVersion = "1" // part of a template's name: changed when the fill changes
)

// grownPart tells whether a part of the rounds (apply, orders, pages) is
// measured: all of them unless STORELINK_BENCH_GROWN_PARTS lists some, for
// a profile of one.
func grownPart(name string) bool {
	v := os.Getenv("STORELINK_BENCH_GROWN_PARTS")
	return v == "" || slices.Contains(strings.Split(v, ","), name)
}

// grownSizes are the rows of other clients' stock to measure on, the first
// being the baseline.
func grownSizes(b *testing.B) []int {
	b.Helper()
	v := os.Getenv("STORELINK_BENCH_GROWN_SIZES")
	if v == "" {
		return []int{0, 1_000_000, 10_000_000}
	}
	var sizes []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || n%(grownStores*grownArticles) != 0 {
			b.Fatalf("STORELINK_BENCH_GROWN_SIZES: %q is not a multiple of %d", f, grownStores*grownArticles)
		}
		sizes = append(sizes, n)
	}
	if len(sizes) == 0 || sizes[0] != 0 {
		b.Fatal("STORELINK_BENCH_GROWN_SIZES must start with 0, the baseline")
	}
	return sizes
}

// grownStat is what a template holds, kept beside it.
type grownStat struct {
	Rows       int   `json:"rows"`
	Clients    int   `json:"clients"`
	FileBytes  int64 `json:"file_bytes"`  // page_count × page_size
	StockBytes int64 `json:"stock_bytes"` // the stock table and its indexes
	Indexes    int   `json:"indexes"`     // indexes of the stock table besides its primary key
	Seconds    float64
}

func (s grownStat) String() string {
	if s.Rows == 0 {
		return "no rows of other clients"
	}
	return fmt.Sprintf("%d rows of %d other clients: %.1f bytes per row in the stock table and its %d other index(es), %.1f in the whole database (%.0f MB); made in %.0f s",
		s.Rows, s.Clients, float64(s.StockBytes)/float64(s.Rows), s.Indexes, float64(s.FileBytes)/float64(s.Rows), float64(s.FileBytes)/1e6, s.Seconds)
}

// grownCache is the folder the templates are kept in.
func grownCache(b *testing.B) string {
	b.Helper()
	dir := os.Getenv("STORELINK_BENCH_GROWN_CACHE")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "storelink-grown")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	return dir
}

// migrationsKey names the schema a template was made with: a hash of the
// migrations in folder (relative to this package) and of the fill.
func migrationsKey(b *testing.B, folder string) string {
	b.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", folder, "migrations", "*.sql"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no migrations in %s: %v", folder, err)
	}
	h := sha256.New()
	io.WriteString(h, grownFillVersion)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// grownClients yields the other clients of a template: their creation
// times, half long before the benchmark's own clients and half long after,
// and the stock rows of each.
func grownClientTime(k int) time.Time {
	if k%2 == 0 {
		return time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(k) * time.Hour)
	}
	return time.Date(2090, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(k) * time.Hour)
}

func grownStoreID(s int) string { return fmt.Sprintf("S%02d", s+1) }

// grownRows is the stock of other client k, by store and EAN (the primary
// key's order): each store carries 20,000 articles of a catalogue of
// 30,000, with values like BenchmarkStockImport's feed.
func grownRows(k int) iter.Seq[storelink.StockRow] {
	return func(yield func(storelink.StockRow) bool) {
		for s := range grownStores {
			n := 0
			for p := 0; n < grownArticles; p++ {
				if mix(uint64(k)<<40|uint64(s)<<32|uint64(p))%3 == 0 {
					continue // not carried
				}
				n++
				h := mix(uint64(k)<<48 ^ uint64(s)<<32 ^ uint64(p) ^ 0x9e0)
				price := storelink.Money(99 + mix(uint64(p))%29_900)
				retail := price + price*storelink.Money(h>>16%60)/100
				if !yield(storelink.StockRow{
					StoreID: grownStoreID(s), EAN: benchEAN(p), ArticleNumber: fmt.Sprintf("ART-%06d", 100_000+p*37%900_000),
					Quantity: int(h % 40), Price: price, RetailPrice: &retail,
					ArticleLocation: fmt.Sprintf("Aisle %02d Shelf %d", 1+h>>24%40, 1+h>>32%6),
				}) {
					return
				}
			}
		}
	}
}

// sqliteTemplate returns the template of rows rows, making it first when
// the cache has none for the current migrations.
func sqliteTemplate(b *testing.B, rows int) (string, grownStat) {
	b.Helper()
	key := migrationsKey(b, "sqlite")
	dir := grownCache(b)
	path := filepath.Join(dir, fmt.Sprintf("sqlite-%d-%s.db", rows, key))
	var st grownStat
	if data, err := os.ReadFile(path + ".json"); err == nil && json.Unmarshal(data, &st) == nil {
		if _, err := os.Stat(path); err == nil {
			return path, st
		}
	}
	// Templates of older migrations are of no more use.
	old, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("sqlite-%d-*", rows)))
	for _, f := range old {
		os.Remove(f)
	}
	start := time.Now()
	tmp := path + ".making"
	os.Remove(tmp)
	ctx := context.Background()
	db, err := sqlite.Open(ctx, tmp)
	if err != nil {
		b.Fatal(err)
	}
	st.Rows, st.Clients = rows, rows/(grownStores*grownArticles)
	for k := range st.Clients {
		at := grownClientTime(k)
		svc := service.New(sqlite.NewDrivers(db), service.WithClock(func() time.Time { return at }))
		clientID := grownOtherClient(b, svc, k)
		n, err := dbtest.OnSQLite(db).FillStock(ctx, clientID, storelink.NewID(at), grownRows(k))
		if err != nil || n != grownStores*grownArticles {
			b.Fatalf("fill the stock of other client %d: %d rows, %v", k, n, err)
		}
		fmt.Printf("template of %d rows: client %d of %d filled after %.0f s\n", rows, k+1, st.Clients, time.Since(start).Seconds())
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	os.Remove(tmp + ".lock")
	st.Seconds = time.Since(start).Seconds()
	st.FileBytes, st.StockBytes, st.Indexes = sqliteSizes(b, tmp)
	os.Remove(tmp + "-wal")
	os.Remove(tmp + "-shm")
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	data, _ := json.Marshal(st)
	if err := os.WriteFile(path+".json", data, 0o600); err != nil {
		b.Fatal(err)
	}
	return path, st
}

// sqliteSizes reads the size of a database file and of its stock table
// with the table's indexes (dbstat: every page of them, read once).
func sqliteSizes(b *testing.B, path string) (file, stock int64, indexes int) {
	b.Helper()
	db, err := openRaw(path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	q := `SELECT (SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()),
		(SELECT sum(pgsize) FROM dbstat WHERE name = 'stock' OR name IN (SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'stock')),
		(SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'stock' AND sql IS NOT NULL)`
	if err := db.QueryRow(q).Scan(&file, &stock, &indexes); err != nil {
		b.Fatal(err)
	}
	return file, stock, indexes
}

// openRaw opens a database file read-only, outside the product's code.
func openRaw(path string) (*sql.DB, error) {
	return sql.Open("sqlite", "file:"+path+"?mode=ro")
}

// copyFile copies a template into a data folder.
func copyFile(b *testing.B, from, to string) {
	b.Helper()
	in, err := os.Open(from)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
}

// grownServe is one size's serve process, and what was measured on it.
type grownServe struct {
	rows   int
	stat   grownStat
	p      *proc
	orders *ordersTarget
	rounds []grownRound
}

// grownRound is one round's figures on one size.
type grownRound struct {
	load                   string
	first, changed, resent importResult
	create                 []time.Duration // POST /orders
	pages                  []time.Duration
	// serve's CPU time per transition of the orders, and per page read
	orderCPU, pageCPU time.Duration
}

// BenchmarkGrownTables is the benchmark of issue 15 item 3; see the top of
// the file.
func BenchmarkGrownTables(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		var serves []*grownServe
		for _, rows := range grownSizes(b) {
			path, st := sqliteTemplate(b, rows)
			data := b.TempDir()
			copyFile(b, path, filepath.Join(data, "storelink.db"))
			serves = append(serves, &grownServe{rows: rows, stat: st,
				p: startServe(b, data, "--capacity-base", "1GiB")})
		}
		runGrown(b, "SQLite", serves)
	})
	b.Run("postgres", func(b *testing.B) {
		skipWithoutPostgres(b)
		var serves []*grownServe
		for _, rows := range grownSizes(b) {
			tmpl, st := pgTemplate(b, rows)
			name := fmt.Sprintf("storelink_grown_run_%d_%d", rows, os.Getpid())
			// FILE_COPY: a checkpoint and a copy of the files, much faster
			// for a large template than writing it all to the WAL.
			pgGrownAdmin(b, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)",
				"CREATE DATABASE "+name+" TEMPLATE "+tmpl+" STRATEGY FILE_COPY")
			b.Cleanup(func() { pgGrownAdmin(b, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
			p := startServe(b, b.TempDir(), pgArgs(pgDatabaseURL(b, name), "--capacity-base", "1GiB")...)
			p.AdminToken = pgTestToken
			serves = append(serves, &grownServe{rows: rows, stat: st, p: p})
		}
		runGrown(b, "PostgreSQL", serves)
	})
}

// runGrown sets up the orders clients, runs the rounds and prints the
// figures.
func runGrown(b *testing.B, name string, serves []*grownServe) {
	loadBefore := loadAverage()
	feeds := [2]benchFeedData{benchFeed(benchFeedBytes, -1, 0), benchFeed(benchFeedBytes, -1, 1)}
	for _, g := range serves {
		if grownPart("orders") {
			o := grownClient(b, g.p, "orders", "S1", "S2", "S3")
			g.orders = newOrdersTarget(b, o, g.p.PID())
			g.orders.verify(b, g.orders.drive(b, ordersWarmUp))
		}
	}
	round := 0
	for b.Loop() {
		for i := range serves {
			g := serves[(i+round)%len(serves)]
			g.rounds = append(g.rounds, g.round(b, round, feeds))
			r := g.rounds[round]
			fmt.Printf("round %d, %8d rows of other clients (load %s): 10 MiB first import %d ms (serve CPU %d ms), every row changed %d ms (%d ms), 2%% changed %d ms (%d ms); POST /orders p50 %.1f ms p99 %.1f ms (serve CPU %.2f ms per transition); stock page p50 %.2f ms p99 %.2f ms (serve CPU %.2f ms per page)\n",
				round+1, g.rows, r.load, r.first.total.Milliseconds(), r.first.cpu.Milliseconds(), r.changed.total.Milliseconds(), r.changed.cpu.Milliseconds(),
				r.resent.total.Milliseconds(), r.resent.cpu.Milliseconds(), ms(pct(r.create, 50)), ms(pct(r.create, 99)), ms(r.orderCPU),
				ms(pct(r.pages, 50)), ms(pct(r.pages, 99)), ms(r.pageCPU))
		}
		round++
	}
	printGrown(name, serves, loadBefore, loadAverage())
}

// grownClient makes a client with the stores named through the operator
// API, and returns the serve process as that client's.
func grownClient(b *testing.B, p *proc, name string, stores ...string) *proc {
	b.Helper()
	admin := func(method, path string, body any) map[string]any {
		data, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, p.URL+path, strings.NewReader(string(data)))
		req.Header.Set("Authorization", "Bearer "+p.AdminToken)
		req.Header.Set("Content-Type", "application/json")
		code, v := doJSON(b, req)
		if code != http.StatusOK && code != http.StatusCreated {
			b.Fatalf("%s %s: %d %v", method, path, code, v)
		}
		return v
	}
	partner := admin(http.MethodPost, "/admin/partners", map[string]string{"name": "Bench " + name})
	client := admin(http.MethodPost, "/admin/partners/"+partner["partner_id"].(string)+"/clients",
		map[string]string{"country_code": "DE", "currency": "EUR"})
	c := *p
	c.ClientID, c.APIKey = client["client_id"].(string), client["api_key"].(string)
	for _, s := range stores {
		admin(http.MethodPut, "/admin/clients/"+c.ClientID+"/stores/"+s, map[string]string{"name": "Bench store " + s})
	}
	return &c
}

// round measures one round on g.
func (g *grownServe) round(b *testing.B, round int, feeds [2]benchFeedData) grownRound {
	r := grownRound{load: loadAverage()}
	c := grownClient(b, g.p, fmt.Sprintf("round %d", round))
	s := newBenchServer(b, c) // registers the 50 stores
	// unchanged tells how many rows of a feed the server should find
	// unchanged, from the stock it holds.
	unchanged := heldStock{}.unchanged
	// The pages read need the client's stock: the first feed at least.
	r.first = s.importFeedUnchanged(b, "first.csv", feeds[0], bigPoll, unchanged(feeds[0]))
	if grownPart("apply") {
		r.changed = s.importFeedUnchanged(b, "changed.csv", feeds[1], bigPoll, unchanged(feeds[1]))
		again := benchChanged(feeds[1], 50, uint64(round+1))
		r.resent = s.importFeedUnchanged(b, "again.csv", again, bigPoll, unchanged(again))
	}

	if grownPart("orders") {
		o := g.orders.drive(b, grownOrders)
		g.orders.verify(b, o)
		r.create = o.lat[callCreate]
		r.orderCPU = o.cpu / time.Duration(o.transitions)
	}
	if !grownPart("pages") {
		return r
	}
	cpu := cpuTime(b, g.p.PID())
	r.pages = readStockPages(b, c, grownPages)
	r.pageCPU = (cpuTime(b, g.p.PID()) - cpu) / grownPages
	return r
}

// readStockPages reads n pages of the client's stock one after the other,
// following next_cursor, and times each (request to the answer read).
func readStockPages(b *testing.B, c *proc, n int) []time.Duration {
	b.Helper()
	client := &http.Client{Timeout: time.Minute}
	var lat []time.Duration
	cursor := ""
	for range n {
		path := fmt.Sprintf("%s/stock/%s/stock?limit=%d", c.URL, c.ClientID, grownPageRows)
		if cursor != "" {
			path += "&after=" + url.QueryEscape(cursor)
		}
		req, _ := http.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("x-api-key", c.APIKey)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatalf("GET %s: %v", path, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		lat = append(lat, time.Since(start))
		var page struct {
			Stock      []json.RawMessage `json:"stock"`
			NextCursor string            `json:"next_cursor"`
		}
		if err != nil || resp.StatusCode != http.StatusOK || json.Unmarshal(body, &page) != nil || len(page.Stock) != grownPageRows {
			b.Fatalf("GET %s: %d %v %.200s", path, resp.StatusCode, err, body)
		}
		cursor = page.NextCursor
	}
	return lat
}

// grownFigure is one figure of every size: a time or latency per round.
type grownFigure struct {
	name   string
	target bool // at most grownTarget times the baseline at 10 million rows
	of     func(grownRound) time.Duration
}

var grownFigures = []grownFigure{
	{"10 MiB feed, first import (PUT to applied)", true, func(r grownRound) time.Duration { return r.first.total }},
	{"10 MiB feed, every row changed", true, func(r grownRound) time.Duration { return r.changed.total }},
	{"10 MiB feed, again with 2% changed", true, func(r grownRound) time.Duration { return r.resent.total }},
	{"POST /orders p99 at 16 clients", true, func(r grownRound) time.Duration { return pct(r.create, 99) }},
	{"stock page of 100 rows, median", true, func(r grownRound) time.Duration { return pct(r.pages, 50) }},
	{"stock page of 100 rows, p99", false, func(r grownRound) time.Duration { return pct(r.pages, 99) }},
	{"serve CPU: 10 MiB first import", false, func(r grownRound) time.Duration { return r.first.cpu }},
	{"serve CPU: 10 MiB every row changed", false, func(r grownRound) time.Duration { return r.changed.cpu }},
	{"serve CPU: 10 MiB again with 2% changed", false, func(r grownRound) time.Duration { return r.resent.cpu }},
	{"serve CPU: per order transition", false, func(r grownRound) time.Duration { return r.orderCPU }},
	{"serve CPU: per stock page", false, func(r grownRound) time.Duration { return r.pageCPU }},
}

func printGrown(name string, serves []*grownServe, loadBefore, loadAfter string) {
	base := serves[0]
	if len(base.rounds) == 0 {
		return
	}
	fmt.Printf("--- grown tables on %s (issue 15 item 3) ---\n", name)
	fmt.Printf("%d rounds; machine load average before %s, after %s; per round:", len(base.rounds), loadBefore, loadAfter)
	for _, g := range serves {
		var loads []string
		for _, r := range g.rounds {
			loads = append(loads, r.load)
		}
		fmt.Printf(" [%d rows: %s]", g.rows, strings.Join(loads, "; "))
	}
	fmt.Println()
	for _, g := range serves {
		fmt.Printf("database of %d rows: %s\n", g.rows, g.stat)
	}
	fmt.Println("figure (median of the rounds [min-max]); each size's ratio to the baseline is the median of the per-round ratios [min-max]")
	for _, f := range grownFigures {
		if f.of(base.rounds[0]) == 0 {
			continue // a part not measured (STORELINK_BENCH_GROWN_PARTS)
		}
		fmt.Printf("%s:\n", f.name)
		for _, g := range serves {
			n := min(len(g.rounds), len(base.rounds))
			var v, ratios []float64
			for i := range n {
				v = append(v, ms(f.of(g.rounds[i])))
				ratios = append(ratios, ms(f.of(g.rounds[i]))/ms(f.of(base.rounds[i])))
			}
			line := fmt.Sprintf("  %9d rows: %9.2f ms [%.2f-%.2f]", g.rows, medianOf(v), slices.Min(v), slices.Max(v))
			if g != base {
				line += fmt.Sprintf("   ratio %.2f [%.2f-%.2f]", medianOf(ratios), slices.Min(ratios), slices.Max(ratios))
				if f.target && g.rows >= 10_000_000 {
					line += fmt.Sprintf("   target <= %.1f: %s", grownTarget, verdict(medianOf(ratios) <= grownTarget))
				}
			} else {
				line += "   (baseline)"
			}
			fmt.Println(line)
		}
	}
}

// pgGrownAdmin runs statements on the server of STORELINK_TEST_DATABASE_URL,
// outside any transaction (CREATE DATABASE cannot run in one).
func pgGrownAdmin(b *testing.B, statements ...string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, os.Getenv("STORELINK_TEST_DATABASE_URL"))
	if err != nil {
		b.Fatalf("connect to the test database: %v", err)
	}
	defer conn.Close(ctx)
	for _, q := range statements {
		if _, err := conn.Exec(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
}

// pgDatabaseURL is STORELINK_TEST_DATABASE_URL with another database.
func pgDatabaseURL(b *testing.B, name string) string {
	b.Helper()
	u, err := url.Parse(os.Getenv("STORELINK_TEST_DATABASE_URL"))
	if err != nil {
		b.Fatal("STORELINK_TEST_DATABASE_URL cannot be parsed")
	}
	u.Path = "/" + name
	return u.String()
}

// pgTemplate returns the name of the template database of rows rows, making
// it first when the server has none for the current migrations.
func pgTemplate(b *testing.B, rows int) (string, grownStat) {
	b.Helper()
	key := migrationsKey(b, "postgres")
	name := fmt.Sprintf("storelink_grown_%d_%s", rows, key)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, os.Getenv("STORELINK_TEST_DATABASE_URL"))
	if err != nil {
		b.Fatalf("connect to the test database: %v", err)
	}
	var st grownStat
	var comment *string
	var old []string
	// starts_with, not LIKE, whose _ matches any character: the template
	// of 1,000,000 rows is not one of 10,000,000.
	rowsOf, err := conn.Query(ctx, `SELECT datname, shobj_description(oid, 'pg_database') FROM pg_database WHERE starts_with(datname, $1)`,
		fmt.Sprintf("storelink_grown_%d_", rows))
	if err == nil {
		for rowsOf.Next() {
			var n string
			var c *string
			if rowsOf.Scan(&n, &c) == nil {
				if n == name {
					comment = c
				} else {
					old = append(old, n)
				}
			}
		}
		rowsOf.Close()
	}
	conn.Close(ctx)
	if comment != nil && json.Unmarshal([]byte(*comment), &st) == nil {
		return name, st
	}
	// Templates of older migrations, or unfinished ones, are of no more use.
	for _, n := range append(old, name) {
		pgGrownAdmin(b, "DROP DATABASE IF EXISTS "+n+" WITH (FORCE)")
	}
	start := time.Now()
	pgGrownAdmin(b, "CREATE DATABASE "+name)
	db, err := postgres.Open(ctx, pgDatabaseURL(b, name))
	if err != nil {
		b.Fatal(err)
	}
	raw := dbtest.Postgres{URL: pgDatabaseURL(b, name), Now: db.Now}
	st.Rows, st.Clients = rows, rows/(grownStores*grownArticles)
	for k := range st.Clients {
		at := grownClientTime(k)
		svc := service.New(postgres.NewDrivers(db), service.WithClock(func() time.Time { return at }))
		clientID := grownOtherClient(b, svc, k)
		n, err := raw.FillStock(ctx, clientID, storelink.NewID(at), grownRows(k))
		if err != nil || n != grownStores*grownArticles {
			b.Fatalf("fill the stock of other client %d: %d rows, %v", k, n, err)
		}
		fmt.Printf("template of %d rows on PostgreSQL: client %d of %d filled after %.0f s\n", rows, k+1, st.Clients, time.Since(start).Seconds())
	}
	db.Close()
	// A database that grew over time has been vacuumed and analysed by
	// autovacuum.
	conn, err = pgx.Connect(ctx, pgDatabaseURL(b, name))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		b.Fatal(err)
	}
	var indexes int
	if err := conn.QueryRow(ctx, `SELECT pg_database_size(current_database()), pg_total_relation_size('stock'),
		(SELECT count(*) FROM pg_indexes WHERE tablename = 'stock') - 1`).Scan(&st.FileBytes, &st.StockBytes, &indexes); err != nil {
		b.Fatal(err)
	}
	st.Indexes = indexes
	conn.Close(ctx)
	st.Seconds = time.Since(start).Seconds()
	data, _ := json.Marshal(st)
	// The comment marks the template finished, and keeps its figures.
	pgGrownAdmin(b, fmt.Sprintf("COMMENT ON DATABASE %s IS '%s'", name, data))
	return name, st
}

// grownOtherClient makes other client k with its 50 stores through the
// services, and returns its id.
func grownOtherClient(b *testing.B, svc *service.Services, k int) string {
	b.Helper()
	ctx := context.Background()
	partner, err := svc.Partners.CreatePartner(ctx, fmt.Sprintf("Other partner %d", k))
	if err != nil {
		b.Fatal(err)
	}
	client, err := svc.Partners.CreateClient(ctx, partner.ID, "DE", "EUR")
	if err != nil {
		b.Fatal(err)
	}
	for s := range grownStores {
		if _, _, err := svc.Partners.PutStore(ctx, client.ID, grownStoreID(s), "Other store"); err != nil {
			b.Fatal(err)
		}
	}
	return client.ID
}
