package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"storelink"
)

// Fault turns the error of a write that found the disk full into ENOSPACE;
// any other error is returned as it is. SQLite reports a write that failed
// with ENOSPC as SQLITE_FULL (as the primary code of an extended one), and
// rolls the transaction back, so nothing of it was stored.
func Fault(err error) error {
	var se *msqlite.Error
	if errors.Is(err, syscall.ENOSPC) || (errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL) {
		return storelink.NoSpace()
	}
	return err
}

// probeSize is how much ProbeWrite writes: room for the small writes of
// orders and for small stock files. A larger upload may still find the disk
// full; it is answered 507 and the service is not ready again until a probe
// passes.
const probeSize = 64 << 10

// ProbeWrite writes and syncs probeSize bytes next to the database file and
// removes them again: whether the disk has room for writes. A probe through
// SQLite itself would say little, since a small transaction may fit in the
// pages the write-ahead log already has.
func (db *DB) ProbeWrite(ctx context.Context) error {
	name := db.path + ".probe"
	f, err := os.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return Fault(fmt.Errorf("probe write: %w", err))
	}
	defer os.Remove(name)
	_, err = f.Write(make([]byte, probeSize))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Fault(fmt.Errorf("probe write: %w", err))
	}
	return ctx.Err()
}
