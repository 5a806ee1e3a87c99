package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// Backup copies what is committed, beside an open database (whose lock it
// does not need) and a write transaction in progress (which it does not
// wait for and does not copy), and the copy opens as a storelink database.
func TestBackupBesideAWriter(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "storelink.db")
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.write.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES ('backup_test', 'committed')`); err != nil {
		t.Fatal(err)
	}
	tx, err := db.write.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE settings SET value = 'uncommitted' WHERE name = 'backup_test'`); err != nil {
		t.Fatal(err)
	}

	to := filepath.Join(dir, "copy.db")
	start := time.Now()
	info, err := Backup(ctx, path, to)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the backup took %s beside the writer: it waited for it", d)
	}
	if info.Schema < 11 || info.Bytes == 0 {
		t.Errorf("backup info %+v", info)
	}
	if _, err := Backup(ctx, path, to); err == nil {
		t.Error("a second backup to the same file succeeded")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	copyDB, err := Open(ctx, to)
	if err != nil {
		t.Fatalf("open the copy: %v", err)
	}
	defer copyDB.Close()
	var v string
	if err := copyDB.read.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = 'backup_test'`).Scan(&v); err != nil || v != "committed" {
		t.Errorf("the copy holds %q (%v), want what was committed when it began", v, err)
	}
	var n int
	if err := copyDB.read.QueryRowContext(ctx, `SELECT count(*) FROM settings WHERE value = 'uncommitted'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("the copy holds an uncommitted write (%d, %v)", n, err)
	}
}
