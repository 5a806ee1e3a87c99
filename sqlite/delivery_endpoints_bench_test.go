package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"storelink"
)

// endpointsFixture is a backlog shaped as cmd/storelink's
// BenchmarkWebhookEndpoints makes it: endpoints endpoints, each with
// orders orders of five events, the orders made 32 at a time, so that an
// order's events lie about 32 apart in the queue. It returns the database
// and the number of deliveries queued.
func endpointsFixture(t testing.TB, endpoints, orders int) (*Fixture, int) {
	t.Helper()
	ctx := context.Background()
	db, ep := batchFixture(t, 0)
	rows, err := db.TestAccess().Query(ctx, `SELECT id FROM clients`)
	if err != nil || len(rows) != 1 {
		t.Fatalf("clients: %v %v", rows, err)
	}
	price := storelink.Money(1999)
	items := make([]storelink.NewItem, 3)
	for i := range items {
		items[i] = storelink.NewItem{EAN: "4006381333931", MarketplaceArticleNumber: fmt.Sprintf("MP-%d", i),
			ArticleNumber: fmt.Sprintf("SKU-%d", i), Price: &price}
	}
	o, err := db.Services().Orders.CreateWarehouseOrder(ctx, storelink.NewOrder{OrderNumber: "W-0", ClientID: rows[0]["id"], Items: items})
	if err != nil {
		t.Fatal(err)
	}
	now := ms(time.Now()) - 60_000
	n := endpoints * orders
	stmts := []string{
		`DELETE FROM deliveries`,
		fmt.Sprintf(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < %d)
			INSERT INTO endpoints (id, client_id, url, states, api_key, secret, created_at, updated_at)
			SELECT printf('%%s-%%05d', id, i), client_id, url, states, api_key, secret, created_at, updated_at
			FROM n, endpoints WHERE id = '%s'`, endpoints, ep.ID),
		fmt.Sprintf(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < %d),
			k(k) AS (VALUES (0), (1), (2), (3), (4))
			INSERT INTO events (id, client_id, order_id, state, payload, created_at)
			SELECT printf('ev-%%07d-%%d', i, k), client_id, order_id, state, payload, created_at
			FROM n, k, (SELECT * FROM events WHERE order_id = '%s' LIMIT 1)
			ORDER BY i / 32, k, i`, n, o.ID),
		fmt.Sprintf(`INSERT INTO deliveries (id, event_id, event_seq, endpoint_id, client_id, order_id, event_state,
			state, next_attempt_at, created_at, updated_at)
			SELECT printf('dl-%%08d', ev.seq), ev.id, ev.seq,
				CASE WHEN CAST(substr(ev.id, 4, 7) AS INTEGER) %% %d = 0 THEN '%s'
				ELSE printf('%%s-%%05d', '%s', CAST(substr(ev.id, 4, 7) AS INTEGER) %% %d) END,
				ev.client_id, 'o-' || substr(ev.id, 4, 7), ev.state, 'pending', %d, %d, %d
			FROM events ev WHERE ev.id LIKE 'ev-%%' ORDER BY ev.seq`, endpoints, ep.ID, ep.ID, endpoints, now, now, now),
	}
	for _, s := range stmts {
		if err := db.TestAccess().Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return db, 5 * n
}

// BenchmarkDeliveryEndpoints is the deliverer's bookkeeping as it runs in
// cmd/storelink's BenchmarkWebhookEndpoints: a backlog to 1,000 endpoints,
// rounds that record the oldest results in flight (about as many as come
// in while a round runs there) and claim what frees up, up to as many in
// flight and claimed ahead as worker.Deliverer keeps. It reports the CPU per
// delivery and the deliveries a round:
//
//	go test ./sqlite -run '^$' -bench DeliveryEndpoints -benchtime 3x
func BenchmarkDeliveryEndpoints(b *testing.B) {
	const endpoints, orders, round, held = 1000, 5, 40, 768
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		db, backlog := endpointsFixture(b, endpoints, orders)
		q := db.Services()
		b.StartTimer()
		start, cpu0 := time.Now(), cpuTime()
		var flight []storelink.DeliveryJob
		done, rounds := 0, 0
		for {
			n := min(round, len(flight))
			results := succeeded(flight, n, 50, 200)
			jobs, err := q.Webhooks.RecordAndClaim(ctx, results, storelink.ClaimRequest{Owner: "w1", Lease: time.Minute, Limit: held - len(flight) + n, Caps: storelink.EndpointCap(96)})
			if err != nil {
				b.Fatal(err)
			}
			done += n
			rounds++
			flight = append(flight[n:], jobs...)
			if len(flight) == 0 {
				break
			}
		}
		reportDeliveries(b, start, cpu0, done, backlog)
		b.ReportMetric(float64(done)/float64(rounds), "deliveries/round")
		db.Close()
	}
}
