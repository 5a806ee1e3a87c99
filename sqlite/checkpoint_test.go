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
	list, err := db.TestAccess().Query(ctx, "PRAGMA database_list")
	if err != nil {
		t.Fatal(err)
	}
	path := list[0]["file"]
	for _, q := range []string{
		`CREATE TABLE filler (b BLOB)`,
		`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 2047) INSERT INTO filler SELECT randomblob(4096) FROM n`,
	} {
		if err := db.TestAccess().Exec(ctx, q); err != nil {
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

// After a large transaction, the WAL file shrinks back to walSizeLimit once
// it was checkpointed and writes start again from its beginning, rather
// than keeping the size the largest transaction gave it: 16 MiB written at
// once, then small writes, until the -wal file is within the limit.
func TestCheckpointsTruncateTheWAL(t *testing.T) {
	ctx := context.Background()
	db, _ := batchFixture(t, 0)
	list, err := db.TestAccess().Query(ctx, "PRAGMA database_list")
	if err != nil {
		t.Fatal(err)
	}
	wal := list[0]["file"] + "-wal"
	for _, q := range []string{
		`CREATE TABLE filler (b BLOB)`,
		`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 4095) INSERT INTO filler SELECT randomblob(4096) FROM n`,
	} {
		if err := db.TestAccess().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(wal)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() < 16<<20 {
		t.Fatalf("the WAL is %d bytes after a 16 MiB transaction; the test needs it larger than that", fi.Size())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		// A write after a complete checkpoint starts the WAL over, and its
		// commit truncates the file.
		if err := db.TestAccess().Exec(ctx, `INSERT INTO filler VALUES (x'00')`); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(wal)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() <= walSizeLimit {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the WAL is still %d bytes 10s after a 16 MiB transaction, above its limit of %d", fi.Size(), walSizeLimit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
