package service

import (
	"context"
	"time"

	"storelink"
)

// OrderDriver is a database as the order calls and the reads of orders and
// events see it. The reads need no transaction: the driver answers them
// from whatever connection suits reading.
type OrderDriver interface {
	// Begin starts a write transaction of the order calls, or returns ctx's
	// error if ctx ends first. The caller ends it with Commit or Rollback;
	// Rollback after Commit does nothing.
	Begin(ctx context.Context) (OrderTx, error)
	// Transient tells whether err ended a transaction for a reason that a
	// fresh try of the same work can avoid, such as a deadlock between
	// writers: the service then runs the transaction again.
	Transient(err error) bool

	// GetOrder returns an order with its items in their order, or
	// ErrNotFound.
	GetOrder(ctx context.Context, id string) (*storelink.Order, error)
	// ListOrders returns the orders that f selects, newest first, each with
	// its items, at most f.Limit of them, never nil. It reads the items of
	// the whole page at once, not order by order.
	ListOrders(ctx context.Context, f storelink.OrderFilter) ([]storelink.Order, error)
	// OrderExists tells whether an order of that id exists.
	OrderExists(ctx context.Context, id string) (bool, error)
	// ListOrderEvents returns an order's events, oldest first, never nil.
	ListOrderEvents(ctx context.Context, orderID string) ([]storelink.EventRecord, error)
	// ListEvents returns up to limit order events of a client (not those
	// of WriteEvent) numbered above after, in the order of their numbers,
	// which is the order their transactions committed; each record's
	// Cursor is its number. Never nil.
	ListEvents(ctx context.Context, clientID string, after int64, limit int) ([]storelink.EventRecord, error)
	// NewestEvent returns the client's newest order event, its Cursor its
	// number as ListEvents has it; nil when it has none.
	NewestEvent(ctx context.Context, clientID string) (*storelink.EventRecord, error)
	// DueUploadEvents returns up to limit uploads, ended, whose event is
	// due (TakeUploadEvent), the oldest first.
	DueUploadEvents(ctx context.Context, limit int) ([]storelink.Upload, error)
}

// OrderTx is one write transaction of the order calls: the rows they read,
// lock and write, their own and the few of other areas they need (the
// client, its stores, the stock in force, the enabled endpoints, the
// deliveries they queue). Its reads see what it wrote; nothing of it is seen
// by others before Commit. Every method's error is its own: a method that
// takes a lock takes it with its own read, and a write's error is the
// error of the method that writes it (InsertDeliveries and PutOrderKey
// write with Commit, whose error is then theirs).
type OrderTx interface {
	// Commit writes what InsertDeliveries and PutOrderKey were given and
	// commits.
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error

	// GetClient returns a client, or ErrNotFound.
	GetClient(ctx context.Context, id string) (*storelink.Client, error)
	// StoreExists tells whether the client has a store of that id.
	StoreExists(ctx context.Context, clientID, storeID string) (bool, error)
	// GetOrder returns an order with its items as the transaction sees it,
	// or ErrNotFound.
	GetOrder(ctx context.Context, p GetOrderParams) (*storelink.Order, error)
	// StockInForce returns the stock rows of the EANs at one store or at
	// every store of the client, each with the units that order items hold
	// reserved (storelink.Item's Reserving).
	StockInForce(ctx context.Context, p StockInForceParams) (storelink.StoreStock, error)
	// GetOrderKey returns a remembered idempotency key, live or expired, or
	// ErrNotFound.
	GetOrderKey(ctx context.Context, p GetOrderKeyParams) (*storelink.OrderKey, error)
	// WriteOrder writes an order and its event, and returns the client's
	// enabled webhook endpoints, with their ids and the states they want,
	// as they stand once the event is numbered.
	WriteOrder(ctx context.Context, p WriteOrderParams) ([]storelink.Endpoint, error)
	// InsertDeliveries queues deliveries of an event that WriteOrder wrote
	// in this transaction, and lets the deliverers know there is work once
	// it commits. They are written with Commit.
	InsertDeliveries(ctx context.Context, p InsertDeliveriesParams) error
	// WriteEvent writes an upload's event, numbered among the client's
	// events as WriteOrder numbers an order's, and returns the client's
	// enabled endpoints as WriteOrder does.
	WriteEvent(ctx context.Context, p WriteEventParams) ([]storelink.Endpoint, error)
	// TakeUploadEvent tells whether the upload's event is due (FinishUpload
	// and CancelUpload's Announce) and, when it is, makes it due no more:
	// of racing transactions, one takes it, and the others wait for it to
	// end and find it taken.
	TakeUploadEvent(ctx context.Context, uploadID string) (bool, error)
	// PutOrderKey writes k, replacing an expired row of the same key, and
	// deletes up to sweep keys created at or before expired that no other
	// transaction holds. They are written with Commit.
	PutOrderKey(ctx context.Context, k storelink.OrderKey, expired time.Time, sweep int) error
}

// GetOrderParams are what OrderTx.GetOrder reads.
type GetOrderParams struct {
	ID string
	// ForUpdate also keeps any other transaction from changing the order
	// until this one ends, so that racing changes of one order each decide
	// on the state the previous one left.
	ForUpdate bool
}

// StockInForceParams are what OrderTx.StockInForce reads.
type StockInForceParams struct {
	ClientID string
	// StoreID is the one store read; empty reads every store of the
	// client.
	StoreID string
	EANs    []string
	// Lock first takes the client's routing lock: the other transactions
	// that route orders of the client wait until this one ends, and this
	// one reads the stock in force as they left it, so that two of them
	// never count the same free unit.
	Lock bool
}

// GetOrderKeyParams are what OrderTx.GetOrderKey reads.
type GetOrderKeyParams struct {
	ClientID, Key string
	// Lock first takes the key's lock: the other transactions that bring
	// the same key of the client wait until this one ends, and this one
	// reads the key as the previous one left it.
	Lock bool
}

// WriteOrderParams are what OrderTx.WriteOrder writes.
type WriteOrderParams struct {
	Order *storelink.Order
	// New writes the order and every item as new. Otherwise the order's
	// state, addresses, reassignment and update time are written, the items
	// at the positions in Inserted are inserted and the changeable fields
	// (status, reasons, return data, reserving) of those in Updated are
	// written; other items are left as stored.
	New               bool
	Inserted, Updated []int
	// Event is the order's event, made at At: it is numbered among the
	// client's events in the order in which their transactions commit, and
	// the client's events stay locked until the transaction ends. Without
	// one (the driver suite writes orders alone) the order is written alone
	// and no endpoints are read.
	Event *storelink.Event
	At    time.Time
}

// InsertDeliveriesParams are the deliveries of one event that
// OrderTx.InsertDeliveries queues.
type InsertDeliveriesParams struct {
	ClientID string
	Event    QueuedEvent
	At       time.Time
	// State is the deliveries' state from their creation (pending).
	State      storelink.DeliveryState
	Deliveries []NewDelivery
}

// QueuedEvent is the event whose deliveries InsertDeliveries queues.
type QueuedEvent struct {
	ID string
	// Chain is what the event's deliveries to one endpoint go in order
	// within: its order's id, or its upload's (WriteEvent's UploadID).
	Chain string
	// State is the order's state, or the event's kind (WriteEvent's).
	State storelink.OrderState
}

// OrderEvent is an order event as InsertDeliveries queues it.
func OrderEvent(ev *storelink.Event) QueuedEvent {
	return QueuedEvent{ID: ev.EventID, Chain: ev.OrderID, State: ev.State}
}

// WriteEventParams are an upload's event (OrderTx.WriteEvent).
type WriteEventParams struct {
	ClientID, EventID string
	// UploadID is the upload it tells of, within which its deliveries go
	// in order (as an order event's go within their order); State is its
	// kind.
	UploadID string
	State    storelink.OrderState
	Payload  []byte
	At       time.Time
}

// NewDelivery is a delivery of an event to one endpoint, as the order calls
// queue it with the event (OrderTx.InsertDeliveries).
type NewDelivery struct {
	ID         string
	EndpointID string
}
