package service

import (
	"context"
	"errors"
	"time"

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
	PartnerDriver = Driver

	SecretKeyDriver = Driver

	OrderDriver = Driver

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

	OrderReads
	AdminReads
	EndpointCalls
	EndpointReads
	Bookkeeping
	Handle
}

// Tx is one write transaction of a Driver. Its row methods see what it
// wrote; nothing of it is seen by others before Commit.
type Tx interface {
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error

	OrderRows
	AdminRows
	EndpointRows
	EndpointOpRows
}

// ErrNotFound is what a driver's row method returns (wrapped or not) when
// the row it is asked for does not exist, so that the services can tell a
// missing row from a failing database without knowing the driver.
var ErrNotFound = errors.New("no such row")

// OrderReads are the reads of orders and events that need no transaction:
// the driver answers them from whatever connection suits reading.
type OrderReads interface {
	// GetOrder returns an order with its items in their order, or
	// ErrNotFound.
	GetOrder(ctx context.Context, id string) (*storelink.Order, error)
	// ListOrders returns the orders that f selects, newest first, each with
	// its items, at most f.Limit of them, never nil.
	ListOrders(ctx context.Context, f storelink.OrderFilter) ([]storelink.Order, error)
	// OrderExists tells whether an order of that id exists.
	OrderExists(ctx context.Context, id string) (bool, error)
	// ListOrderEvents returns an order's events, oldest first, never nil.
	ListOrderEvents(ctx context.Context, orderID string) ([]storelink.EventRecord, error)
	// ListEvents returns up to limit events of a client numbered above
	// after, in the order of their numbers, which is the order their
	// transactions committed; each record's Cursor is its number. Never nil.
	ListEvents(ctx context.Context, clientID string, after int64, limit int) ([]storelink.EventRecord, error)
}

// OrderRows are the rows the order calls read, lock and write inside their
// transaction.
type OrderRows interface {
	// GetClient returns a client, or ErrNotFound.
	GetClient(ctx context.Context, id string) (*storelink.Client, error)
	// StoreExists tells whether the client has a store of that id.
	StoreExists(ctx context.Context, clientID, storeID string) (bool, error)
	// GetOrder returns an order with its items as the transaction sees it,
	// or ErrNotFound.
	GetOrder(ctx context.Context, id string) (*storelink.Order, error)
	// GetOrderForUpdate is GetOrder that also keeps any other transaction
	// from changing the order until this one ends, so that racing changes
	// of one order each decide on the state the previous one left.
	GetOrderForUpdate(ctx context.Context, id string) (*storelink.Order, error)
	// LockRouting keeps the other transactions that route orders of the
	// client waiting until this one ends, and lets this one read the stock
	// in force as they left it: two of them never count the same free unit.
	// A driver may take the lock with the transaction's next statement
	// rather than at once, as that is before any read it guards.
	LockRouting(ctx context.Context, clientID string) error
	// StockInForce returns the stock rows of the EANs at one store (storeID
	// set) or at every store of the client, each with the units that order
	// items hold reserved.
	StockInForce(ctx context.Context, clientID, storeID string, eans []string) (storelink.StoreStock, error)
	// InsertOrder writes a new order and its items.
	InsertOrder(ctx context.Context, o *storelink.Order) error
	// UpdateOrder writes the order's state, addresses, reassignment and
	// update time, inserts the items at the positions in inserted and
	// writes the changeable fields (status, reasons, return data,
	// reserving) of those in updated. Other items are left as stored.
	UpdateOrder(ctx context.Context, o *storelink.Order, inserted, updated []int) error
	// InsertEvent writes an event of the client's order, made at at,
	// numbered among the client's events in the order in which their
	// transactions commit: the client's events stay locked until the
	// transaction ends. A driver may send it with the transaction's next
	// statement.
	InsertEvent(ctx context.Context, clientID string, ev *storelink.Event, at time.Time) error
	// EnabledEndpoints returns the client's enabled webhook endpoints, with
	// their ids and the states they want.
	EnabledEndpoints(ctx context.Context, clientID string) ([]storelink.Endpoint, error)
	// InsertDeliveries queues deliveries of the event that InsertEvent
	// wrote last in this transaction, pending from their creation, and lets
	// the deliverers know there is work. A driver may send it with the
	// transaction's next statement.
	InsertDeliveries(ctx context.Context, clientID string, ev *storelink.Event, at time.Time, ds []NewDelivery) error
	// LockOrderKey keeps the other transactions that bring the same
	// idempotency key of the client waiting until this one ends, and lets
	// this one read the key as the previous one left it. As with
	// LockRouting, the lock may be taken with the next statement.
	LockOrderKey(ctx context.Context, clientID, key string) error
	// GetOrderKey returns a remembered idempotency key, live or expired, or
	// ErrNotFound.
	GetOrderKey(ctx context.Context, clientID, key string) (*storelink.OrderKey, error)
	// PutOrderKey writes k, replacing an expired row of the same key, and
	// deletes up to sweep keys created at or before expired that no other
	// transaction holds. The two are one call so that a driver can send them
	// to the database together.
	PutOrderKey(ctx context.Context, k storelink.OrderKey, expired time.Time, sweep int) error
}

// NewDelivery is a delivery of an event to one endpoint, as the order calls
// queue it with the event (InsertDeliveries).
type NewDelivery struct {
	ID         string
	EndpointID string
}
