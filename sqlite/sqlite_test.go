package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"storelink/sqlite"
	"storelink/storetest"
)

func open(t *testing.T, now func() time.Time) storetest.Store {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "storelink.db"))
	if err != nil {
		t.Fatal(err)
	}
	db.Now = now
	t.Cleanup(func() { db.Close() })
	return db
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
