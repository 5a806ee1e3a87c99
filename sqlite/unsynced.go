package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
)

// unsyncedTx is a write transaction whose commit is not fsynced, for the
// deliverer's bookkeeping (claims and attempt records): synchronous=NORMAL on a connection
// pinned for it. In WAL mode a crash of the process loses none of it; a power
// cut may lose the last few, and then an event is sent again, which
// at-least-once delivery allows. Everything that must survive a power cut
// (uploads, orders, events and the deliveries queued with them) commits with
// synchronous=FULL, as the connection is set back before it is released.
// Its statement journals stay in memory (temp_store=MEMORY, set back too): a
// statement that writes a batch of rows journals the pages it changes, and
// past 64 KiB SQLite moved the journal to a file it made for each statement.
type unsyncedTx struct {
	orderTx
	conn *sql.Conn
}

func (db *DB) beginUnsynced(ctx context.Context) (*unsyncedTx, error) {
	conn, err := db.write.Conn(ctx)
	if err != nil {
		return nil, err
	}
	// The wait is over once the connection is ours: what follows takes
	// microseconds, and a context that can be cancelled costs the driver a
	// goroutine for each statement.
	ctx = context.WithoutCancel(ctx)
	b := &unsyncedTx{conn: conn}
	if _, err := conn.ExecContext(ctx, `PRAGMA synchronous = NORMAL; PRAGMA temp_store = MEMORY`); err != nil {
		b.release() // the first may have taken
		return nil, err
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		b.release()
		return nil, err
	}
	b.orderTx = orderTx{Tx: tx, prepared: db.prepared}
	return b, nil
}

// release sets the connection back to synchronous=FULL (and temp_store to
// its default) and returns it to the pool, or, should that fail, has the
// pool throw it away: a connection that commits without fsync must never
// serve a durable write.
func (b *unsyncedTx) release() {
	if b.conn == nil {
		return
	}
	if _, err := b.conn.ExecContext(context.Background(), `PRAGMA synchronous = FULL; PRAGMA temp_store = DEFAULT`); err != nil {
		_ = b.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	b.conn.Close()
	b.conn = nil
}

// Commit commits and releases the connection.
func (b *unsyncedTx) Commit() error {
	err := b.Tx.Commit()
	b.release()
	return err
}

// Rollback rolls back (if not yet committed) and releases the connection.
func (b *unsyncedTx) Rollback() error {
	var err error
	if b.Tx != nil {
		err = b.Tx.Rollback()
	}
	b.release()
	return err
}
