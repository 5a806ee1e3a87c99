package postgres

import (
	"context"

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

// Begin starts a transaction at READ COMMITTED (each statement takes a new
// snapshot, so a transaction that waited for a lock reads what the holder
// committed) on a pipe: BEGIN, the locks and the writes whose answer is
// not needed go with the next read or with COMMIT, so that an order call
// costs a round trip per read, not per statement.
func (d *webhooks) Begin(ctx context.Context) (service.WebhookTx, error) {
	p, err := beginPipe(ctx, d.db.pool)
	if err != nil {
		return nil, err
	}
	return &endpointTx{tx: p, db: d.db}, nil
}

// Transient tells deadlock victims and serialization failures: with many
// writers these are expected and rare, and a fresh try avoids them.
func (d *webhooks) Transient(err error) bool { return retryable(err) }

// endpointTx is a transaction of the endpoint calls, begun by webhooks.Begin.
type endpointTx struct {
	tx pipe
	db *DB
	// wake: deliveries were inserted, the deliverers are told at commit.
	wake bool
}

// Commit sends what is queued with COMMIT, and then wakes the deliverers of
// every process for the deliveries inserted (see DB.wake: a NOTIFY sent
// from the transaction itself would make the commits of every order call,
// in every process, wait for one another's flush).
func (t *endpointTx) Commit(ctx context.Context) error {
	if err := t.tx.commit(ctx); err != nil {
		return err // Rollback ends it
	}
	if t.wake && t.db != nil {
		t.db.wake(ChannelDeliveries)
	}
	return nil
}

// Rollback rolls back; after Commit it does nothing.
func (t *endpointTx) Rollback(ctx context.Context) error {
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
func (h handle) Ping(ctx context.Context) error { return h.db.Ping(ctx) }

// ProbeWrite tries a small write in the database.
func (h handle) ProbeWrite(ctx context.Context) error { return h.db.ProbeWrite(ctx) }

// Fault turns an unreachable database into EUNAVAILABLE and a full disk
// into ENOSPACE.
func (h handle) Fault(err error) error { return Fault(err) }

// Listen hears of the uploads and deliveries that other processes on the
// database add, through LISTEN (see DB.Listen).
func (h handle) Listen(ctx context.Context, uploads, deliveries func()) error {
	return h.db.Listen(ctx, func(channel string) {
		switch channel {
		case ChannelUploads:
			uploads()
		case ChannelDeliveries:
			deliveries()
		}
	})
}

// Close closes the pool.
func (h handle) Close() error { return h.db.Close() }
