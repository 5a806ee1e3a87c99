package service

import (
	"context"
	"errors"

	"storelink"
)

// Drivers are one database's drivers, one per area of the services, and
// its Handle. A driver package makes them from an open database.
type Drivers struct {
	// Partners, clients, API keys, stores and sessions.
	Partners PartnerDriver

	// The secret key's check value and the values sealed with it.
	SecretKeys SecretKeyDriver

	// Orders, their events and idempotency keys.
	Orders OrderDriver

	// Uploads, their files and the stock they write.
	Uploads UploadDriver

	// Webhook endpoints and their deliveries.
	Webhooks WebhookDriver

	// The database itself.
	Handle Handle
}

// The areas' drivers, each the whole Driver until the area has one of its
// own.
type (
	WebhookDriver = Driver
)

// Driver is a database as the services see it: rows to read, and write
// transactions to begin. A driver reads, inserts, updates and locks rows; it
// decides nothing about what an order may do, so every rule is written
// once, here, and holds on every database. Each area of the services adds
// its row interfaces to Driver and Tx in a file of its own.
type Driver interface {
	// Begin starts a write transaction. The caller ends it with Commit or
	// Rollback; Rollback after Commit does nothing.
	Begin(ctx context.Context) (Tx, error)
	// Transient tells whether err ended a transaction for a reason that a
	// fresh try of the same work can avoid, such as a deadlock between
	// writers: the service then runs the transaction again.
	Transient(err error) bool

	EndpointCalls
	EndpointReads
	Bookkeeping
	Handle

	// GetClient and Stores are reads of the partners' rows that other
	// areas make too (PartnerDriver says what they return).
	GetClient(ctx context.Context, id string) (*storelink.Client, error)
	Stores(ctx context.Context, clientID string) ([]storelink.Store, error)
}

// Tx is one write transaction of a Driver. Its row methods see what it
// wrote; nothing of it is seen by others before Commit.
type Tx interface {
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error

	EndpointRows
	EndpointOpRows
}

// ErrNotFound is what a driver's row method returns (wrapped or not) when
// the row it is asked for does not exist, so that the services can tell a
// missing row from a failing database without knowing the driver.
var ErrNotFound = errors.New("no such row")
