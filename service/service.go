// Package service holds the rules of storelink's services, written once over
// a narrow row-level Driver. The rules (what an order may do, where it is
// routed, when an idempotency key answers, which endpoints hear of an event)
// are the same on every database; what differs between databases (how rows
// are locked, batched or prepared) stays in the driver packages, sqlite and
// postgres, which load, insert, update and lock rows and decide nothing.
//
// Each call owns its transaction: it begins one on the driver, hands the
// transaction to the helpers that read and write rows, and commits.
package service

import (
	"context"
	"time"

	"storelink"
)

var (
	_ storelink.OrderService = (*Service)(nil)
	_ storelink.EventService = (*Service)(nil)
)

// Service implements the storelink services whose rules live here, over a
// Driver. It is safe for concurrent use.
type Service struct {
	d      Driver
	clock  func() time.Time
	sealer *storelink.Sealer
	// retention is how long an upload's files are answered after it was
	// received (0: for as long as they are kept).
	retention time.Duration
}

// Option configures a Service.
type Option func(*Service)

// WithClock sets the clock the service stamps rows with, so that tests
// control time. The default is the system clock.
func WithClock(now func() time.Time) Option {
	return func(s *Service) { s.clock = now }
}

// WithSealer sets the sealer that keeps webhook secrets and endpoint keys
// encrypted at rest. Without one the endpoint calls that seal fail.
func WithSealer(sealer *storelink.Sealer) Option {
	return func(s *Service) { s.sealer = sealer }
}

// WithUploadRetention sets how long an upload's file and error file are
// answered after the upload was received: from then on they are gone
// (EGONE), whether or not ExpireFiles has removed them yet.
func WithUploadRetention(d time.Duration) Option {
	return func(s *Service) { s.retention = d }
}

// New returns the services over d.
func New(d Driver, opts ...Option) *Service {
	s := &Service{d: d, clock: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

// now is the clock in UTC truncated to milliseconds, what every database
// keeps, so that what an answer shows equals what a later read shows.
func (s *Service) now() time.Time { return s.clock().UTC().Truncate(time.Millisecond) }

// newIDFunc is the newID the domain's constructors take for rows made at
// now: each call a new id (UUID version 7) stamped with now.
func newIDFunc(now time.Time) func() string {
	return func() string { return storelink.NewID(now) }
}

// maxTries bounds how often a transaction that ended for a transient reason
// is run again.
const maxTries = 4

// inTx runs fn in a transaction of its own and commits it. A transaction
// that the driver says ended for a transient reason (a deadlock victim
// among many writers) is run again from the start, a few times: such ends
// are expected, rare, and say nothing about the request. fn must therefore
// set its results afresh on every run.
func (s *Service) inTx(ctx context.Context, fn func(tx Tx) error) error {
	return retried(ctx, s.d, s.d.Begin, fn)
}

// ender is what every kind of transaction of a driver offers.
type ender interface {
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// retried runs fn in a transaction that begin starts and commits it, and
// runs it again, as inTx says, when d finds it ended for a transient
// reason.
func retried[T ender](ctx context.Context, d Driver, begin func(context.Context) (T, error), fn func(T) error) error {
	for try := 1; ; try++ {
		err := once(ctx, begin, fn)
		if try < maxTries && err != nil && d.Transient(err) {
			continue
		}
		return err
	}
}

func once[T ender](ctx context.Context, begin func(context.Context) (T, error), fn func(T) error) error {
	tx, err := begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
