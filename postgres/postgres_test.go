package postgres_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
	"storelink/internal/dbtest"
	"storelink/postgres"
	"storelink/service"
	"storelink/service/drivertest"
	"storelink/storetest"
)

// testSealer seals the webhook secrets of every database the tests open:
// one key, as the processes on one database share one.
var testSealer = func() *storelink.Sealer {
	key := make([]byte, storelink.SealKeySize)
	_, _ = rand.Read(key)
	s, err := storelink.NewSealer(key)
	if err != nil {
		panic(err)
	}
	return s
}()

func baseURL(t testing.TB) string { return dbtest.BaseURL(t) }

func newSchema(t testing.TB) string { return dbtest.Schema(t) }

// openDB opens the database at dbURL on the clock now, closed when the
// test ends.
func openDB(t testing.TB, dbURL string, now func() time.Time) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.Now = now
	return db
}

// services returns the services over db, as serve makes them: on the
// database's clock, sealing with testSealer.
func services(db *postgres.DB) *service.Services {
	return service.New(postgres.NewDrivers(db), service.WithClock(func() time.Time { return db.Now() }), service.WithSealer(testSealer))
}

// openAt returns the services over a database opened at dbURL on the clock
// now: one process of those that share the database.
func openAt(t testing.TB, dbURL string, now func() time.Time) *service.Services {
	t.Helper()
	return services(openDB(t, dbURL, now))
}

// open is the conformance suite's opener: a database in a schema of its
// own, and a trigger to make event writes fail.
func open(t *testing.T, now func() time.Time) storetest.Fixture {
	t.Helper()
	dbURL := newSchema(t)
	db := openDB(t, dbURL, now)
	raw := dbtest.Postgres{URL: dbURL, Now: func() time.Time { return db.Now() }}
	return storetest.Fixture{
		Services: func(sealer *storelink.Sealer) *service.Services {
			return services(db).With(service.WithSealer(sealer))
		},
		FailEvents: func(t *testing.T, state storelink.OrderState) func() {
			t.Helper()
			exec := func(query string) {
				t.Helper()
				if err := raw.Exec(context.Background(), query); err != nil {
					t.Fatal(err)
				}
			}
			// A trigger raises inside the service's own transaction, after
			// the order and its items were written.
			when := ""
			if state != "" {
				when = "WHEN (NEW.state = '" + string(state) + "') "
			}
			exec(`CREATE OR REPLACE FUNCTION fail_events() RETURNS trigger LANGUAGE plpgsql AS
			$$BEGIN RAISE EXCEPTION 'injected event failure'; END$$`)
			exec("CREATE TRIGGER fail_events BEFORE INSERT ON events FOR EACH ROW " + when + "EXECUTE FUNCTION fail_events()")
			return func() { exec("DROP TRIGGER fail_events ON events") }
		},
		Exec:      raw.Exec,
		FillStock: raw.FillStock,
	}
}

func TestConformance(t *testing.T) {
	baseURL(t) // one skip for the whole suite
	storetest.Exercise(t, open)
}

func TestDriver(t *testing.T) {
	baseURL(t) // one skip for the whole suite
	drivertest.Exercise(t, func(t *testing.T) (service.Drivers, *service.Services) {
		db := openDB(t, newSchema(t), time.Now)
		return postgres.NewDrivers(db), services(db)
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// fixedClock is a clock that stands still, so that buckets do not refill
// and leases do not run out while a test races.
func fixedClock() func() time.Time {
	at := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	return func() time.Time { return at }
}

// TestConcurrentMigrations: three processes opening an empty database at
// once all succeed, and each migration is applied once.
func TestConcurrentMigrations(t *testing.T) {
	dbURL := newSchema(t)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	dbs := make([]*postgres.DB, 3)
	for i := range dbs {
		wg.Go(func() { dbs[i], errs[i] = postgres.Open(context.Background(), dbURL) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		defer dbs[i].Close()
	}
	conn, err := pgx.Connect(context.Background(), dbURL)
	must(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT version_id FROM goose_db_version WHERE version_id > 0 ORDER BY id`)
	must(t, err)
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	must(t, err)
	entries, _ := os.ReadDir("migrations")
	want := []int64{}
	for _, e := range entries {
		// The version is the file name's number, 00008_… is 8: numbers
		// are given out ahead, so one may be missing.
		n, err := strconv.ParseInt(strings.SplitN(e.Name(), "_", 2)[0], 10, 64)
		must(t, err)
		want = append(want, n)
	}
	if !slices.Equal(versions, want) {
		t.Fatalf("applied versions %v, want each of %v once", versions, want)
	}
	for _, db := range dbs {
		if _, err := services(db).Partners.PartnerCount(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// setup makes a partner with n clients, each with store S1.
func setup(t *testing.T, db *service.Services, n int) []string {
	t.Helper()
	ctx := context.Background()
	p, err := db.Partners.CreatePartner(ctx, "Acme")
	must(t, err)
	var ids []string
	for i := range n {
		c, err := db.Partners.CreateClient(ctx, p.ID, fmt.Sprintf("%c%c", 'A'+i/26, 'A'+i%26), "EUR")
		must(t, err)
		_, _, err = db.Partners.PutStore(ctx, c.ID, "S1", "")
		must(t, err)
		ids = append(ids, c.ID)
	}
	return ids
}

var unlimited = storelink.CapacityPolicy{Base: 1 << 40, Window: time.Hour}

// TestReleaseOwnLeases: after an orderly stop, a process's own claims are
// claimable again at once, without the interrupted claim counting as an
// attempt; another process's claims are left alone.
func TestReleaseOwnLeases(t *testing.T) {
	dbURL := newSchema(t)
	clock := fixedClock()
	a, b := openAt(t, dbURL, clock), openAt(t, dbURL, clock)
	ctx := context.Background()
	clients := setup(t, a, 2)
	for _, c := range clients {
		_, _, err := a.Uploads.Accept(ctx, storelink.NewUpload{ClientID: c, FileName: "f.csv", Body: storelink.ChunksOf([]byte("x"))}, unlimited)
		must(t, err)
	}
	mine, err := a.Uploads.Claim(ctx, "a", time.Hour)
	must(t, err)
	theirs, err := b.Uploads.Claim(ctx, "b", time.Hour)
	must(t, err)
	if mine == nil || theirs == nil {
		t.Fatalf("claims = %v, %v; want one upload each", mine, theirs)
	}
	must(t, a.Uploads.ReleaseOwnLeases(ctx, "a"))
	again, err := b.Uploads.Claim(ctx, "b2", time.Hour)
	must(t, err)
	if again == nil || again.ID != mine.ID || again.Attempts != 1 {
		t.Fatalf("claim after the release = %+v, want %s as its first attempt", again, mine.ID)
	}
	if none, err := a.Uploads.Claim(ctx, "a2", time.Hour); err != nil || none != nil {
		t.Fatalf("claim = %v, %v; want nothing: b's lease holds", none, err)
	}
	if _, err := a.Uploads.Apply(ctx, mine, func(map[string]bool, func(storelink.StockRow) error) (storelink.FeedReport, error) {
		return storelink.FeedReport{}, nil
	}); storelink.ErrorCode(err) != storelink.ECONFLICT {
		t.Fatalf("apply by the released claim = %v, want ECONFLICT", err)
	}
}

// TestSecretsSealedAtRest: no column of endpoints holds a webhook secret or
// an endpoint's x-api-key in clear.
func TestSecretsSealedAtRest(t *testing.T) {
	dbURL := newSchema(t)
	db := openAt(t, dbURL, time.Now)
	ctx := context.Background()
	client := setup(t, db, 1)[0]
	first, second := "whsec_"+strings.Repeat("QUJD", 11), "whsec_"+strings.Repeat("REVG", 11)
	webhooks := db
	ep, err := webhooks.Webhooks.CreateEndpoint(ctx, client, storelink.NewEndpoint{URL: "https://a.test", APIKey: "partner-key-one-0123456789"}, first)
	must(t, err)
	_, err = webhooks.Webhooks.RotateSecret(ctx, "", ep.ID, storelink.SecretRotation{Secret: second, Overlap: time.Hour})
	must(t, err)
	clear := []string{first, second, strings.TrimPrefix(first, "whsec_"), strings.TrimPrefix(second, "whsec_"), "partner-key-one-0123456789"}
	conn, err := pgx.Connect(ctx, dbURL)
	must(t, err)
	defer conn.Close(ctx)
	var secret, previous, key, row string
	must(t, conn.QueryRow(ctx, `SELECT secret, previous_secret, api_key, e::text FROM endpoints e`).Scan(&secret, &previous, &key, &row))
	for _, s := range clear {
		if strings.Contains(row, s) {
			t.Fatalf("the endpoint row holds a secret in clear: %s", row)
		}
	}
	for _, v := range []string{secret, previous, key} {
		if !strings.HasPrefix(v, "sealed:") {
			t.Fatalf("stored %q, want a sealed value", v)
		}
	}
}

// waitLockWaiters polls, for at most 10s, until at least n sessions of the
// test database wait for a lock: a statement the test blocked has then
// reached the lock it blocks on.
func waitLockWaiters(tb testing.TB, conn *pgx.Conn, n int) {
	tb.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var k int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&k); err != nil {
			tb.Fatalf("sessions waiting on a lock: %v", err)
		}
		if k >= n {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d sessions waiting on a lock after 10s, want %d", k, n)
		}
	}
}
