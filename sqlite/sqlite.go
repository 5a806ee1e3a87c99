// Package sqlite is storelink's embedded database (modernc.org/sqlite, no
// cgo) and its drivers: NewDrivers gives package service one small driver
// per area (partners, secret keys, orders, uploads, webhooks) and the
// database's handle, each speaking SQL and deciding nothing. It is the
// default database: one file in the data folder, owned by one storelink
// process at a time.
//
// The file is the only truth. Because one process owns it, the deliverer's
// bookkeeping keeps two things in memory behind the driver: the queue of
// pending deliveries (deliveryQueue), a cache of the file's pending rows
// that is read from the file at the first round and dropped and read again
// whenever a round fails, so that a claim need not walk an index of the
// file; and the leases of the attempts in flight (leaseBook), which only
// this process could ever read and which die with it, so that a claim
// writes nothing. Everything a restart needs is in the file.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"storelink"
)

//go:embed migrations/*.sql
var migrations embed.FS

// DB is an open storelink database. SQLite has one writer, so writes go
// through a pool of one connection that takes the write lock when a
// transaction begins (BEGIN IMMEDIATE); reads use a separate pool and never
// wait for a writer, thanks to WAL.
type DB struct {
	// migrated is what the last Migrate did.
	migrated storelink.Migrated
	path     string
	write    *sql.DB
	read     *sql.DB
	lock     *os.File

	// The services' way to the write connection (see beginWrite):
	// orderTurn admits the order and endpoint calls one at a time, first
	// come first served; group is the transaction open on the connection,
	// which the order calls join (writeGroup) up to maxGroup; prepared holds their
	// statements.
	orderTurn turn
	group     *writeGroup
	maxGroup  groupBound
	prepared  map[string]*sql.Stmt

	// leases holds the leases of the deliveries in flight, queue the
	// pending deliveries; both change only while the write connection is
	// held.
	leases leaseBook
	queue  deliveryQueue
	// checkpoints copies the WAL back into the file in the background.
	checkpoints *checkpointer
	// uploadTurn orders the upload calls' transactions.
	uploadTurn *uploadTurn

	// Now is the clock; tests replace it.
	Now func() time.Time
}

// Open opens (creating it if needed) the database file at path and applies
// the migrations. It takes an exclusive lock on path+".lock" so that a second
// process on the same file fails at once: this process keeps the queue and
// the leases of deliveries in its memory (see the package comment), and a
// second one would claim and send the same deliveries.
func Open(ctx context.Context, path string) (*DB, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create database folder: %w", err)
		}
	}
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("database %s is in use by another storelink process (use PostgreSQL to run several)", path)
	}
	// The database holds key hashes and partner data: readable by its owner
	// only. SQLite creates the -wal and -shm files with the same mode.
	if f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600); err == nil {
		f.Close()
	}
	db := &DB{path: path, lock: lock, Now: func() time.Time { return time.Now().UTC() },
		uploadTurn: &uploadTurn{}, maxGroup: defaultGroupBound}
	// synchronous(FULL): a commit is on disk before it returns, so a 200 for
	// an upload survives a power cut, not only a crash of the process.
	pragmas := "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(ON)"
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + pragmas
	if db.write, err = sql.Open("sqlite", dsn+"&_txlock=immediate"+
		fmt.Sprintf("&_pragma=wal_autocheckpoint(%d)&_pragma=journal_size_limit(%d)", walBackstop, walSizeLimit)); err != nil {
		db.Close()
		return nil, err
	}
	db.write.SetMaxOpenConns(1)
	db.write.SetConnMaxIdleTime(0)
	if db.read, err = sql.Open("sqlite", dsn+"&_pragma=query_only(1)"); err != nil {
		db.Close()
		return nil, err
	}
	db.read.SetMaxOpenConns(4)
	if err := db.Migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := db.prepare(ctx, slices.Concat(orderStatements, deliveryStatements, uploadStatements, groupStatements)); err != nil {
		db.Close()
		return nil, err
	}
	if db.checkpoints, err = startCheckpointer(dsn); err != nil {
		db.Close()
		return nil, err
	}
	if err := db.ReleaseLeases(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("release leases: %w", err)
	}
	return db, nil
}

// prepare prepares statements on the write pool, once: its one connection
// keeps them. They must be prepared before a transaction needs them, since
// preparing on the pool waits for the connection a transaction holds.
func (db *DB) prepare(ctx context.Context, queries []string) error {
	db.prepared = make(map[string]*sql.Stmt, len(queries))
	for _, q := range queries {
		s, err := db.write.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare %.40q: %w", q, err)
		}
		db.prepared[q] = s
	}
	return nil
}

// orderTx is the write transaction of one order call. A statement whose SQL
// was prepared when the database was opened runs prepared: parsing the SQL
// of every statement again would be a large part of a transition's time.
type orderTx struct {
	*sql.Tx
	prepared map[string]*sql.Stmt
}

func (tx orderTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if s := tx.prepared[query]; s != nil {
		return tx.StmtContext(ctx, s).ExecContext(ctx, args...)
	}
	return tx.Tx.ExecContext(ctx, query, args...)
}

func (tx orderTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if s := tx.prepared[query]; s != nil {
		return tx.StmtContext(ctx, s).QueryContext(ctx, args...)
	}
	return tx.Tx.QueryContext(ctx, query, args...)
}

func (tx orderTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if s := tx.prepared[query]; s != nil {
		return tx.StmtContext(ctx, s).QueryRowContext(ctx, args...)
	}
	return tx.Tx.QueryRowContext(ctx, query, args...)
}

// Migrate applies the embedded migrations that have not been applied yet.
func (db *DB) Migrate(ctx context.Context) error {
	p, err := goose.NewProvider(goose.DialectSQLite3, db.write, migrationsFS())
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	res, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	db.migrated.Applied = db.migrated.Applied[:0]
	for _, r := range res {
		db.migrated.Applied = append(db.migrated.Applied, r.Source.Version)
	}
	if db.migrated.Version, err = p.GetDBVersion(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// Migrated tells what the last Migrate did: the migrations it applied
// and the schema's version after it.
func (db *DB) Migrated() storelink.Migrated { return db.migrated }

// Close closes the pools and releases the file lock.
func (db *DB) Close() error {
	errs := []error{db.checkpoints.close()}
	for _, s := range db.prepared {
		errs = append(errs, s.Close())
	}
	if db.write != nil {
		errs = append(errs, db.write.Close())
	}
	if db.read != nil {
		errs = append(errs, db.read.Close())
	}
	if db.lock != nil {
		errs = append(errs, db.lock.Close())
	}
	return errors.Join(errs...)
}

// Ping checks that the database answers (for /readyz).
func (db *DB) Ping(ctx context.Context) error {
	var one int
	return db.read.QueryRowContext(ctx, "SELECT 1").Scan(&one)
}

// ReleaseLeases makes every upload in processing, and every delivery in
// flight, claimable again. Only one process can hold the file, so once Open
// has its lock every lease in it is a dead one: Open calls this. An
// upload's lease ends now, not at 0, so that the backoff of an interrupted
// upload counts from the restart (the claim adds it to lease_until).
func (db *DB) ReleaseLeases(ctx context.Context) error {
	if _, err := db.write.ExecContext(ctx, `UPDATE uploads SET lease_until = min(lease_until, ?) WHERE status = ?`,
		ms(db.Now()), storelink.UploadProcessing); err != nil {
		return err
	}
	// A delivery a killed process was sending may or may not have arrived;
	// it goes out again now (receivers deduplicate by webhook-id) rather
	// than when its lease, the webhook timeout and 30s, runs out.
	// Leases of deliveries are held in memory (leaseBook); a file written
	// by a version that kept them in its rows may still hold some, which
	// are cleared too.
	conn, err := db.write.Conn(ctx) // see leaseBook
	if err != nil {
		return err
	}
	defer conn.Close()
	db.leases.clear()
	db.queue.reset()
	_, err = conn.ExecContext(ctx, releaseLeasesSQL, storelink.DeliveryPending)
	return err
}

// releaseLeasesSQL clears the leases kept in the rows of deliveries in
// state ?1, pending. SQLite plans the statement again once the state is
// bound, so deliveries_pending still serves.
const releaseLeasesSQL = `UPDATE deliveries SET lease_owner = NULL, lease_until = NULL WHERE state = ?1 AND lease_until IS NOT NULL`

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

func fromNullMS(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMS(v.Int64)
	return &t
}

func migrationsFS() fs.FS {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err) // the embed pattern guarantees the folder
	}
	return sub
}
