package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"storelink"
	"storelink/sqlite"
	"storelink/storetest"
)

func open(t *testing.T, now func() time.Time) (storetest.Store, storetest.FailEvents) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "storelink.db"))
	if err != nil {
		t.Fatal(err)
	}
	db.Now = now
	t.Cleanup(func() { db.Close() })
	return db, func(t *testing.T, state storelink.OrderState) func() {
		t.Helper()
		exec := func(query string) {
			t.Helper()
			if err := db.ExecForTest(context.Background(), query); err != nil {
				t.Fatal(err)
			}
		}
		// A trigger aborts the INSERT inside the service's own transaction,
		// after the order and its items were written.
		when := ""
		if state != "" {
			when = "WHEN NEW.state = '" + string(state) + "' "
		}
		exec("CREATE TRIGGER fail_events BEFORE INSERT ON events " + when + "BEGIN SELECT RAISE(ABORT, 'injected event failure'); END")
		return func() { exec("DROP TRIGGER fail_events") }
	}
}

func TestConformance(t *testing.T) { storetest.Exercise(t, open) }

func TestSecondOpenRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "storelink.db")
	db, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := sqlite.Open(context.Background(), path); err == nil {
		t.Fatal("a second Open of the same file succeeded; want it refused while the first holds it")
	}
}
