package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// BackupInfo describes a copy made by Backup.
type BackupInfo struct {
	// Schema is the last migration applied to the database copied.
	Schema int64
	// KeyCheck is the check value of the secret key the copy's webhook
	// secrets are sealed with ("" when none is recorded yet).
	KeyCheck string
	// Bytes is the size of the copy.
	Bytes int64
}

// Backup writes a consistent copy of the database file at path to the new
// file to, while a serve may be running on it. It needs neither the lock
// that Open takes nor the write lock: VACUUM INTO copies what one read
// transaction sees (WAL mode lets that run beside the writer), so the copy
// holds every transaction committed before it started and none of those
// after. The copy is written beside to, synced, checked with PRAGMA
// integrity_check and only then given its name, so that a file named to is
// always a whole backup; an existing to is never overwritten.
func Backup(ctx context.Context, path, to string) (BackupInfo, error) {
	var info BackupInfo
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		return info, fmt.Errorf("no database file at %s", path)
	}
	if _, err := os.Lstat(to); err == nil {
		return info, fmt.Errorf("%s exists: a backup never overwrites a file; name a new one", to)
	}
	// mode=rw: never create a database where there was none.
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?mode=rw&_pragma=busy_timeout(10000)")
	if err != nil {
		return info, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		return info, fmt.Errorf("open %s: %w", path, err)
	}
	defer conn.Close()
	if err := conn.QueryRowContext(ctx, `SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied`).Scan(&info.Schema); err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return info, fmt.Errorf("%s is not a storelink database (it has no migrations table)", path)
		}
		return info, fmt.Errorf("read the schema version of %s: %w", path, err)
	}

	// VACUUM INTO takes an empty file: made first, so that it is the
	// owner's only, as the database is.
	partial := filepath.Join(filepath.Dir(to), "."+filepath.Base(to)+".partial")
	f, err := os.OpenFile(partial, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return info, fmt.Errorf("create the backup: %w", err)
	}
	f.Close()
	done := false
	defer func() {
		if !done {
			os.Remove(partial)
		}
	}()
	if _, err := conn.ExecContext(ctx, `VACUUM INTO ?`, partial); err != nil {
		return info, fmt.Errorf("copy %s: %w", path, err)
	}
	if info.KeyCheck, err = checkCopy(ctx, partial); err != nil {
		return info, err
	}
	if info.Bytes, err = syncFile(partial); err != nil {
		return info, fmt.Errorf("sync the backup: %w", err)
	}
	// A link, not a rename: it fails rather than replace a file that
	// appeared at to meanwhile. Where the file system has no links, a
	// rename after one more look.
	if err := os.Link(partial, to); err != nil {
		if _, statErr := os.Lstat(to); errors.Is(err, os.ErrExist) || statErr == nil {
			return info, fmt.Errorf("%s appeared while the backup was written: a backup never overwrites a file; name a new one", to)
		}
		if err := os.Rename(partial, to); err != nil {
			return info, fmt.Errorf("name the backup %s: %w", to, err)
		}
	}
	done = true
	os.Remove(partial)
	if d, err := os.Open(filepath.Dir(to)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return info, nil
}

// checkCopy runs PRAGMA integrity_check on the copy and reads its secret
// key's check value.
func checkCopy(ctx context.Context, file string) (keyCheck string, err error) {
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: file}).EscapedPath()+"?mode=ro")
	if err != nil {
		return "", err
	}
	defer db.Close()
	var result string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&result); err != nil {
		return "", fmt.Errorf("check the copy: %w", err)
	}
	if result != "ok" {
		return "", fmt.Errorf("the copy fails PRAGMA integrity_check: %s", result)
	}
	err = db.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = 'secret_key_check'`).Scan(&keyCheck)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return keyCheck, err
}

func syncFile(name string) (int64, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}
