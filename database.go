package storelink

import "context"

// Database is a whole store as the rest of storelink sees it: every service
// over one open database, and what is the database's own (the readiness
// checks, its faults, the work other processes add, closing it). serve, the
// conformance suite and the test fixtures hold one value of it whatever the
// database, so that none needs to know which database it runs on. It is
// not named Store because a Store is a client's retail store.
type Database interface {
	AdminService
	Authenticator
	SessionStore
	UploadService
	StockService
	OrderService
	EventService
	WebhookService
	SecretKeyStore

	// SecretKeyCurrent is nil while the key the services seal with is still
	// the database's (or they have none), and EUNAVAILABLE once another
	// process moved the database to another key (for /readyz).
	SecretKeyCurrent(ctx context.Context) error
	// ReleaseOwnLeases hands back the uploads that owner still holds, as a
	// process that stops does.
	ReleaseOwnLeases(ctx context.Context, owner string) error

	// Ping checks that the database answers (for /readyz).
	Ping(ctx context.Context) error
	// ProbeWrite tries a small write where the data is kept (for /readyz
	// after a write found the disk full).
	ProbeWrite(ctx context.Context) error
	// Fault tells a full disk or an unreachable database from other errors:
	// it turns those into ENOSPACE or EUNAVAILABLE and returns any other
	// error as it is.
	Fault(err error) error
	// Listen calls uploads when another process accepted an upload and
	// deliveries when it queued deliveries, so that this one picks the work
	// up at once, until ctx ends (nil) or its connection fails (the error;
	// the caller listens again, the workers' polling covers the gap). Where
	// no other process can add work it returns nil at once.
	Listen(ctx context.Context, uploads, deliveries func()) error
	// Close closes the database.
	Close() error
}
