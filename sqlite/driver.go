package sqlite

import (
	"context"
	"errors"
	"fmt"

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
// The other writers (the background loops, uploads) take the connection
// from the pool between two turns. This is a matter of the driver's speed
// alone: a transaction begun sees and does the same either way.
func (db *DB) beginWrite(ctx context.Context) (*writeTx, error) {
	if err := db.orderTurn.take(ctx); err != nil {
		return nil, err
	}
	sqlTx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		db.orderTurn.give()
		return nil, err
	}
	return &writeTx{orderTx: orderTx{Tx: sqlTx, prepared: db.prepared}, db: db}, nil
}

// writeTx is a transaction begun by beginWrite: it holds the turn until
// it ends.
type writeTx struct {
	orderTx
	db   *DB
	done bool
}

// end gives the turn back.
func (tx *writeTx) end() {
	tx.done = true
	tx.db.orderTurn.give()
}

// Commit commits and gives the turn back.
func (tx *writeTx) Commit(context.Context) error {
	if tx.done {
		return errors.New("commit of an ended transaction")
	}
	err := tx.Tx.Commit()
	tx.end()
	if err != nil {
		return fmt.Errorf("commit order transaction: %w", err)
	}
	return nil
}

// Rollback rolls back, unless the transaction ended already, and gives the
// turn back.
func (tx *writeTx) Rollback(context.Context) error {
	if tx.done {
		return nil
	}
	err := tx.Tx.Rollback()
	tx.end()
	return err
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
