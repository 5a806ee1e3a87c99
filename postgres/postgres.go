// Package postgres is storelink's PostgreSQL database (pgx), for running
// several storelink processes on one database, and its drivers: NewDrivers
// gives package service one small driver per area (partners, secret keys,
// orders, uploads, webhooks) and the database's handle. The services behave
// as on SQLite (one behaviour suite, storetest, judges both); what differs
// is how they stay correct with many writers at once:
//
//   - uploads and deliveries are claimed with FOR UPDATE SKIP LOCKED and a
//     lease, so one process works on each at a time and a dead process's
//     claims are taken over when its lease ends;
//   - a client's capacity bucket is one row, locked while an upload takes
//     from it;
//   - an order change locks the order row; routing takes a per-client
//     advisory lock, so that two orders never get the same unit;
//   - a client's events are numbered from a per-client counter row that the
//     writing transaction holds until it commits, so the event cursor
//     follows commit order;
//   - work made by one process wakes the others through LISTEN/NOTIFY.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"strings"
	"time"

	"storelink"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrations embed.FS

// DB is an open storelink database on PostgreSQL: a pool of connections
// shared by every service.
type DB struct {
	// migrated is what the last Migrate did.
	migrated storelink.Migrated
	pool     *pgxpool.Pool
	// schema is the schema the tables live in (the first of search_path):
	// notifications carry it, so that installations in other schemas of the
	// same database do not wake this one.
	schema string

	// Now is the clock; tests replace it.
	Now func() time.Time

	// notifiers coalesce the wake-ups sent after commits, by channel.
	notifiers map[string]*notifier
}

// defaultConnectTimeout bounds connecting to the database, the answer to
// the start-up message included.
const defaultConnectTimeout = 5 * time.Second

// Open connects to the database at url (postgres://…; a search_path
// parameter selects the schema, pool_max_conns the pool's size) and applies
// the migrations. Several
// processes may open the same database at once: the migrations run under an
// advisory lock, so they are applied once.
func Open(ctx context.Context, url string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The error of ParseConfig may quote the URL, password included.
		return nil, errors.New("postgres: the database URL cannot be parsed")
	}
	if !strings.Contains(url, "pool_max_conns") {
		// pgxpool's default (4 on this kind of machine) is too few for
		// HTTP requests, an apply or two holding theirs for seconds, the
		// deliverer and its recorder; a pool_max_conns parameter wins.
		cfg.MaxConns = 16
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// pgx connects in the background of the request that asked, and
		// without a limit a database that accepts connections and never
		// answers would keep every connection of the pool connecting; a
		// connect_timeout parameter wins.
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		// Times come back in UTC, as the domain keeps them, not in the
		// process's local zone.
		c.TypeMap().RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID,
			Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}})
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	db := &DB{pool: pool, Now: func() time.Time { return time.Now().UTC() },
		notifiers: map[string]*notifier{ChannelUploads: {}, ChannelDeliveries: {}}}
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&db.schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	if err := db.Migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return db, nil
}

// Migrate applies the embedded migrations that have not been applied yet.
// It holds a session advisory lock meanwhile (goose's Postgres session
// locker), keyed by the schema, so that processes starting together migrate
// once and the others wait for it.
func (db *DB) Migrate(ctx context.Context) error {
	h := fnv.New64a()
	h.Write([]byte("storelink migrations " + db.schema))
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(int64(h.Sum64()>>1)), lock.WithLockTimeout(1, 300))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	sqlDB := stdlib.OpenDBFromPool(db.pool)
	defer sqlDB.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrationsFS(), goose.WithSessionLocker(locker))
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

// closeWait bounds how long Close waits for the pool's connections to be
// closed.
const closeWait = 2 * time.Second

// Close closes the pool. It waits at most closeWait: a connection whose
// query was canceled is closed only after pgx has sent the server a cancel
// request and had its answer, for up to 15 s, which a database that hangs
// never gives. Whoever closes the pool is done with it; the rest of the
// closing goes on in the background, and the server ends connections whose
// client is gone.
func (db *DB) Close() error {
	done := make(chan struct{})
	go func() {
		db.pool.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(closeWait):
	}
	return nil
}

// Ping checks that the database answers (for /readyz).
func (db *DB) Ping(ctx context.Context) error {
	var one int
	return db.pool.QueryRow(ctx, "SELECT 1").Scan(&one)
}

// sendBatch sends b on a connection of the pool, in one round trip.
func (db *DB) sendBatch(ctx context.Context, b *pgx.Batch) error {
	return db.pool.SendBatch(ctx, b).Close()
}

// querier is what both the pool and a transaction offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// inTx runs fn in a transaction and commits it. A transaction that
// PostgreSQL ended as a deadlock victim or a serialization failure is run
// again from the start, a few times: with many writers these are expected,
// rare, and say nothing about the request. fn must therefore set its
// results afresh on every run.
func (db *DB) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	for try := 1; ; try++ {
		err := db.tryTx(ctx, fn)
		if try < 4 && retryable(err) {
			continue
		}
		return err
	}
}

func (db *DB) tryTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func retryable(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && (pg.Code == "40P01" || pg.Code == "40001")
}

// Advisory lock classes: the first key of pg_advisory_xact_lock(int, int),
// the second being hashtext of what is locked.
const (
	// lockRouting serialises, per client, the transactions that reserve
	// stock by routing (creating an order, cancelling with reassign), so
	// that two of them never count the same free unit.
	lockRouting = 0x53_4c_01
	// lockDeliveryClaims serialises delivery claims, so that the cap on
	// attempts in flight per endpoint holds across processes.
	lockDeliveryClaims = 0x53_4c_02
	// lockOrderKey serialises the create calls that bring one idempotency
	// key of a client (see ordersTx.GetOrderKey).
	lockOrderKey = 0x53_4c_03
)

// exists returns pgx.ErrNoRows when the query finds nothing.
func exists(ctx context.Context, q querier, query string, args ...any) error {
	var one int
	return q.QueryRow(ctx, query, args...).Scan(&one)
}

// noRows tells whether a lookup found nothing: no row, or a key that
// cannot be stored at all. PostgreSQL refuses text that is not UTF-8 or holds
// a NUL byte (an id taken from a URL can be anything), where SQLite simply
// finds no row; either way there is nothing by that id.
func noRows(err error) bool {
	var pg *pgconn.PgError
	return errors.Is(err, pgx.ErrNoRows) || errors.As(err, &pg) && (pg.Code == "22021" || pg.Code == "22P05")
}

func migrationsFS() fs.FS {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err) // the embed pattern guarantees the folder
	}
	return sub
}
