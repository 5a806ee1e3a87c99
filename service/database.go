package service

import (
	"context"
)

// Handle is what a driver answers of the database itself rather than of
// its rows: the readiness checks, how it tells its faults, the work other
// processes add, and closing it. Each is the driver's own, with no rule of
// the services in it.
type Handle interface {
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// ProbeWrite tries a small write where the data is kept.
	ProbeWrite(ctx context.Context) error
	// Fault turns a full disk into ENOSPACE and an unreachable database
	// into EUNAVAILABLE; any other error is returned as it is.
	Fault(err error) error
	// Listen calls uploads or deliveries when another process adds such
	// work, until ctx ends or the connection fails; nil at once where no
	// other process can add work.
	Listen(ctx context.Context, uploads, deliveries func()) error
	// Close closes the database.
	Close() error
}

// Ping checks that the database answers (for /readyz).
func (s *Services) Ping(ctx context.Context) error { return s.d.Handle.Ping(ctx) }

// ProbeWrite tries a small write where the data is kept (for /readyz after
// a write found the disk full).
func (s *Services) ProbeWrite(ctx context.Context) error { return s.d.Handle.ProbeWrite(ctx) }

// Fault tells a full disk or an unreachable database from other errors, the
// way of the database the services run on.
func (s *Services) Fault(err error) error { return s.d.Handle.Fault(err) }

// Listen calls uploads or deliveries when another process on the database
// adds such work.
func (s *Services) Listen(ctx context.Context, uploads, deliveries func()) error {
	return s.d.Handle.Listen(ctx, uploads, deliveries)
}

// Close closes the database: the services and every copy of them (With)
// are done with it.
func (s *Services) Close() error { return s.d.Handle.Close() }
