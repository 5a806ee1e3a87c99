package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
	"storelink/internal/dbtest"
)

// BenchmarkOrderCallsCPU is the order calls of bench/keep-up in process,
// without the deliverer: 4 clients, each with one endpoint and two stores
// stocked, orders of one item routed by the stock and driven through
// create → fulfil → return. It reports the database's backends' CPU time
// per call of each kind, the calls made one at a time (serial), and per
// event with 16 callers at once (concurrent). Run it on a database nothing
// else uses:
//
//	STORELINK_TEST_DATABASE_URL=… go test ./postgres -run '^$' -bench OrderCallsCPU -benchtime 3x
//
// STORELINK_BENCH_ORDERS sets the orders of each part (default 300).
func BenchmarkOrderCallsCPU(b *testing.B) {
	const clients, callers = 4, 16
	orders := 300
	if s := os.Getenv("STORELINK_BENCH_ORDERS"); s != "" {
		orders, _ = strconv.Atoi(s)
	}
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		dbURL := newSchema(b)
		db := openAt(b, dbURL, time.Now)
		raw := dbtest.Postgres{URL: dbURL, Now: time.Now}
		var ids []string
		for k := range clients {
			p, err := db.Partners.CreatePartner(ctx, fmt.Sprint("Acme ", k))
			if err != nil {
				b.Fatal(err)
			}
			c, err := db.Partners.CreateClient(ctx, p.ID, "DE", "EUR")
			if err != nil {
				b.Fatal(err)
			}
			ids = append(ids, c.ID)
			for _, s := range []string{"S1", "S2"} {
				if _, _, err := db.Partners.PutStore(ctx, c.ID, s, ""); err != nil {
					b.Fatal(err)
				}
			}
			_, err = raw.FillStock(ctx, c.ID, "", func(yield func(storelink.StockRow) bool) {
				for _, s := range []string{"S1", "S2"} {
					for e := range 8 {
						if !yield(storelink.StockRow{StoreID: s, EAN: ocEAN(e), ArticleNumber: "A", Quantity: 1_000_000, Price: 1999}) {
							return
						}
					}
				}
			})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := db.Webhooks.CreateEndpoint(ctx, c.ID, storelink.NewEndpoint{URL: fmt.Sprintf("https://%d.test", k)}, "whsec_AAAA"); err != nil {
				b.Fatal(err)
			}
		}
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			b.Fatal(err)
		}
		// The client backends' CPU time, each counted from its first
		// reading (autovacuum's workers come and go at random and are left
		// out).
		seen := map[int32]time.Duration{}
		backends := func() time.Duration {
			rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
				AND backend_type = 'client backend'`)
			if err != nil {
				b.Fatal(err)
			}
			pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
			if err != nil {
				b.Fatal(err)
			}
			var sum time.Duration
			for _, pid := range pids {
				c := procCPU(int(pid))
				if c == 0 {
					continue
				}
				seen[pid] = c
			}
			for _, c := range seen {
				sum += c
			}
			return sum
		}
		create := func(k int) (*storelink.Order, error) {
			return db.Orders.CreateOrder(ctx, storelink.NewOrder{OrderNumber: fmt.Sprint("O-", k), ClientID: ids[k%clients],
				Items: []storelink.NewItem{{EAN: ocEAN(k % 8), MarketplaceArticleNumber: "M"}},
				CustomerBillingAddress: &storelink.Address{FirstName: "Erika", LastName: "Mustermann", AddressLine1: "Heidestraße 17",
					ZipCode: "51147", City: "Köln", CountryCode: "DE"}})
		}
		ret := func(o *storelink.Order) error {
			code := storelink.ReturnReasonCode(2)
			_, err := db.Orders.ReturnItems(ctx, o.ID, storelink.ReturnRequest{Items: []storelink.ReturnItem{
				{ItemID: o.Items[0].ItemID, ReturnReasonCode: &code, ReturnLocation: storelink.ReturnLocation("STORE")}}})
			return err
		}
		// Warm every connection of the pool and its statement cache.
		var warm sync.WaitGroup
		for g := range callers {
			warm.Go(func() {
				for k := range 10 {
					o, err := create(1_000_000 + 100*g + k)
					if err == nil {
						_, err = db.Orders.FulfilOrder(ctx, o.ID, storelink.FulfilRequest{})
					}
					if err == nil {
						err = ret(o)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		warm.Wait()
		if b.Failed() {
			b.FailNow()
		}
		b.StartTimer()

		// Serial, per kind of call.
		ords := make([]*storelink.Order, orders)
		pg0 := backends()
		for k := range orders {
			if ords[k], err = create(k); err != nil {
				b.Fatal(err)
			}
		}
		pg1 := backends()
		for k := range orders {
			if _, err := db.Orders.FulfilOrder(ctx, ords[k].ID, storelink.FulfilRequest{}); err != nil {
				b.Fatal(err)
			}
		}
		pg2 := backends()
		for k := range orders {
			if err := ret(ords[k]); err != nil {
				b.Fatal(err)
			}
		}
		pg3 := backends()

		// Concurrent, whole orders.
		var next atomic.Int64
		var wg sync.WaitGroup
		var failed atomic.Value
		start := time.Now()
		for range callers {
			wg.Go(func() {
				for {
					k := int(next.Add(1))
					if k > orders {
						return
					}
					o, err := create(orders + k)
					if err == nil {
						_, err = db.Orders.FulfilOrder(ctx, o.ID, storelink.FulfilRequest{})
					}
					if err == nil {
						err = ret(o)
					}
					if err != nil {
						failed.Store(err)
						return
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		pg4 := backends()
		b.StopTimer()
		conn.Close(ctx)
		if err, _ := failed.Load().(error); err != nil {
			b.Fatal(err)
		}
		per := func(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(n) }
		b.ReportMetric(per(pg1-pg0, orders), "create-pg-µs")
		b.ReportMetric(per(pg2-pg1, orders), "fulfil-pg-µs")
		b.ReportMetric(per(pg3-pg2, orders), "return-pg-µs")
		b.ReportMetric(per(pg4-pg3, 3*orders), "concurrent-pg-µs/event")
		b.ReportMetric(float64(3*orders)/elapsed.Seconds(), "concurrent-events/s")
		b.StartTimer()
	}
}

// ocEAN is the k-th EAN-13 of the benchmark, with its check digit.
func ocEAN(k int) string {
	body := fmt.Sprintf("400%09d", 7100+k)
	sum := 0
	for i := range 12 {
		d := int(body[i] - '0')
		if i%2 == 1 {
			d *= 3
		}
		sum += d
	}
	return body + strconv.Itoa((10-sum%10)%10)
}
