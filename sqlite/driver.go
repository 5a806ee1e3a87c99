package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"storelink/service"
)

var (
	_ service.WebhookDriver = (*webhooks)(nil)
	_ service.Handle        = handle{}
)

// webhooks is the webhook endpoints' and deliveries' driver.
type webhooks struct{ db *DB }

// handle is the database's own calls: readiness, faults, the work other
// processes add, closing it.
type handle struct{ db *DB }

// NewDrivers returns the drivers of an open database, one per area of the
// services.
func NewDrivers(db *DB) service.Drivers {
	return service.Drivers{
		// Partners, clients, API keys, stores and sessions.
		Partners: partners{db},

		// The secret key's check value and the values sealed with it.
		SecretKeys: secretKeys{db},

		// Orders, their events and idempotency keys.
		Orders: orders{db},

		// Uploads, their files and the stock they write.
		Uploads: &uploads{db: db},

		// Webhook endpoints and their deliveries.
		Webhooks: &webhooks{db: db},

		// The database itself.
		Handle: handle{db},
	}
}

// Transient is always false: with one writer no transaction is ever a
// deadlock's victim.
func (d *webhooks) Transient(error) bool { return false }

// orderHold bounds how long order calls keep the write connection from
// the other writers (uploads, the background loops) while they keep coming.
const orderHold = 10 * time.Millisecond

// Begin starts a write transaction of its own, on the write connection
// (beginWrite).
func (d *webhooks) Begin(ctx context.Context) (service.WebhookTx, error) {
	w, err := d.db.beginWrite(ctx)
	if err != nil {
		return nil, err
	}
	return &endpointTx{w: w}, nil
}

// beginWrite starts a write transaction of the services on the write
// connection, or returns ctx's error if ctx ends first.
//
// The transactions take their turn first come first served (turn): the
// write pool hands its one connection to a random waiter (database/sql), so
// under load an unlucky call would wait behind any number of later ones.
// And the transaction whose turn it is hands the connection straight on to
// the next one waiting, for up to orderHold, instead of back to the pool:
// there the background loops, which every order call wakes, would win it
// about as often as the order calls and run a (mostly empty) claim
// transaction between any two of them. This is a matter of the driver's
// speed alone: a transaction begun sees and does the same either way.
func (db *DB) beginWrite(ctx context.Context) (*writeTx, error) {
	if err := db.orderTurn.take(ctx); err != nil {
		return nil, err
	}
	tx := &writeTx{db: db}
	if err := ctx.Err(); err != nil {
		tx.end(true)
		return nil, err
	}
	if db.orderConn == nil {
		conn, err := db.write.Conn(ctx)
		if err != nil {
			tx.end(true)
			return nil, err
		}
		db.orderConn, db.orderSince = conn, time.Now()
	}
	sqlTx, err := db.orderConn.BeginTx(ctx, nil)
	if err != nil {
		tx.end(true)
		return nil, err
	}
	tx.orderTx = orderTx{Tx: sqlTx, prepared: db.prepared}
	return tx, nil
}

// writeTx is a transaction begun by beginWrite: it holds the turn until
// it ends.
type writeTx struct {
	orderTx
	db *DB
	// failed is set when a statement failed: the database's fault or the
	// context's, never the caller's.
	failed bool
	done   bool
}

// end gives the turn back. After a failed statement the connection goes
// back to the pool too (the pool knows what to do with a broken one), as
// it does when nobody waits or it was held long enough.
func (tx *writeTx) end(failed bool) {
	db := tx.db
	tx.done = true
	if db.orderConn != nil && (failed || db.orderTurn.waiting() == 0 || time.Since(db.orderSince) > orderHold) {
		db.orderConn.Close() // back to the pool
		db.orderConn = nil
	}
	db.orderTurn.give()
}

// Commit commits and gives the turn back.
func (tx *writeTx) Commit(context.Context) error {
	if tx.done {
		return errors.New("commit of an ended transaction")
	}
	err := tx.Tx.Commit()
	tx.end(err != nil || tx.failed)
	if err != nil {
		return fmt.Errorf("commit order transaction: %w", err)
	}
	return nil
}

// Rollback rolls back, unless the transaction ended already, and gives the
// turn back.
func (tx *writeTx) Rollback(ctx context.Context) error {
	if tx.done {
		return nil
	}
	err := tx.Tx.Rollback()
	tx.end(tx.failed || err != nil || ctx.Err() != nil)
	return err
}

// fail records a statement's error, other than finding no row.
func (tx *writeTx) fail(err error) error {
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		tx.failed = true
	}
	return err
}

// ExecContext runs a statement, prepared when its SQL is, noting a failure.
func (tx *writeTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	res, err := tx.orderTx.ExecContext(ctx, query, args...)
	return res, tx.fail(err)
}

// QueryContext runs a query, prepared when its SQL is, noting a failure.
func (tx *writeTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	rows, err := tx.orderTx.QueryContext(ctx, query, args...)
	return rows, tx.fail(err)
}

// QueryRowContext runs a one-row query, prepared when its SQL is, noting a
// failure other than finding no row.
func (tx *writeTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	row := tx.orderTx.QueryRowContext(ctx, query, args...)
	tx.fail(row.Err())
	return row
}

// Ping checks that the database answers.
func (h handle) Ping(ctx context.Context) error { return h.db.Ping(ctx) }

// ProbeWrite tries a small write next to the database file.
func (h handle) ProbeWrite(ctx context.Context) error { return h.db.ProbeWrite(ctx) }

// Fault turns a write that found the disk full into ENOSPACE.
func (h handle) Fault(err error) error { return Fault(err) }

// Listen returns at once: one process owns the file (see Open), so no other
// adds work that this one would need to hear of.
func (h handle) Listen(context.Context, func(), func()) error { return nil }

// Close closes the database.
func (h handle) Close() error { return h.db.Close() }
