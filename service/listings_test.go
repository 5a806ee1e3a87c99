package service_test

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"storelink"
	"storelink/internal/dbtest"
	"storelink/postgres"
	"storelink/service"
	"storelink/sqlite"
)

// A client's endpoints are listed whole, oldest first, each with its own
// stats, however many there are: 200 endpoints, each with attempts that
// succeeded, failed or were retried, and deliveries pending and failed,
// and one endpoint with nothing yet.
func TestEndpointDetailsListsAWholePage(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		ctx := context.Background()
		const n = 200
		c, eps, want := fillEndpoints(t, db, n)
		list, err := db.svc.Webhooks.EndpointDetails(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != n+1 {
			t.Fatalf("listed %d endpoints, want %d", len(list), n+1)
		}
		for i, d := range list {
			if d.ID != eps[i].ID || d.URL != eps[i].URL {
				t.Fatalf("endpoint %d listed = %s %s, want %s %s (oldest first)", i, d.ID, d.URL, eps[i].ID, eps[i].URL)
			}
			if got := statsText(d.Stats); got != want[i] {
				t.Errorf("endpoint %d stats = %s\nwant %s", i, got, want[i])
			}
		}
		// One endpoint read alone has the stats it has in the list.
		for _, i := range []int{0, 1, 2, n} {
			d, err := db.svc.Webhooks.Endpoint(ctx, c, eps[i].ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := statsText(d.Stats); got != want[i] {
				t.Errorf("endpoint %d read alone: stats = %s\nwant %s", i, got, want[i])
			}
		}
	})
}

// The endpoints of many clients are listed in one read, oldest first, and
// those of no client are none.
func TestEndpointsOfManyClients(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		ctx := context.Background()
		var clients []string
		var want []string
		for i := range 30 {
			p, err := db.svc.Partners.CreatePartner(ctx, fmt.Sprintf("P%d", i))
			if err != nil {
				t.Fatal(err)
			}
			c, err := db.svc.Partners.CreateClient(ctx, p.ID, "DE", "EUR")
			if err != nil {
				t.Fatal(err)
			}
			clients = append(clients, c.ID)
			for j := range 3 {
				db.clock.advance(time.Millisecond)
				e, err := db.svc.Webhooks.CreateEndpoint(ctx, c.ID, storelink.NewEndpoint{URL: fmt.Sprintf("https://c%d-e%d.test/", i, j)}, endpointSecret)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, e.URL)
			}
		}
		list, err := db.svc.Webhooks.Endpoints(ctx, clients...)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range list {
			got = append(got, e.URL)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("endpoints of 30 clients = %v\nwant %v", got, want)
		}
		if one, err := db.svc.Webhooks.Endpoints(ctx, clients[7]); err != nil || len(one) != 3 || one[0].URL != want[21] || one[2].URL != want[23] {
			t.Fatalf("endpoints of one client = %+v, %v; want its three, oldest first", one, err)
		}
		if none, err := db.svc.Webhooks.Endpoints(ctx); err != nil || none == nil || len(none) != 0 {
			t.Fatalf("endpoints of no client = %#v, %v; want none", none, err)
		}
	})
}

// EndpointDetails makes as many statements for 200 endpoints as for 10:
// counted on PostgreSQL, between the services and the server.
func TestEndpointDetailsStatementsDoNotGrow(t *testing.T) {
	made := map[int]int64{}
	for _, n := range []int{10, 200} {
		db := openCounted(t)
		c, _, _ := fillEndpoints(t, db, n)
		before := db.statements()
		if _, err := db.svc.Webhooks.EndpointDetails(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		made[n] = db.statements() - before
	}
	if made[200] != made[10] || made[10] > 3 {
		t.Fatalf("EndpointDetails made %d statements for 10 endpoints, %d for 200; want the same, at most 3", made[10], made[200])
	}
}

// BenchmarkEndpointDetails lists clients of 10 and of 500 endpoints, each
// endpoint with attempts and deliveries. It reports the time and the
// process's CPU time (the SQLite database's work is the process's; the
// time is that of a loaded machine too) per endpoint, which fall with the
// size when the statements do not grow with the endpoints, and on
// PostgreSQL the statements per listing.
func BenchmarkEndpointDetails(b *testing.B) {
	for _, n := range []int{10, 500} {
		eachDatabaseB(b, fmt.Sprintf("endpoints=%d", n), func(b *testing.B, db database) {
			c, _, _ := fillEndpoints(b, db, n)
			ctx := context.Background()
			var statements int64
			b.ResetTimer()
			cpu := cpuTime()
			for range b.N {
				before := db.statements()
				list, err := db.svc.Webhooks.EndpointDetails(ctx, c)
				if err != nil || len(list) != n+1 {
					b.Fatalf("listed %d endpoints, %v; want %d", len(list), err, n+1)
				}
				statements += db.statements() - before
			}
			rows := float64(b.N * (n + 1))
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/rows, "cpu-ns/endpoint")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/rows, "ns/endpoint")
			if db.name == "postgres" {
				b.ReportMetric(float64(statements)/float64(b.N), "statements/op")
			}
		})
	}
}

// cpuTime is the CPU time the process has used, in user and system mode.
func cpuTime() time.Duration {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// eachDatabaseB runs fn as a sub-benchmark on a fresh SQLite file and, when
// STORELINK_TEST_DATABASE_URL is set, on a fresh schema of that PostgreSQL
// database opened to count its statements, as eachDatabase does for a test.
func eachDatabaseB(b *testing.B, name string, fn func(b *testing.B, db database)) {
	b.Run("sqlite/"+name, func(b *testing.B) {
		c := newClock()
		sdb, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "storelink.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { sdb.Close() })
		sdb.Now = c.now
		fn(b, database{name: "sqlite", svc: service.New(sqlite.NewDrivers(sdb), options(b, c)...), clock: c,
			statements: func() int64 { return 0 }})
	})
	b.Run("postgres/"+name, func(b *testing.B) { fn(b, openCounted(b)) })
}

// openCounted opens services on a fresh schema of the PostgreSQL database
// at STORELINK_TEST_DATABASE_URL (skipping tb when it is not set), through
// a counter of the statements they have the server run.
func openCounted(tb testing.TB) database {
	tb.Helper()
	c := newClock()
	count, url := dbtest.CountStatements(tb, dbtest.Schema(tb))
	pdb, err := postgres.Open(context.Background(), url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { pdb.Close() })
	pdb.Now = c.now
	return database{name: "postgres", svc: service.New(postgres.NewDrivers(pdb), options(tb, c)...), clock: c, statements: count.Count}
}

// fillEndpoints makes a client with n endpoints and one more with nothing,
// and returns the client, its endpoints oldest first and each one's stats
// as statsText writes them. Of the first order's deliveries, those to
// every fourth endpoint (from the first) fail for good, those to the ones
// after them are retried and then succeed, the others succeed; each
// attempt takes a time of its endpoint's own. A second order's deliveries
// stay pending.
func fillEndpoints(tb testing.TB, db database, n int) (string, []storelink.Endpoint, []string) {
	tb.Helper()
	ctx := context.Background()
	c := client(tb, db)
	applyStockRows(tb, db, c.ID, storelink.StockRow{StoreID: "S1", EAN: "4006381333931", ArticleNumber: "A-1", Quantity: 100, Price: 100})
	var eps []storelink.Endpoint
	at := map[string]int{}
	webhooks := db.svc.With(service.WithMaxEndpoints(n + 1)).Webhooks // more than a client may have by default
	newEndpoint := func(i int) {
		db.clock.advance(time.Millisecond) // oldest first is in the order made
		e, err := webhooks.CreateEndpoint(ctx, c.ID, storelink.NewEndpoint{URL: fmt.Sprintf("https://e%d.test/", i)}, endpointSecret)
		if err != nil {
			tb.Fatal(err)
		}
		at[e.ID] = i
		eps = append(eps, *e)
	}
	for i := range n {
		newEndpoint(i)
	}
	order := func(number string) {
		_, err := db.svc.Orders.CreateOrder(ctx, storelink.NewOrder{OrderNumber: number, ClientID: c.ID,
			Items: []storelink.NewItem{{EAN: "4006381333931", MarketplaceArticleNumber: "M-1"}}})
		if err != nil {
			tb.Fatal(err)
		}
	}
	// recordAll records an attempt of each job claimed, as outcome says.
	recordAll := func(want int, outcome func(i int) (storelink.Outcome, int64)) {
		jobs, err := db.svc.Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w", Lease: time.Minute, Limit: 2 * n, Caps: storelink.EndpointCap(10)})
		if err != nil || len(jobs) != want {
			tb.Fatalf("claimed %d deliveries, %v; want %d", len(jobs), err, want)
		}
		results := make([]storelink.AttemptResult, len(jobs))
		for k := range jobs {
			o, ms := outcome(at[jobs[k].EndpointID])
			r := storelink.AttemptResult{Job: &jobs[k], Outcome: o,
				Attempt: storelink.Attempt{Number: jobs[k].Attempt, At: db.clock.now(), DurationMS: ms, StatusCode: 200}}
			if o != storelink.OutcomeSucceeded {
				r.Attempt.StatusCode, r.NextAt = 503, db.clock.now().Add(time.Minute)
			}
			results[k] = r
		}
		if err := db.svc.Webhooks.RecordAttempts(ctx, results); err != nil {
			tb.Fatal(err)
		}
	}
	order("N-1")
	t0 := db.clock.now()
	recordAll(n, func(i int) (storelink.Outcome, int64) {
		switch i % 4 {
		case 0:
			return storelink.OutcomeFailed, int64(i + 1)
		case 1:
			return storelink.OutcomeRetry, int64(2*i + 1)
		}
		return storelink.OutcomeSucceeded, int64(i + 1)
	})
	db.clock.advance(time.Hour)
	t1 := db.clock.now()
	recordAll(countRetried(n), func(int) (storelink.Outcome, int64) { return storelink.OutcomeSucceeded, 5 })
	order("N-2")
	newEndpoint(n)

	since := db.clock.now().Add(-storelink.StatsWindow)
	want := make([]string, n+1)
	for i := range n {
		st := storelink.EndpointStats{Since: since, Pending: 1}
		p50, p95 := int64(i+1), int64(i+1)
		switch i % 4 {
		case 0:
			st.Attempts, st.Failed, st.FailedDeliveries, st.LastFailureAt = 1, 1, 1, &t0
		case 1:
			st.Attempts, st.Succeeded, st.Failed, st.LastSuccessAt, st.LastFailureAt = 2, 1, 1, &t1, &t0
			p50, p95 = min(5, int64(2*i+1)), max(5, int64(2*i+1))
		default:
			st.Attempts, st.Succeeded, st.LastSuccessAt = 1, 1, &t0
		}
		rate := float64(st.Succeeded) / float64(st.Attempts)
		st.SuccessRate, st.LatencyP50MS, st.LatencyP95MS = &rate, &p50, &p95
		want[i] = statsText(st)
	}
	want[n] = statsText(storelink.EndpointStats{Since: since})
	return c.ID, eps, want
}

// countRetried is how many of n endpoints have their first delivery
// retried: those at 1, 5, 9, …
func countRetried(n int) int { return (n + 2) / 4 }

// statsText writes an endpoint's stats, times in UTC milliseconds and
// what pointers point at, for comparing.
func statsText(st storelink.EndpointStats) string {
	t := func(p *time.Time) string {
		if p == nil {
			return "-"
		}
		return p.UTC().Format("15:04:05.000")
	}
	f := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	ms := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("since %s: %d attempts, %d succeeded, %d failed, rate %s, p50 %s ms, p95 %s ms, last success %s, last failure %s; %d pending, %d failed deliveries",
		st.Since.UTC().Format(time.RFC3339), st.Attempts, st.Succeeded, st.Failed, f(st.SuccessRate), ms(st.LatencyP50MS), ms(st.LatencyP95MS),
		t(st.LastSuccessAt), t(st.LastFailureAt), st.Pending, st.FailedDeliveries)
}
