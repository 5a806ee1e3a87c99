package sqlite

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

// Transient is always false: with one writer no transaction is ever a
// deadlock's victim.
func (d *webhooks) Transient(error) bool { return false }

// Begin starts a write transaction of its own on the write connection
// (beginWrite), which no other call joins.
func (d *webhooks) Begin(ctx context.Context) (service.WebhookTx, error) {
	w, err := d.db.beginWrite(ctx, false)
	if err != nil {
		return nil, err
	}
	return &endpointTx{w: w}, nil
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
