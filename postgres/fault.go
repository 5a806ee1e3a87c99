package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"storelink"
)

// unreachableRetry is the Retry-After, in seconds, of a request that failed
// because the database could not be reached: long enough for a restart or
// a fail-over to get under way, short enough not to keep clients waiting
// once it is back.
const unreachableRetry = 5

// Fault turns the error of a database that cannot be reached, or that
// refuses a connection or a statement for want of room (too many clients,
// out of memory), into EUNAVAILABLE with a Retry-After, and PostgreSQL's
// disk_full into ENOSPACE; any other error is returned as it is. A connection that broke
// during a commit may have committed: the caller is told to try again, and
// the idempotency key (where there is one) makes that safe.
func Fault(err error) error {
	if err == nil {
		return nil
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch {
		case pg.Code == "53100": // disk_full
			return storelink.NoSpace()
		case strings.HasPrefix(pg.Code, "08"), pg.Code == "57P01", pg.Code == "57P02", pg.Code == "57P03":
			// connection_exception; admin_shutdown, crash_shutdown, cannot_connect_now
			return unreachable()
		case pg.Code == "53300", pg.Code == "53200": // too_many_connections, out_of_memory
			e := storelink.Errorf(storelink.EUNAVAILABLE,
				"The database refuses more work for now (%s). Retry after %d seconds.", pg.Message, unreachableRetry)
			e.RetryAfter = unreachableRetry
			return e
		}
		return err
	}
	var connect *pgconn.ConnectError
	var op *net.OpError
	switch {
	case errors.As(err, &connect), errors.As(err, &op), pgconn.SafeToRetry(err),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, pgconn.ErrConnClosed),
		// A deadline that ran out while waiting for the database: one
		// that hangs (connections accepted, nothing answered).
		errors.Is(err, context.DeadlineExceeded):
		return unreachable()
	}
	return err
}

func unreachable() *storelink.Error {
	e := storelink.Errorf(storelink.EUNAVAILABLE, "The database cannot be reached. Retry after %d seconds.", unreachableRetry)
	e.RetryAfter = unreachableRetry
	return e
}

// ProbeWrite runs a transaction that is given a transaction id and so
// writes a commit record: whether the database takes writes again after it
// reported its disk full.
func (db *DB) ProbeWrite(ctx context.Context) error {
	_, err := db.pool.Exec(ctx, `SELECT pg_current_xact_id()`)
	if err != nil {
		return Fault(fmt.Errorf("probe write: %w", err))
	}
	return nil
}
