package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// The services' write transactions on the write connection (the order
// calls' and the endpoint calls') take their turn first come first served
// (turn): the write pool hands its one connection to a random waiter
// (database/sql), so under load an unlucky call would wait behind any
// number of later ones. The other writers (the background loops, uploads)
// take the connection from the pool between two transactions.
//
// The order calls commit in groups. A COMMIT waits for the disk
// (synchronous(FULL)), which is most of a small transaction's time on the
// one write connection; so an order call that comes while another holds
// the write transaction joins that transaction rather than waiting for its
// COMMIT. Each call of a group runs alone, after the ones before it, within
// a savepoint of its own: its Commit releases the savepoint, its Rollback
// rolls back to it, so that a failing call undoes its own writes and no
// other's. The transaction commits when a call ends and no other waits for
// the turn, or when the group is full (writeGroup.full); an endpoint call that
// comes commits the group before it begins its own transaction, which
// nothing joins. A call's Commit returns once the group's COMMIT is on
// disk, with that COMMIT's error if it failed: no call is answered before
// its writes are durable, and a crash before the COMMIT loses only calls
// that nobody was answered for yet. The calls of a group see what the ones
// before them in the group wrote, as if each had committed on its own, and
// the database's readers see the whole group at once, at its COMMIT.

// groupBound bounds a group, and so how long it keeps the connection from
// the other writers.
type groupBound struct {
	calls int
	time  time.Duration
}

// defaultGroupBound is the bound of every database (DB.maxGroup); a test
// may give its database another.
var defaultGroupBound = groupBound{calls: 32, time: 25 * time.Millisecond}

// The savepoint of a call within its group's transaction; one at a time,
// as the calls run one after the other.
const (
	savepointSQL  = `SAVEPOINT call`
	releaseSQL    = `RELEASE call`
	rollbackToSQL = `ROLLBACK TO call`
)

var groupStatements = []string{savepointSQL, releaseSQL, rollbackToSQL}

// writeGroup is a transaction on the write connection and the calls that
// joined it. Only the holder of the turn reads or changes it, except done
// and err, which the calls waiting for the COMMIT read once done is
// closed.
type writeGroup struct {
	tx    *sql.Tx
	began time.Time
	calls int  // the calls that joined
	solo  bool // an endpoint call's: no other call joins it
	// failed, once set, is why the transaction cannot commit: a call's
	// savepoint could not be rolled back to.
	failed error
	done   chan struct{} // closed when the transaction has ended
	err    error         // its COMMIT's error, or why it was rolled back
}

// beginWrite starts a write transaction of the services on the write
// connection, or returns ctx's error if ctx ends first. An order call
// (join) joins the group open on the connection, if any; an endpoint call
// commits that group first and begins a transaction of its own.
func (db *DB) beginWrite(ctx context.Context, join bool) (*writeTx, error) {
	if err := db.orderTurn.take(ctx); err != nil {
		return nil, err
	}
	if db.group != nil && !join {
		db.endGroup()
	}
	g := db.group
	if g == nil {
		// The transaction outlives the call that begins it: database/sql
		// would roll it back when that call's context ended.
		sqlTx, err := db.write.BeginTx(context.WithoutCancel(ctx), nil)
		if err != nil {
			db.orderTurn.give()
			return nil, err
		}
		g = &writeGroup{tx: sqlTx, began: time.Now(), solo: !join, done: make(chan struct{})}
		db.group = g
	}
	tx := &writeTx{orderTx: orderTx{Tx: g.tx, prepared: db.prepared}, db: db, g: g}
	if _, err := tx.orderTx.ExecContext(context.Background(), savepointSQL); err != nil {
		g.failed = fmt.Errorf("begin a call's savepoint: %w", err)
		tx.done = true
		tx.leave()
		return nil, g.failed
	}
	g.calls++
	return tx, nil
}

// full tells whether the group takes no more calls.
func (g *writeGroup) full(max groupBound) bool {
	return g.solo || g.failed != nil || g.calls >= max.calls || time.Since(g.began) >= max.time
}

// endGroup commits the open group, or rolls it back if it failed, and lets
// its calls know. The caller holds the turn and keeps it.
func (db *DB) endGroup() {
	g := db.group
	db.group = nil
	if g.failed != nil {
		_ = g.tx.Rollback() // SQLite may have rolled it back already
		g.err = fmt.Errorf("another call of the same transaction failed: %w", g.failed)
	} else {
		g.err = g.tx.Commit()
	}
	close(g.done)
}

// writeTx is a call's part of a group: it holds the turn until it ends.
type writeTx struct {
	orderTx
	db   *DB
	g    *writeGroup
	done bool
}

// leave passes the turn on to the next waiter with the group still open,
// unless the group is full or nobody waits: then the group ends and the
// turn is given back.
func (tx *writeTx) leave() {
	if !tx.g.full(tx.db.maxGroup) && tx.db.orderTurn.passOn() {
		return
	}
	tx.db.endGroup()
	tx.db.orderTurn.give()
}

// Commit releases the call's savepoint and returns once the group has
// committed. After an error of the release the call is still open:
// Rollback ends it.
func (tx *writeTx) Commit(context.Context) error {
	if tx.done {
		return errors.New("commit of an ended transaction")
	}
	if _, err := tx.orderTx.ExecContext(context.Background(), releaseSQL); err != nil {
		return fmt.Errorf("commit order transaction: %w", err)
	}
	tx.done = true
	g := tx.g
	tx.leave()
	<-g.done
	if g.err != nil {
		return fmt.Errorf("commit order transaction: %w", g.err)
	}
	return nil
}

// Rollback undoes the call's writes, unless it ended already. If its
// savepoint cannot be rolled back to, the whole group is rolled back and
// its other calls fail.
func (tx *writeTx) Rollback(context.Context) error {
	if tx.done {
		return nil
	}
	tx.done = true
	_, err := tx.orderTx.ExecContext(context.Background(), rollbackToSQL)
	if err == nil {
		_, err = tx.orderTx.ExecContext(context.Background(), releaseSQL)
	}
	if err != nil {
		err = fmt.Errorf("roll back order transaction: %w", err)
		tx.g.failed = err
	}
	tx.leave()
	return err
}

// A call's statements run to their end once started, even when its context
// ends meanwhile: SQLite interrupted in a write within a transaction rolls
// back the whole transaction, and with it the other calls of the group. A
// statement of a call whose context has ended does not start: database/sql
// returns the context's error.
func statementContext(ctx context.Context) context.Context {
	if ctx.Err() != nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

func (tx *writeTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return tx.orderTx.ExecContext(statementContext(ctx), query, args...)
}

func (tx *writeTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return tx.orderTx.QueryContext(statementContext(ctx), query, args...)
}

func (tx *writeTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return tx.orderTx.QueryRowContext(statementContext(ctx), query, args...)
}
