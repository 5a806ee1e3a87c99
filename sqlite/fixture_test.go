package sqlite

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"storelink"
	"storelink/service"
)

// Fixture is the one database the tests of this package open, the
// package's own tests and package sqlite_test's alike (hence exported, in a
// test file): a fresh file in a temporary folder, closed when the test
// ends, and the sealer of a random key that its services seal webhook
// secrets with, as serve's do once the key is checked. Its clock is the
// DB's Now, which a test may set at any time.
type Fixture struct {
	*DB
	// Path is the database file.
	Path string
	// Sealer is the sealer the services seal with.
	Sealer *storelink.Sealer
}

// OpenFixture opens a fresh database on the clock now (nil for the
// system clock).
func OpenFixture(t testing.TB, now func() time.Time) *Fixture {
	t.Helper()
	key := make([]byte, storelink.SealKeySize)
	_, _ = rand.Read(key)
	sealer, err := storelink.NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	f := &Fixture{Path: filepath.Join(t.TempDir(), "storelink.db"), Sealer: sealer}
	if f.DB, err = Open(context.Background(), f.Path); err != nil {
		t.Fatal(err)
	}
	if now != nil {
		f.Now = now
	}
	t.Cleanup(func() { f.DB.Close() })
	return f
}

// Services returns the services over the database, as serve makes them: on
// the database's clock as it is at each call, sealing with Sealer.
func (f *Fixture) Services() *service.Services {
	return service.New(NewDrivers(f.DB), service.WithClock(func() time.Time { return f.Now() }), service.WithSealer(f.Sealer))
}

// Reopen closes the database and opens its file again on the same clock,
// as a restart of the process does.
func (f *Fixture) Reopen(t testing.TB) {
	t.Helper()
	now := f.Now
	if err := f.DB.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := Open(context.Background(), f.Path)
	if err != nil {
		t.Fatal(err)
	}
	f.DB = db
	f.Now = now
}
