package postgres_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
)

// BenchmarkRecordAndClaim is the deliverer's bookkeeping alone on
// PostgreSQL, as it runs when a backlog goes to fast endpoints: each round
// records the results of the deliveries claimed in the round before (all
// succeeded) and claims as many again, in one transaction. It reports the
// time per delivery and the CPU time per delivery of this process and of
// the database's backends (every process pg_stat_activity lists for it,
// from /proc/PID/stat: run it on a database nothing else uses):
//
//	STORELINK_TEST_DATABASE_URL=… go test ./postgres -run '^$' -bench RecordAndClaim -benchtime 3x
func BenchmarkRecordAndClaim(b *testing.B) {
	const orders, endpoints, round = 150, 10, 48
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		dbURL := newSchema(b)
		db := openAt(b, dbURL, time.Now)
		p, err := db.Partners.CreatePartner(ctx, "Acme")
		if err != nil {
			b.Fatal(err)
		}
		c, err := db.Partners.CreateClient(ctx, p.ID, "DE", "EUR")
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := db.Partners.PutStore(ctx, c.ID, "S1", ""); err != nil {
			b.Fatal(err)
		}
		for i := range endpoints {
			if _, err := db.Webhooks.CreateEndpoint(ctx, c.ID, storelink.NewEndpoint{URL: fmt.Sprintf("https://%d.test", i)}, "whsec_AAAA"); err != nil {
				b.Fatal(err)
			}
		}
		price := storelink.Money(100)
		for i := range orders {
			o, err := db.Orders.CreateOrder(ctx, storelink.NewOrder{OrderNumber: fmt.Sprint("O-", i), ClientID: c.ID, StoreID: "S1",
				Items: []storelink.NewItem{{EAN: "4006381333931", MarketplaceArticleNumber: "M", ArticleNumber: "A", Price: &price}}})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := db.Orders.FulfilOrder(ctx, o.ID, storelink.FulfilRequest{}); err != nil {
				b.Fatal(err)
			}
		}
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			b.Fatal(err)
		}
		backends := func() time.Duration {
			rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
			if err != nil {
				b.Fatal(err)
			}
			pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
			if err != nil {
				b.Fatal(err)
			}
			var sum time.Duration
			for _, pid := range pids {
				sum += procCPU(int(pid))
			}
			return sum
		}
		caps := storelink.ClaimCaps{Default: round, All: round}
		b.StartTimer()
		start, cpu0, pg0 := time.Now(), selfCPU(), backends()
		jobs, err := db.Webhooks.RecordAndClaim(ctx, nil, storelink.ClaimRequest{Owner: "w1", Lease: time.Minute, Limit: round, Caps: caps})
		done := 0
		for err == nil && len(jobs) > 0 {
			results := make([]storelink.AttemptResult, len(jobs))
			now := time.Now().UTC()
			for i := range jobs {
				results[i] = storelink.AttemptResult{Job: &jobs[i], Outcome: storelink.OutcomeSucceeded,
					Attempt: storelink.Attempt{Number: jobs[i].Attempt, At: now, DurationMS: 1, StatusCode: 204, URL: jobs[i].URL}}
			}
			done += len(jobs)
			jobs, err = db.Webhooks.RecordAndClaim(ctx, results, storelink.ClaimRequest{Owner: "w1", Lease: time.Minute, Limit: round, Caps: caps})
		}
		if err != nil {
			b.Fatal(err)
		}
		elapsed, cpu, pg := time.Since(start), selfCPU()-cpu0, backends()-pg0
		b.StopTimer()
		conn.Close(ctx)
		if want := 2 * orders * endpoints; done != want {
			b.Fatalf("%d deliveries done, want %d", done, want)
		}
		b.ReportMetric(float64(elapsed.Microseconds())/float64(done), "µs/delivery")
		b.ReportMetric(float64(cpu.Microseconds())/float64(done), "cpu-µs/delivery")
		b.ReportMetric(float64(pg.Microseconds())/float64(done), "pg-cpu-µs/delivery")
		b.StartTimer()
	}
}

// selfCPU is the CPU time this process has used, from /proc.
func selfCPU() time.Duration { return procCPU(os.Getpid()) }

// procCPU is a process's time on a processor, from /proc/PID/schedstat (in
// nanoseconds; /proc/PID/stat counts clock ticks of 10 ms), 0 when it has
// gone.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		return 0
	}
	var ns int64
	if _, err := fmt.Sscan(string(b), &ns); err != nil {
		return 0
	}
	return time.Duration(ns)
}
