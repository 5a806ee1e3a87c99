// Package service holds the rules of storelink's services, written once
// over narrow row-level drivers, one area at a time: Partners (partners,
// clients, API keys, stores, sessions), SecretKeys (the key that seals
// webhook secrets), Orders (orders, their events and idempotency keys),
// Uploads (stock uploads and the stock in force they leave) and Webhooks
// (endpoints and their deliveries). Each area's service type runs over its
// own driver interface (PartnerDriver, OrderDriver, UploadDriver, …) and
// that driver's transactions; Services holds one of each, made by New from
// a database's Drivers, and the database's own calls (Handle).
//
// The rules (what an order may do, where it is routed, when an idempotency
// key answers, which uploads are claimed together, which endpoints hear of
// an event) are the same on every database; the states a rule names reach
// the drivers as parameters. What differs between databases (how rows are
// locked, batched or prepared) stays in the driver packages, sqlite and
// postgres, which read, insert, update and lock rows and decide nothing.
//
// Each call owns its transaction: it begins one on its area's driver,
// hands it to the helpers that read and write rows, and commits.
package service

import (
	"context"
	"time"

	"storelink"
)

// Services are storelink's services over one database, one value per
// area: partners and their credentials, the secret key that seals webhook
// secrets, orders and their events, uploads and the stock they write, and
// webhook endpoints with their deliveries. serve wires each consumer (the
// API, the dashboard, the workers) to the areas it needs; the database's
// own calls (readiness, faults, the work other processes add, closing it)
// are the Services' own.
type Services struct {
	Partners   *Partners
	SecretKeys *SecretKeys
	Orders     *Orders
	Uploads    *Uploads
	Webhooks   *Webhooks

	d   Drivers
	cfg config
}

// config is what every area's service is configured with.
type config struct {
	clock  func() time.Time
	sealer *storelink.Sealer
	// retention is how long an upload's files are answered after it was
	// received (0: for as long as they are kept).
	retention time.Duration
	// maxEndpoints is the most webhook endpoints a client may have.
	maxEndpoints int
	// statusURL is where a client reads an upload's status.
	statusURL func(clientID, uploadID string) string
}

// Option configures the services.
type Option func(*config)

// WithClock sets the clock the services stamp rows with, so that tests
// control time. The default is the system clock.
func WithClock(now func() time.Time) Option {
	return func(c *config) { c.clock = now }
}

// WithSealer sets the sealer that keeps webhook secrets and endpoint keys
// encrypted at rest. Without one the endpoint calls that seal fail.
func WithSealer(sealer *storelink.Sealer) Option {
	return func(c *config) { c.sealer = sealer }
}

// WithUploadRetention sets how long an upload's file and error file are
// answered after the upload was received: from then on they are gone
// (EGONE), whether or not ExpireFiles has removed them yet.
func WithUploadRetention(d time.Duration) Option {
	return func(c *config) { c.retention = d }
}

// DefaultMaxEndpoints is how many webhook endpoints a client may have
// unless WithMaxEndpoints says otherwise: each order event is sent to every
// one, so a partner's endpoints bound how much delivery work one event of
// its makes for the deliverers every partner shares. A partner's ERP, a
// staging copy and a few tools fit, as they do in Stripe's 16.
const DefaultMaxEndpoints = 20

// WithMaxEndpoints sets how many webhook endpoints (not deleted) a client
// may have; one more is refused (ECONFLICT).
func WithMaxEndpoints(n int) Option {
	return func(c *config) { c.maxEndpoints = n }
}

// WithUploadStatusURL sets where a client reads an upload's status, as
// an upload's event (storelink.UploadEvent) names it: the API's path. The
// default names none.
func WithUploadStatusURL(f func(clientID, uploadID string) string) Option {
	return func(c *config) { c.statusURL = f }
}

// New returns the services over d.
func New(d Drivers, opts ...Option) *Services {
	c := config{clock: time.Now, maxEndpoints: DefaultMaxEndpoints, statusURL: func(string, string) string { return "" }}
	for _, o := range opts {
		o(&c)
	}
	return newServices(d, c)
}

func newServices(d Drivers, c config) *Services {
	keys := &SecretKeys{config: c, d: d.SecretKeys}
	return &Services{
		Partners:   &Partners{config: c, d: d.Partners, uses: &keyUses{}},
		SecretKeys: keys,
		Orders:     &Orders{config: c, d: d.Orders},
		Uploads:    &Uploads{config: c, d: d.Uploads},
		Webhooks:   &Webhooks{config: c, d: d.Webhooks, keys: keys},
		d:          d,
		cfg:        c,
	}
}

// With returns the services over the same driver with s's options and then
// opts: serve opens the database before it knows the secret key, checks the
// key against it, and then makes the services that seal with it.
func (s *Services) With(opts ...Option) *Services {
	c := s.cfg
	for _, o := range opts {
		o(&c)
	}
	return newServices(s.d, c)
}

// now is the clock in UTC truncated to milliseconds, what every database
// keeps, so that what an answer shows equals what a later read shows.
func (c config) now() time.Time { return c.clock().UTC().Truncate(time.Millisecond) }

// newIDFunc is the newID the domain's constructors take for rows made at
// now: each call a new id (UUID version 7) stamped with now.
func newIDFunc(now time.Time) func() string {
	return func() string { return storelink.NewID(now) }
}

// maxTries bounds how often a transaction that ended for a transient reason
// is run again.
const maxTries = 4

// inTx runs fn in a transaction of d's own and commits it. A transaction
// that the driver says ended for a transient reason (a deadlock victim
// among many writers) is run again from the start, a few times: such ends
// are expected, rare, and say nothing about the request. fn must therefore
// set its results afresh on every run.
func inTx[T ender](ctx context.Context, d beginner[T], fn func(tx T) error) error {
	return retried(ctx, d.Transient, d.Begin, fn)
}

// beginner is an area's driver as inTx uses it.
type beginner[T ender] interface {
	// Begin starts a write transaction.
	Begin(ctx context.Context) (T, error)
	// Transient tells whether err ended a transaction for a reason that a
	// fresh try of the same work can avoid, such as a deadlock between
	// writers.
	Transient(err error) bool
}

// ender is what every kind of transaction of a driver offers.
type ender interface {
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// retried runs fn in a transaction that begin starts and commits it, and
// runs it again, as inTx says, when transient finds it ended for a
// transient reason.
func retried[T ender](ctx context.Context, transient func(error) bool, begin func(context.Context) (T, error), fn func(T) error) error {
	for try := 1; ; try++ {
		err := once(ctx, begin, fn)
		if try < maxTries && err != nil && transient(err) {
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
