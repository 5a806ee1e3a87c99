package sqlite

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"storelink"
)

// Migration 5 rebuilds delivery_attempts and swaps an index of deliveries
// (as 8 swaps indexes and 9 rebuilds the attempts again): down to 4 and up
// again, the attempts recorded are all still there, and the listing by
// state finds the same deliveries after.
func TestMigrationDeliveryWritesKeepsAttempts(t *testing.T) {
	ctx := context.Background()
	db, _ := batchFixture(t, 6)
	jobs, err := db.Services().Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w1", Lease: time.Minute, Limit: 10, Caps: storelink.EndpointCap(10)})
	if err != nil || len(jobs) != 6 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	var results []storelink.AttemptResult
	for i := range jobs {
		r := storelink.AttemptResult{Job: &jobs[i], Outcome: storelink.OutcomeSucceeded,
			Attempt: storelink.Attempt{Number: jobs[i].Attempt, At: now, DurationMS: int64(i), StatusCode: 204}}
		if i%2 == 1 {
			r.Outcome, r.Attempt.StatusCode, r.Attempt.Response = storelink.OutcomeFailed, 500, "boom"
		}
		results = append(results, r)
	}
	if err := db.Services().Webhooks.RecordAttempts(ctx, results); err != nil {
		t.Fatal(err)
	}
	list := func(state storelink.DeliveryState) map[string][]storelink.Attempt {
		t.Helper()
		ds, err := db.Services().Webhooks.Deliveries(ctx, storelink.DeliveryFilter{State: state, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]storelink.Attempt{}
		for _, d := range ds {
			out[d.ID] = d.Attempts
		}
		return out
	}
	succeeded, failed := list(storelink.DeliverySucceeded), list(storelink.DeliveryFailed)
	if len(succeeded) != 3 || len(failed) != 3 {
		t.Fatalf("before: %d succeeded, %d failed, want 3 and 3", len(succeeded), len(failed))
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db.write, migrationsFS())
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for state, want := range map[storelink.DeliveryState]map[string][]storelink.Attempt{
			storelink.DeliverySucceeded: succeeded, storelink.DeliveryFailed: failed} {
			got := list(state)
			if len(got) != len(want) {
				t.Fatalf("%s: %d %s deliveries, want %d", when, len(got), state, len(want))
			}
			for id, attempts := range want {
				if len(got[id]) != 1 || got[id][0] != attempts[0] {
					t.Fatalf("%s: delivery %s attempts %+v, want %+v", when, id, got[id], attempts)
				}
			}
		}
	}
	if _, err := p.DownTo(ctx, 4); err != nil {
		t.Fatal(err)
	}
	// The listing of this version reads the indexes of version 5: at 4,
	// the attempts and states are read as they are stored.
	rows, err := db.TestAccess().Query(ctx, `SELECT d.id, d.state, a.status_code, a.response FROM deliveries d
		JOIN delivery_attempts a ON a.delivery_id = d.id ORDER BY d.seq`)
	if err != nil || len(rows) != 6 {
		t.Fatalf("down to 4: %d attempts, %v; want 6", len(rows), err)
	}
	for _, r := range rows {
		want := succeeded
		if r["state"] == string(storelink.DeliveryFailed) {
			want = failed
		}
		a := want[r["id"]]
		if len(a) != 1 || r["status_code"] != fmt.Sprint(a[0].StatusCode) || r["response"] != a[0].Response {
			t.Fatalf("down to 4: delivery %s (%s) attempt %v, want %+v", r["id"], r["state"], r, a)
		}
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	check("up again")
}

// The migration that allows the status cancelled makes the uploads table
// anew: down to the one before it and up again, the uploads, their bytes and their
// queue order are all still there, and a waiting one can be cancelled.
func TestMigrationUploadCancelledKeepsUploads(t *testing.T) {
	ctx := context.Background()
	f := OpenFixture(t, nil)
	svc := f.Services()
	p, err := svc.Partners.CreatePartner(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	c, err := svc.Partners.CreateClient(ctx, p.ID, "DE", "EUR")
	if err != nil {
		t.Fatal(err)
	}
	policy := storelink.CapacityPolicy{Base: 1 << 20, Window: time.Hour}
	var ids []string
	for i := range 3 {
		u, _, err := svc.Uploads.Accept(ctx, storelink.NewUpload{ClientID: c.ID, FileName: fmt.Sprintf("f%d.csv", i), Body: storelink.ChunksOf([]byte("store;ean\n"))}, policy)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, u.ID)
	}
	pv, err := goose.NewProvider(goose.DialectSQLite3, f.write, migrationsFS())
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		// Read as the schema of the moment has them: the services expect
		// the latest.
		rows, err := f.TestAccess().Query(ctx, `SELECT id FROM uploads WHERE client_id = ? ORDER BY seq DESC`, c.ID)
		if err != nil || len(rows) != 3 || rows[0]["id"] != ids[2] || rows[2]["id"] != ids[0] {
			t.Fatalf("%s: uploads %v, %v; want the three, newest first", when, rows, err)
		}
		var bodies int
		if err := f.write.QueryRowContext(ctx, `SELECT count(*) FROM upload_bodies`).Scan(&bodies); err != nil || bodies != 3 {
			t.Fatalf("%s: %d upload bodies, %v; want 3", when, bodies, err)
		}
	}
	version := migrationVersion(t, pv, "upload_cancelled")
	if _, err := pv.DownTo(ctx, version-1); err != nil {
		t.Fatal(err)
	}
	check("down to the migration before")
	if _, err := pv.Up(ctx); err != nil {
		t.Fatal(err)
	}
	check("up again")
	u, err := svc.Uploads.Cancel(ctx, c.ID, ids[1], policy)
	if err != nil || u.Status != storelink.UploadCancelled {
		t.Fatalf("cancel after the migration: %+v, %v", u, err)
	}
	var fk int
	if err := f.write.QueryRowContext(ctx, `SELECT count(*) FROM pragma_foreign_key_check`).Scan(&fk); err != nil || fk != 0 {
		t.Fatalf("foreign key check: %d violations, %v", fk, err)
	}
}

// The webhook operations' migration rebuilds deliveries for the cancelled state and gives
// attempts their endpoint and outcome: down and up again, every delivery
// and its seq are kept, the sequence goes on where it was, a cancelled
// delivery goes back to waiting (pending, its endpoint disabled), and the
// attempts recorded before are counted in the endpoint's stats, those of
// 2xx without an error as succeeded.
func TestMigrationWebhookOperations(t *testing.T) {
	ctx := context.Background()
	db, ep := batchFixture(t, 4)
	s := db.Services()
	jobs, err := s.Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w1", Lease: time.Minute, Limit: 10, Caps: storelink.EndpointCap(10)})
	if err != nil || len(jobs) != 4 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	outcomes := []storelink.Outcome{storelink.OutcomeSucceeded, storelink.OutcomeSucceeded, storelink.OutcomeFailed, storelink.OutcomeRetry}
	var results []storelink.AttemptResult
	for i := range jobs {
		r := storelink.AttemptResult{Job: &jobs[i], Outcome: outcomes[i], NextAt: now.Add(time.Hour),
			Attempt: storelink.Attempt{Number: jobs[i].Attempt, At: now, DurationMS: int64(i), StatusCode: 204}}
		if outcomes[i] != storelink.OutcomeSucceeded {
			r.Attempt.StatusCode = 500
		}
		results = append(results, r)
	}
	if err := s.Webhooks.RecordAttempts(ctx, results); err != nil {
		t.Fatal(err)
	}
	if err := s.Webhooks.DeleteEndpoint(ctx, "", ep.ID, nil); err != nil { // the retried one is cancelled
		t.Fatal(err)
	}
	states := func(when string) map[string]string {
		t.Helper()
		rows, err := db.TestAccess().Query(ctx, `SELECT seq, state FROM deliveries ORDER BY seq`)
		if err != nil || len(rows) != 4 {
			t.Fatalf("%s: %d deliveries, %v", when, len(rows), err)
		}
		out := map[string]string{}
		for _, r := range rows {
			out[r["seq"]] = r["state"]
		}
		return out
	}
	sequence := func() string {
		t.Helper()
		rows, err := db.TestAccess().Query(ctx, `SELECT seq FROM sqlite_sequence WHERE name = 'deliveries'`)
		if err != nil || len(rows) != 1 {
			t.Fatalf("sqlite_sequence of deliveries: %v, %v", rows, err)
		}
		return rows[0]["seq"]
	}
	before, seq := states("before"), sequence()

	p, err := goose.NewProvider(goose.DialectSQLite3, db.write, migrationsFS())
	if err != nil {
		t.Fatal(err)
	}
	beforeOps := migrationVersion(t, p, "webhook_operations") - 1
	if _, err := p.DownTo(ctx, beforeOps); err != nil {
		t.Fatal(err)
	}
	down := states("down to the migration before")
	for k, v := range before {
		want := v
		if v == string(storelink.DeliveryCancelled) {
			want = string(storelink.DeliveryPending)
		}
		if down[k] != want {
			t.Fatalf("down to the migration before: delivery %s is %s, want %s", k, down[k], want)
		}
	}
	if got := sequence(); got != seq {
		t.Fatalf("down to the migration before: the sequence is %s, want %s", got, seq)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sequence(); got != seq {
		t.Fatalf("up again: the sequence is %s, want %s", got, seq)
	}
	rows, err := db.TestAccess().Query(ctx, `SELECT endpoint_id, succeeded, url FROM delivery_attempts ORDER BY delivery_id`)
	if err != nil || len(rows) != 4 {
		t.Fatalf("up again: %d attempts, %v", len(rows), err)
	}
	for _, r := range rows {
		if r["endpoint_id"] != ep.ID || r["url"] != "" {
			t.Fatalf("up again: attempt %v, want of endpoint %s, with no url", r, ep.ID)
		}
	}
	d, err := s.Webhooks.Endpoint(ctx, "", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st := d.Stats; st.Attempts != 4 || st.Succeeded != 2 || st.FailedDeliveries != 1 || st.Pending != 1 {
		t.Fatalf("up again: stats %+v, want 4 attempts, 2 succeeded, 1 failed and 1 pending delivery", st)
	}
}

// migrationVersion is the version of the migration named *_name.sql, so
// that a test of one migration does not depend on its number.
func migrationVersion(t *testing.T, p *goose.Provider, name string) int64 {
	t.Helper()
	for _, m := range p.ListSources() {
		if strings.HasSuffix(m.Path, "_"+name+".sql") {
			return m.Version
		}
	}
	t.Fatalf("no migration *_%s.sql", name)
	return 0
}

// Migration 16 adds the partners' sessions to the dashboard's: down to the
// migration before, the operator's session is still active and the
// partner's is gone (nothing could tell it apart any more); up again, both
// kinds are recorded and read.
func TestMigrationPortalSessions(t *testing.T) {
	ctx := context.Background()
	db, _ := batchFixture(t, 0)
	s := db.Services()
	c, err := s.Partners.Clients(ctx)
	if err != nil || len(c) == 0 {
		t.Fatalf("clients: %v, %v", c, err)
	}
	key, err := s.Partners.CreateAPIKey(ctx, c[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	expires := time.Now().Add(time.Hour)
	op, partner := []byte("operator session"), []byte("partner session")
	for _, n := range []storelink.NewSession{{IDHash: op, Expires: expires}, {IDHash: partner, ClientID: c[0].ID, APIKey: key.APIKey, Expires: expires}} {
		if err := s.Partners.CreateSession(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db.write, migrationsFS())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, migrationVersion(t, p, "portal_sessions")-1); err != nil {
		t.Fatal(err)
	}
	rows, err := db.TestAccess().Query(ctx, `SELECT id_hash FROM dashboard_sessions`)
	if err != nil || len(rows) != 1 || rows[0]["id_hash"] != string(op) {
		t.Fatalf("down to the migration before: sessions %v, %v; want the operator's only", rows, err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if client, ok, err := s.Partners.Session(ctx, op); err != nil || !ok || client != "" {
		t.Fatalf("up again: the operator's session = %q, %v, %v", client, ok, err)
	}
	if err := s.Partners.CreateSession(ctx, storelink.NewSession{IDHash: partner, ClientID: c[0].ID, APIKey: key.APIKey, Expires: expires}); err != nil {
		t.Fatal(err)
	}
	if client, ok, err := s.Partners.Session(ctx, partner); err != nil || !ok || client != c[0].ID {
		t.Fatalf("up again: the partner's session = %q, %v, %v", client, ok, err)
	}
}

// Migration upload_chunks moves every stored file into pieces: down to
// the migration before, each file is one blob again, byte for byte, and up
// again it is pieces that read back as the same bytes.
func TestMigrationUploadChunksKeepsFiles(t *testing.T) {
	ctx := context.Background()
	f := OpenFixture(t, nil)
	svc := f.Services()
	p, err := svc.Partners.CreatePartner(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	c, err := svc.Partners.CreateClient(ctx, p.ID, "DE", "EUR")
	if err != nil {
		t.Fatal(err)
	}
	policy := storelink.CapacityPolicy{Base: 1 << 30, Window: time.Hour}
	files := map[string][]byte{}
	for _, size := range []int{10, storelink.ChunkSize, 2*storelink.ChunkSize + 1} {
		body := make([]byte, size)
		for i := range body {
			body[i] = byte('a' + (i*31+size)%26)
		}
		u, _, err := svc.Uploads.Accept(ctx, storelink.NewUpload{ClientID: c.ID, FileName: "f.csv", Body: storelink.ChunksOf(body)}, policy)
		if err != nil {
			t.Fatal(err)
		}
		files[u.ID] = body
	}
	pv, err := goose.NewProvider(goose.DialectSQLite3, f.write, migrationsFS())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pv.DownTo(ctx, migrationVersion(t, pv, "upload_chunks")-1); err != nil {
		t.Fatal(err)
	}
	for id, want := range files {
		var got []byte
		if err := f.write.QueryRowContext(ctx, `SELECT body FROM upload_bodies WHERE upload_id = ?`, id).Scan(&got); err != nil || string(got) != string(want) {
			t.Fatalf("down: the file of %d bytes is %d bytes, %v; want it whole", len(want), len(got), err)
		}
	}
	if _, err := pv.Up(ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range files {
		got, err := svc.Uploads.UploadFile(ctx, c.ID, id)
		if err != nil || string(got.Bytes()) != string(want) {
			t.Fatalf("up again: the file of %d bytes reads %d bytes, %v", len(want), got.Len(), err)
		}
		if n := (len(want) + storelink.ChunkSize - 1) / storelink.ChunkSize; len(got) != n {
			t.Fatalf("up again: the file of %d bytes is in %d pieces, want %d", len(want), len(got), n)
		}
	}
}

// Migration 24 rebuilds events so that an event may be no order's: down
// to the migration before and up again, the order events keep their ids,
// numbers (the feed's cursors) and payloads, the deliveries still refer to
// them, the numbering goes on from where it was, and the foreign keys hold.
// Down drops the upload events and their deliveries.
func TestMigrationUploadEventsKeepsEvents(t *testing.T) {
	ctx := context.Background()
	f, ep := batchFixture(t, 5)
	s := f.Services()
	kind := storelink.EventUploadFinished
	if _, err := s.Webhooks.UpdateEndpoint(ctx, "", ep.ID, storelink.EndpointPatch{States: &[]storelink.OrderState{storelink.StateWarehouseFulfilled, kind}}); err != nil {
		t.Fatal(err)
	}
	u, _, err := s.Uploads.Accept(ctx, storelink.NewUpload{ClientID: ep.ClientID, FileName: "f.csv", Body: storelink.ChunksOf([]byte("x"))},
		storelink.CapacityPolicy{Base: 1 << 30, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Uploads.Cancel(ctx, ep.ClientID, u.ID, storelink.CapacityPolicy{Base: 1 << 30, Window: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Orders.AnnounceUploads(ctx, 10); err != nil || n != 1 {
		t.Fatalf("AnnounceUploads = %d, %v; want the cancelled upload's event", n, err)
	}
	rows := func(query string) string {
		t.Helper()
		list, err := f.TestAccess().Query(ctx, query)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(list)
	}
	const orderEvents = `SELECT seq, id, order_id, state, payload FROM events WHERE order_id IS NOT NULL ORDER BY seq`
	const orderDeliveries = `SELECT d.id, d.event_id, d.event_seq FROM deliveries d JOIN events e ON e.id = d.event_id WHERE e.order_id IS NOT NULL ORDER BY d.seq`
	events, deliveries := rows(orderEvents), rows(orderDeliveries)
	if !strings.Contains(rows(`SELECT count(*) AS n FROM events WHERE order_id IS NULL`), "n:1") {
		t.Fatalf("the upload's event is not stored: %s", rows(`SELECT id, order_id, state FROM events`))
	}
	check := func(when string, uploadEvents string) {
		t.Helper()
		if got := rows(orderEvents); got != events {
			t.Fatalf("%s: order events %s, want %s", when, got, events)
		}
		if got := rows(orderDeliveries); got != deliveries {
			t.Fatalf("%s: their deliveries %s, want %s", when, got, deliveries)
		}
		if got := rows(`SELECT count(*) AS n FROM events WHERE order_id IS NULL`); !strings.Contains(got, uploadEvents) {
			t.Fatalf("%s: upload events %s, want %s", when, got, uploadEvents)
		}
		var fk int
		if err := f.write.QueryRowContext(ctx, `SELECT count(*) FROM pragma_foreign_key_check`).Scan(&fk); err != nil || fk != 0 {
			t.Fatalf("%s: foreign key check: %d violations, %v", when, fk, err)
		}
	}
	pv, err := goose.NewProvider(goose.DialectSQLite3, f.write, migrationsFS())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pv.DownTo(ctx, migrationVersion(t, pv, "upload_events")-1); err != nil {
		t.Fatal(err)
	}
	check("down", "n:0")
	var notNull int
	if err := f.write.QueryRowContext(ctx, `SELECT "notnull" FROM pragma_table_info('events') WHERE name = 'order_id'`).Scan(&notNull); err != nil || notNull != 1 {
		t.Fatalf("down: events.order_id NOT NULL = %d, %v; want 1", notNull, err)
	}
	if _, err := pv.Up(ctx); err != nil {
		t.Fatal(err)
	}
	check("up again", "n:0")
	var fkOn int
	if err := f.write.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fkOn); err != nil || fkOn != 1 {
		t.Fatalf("after the migrations, foreign_keys = %d, %v; want them on again", fkOn, err)
	}
	// The numbering goes on: a new order event is numbered after the others.
	price := storelink.Money(1999)
	o, err := s.Orders.CreateWarehouseOrder(ctx, storelink.NewOrder{OrderNumber: "W-after", ClientID: ep.ClientID,
		Items: []storelink.NewItem{{EAN: "4006381333931", MarketplaceArticleNumber: "MP-1", ArticleNumber: "SKU-1", Price: &price}}})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := s.Orders.OrderEvents(ctx, o.ID)
	if err != nil || len(evs) != 1 {
		t.Fatalf("events of the new order: %v, %v", evs, err)
	}
	feed, _, err := s.Orders.Events(ctx, ep.ClientID, "", 100)
	if err != nil || len(feed) != 6 || feed[5].EventID != evs[0].EventID || len(feed[5].Cursor) < len(feed[4].Cursor) ||
		len(feed[5].Cursor) == len(feed[4].Cursor) && feed[5].Cursor <= feed[4].Cursor {
		t.Fatalf("feed after the migrations: %d events, %v; want the new one last, numbered after the others", len(feed), err)
	}
}
