package sqlite

import (
	"context"
	"os"
	"testing"
	"time"
)

// What is written reaches the database file in the background, without a
// commit doing it: 8 MiB written through the write connection (about 2,000
// WAL frames, past SQLite's own threshold of 1,000 but far below the
// write connection's backstop) are in the file within a few seconds.
func TestCheckpointsInTheBackground(t *testing.T) {
	ctx := context.Background()
	db, _ := batchFixture(t, 0)
	list, err := db.QueryForTest(ctx, "PRAGMA database_list")
	if err != nil {
		t.Fatal(err)
	}
	path := list[0]["file"]
	for _, q := range []string{
		`CREATE TABLE filler (b BLOB)`,
		`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 2047) INSERT INTO filler SELECT randomblob(4096) FROM n`,
	} {
		if err := db.ExecForTest(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() >= 8<<20 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the database file is %d bytes 5s after 8 MiB were committed: nothing checkpointed it", fi.Size())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
