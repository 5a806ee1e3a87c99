package service_test

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"storelink"
	"storelink/internal/dbtest"
	"storelink/postgres"
	"storelink/service"
	"storelink/sqlite"
)

// database is one database a test of the services runs on, fresh for the
// test, with services over it on the test's clock.
type database struct {
	name  string
	svc   *service.Services
	clock *clock
	// statements counts the statements run so far, where the database
	// was opened to count them (openCounted).
	statements func() int64
}

// clock is a settable clock for the services.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

// eachDatabase runs fn as a subtest on a fresh SQLite file and, when
// STORELINK_TEST_DATABASE_URL is set, on a fresh schema of that PostgreSQL
// database (skipped with a message when it is not). The services seal
// webhook secrets with a key of their own.
func eachDatabase(t *testing.T, fn func(t *testing.T, db database)) {
	t.Run("sqlite", func(t *testing.T) {
		c := newClock()
		sdb, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "storelink.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sdb.Close() })
		sdb.Now = c.now
		fn(t, database{name: "sqlite", svc: service.New(sqlite.NewDrivers(sdb), options(t, c)...), clock: c})
	})
	t.Run("postgres", func(t *testing.T) {
		c := newClock()
		pdb, err := postgres.Open(context.Background(), dbtest.Schema(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pdb.Close() })
		pdb.Now = c.now
		fn(t, database{name: "postgres", svc: service.New(postgres.NewDrivers(pdb), options(t, c)...), clock: c})
	})
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)} }

// options are the services' options as serve sets them, on clock c.
func options(t testing.TB, c *clock) []service.Option {
	key := make([]byte, storelink.SealKeySize)
	_, _ = rand.Read(key)
	sealer, err := storelink.NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	return []service.Option{service.WithClock(c.now), service.WithSealer(sealer)}
}

// client makes a partner with a client in Germany and stores S1 and S2.
func client(t testing.TB, db database) *storelink.NewClient {
	ctx := context.Background()
	p, err := db.svc.Partners.CreatePartner(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.svc.Partners.CreateClient(ctx, p.ID, "DE", "EUR")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"S1", "S2"} {
		if _, _, err := db.svc.Partners.PutStore(ctx, c.ID, s, "Store "+s); err != nil {
			t.Fatal(err)
		}
	}
	return c
}
