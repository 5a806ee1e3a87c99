package main

// The benchmark of issue 15 item 2, many small feeds at once: 64 uploaders
// over 50 clients PUT 2-row feeds for 20 s, as fast as serve answers, to a
// separate `storelink serve` (SQLite; PostgreSQL too when
// STORELINK_TEST_DATABASE_URL is set). The limits on uploads waiting and in
// flight per client are lifted, so that every upload is accepted and what is
// measured is whether the processing keeps up with the accepts:
//
//   - accepted/s: uploads answered 200 per second of the run (the baseline,
//     measured in the same run);
//   - applied/s over the run: uploads of the run applied by its end, per
//     second of the run, and its ratio to accepted/s (target >= 0.9);
//   - accepted -> applied: each upload's received_at to its finished_at, as
//     the server recorded them (storelink_upload_lag_seconds), p50 and p99
//     (target p99 < 1 s).
//
// After the run every upload is waited for until applied (any other end
// fails the benchmark), and the times are read from the database. Run it
// with bench/small-feeds, or
//
//	go test ./cmd/storelink -run '^$' -bench '^BenchmarkSmallFeeds$' -benchtime 1x
//
// Each of the N runs starts a serve process of its own; its line starts with
// "run N:", which bench/ab reads. STORELINK_BENCH_SMALL_SECONDS shortens the
// runs for a try (the figures in docs/benchmarks.md are of 20 s runs).

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"storelink"
	"storelink/postgres"
	"storelink/service"
	"storelink/sqlite"
	"storelink/worker"
)

const (
	smallUploaders = 64
	smallClients   = 50
	smallRun       = 20 * time.Second
)

// smallFeedArgs lift the limits that would turn the flood away with 429: the
// accept rate is the baseline.
var smallFeedArgs = []string{"--capacity-base", "1GiB", "--max-waiting-uploads", "0", "--max-uploads-in-flight", "1000"}

// BenchmarkSmallFeeds is the benchmark of issue 15 item 2; see the top of
// the file.
func BenchmarkSmallFeeds(b *testing.B) {
	run := smallRun
	if s := os.Getenv("STORELINK_BENCH_SMALL_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("STORELINK_BENCH_SMALL_SECONDS=%q: want whole seconds", s)
		}
		run = time.Duration(n) * time.Second
	}
	b.Run("sqlite", func(b *testing.B) {
		benchSmallFeeds(b, "SQLite", run, func(b *testing.B) smallTarget {
			data := b.TempDir()
			p := startServe(b, data, smallFeedArgs...)
			return smallTarget{procs: []*proc{p}, times: sqliteUploadTimes(b, filepath.Join(data, "storelink.db"))}
		})
	})
	b.Run("postgres", func(b *testing.B) {
		skipWithoutPostgres(b)
		benchSmallFeeds(b, "PostgreSQL", run, func(b *testing.B) smallTarget {
			dbURL, _ := pgSchemaURL(b)
			p := startServe(b, b.TempDir(), pgArgs(dbURL, smallFeedArgs...)...)
			p.AdminToken = pgTestToken
			return smallTarget{procs: []*proc{p}, times: pgUploadTimes(pgConn(b, dbURL))}
		})
	})
}

// smallTarget is the serve processes of one installation and how to read
// its uploads' times. Uploader u sends to procs[u % len(procs)].
type smallTarget struct {
	procs []*proc
	times func() ([]uploadTimes, error)
}

// pgUploadTimes reads the uploads from the installation's schema.
func pgUploadTimes(conn *pgx.Conn) func() ([]uploadTimes, error) {
	return func() ([]uploadTimes, error) {
		rows, err := conn.Query(context.Background(), `SELECT status, received_at, finished_at FROM uploads`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []uploadTimes
		for rows.Next() {
			var t uploadTimes
			var finished *time.Time
			if err := rows.Scan(&t.status, &t.received, &finished); err != nil {
				return nil, err
			}
			if finished != nil {
				t.finished = *finished
			}
			out = append(out, t)
		}
		return out, rows.Err()
	}
}

// uploadTimes is an upload's status and times, as the server recorded them;
// finished is zero while it is not finished.
type uploadTimes struct {
	status             string
	received, finished time.Time
}

// sqliteUploadTimes reads the uploads from serve's database file, beside it:
// WAL lets a reader in while serve writes.
func sqliteUploadTimes(b *testing.B, path string) func() ([]uploadTimes, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=query_only(1)")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return func() ([]uploadTimes, error) {
		rows, err := db.Query(`SELECT status, received_at, coalesce(finished_at, 0) FROM uploads`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []uploadTimes
		for rows.Next() {
			var t uploadTimes
			var received, finished int64
			if err := rows.Scan(&t.status, &received, &finished); err != nil {
				return nil, err
			}
			t.received = time.UnixMilli(received)
			if finished != 0 {
				t.finished = time.UnixMilli(finished)
			}
			out = append(out, t)
		}
		return out, rows.Err()
	}
}

// cpu is the CPU time the processes have used.
func (t smallTarget) cpu(b *testing.B) time.Duration {
	var sum time.Duration
	for _, p := range t.procs {
		sum += cpuTime(b, p.PID())
	}
	return sum
}

// smallResult is one measured run.
type smallResult struct {
	accepted      int
	elapsed       time.Duration // the run: first PUT sent to the last answer
	applied       int           // uploads of the run applied by its end
	drained       time.Duration // the run's end to every upload applied
	p50, p99, max time.Duration // received_at to finished_at
	putP50        time.Duration
	cpu           time.Duration // serve's CPU, the run and the drain
}

func (r smallResult) acceptedRate() float64 { return float64(r.accepted) / r.elapsed.Seconds() }
func (r smallResult) appliedRate() float64  { return float64(r.applied) / r.elapsed.Seconds() }
func (r smallResult) ratio() float64        { return r.appliedRate() / r.acceptedRate() }

func benchSmallFeeds(b *testing.B, name string, run time.Duration, start func(*testing.B) smallTarget) {
	loadBefore := loadAverage()
	var results []smallResult
	for b.Loop() {
		b.StopTimer()
		t := start(b)
		clients := smallClientsOf(b, t.procs[0], smallClients)
		b.StartTimer()
		r := smallRunOnce(b, t, clients, run)
		results = append(results, r)
		fmt.Printf("run %d: %s, %d uploaders over %d clients, 2-row feeds for %.0f s: %d accepted, %.0f accepted/s, %.0f applied/s over the run, %.3f applied/accepted; accepted to applied p50 %.0f ms, %.0f ms p99, max %.0f ms; drained %.0f ms after the run; PUT median %.1f ms; serve CPU %.2f ms per upload; load average %s\n",
			len(results), name, smallUploaders, smallClients, run.Seconds(), r.accepted, r.acceptedRate(), r.appliedRate(), r.ratio(),
			ms(r.p50), ms(r.p99), ms(r.max), ms(r.drained), ms(r.putP50), ms(r.cpu)/float64(r.accepted), loadAverage())
	}
	med := func(f func(smallResult) float64) float64 {
		v := make([]float64, len(results))
		for i, r := range results {
			v[i] = f(r)
		}
		return medianOf(v)
	}
	accepted, applied, ratio := med(smallResult.acceptedRate), med(smallResult.appliedRate), med(smallResult.ratio)
	p50 := med(func(r smallResult) float64 { return ms(r.p50) })
	p99 := med(func(r smallResult) float64 { return ms(r.p99) })
	b.ReportMetric(accepted, "accepted/s")
	b.ReportMetric(applied, "applied/s")
	b.ReportMetric(ratio, "applied/accepted")
	b.ReportMetric(p99, "ms-p99")
	fmt.Printf("--- many small feeds at once on %s (issue 15 item 2), median of %d runs; load average before %s, after %s ---\n",
		name, len(results), loadBefore, loadAverage())
	fmt.Printf("accepted (the baseline):  %7.0f uploads/s\n", accepted)
	fmt.Printf("applied over the run:     %7.0f uploads/s\n", applied)
	fmt.Printf("ratio applied / accepted: %7.3f          target >= 0.90: %s\n", ratio, verdict(ratio >= 0.9))
	fmt.Printf("accepted -> applied:      p50 %.0f ms, p99 %.0f ms; target p99 < 1000 ms: %s\n", p50, p99, verdict(p99 < 1000))
}

// smallClientsOf creates n partners with one client each, each with store
// S01, the store of the small feeds.
func smallClientsOf(b *testing.B, p *proc, n int) []scaleClient {
	b.Helper()
	var out []scaleClient
	for i := range n {
		var partner struct {
			ID string `json:"partner_id"`
		}
		var cl struct {
			ID     string `json:"client_id"`
			APIKey string `json:"api_key"`
		}
		crashAdmin(b, p, "POST", "/admin/partners", map[string]string{"name": fmt.Sprintf("Small Feeds %d", i+1)}, 201, &partner)
		crashAdmin(b, p, "POST", "/admin/partners/"+partner.ID+"/clients", map[string]string{"country_code": "DE", "currency": "EUR"}, 201, &cl)
		crashAdmin(b, p, "PUT", "/admin/clients/"+cl.ID+"/stores/S01", map[string]string{"name": "Store 01"}, 201, nil)
		out = append(out, scaleClient{cl.ID, cl.APIKey})
	}
	return out
}

// smallFeed is uploader u's i-th feed: two rows of its own EANs, with
// quantities that change from one feed to the next.
func smallFeed(u, i int) []byte {
	return fmt.Appendf(nil, "store;ean;article_number;quantity;price\nS01;%s;A-%d;%d;9.99\nS01;%s;B-%d;%d;19.99\n",
		benchEAN(2*u), u, i%1000, benchEAN(2*u+1), u, (i+500)%1000)
}

// smallRunOnce has the uploaders PUT feeds for run (uploader u to client
// u % len(clients), through process u % len(t.procs)), then waits until every
// upload is applied and reads their times. Any answer but 200, or an
// upload not applied, fails the benchmark.
func smallRunOnce(b *testing.B, t smallTarget, clients []scaleClient, run time.Duration) smallResult {
	b.Helper()
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: smallUploaders}}
	defer client.CloseIdleConnections()
	var (
		mu      sync.Mutex
		failure error
		puts    []time.Duration
		n       int
		wg      sync.WaitGroup
	)
	cpu := t.cpu(b)
	begin := time.Now()
	deadline := begin.Add(run)
	for u := range smallUploaders {
		cl, p := clients[u%len(clients)], t.procs[u%len(t.procs)]
		wg.Go(func() {
			var mine []time.Duration
			for i := 0; time.Now().Before(deadline); i++ {
				req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("%s/stock/%s/small-%d-%d.csv", p.URL, cl.id, u, i),
					bytes.NewReader(smallFeed(u, i)))
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
					log := p.stderr.String()
					log = log[max(len(log)-2000, 0):]
					failure = fmt.Errorf("PUT by uploader %d: %w\nthe end of its serve's log:\n%s", u, err, log)
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			puts = append(puts, mine...)
			n += len(mine)
			mu.Unlock()
		})
	}
	wg.Wait()
	end := time.Now()
	if failure != nil {
		b.Fatal(failure)
	}
	r := smallResult{accepted: n, elapsed: end.Sub(begin)}
	var list []uploadTimes
	for wait := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if list, err = t.times(); err != nil {
			b.Fatal(err)
		}
		done := 0
		for _, u := range list {
			if !u.finished.IsZero() {
				done++
			}
		}
		if done == len(list) {
			break
		}
		if time.Now().After(wait) {
			b.Fatalf("%d of %d uploads not finished two minutes after the run", len(list)-done, len(list))
		}
	}
	r.drained = time.Since(end)
	r.cpu = t.cpu(b) - cpu
	if len(list) != n {
		b.Fatalf("%d uploads accepted, %d in the database", n, len(list))
	}
	lags := make([]time.Duration, 0, len(list))
	for _, u := range list {
		if u.status != "applied" {
			b.Fatalf("an upload is %s, want applied:\n%s", u.status, tail(t.procs[0].stderr.String(), 4000))
		}
		if !u.finished.After(end) {
			r.applied++
		}
		lags = append(lags, u.finished.Sub(u.received))
	}
	slices.Sort(lags)
	slices.Sort(puts)
	r.p50, r.p99, r.max = lags[len(lags)/2], lags[(len(lags)*99+99)/100-1], lags[len(lags)-1]
	r.putP50 = puts[len(puts)/2]
	return r
}

// BenchmarkSmallBatchApply accepts 64 small feeds of 50 clients and has
// the processor claim and apply them (in batches), in this process, on
// SQLite and (with STORELINK_TEST_DATABASE_URL) PostgreSQL, so that a
// profile shows where the processing of small uploads spends its time:
//
//	go test ./cmd/storelink -run '^$' -bench SmallBatchApply/sqlite -benchtime 200x -cpuprofile cpu.out
func BenchmarkSmallBatchApply(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		db, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "storelink.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		benchSmallBatchApply(b, service.New(sqlite.NewDrivers(db)))
	})
	b.Run("postgres", func(b *testing.B) {
		skipWithoutPostgres(b)
		dbURL, _ := pgSchemaURL(b)
		db, err := postgres.Open(context.Background(), dbURL)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		benchSmallBatchApply(b, service.New(postgres.NewDrivers(db)))
	})
}

func benchSmallBatchApply(b *testing.B, svc *service.Services) {
	ctx := context.Background()
	var clients []string
	for i := range smallClients {
		partner, err := svc.Partners.CreatePartner(ctx, fmt.Sprintf("Small %d", i))
		if err != nil {
			b.Fatal(err)
		}
		client, err := svc.Partners.CreateClient(ctx, partner.ID, "DE", "EUR")
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := svc.Partners.PutStore(ctx, client.ID, "S01", "Store"); err != nil {
			b.Fatal(err)
		}
		clients = append(clients, client.ID)
	}
	policy := storelink.CapacityPolicy{Base: 1 << 40, Window: time.Hour}
	p := worker.NewProcessor(svc.Uploads, slog.New(slog.NewTextHandler(io.Discard, nil)), "bench", prometheus.NewRegistry())
	n := 0
	var busy time.Duration
	for b.Loop() {
		b.StopTimer()
		for u := range smallUploaders {
			if _, _, err := svc.Uploads.Accept(ctx, storelink.NewUpload{ClientID: clients[u%len(clients)], FileName: "f.csv", Body: storelink.ChunksOf(smallFeed(u, n))}, policy); err != nil {
				b.Fatal(err)
			}
		}
		n++
		b.StartTimer()
		start := time.Now()
		for {
			worked, err := p.RunOnce(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if !worked {
				break
			}
		}
		busy += time.Since(start)
	}
	b.ReportMetric(float64(busy.Microseconds())/float64(n*smallUploaders), "µs/upload")
}
