package sqlite

import (
	"context"
	"testing"
)

// TestBookkeepingRestoresFullSync: delivery bookkeeping commits without
// fsync, but the write connection must be back to synchronous=FULL (2) for
// every other write, after a commit and after a rollback alike.
func TestBookkeepingRestoresFullSync(t *testing.T) {
	ctx := context.Background()
	db := OpenFixture(t, nil)
	level := func() int {
		t.Helper()
		var n int
		if err := db.write.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := level(); got != 2 {
		t.Fatalf("synchronous = %d at start, want 2 (FULL)", got)
	}
	for _, commit := range []bool{true, false} {
		tx, err := db.beginUnsynced(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var inside int
		if err := tx.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&inside); err != nil {
			t.Fatal(err)
		}
		if inside != 1 {
			t.Fatalf("synchronous = %d inside bookkeeping, want 1 (NORMAL)", inside)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		_ = tx.Rollback() // after Commit too: must not release twice
		if got := level(); got != 2 {
			t.Fatalf("synchronous = %d after bookkeeping (commit=%v), want 2 (FULL)", got, commit)
		}
	}
}
