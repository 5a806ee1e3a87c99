package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"storelink"
)

// pipelineFixture is a backlog shaped as serve's deliverer meets it in
// cmd/storelink's BenchmarkWebhooks: orders events made by 16 clients at
// once, each making three events per order in turn (create, fulfil,
// return), so that an order's events lie 16 apart in the queue and each
// waits for the one before. It returns the database and the number of
// deliveries queued (3 × orders).
func pipelineFixture(t testing.TB, orders int) (*Fixture, int) {
	t.Helper()
	ctx := context.Background()
	db, _ := batchFixture(t, 0)
	// One order per group of 16 made through the service, its first event
	// copied for the rest: the rows are what the service writes, made
	// without an order transaction (and an fsync) each.
	rows, err := db.TestAccess().Query(ctx, `SELECT id FROM clients`)
	if err != nil || len(rows) != 1 {
		t.Fatalf("clients: %v %v", rows, err)
	}
	price := storelink.Money(1999)
	o, err := db.Services().Orders.CreateWarehouseOrder(ctx, storelink.NewOrder{OrderNumber: "W-0", ClientID: rows[0]["id"],
		Items: []storelink.NewItem{{EAN: "4006381333931", MarketplaceArticleNumber: "MP-1", ArticleNumber: "SKU-1", Price: &price}}})
	if err != nil {
		t.Fatal(err)
	}
	now := ms(time.Now()) - 60_000
	stmts := []string{
		`DELETE FROM deliveries`,
		fmt.Sprintf(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < %d),
			k(k) AS (VALUES (0), (1), (2))
			INSERT INTO events (id, client_id, order_id, state, payload, created_at)
			SELECT 'ev-' || i || '-' || k, client_id, order_id, state, payload, created_at
			FROM n, k, (SELECT * FROM events WHERE order_id = '%s')
			ORDER BY i / 16, k, i`, orders, o.ID),
		fmt.Sprintf(`INSERT INTO deliveries (id, event_id, event_seq, endpoint_id, client_id, order_id, event_state,
			state, next_attempt_at, created_at, updated_at)
			SELECT 'dl-' || substr(ev.id, 4), ev.id, ev.seq, e.id, ev.client_id,
				'o-' || substr(ev.id, 4, instr(substr(ev.id, 4), '-') - 1), ev.state, 'pending', %d + ev.seq / 20, %d, %d
			FROM events ev, endpoints e WHERE ev.id LIKE 'ev-%%' ORDER BY ev.seq`, now, now, now),
	}
	for _, s := range stmts {
		if err := db.TestAccess().Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return db, 3 * orders
}

// BenchmarkDeliveryPipeline is the deliverer's bookkeeping as it runs when
// the backlog of BenchmarkWebhooks goes to a fast endpoint: a round
// records the oldest PerEndpoint results (all succeeded) while as many
// again are in flight and more claimed ahead (up to 3 × PerEndpoint leased
// to the endpoint, as worker.Deliverer keeps), and claims what frees up, in
// one transaction. So a claim meets leased deliveries at the head of the
// queue and later events of their orders waiting behind them, as it does
// in serve. It reports the time and CPU per delivery:
//
//	go test ./sqlite -run '^$' -bench DeliveryPipeline -benchtime 3x
func BenchmarkDeliveryPipeline(b *testing.B) {
	const orders, round, leased = 2000, 32, 96
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		db, backlog := pipelineFixture(b, orders)
		q := db.Services()
		b.StartTimer()
		start, cpu0 := time.Now(), cpuTime()
		var held []storelink.DeliveryJob
		done, rounds := 0, 0
		for {
			n := min(round, len(held))
			results := succeeded(held, n, 1, 204)
			jobs, err := q.Webhooks.RecordAndClaim(ctx, results, storelink.ClaimRequest{Owner: "w1", Lease: time.Minute, Limit: 256, Caps: storelink.ClaimCaps{Default: leased}})
			if err != nil {
				b.Fatal(err)
			}
			done += n
			rounds++
			held = append(held[n:], jobs...)
			if len(held) == 0 {
				break
			}
		}
		reportDeliveries(b, start, cpu0, done, backlog)
		b.ReportMetric(float64(done)/float64(rounds), "deliveries/round")
		db.Close()
	}
}
