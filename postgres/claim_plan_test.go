package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
	"storelink/internal/dbtest"
	"storelink/service"
)

// The claim takes the pending state as a parameter and still finds its
// deliveries through the partial indexes of pending ones: claimLockSQL has
// it planned for its parameters even on a connection where PostgreSQL
// settled on generic plans, which know no state and could use none of
// those indexes.
func TestClaimPlanUsesPendingIndexes(t *testing.T) {
	ctx := context.Background()
	dbURL := dbtest.Schema(t)
	db, err := Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var check string
	if err := tx.QueryRow(ctx, claimLockSQL, lockDeliveryClaims, settingKeyCheck).Scan(&check); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `PREPARE claim AS `+claimDeliveriesSQL); err != nil {
		t.Fatal(err)
	}
	// EXPLAIN EXECUTE takes no parameters of its own: the claim's are
	// written out.
	rows, err := tx.Query(ctx, fmt.Sprintf(`EXPLAIN (COSTS OFF) EXECUTE claim(now(), 'w1', now() + interval '1 minute', 10, 100,
		'{}', '{}', 1000, '', '%s', '%s')`, settingKeyCheck, storelink.DeliveryPending))
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	for _, index := range []string{"deliveries_endpoint_due", "deliveries_leased", "deliveries_order"} {
		if !strings.Contains(plan, "using "+index+" ") {
			t.Errorf("the claim's plan reads no %s:\n%s", index, plan)
		}
	}
}

// claimPlanDB opens a new schema with services that seal secrets and a
// client of a new partner; the database closes when the test ends.
func claimPlanDB(t *testing.T, partner string) (*DB, *service.Services, *storelink.NewClient) {
	t.Helper()
	ctx := context.Background()
	db, err := Open(ctx, dbtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	sealer, err := storelink.NewSealer(make([]byte, storelink.SealKeySize))
	if err != nil {
		t.Fatal(err)
	}
	s := service.New(NewDrivers(db), service.WithSealer(sealer))
	p, err := s.Partners.CreatePartner(ctx, partner)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Partners.CreateClient(ctx, p.ID, "DE", "EUR")
	if err != nil {
		t.Fatal(err)
	}
	return db, s, c
}

// The claim reads the enabled endpoints from their partial index, not
// every endpoint: a partner that makes and deletes endpoints again and
// again (each deletion keeps its row, disabled, for the history) does not
// make every claim of every partner's deliveries read those rows.
func TestClaimPlanSkipsDeletedEndpoints(t *testing.T) {
	ctx := context.Background()
	db, s, c := claimPlanDB(t, "Churn")
	if _, err := s.Webhooks.CreateEndpoint(ctx, c.ID, storelink.NewEndpoint{URL: "https://a.test/"}, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"); err != nil {
		t.Fatal(err)
	}
	// 20,000 endpoints made and deleted, as their rows stay.
	if _, err := db.pool.Exec(ctx, `INSERT INTO endpoints (id, client_id, url, states, api_key, secret, created_at, updated_at, description, enabled, deleted_at)
		SELECT e.id || '-' || g, e.client_id, e.url, e.states, e.api_key, e.secret, e.created_at, e.updated_at, e.description, false, e.created_at
		FROM endpoints e, generate_series(1, 20000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.pool.Exec(ctx, `ANALYZE endpoints`); err != nil {
		t.Fatal(err)
	}
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var check string
	if err := tx.QueryRow(ctx, claimLockSQL, lockDeliveryClaims, settingKeyCheck).Scan(&check); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `PREPARE claim AS `+claimDeliveriesSQL); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, fmt.Sprintf(`EXPLAIN (COSTS OFF) EXECUTE claim(now(), 'w1', now() + interval '1 minute', 10, 100,
		'{}', '{}', 1000, '', '%s', '%s')`, settingKeyCheck, storelink.DeliveryPending))
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if plan := strings.Join(lines, "\n"); !strings.Contains(plan, "endpoints_enabled") {
		t.Errorf("with 20,000 deleted endpoints, the claim's plan reads no endpoints_enabled:\n%s", plan)
	}
	// An order event's endpoints and the count of the per-client bound
	// read a partial index that leaves the deleted endpoints out (for the
	// order, the planner may take either).
	for _, q := range []struct {
		what, sql string
		args      []any
		indexes   []string
	}{
		{"an order event's endpoints", orderEndpointsSQL, []any{c.ID}, []string{"endpoints_live", "endpoints_enabled"}},
		{"the count of a client's endpoints", insertEndpointSQL, []any{"e", c.ID, "u", []string{}, "", "", time.Now(), "", 20},
			[]string{"endpoints_live"}},
	} {
		rows, err := tx.Query(ctx, "EXPLAIN (COSTS OFF) "+q.sql, q.args...)
		if err != nil {
			t.Fatalf("%s: %v", q.what, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(lines, "\n")
		if !slices.ContainsFunc(q.indexes, func(ix string) bool { return strings.Contains(plan, "using "+ix+" ") }) ||
			strings.Contains(plan, "Seq Scan on endpoints") {
			t.Errorf("with 20,000 deleted endpoints, %s are read by\n%s\nwant one of %v", q.what, plan, q.indexes)
		}
	}
}

// A claim's look at each endpoint for a due delivery reads that endpoint's
// first entry of deliveries_endpoint_due, not the pending deliveries of
// every endpoint: with one endpoint's backlog of 3,000 and 100 endpoints
// that have nothing pending, the tables analyzed, the claim reads a few
// pages per endpoint. (With min() and an index of all pending deliveries by
// due time, the planner filtered that index by endpoint, and read the
// whole backlog for each of the quiet ones.)
func TestClaimReadsLittleForQuietEndpoints(t *testing.T) {
	ctx := context.Background()
	db, s, c := claimPlanDB(t, "Backlog")
	if _, _, err := s.Partners.PutStore(ctx, c.ID, "S1", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Webhooks.CreateEndpoint(ctx, c.ID, storelink.NewEndpoint{URL: "https://a.test/"}, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"); err != nil {
		t.Fatal(err)
	}
	price := storelink.Money(100)
	_, err := s.Orders.CreateOrder(ctx, storelink.NewOrder{OrderNumber: "N-1", ClientID: c.ID, StoreID: "S1",
		Items: []storelink.NewItem{{EAN: "4006381333931", MarketplaceArticleNumber: "M", ArticleNumber: "A", Price: &price}}})
	if err != nil {
		t.Fatal(err)
	}
	// The backlog: 3,000 more pending deliveries to the endpoint, one event
	// of an order each, due a minute ago; then 100 endpoints with nothing
	// pending.
	for _, q := range []string{
		`INSERT INTO events (client_id, seq, id, order_id, state, payload, created_at)
			SELECT client_id, seq + g, id || '-' || g, order_id, state, payload, created_at FROM events, generate_series(1, 3000) g`,
		`INSERT INTO deliveries (id, event_id, event_seq, endpoint_id, client_id, order_id, event_state, state, next_attempt_at, created_at, updated_at)
			SELECT d.id || '-' || g, d.event_id || '-' || g, d.event_seq + g, d.endpoint_id, d.client_id, d.order_id || '-' || g, d.event_state,
				d.state, now() - interval '1 minute', d.created_at, d.updated_at
			FROM deliveries d, generate_series(1, 3000) g`,
		`INSERT INTO endpoints (id, client_id, url, states, api_key, secret, created_at, updated_at, description)
			SELECT e.id || '-' || g, e.client_id, e.url, e.states, e.api_key, e.secret, e.created_at, e.updated_at, e.description
			FROM endpoints e, generate_series(1, 100) g`,
		`ANALYZE deliveries`, `ANALYZE endpoints`, `ANALYZE events`,
	} {
		if _, err := db.pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var check string
	if err := tx.QueryRow(ctx, claimLockSQL, lockDeliveryClaims, settingKeyCheck).Scan(&check); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `PREPARE claim AS `+claimDeliveriesSQL); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, fmt.Sprintf(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) EXECUTE claim(now(), 'w1',
		now() + interval '1 minute', 10, 10, '{}', '{}', 1000, '', '%s', '%s')`, settingKeyCheck, storelink.DeliveryPending))
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	// The plan's first line is the whole statement's, its first Buffers
	// line what it read.
	var hit, read int
	for _, l := range lines {
		if f := strings.TrimSpace(l); strings.HasPrefix(f, "Buffers: shared") {
			for _, w := range strings.Fields(f) {
				if n, ok := strings.CutPrefix(w, "hit="); ok {
					fmt.Sscan(n, &hit)
				} else if n, ok := strings.CutPrefix(w, "read="); ok {
					fmt.Sscan(n, &read)
				}
			}
			break
		}
	}
	if hit+read == 0 {
		t.Fatalf("no buffers in the claim's plan:\n%s", plan)
	}
	if hit+read > 2000 {
		t.Errorf("the claim read %d pages for 101 endpoints, one with a backlog of 3,001:\n%s", hit+read, plan)
	}
}

// An order's stock read runs on its generic plan (routingLockSQL), made
// for no particular client and EANs: on a stock of 40,000 rows and 2,000
// reserving items it still looks each store and EAN up by the primary key
// and counts the reserved units in order_items_reserving.
func TestStockReadGenericPlan(t *testing.T) {
	ctx := context.Background()
	dbURL := dbtest.Schema(t)
	db, err := Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`INSERT INTO partners (id, name, created_at) VALUES ('p', 'P', now())`,
		`INSERT INTO clients (id, partner_id, country_code, currency, created_at)
			SELECT 'c' || g, 'p', 'C' || g, 'EUR', now() FROM generate_series(1, 20) g`,
		`INSERT INTO stores (client_id, id, name, created_at) SELECT 'c' || g, 'S' || s, '', now()
			FROM generate_series(1, 20) g, generate_series(1, 2) s`,
		`INSERT INTO stock (client_id, store_id, ean, article_number, quantity, price, upload_id, updated_at)
			SELECT 'c' || g, 'S' || s, lpad(e::text, 13, '0'), 'A', 5, 100, 'u', now()
			FROM generate_series(1, 20) g, generate_series(1, 2) s, generate_series(1, 1000) e`,
		`INSERT INTO orders (id, client_id, order_number, store_id, state, created_at, updated_at)
			SELECT 'o' || g, 'c1', 'N' || g, 'S1', 'assigned', now(), now() FROM generate_series(1, 2000) g`,
		`INSERT INTO order_items (item_id, order_id, pos, client_id, store_id, ean, price, currency, article_number,
			marketplace_article_number, status, reserving)
			SELECT 'i' || g, 'o' || g, 0, 'c1', 'S1', lpad((g % 1000 + 1)::text, 13, '0'), 100, 'EUR', 'A', 'M', 'assigned', true
			FROM generate_series(1, 2000) g`,
		`ANALYZE stock`, `ANALYZE stores`, `ANALYZE order_items`,
	} {
		if _, err := db.pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, routingLockSQL, lockRouting, "c1"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `PREPARE stock_read AS `+stockInForceSQL); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, `EXPLAIN (COSTS OFF) EXECUTE stock_read('c1', '{0000000000007}')`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if !strings.Contains(plan, "$1") {
		t.Errorf("the stock read's plan is not the generic one (no parameter in it):\n%s", plan)
	}
	for _, index := range []string{"stock_pkey", "order_items_reserving"} {
		if !strings.Contains(plan, index) {
			t.Errorf("the stock read's plan reads no %s:\n%s", index, plan)
		}
	}
	if strings.Contains(plan, "Seq Scan on stock") || strings.Contains(plan, "Seq Scan on order_items") {
		t.Errorf("the stock read's plan scans a table:\n%s", plan)
	}
}
