package postgres

import (
	"context"

	"storelink/service"
)

var _ service.Driver = (*Driver)(nil)

// Driver is package service's row-level driver on PostgreSQL, where the
// services' rules run. Reads and transactions share the pool.
type Driver struct{ db *DB }

// NewDriver returns the driver of an open database, on its pool.
func NewDriver(db *DB) *Driver { return &Driver{db: db} }

// NewDrivers returns the drivers of an open database, one per area of the
// services.
func NewDrivers(db *DB) service.Drivers {
	d := NewDriver(db)
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
		Webhooks: d,

		// The database itself.
		Handle: d,
	}
}

// Begin starts a transaction at READ COMMITTED (each statement takes a new
// snapshot, so a transaction that waited for a lock reads what the holder
// committed) on a pipe: BEGIN, the locks and the writes whose answer is
// not needed go with the next read or with COMMIT, so that an order call
// costs a round trip per read, not per statement.
func (d *Driver) Begin(ctx context.Context) (service.Tx, error) {
	p, err := beginPipe(ctx, d.db.pool)
	if err != nil {
		return nil, err
	}
	return &pgTx{tx: p, db: d.db}, nil
}

// Transient tells deadlock victims and serialization failures: with many
// writers these are expected and rare, and a fresh try avoids them.
func (d *Driver) Transient(err error) bool { return retryable(err) }

// pgTx is a transaction begun by Driver.Begin.
type pgTx struct {
	tx pipe
	db *DB
	// wake: deliveries were inserted, the deliverers are told at commit.
	wake bool
}

// Commit sends what is queued with COMMIT, and then wakes the deliverers of
// every process for the deliveries inserted (see DB.wake: a NOTIFY sent
// from the transaction itself would make the commits of every order call,
// in every process, wait for one another's flush).
func (t *pgTx) Commit(ctx context.Context) error {
	if err := t.tx.commit(ctx); err != nil {
		return err // Rollback ends it
	}
	if t.wake && t.db != nil {
		t.db.wake(ChannelDeliveries)
	}
	return nil
}

// Rollback rolls back; after Commit it does nothing.
func (t *pgTx) Rollback(ctx context.Context) error {
	t.tx.rollback(ctx)
	return nil
}

// noRow turns noRows into service.ErrNotFound.
func noRow(err error) error {
	if noRows(err) {
		return service.ErrNotFound
	}
	return err
}

// found turns the answer of exists into whether a row was found.
func found(err error) (bool, error) {
	if noRows(err) {
		return false, nil
	}
	return err == nil, err
}

// Ping checks that the database answers.
func (d *Driver) Ping(ctx context.Context) error { return d.db.Ping(ctx) }

// ProbeWrite tries a small write in the database.
func (d *Driver) ProbeWrite(ctx context.Context) error { return d.db.ProbeWrite(ctx) }

// Fault turns an unreachable database into EUNAVAILABLE and a full disk
// into ENOSPACE.
func (d *Driver) Fault(err error) error { return Fault(err) }

// Listen hears of the uploads and deliveries that other processes on the
// database add, through LISTEN (see DB.Listen).
func (d *Driver) Listen(ctx context.Context, uploads, deliveries func()) error {
	return d.db.Listen(ctx, func(channel string) {
		switch channel {
		case ChannelUploads:
			uploads()
		case ChannelDeliveries:
			deliveries()
		}
	})
}

// Close closes the pool.
func (d *Driver) Close() error { return d.db.Close() }
