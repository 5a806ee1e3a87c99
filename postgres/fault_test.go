package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"storelink"
)

// TestFault: what a lost or refused connection and a full disk look like to
// pgx become EUNAVAILABLE (with Retry-After) and ENOSPACE; other errors
// stay what they are.
func TestFault(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"disk full", fmt.Errorf("insert: %w", &pgconn.PgError{Code: "53100"}), storelink.ENOSPACE},
		{"connection failure", &pgconn.PgError{Code: "08006"}, storelink.EUNAVAILABLE},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, storelink.EUNAVAILABLE},
		{"too many clients at connect", fmt.Errorf("acquire: %w", &pgconn.PgError{Code: "53300", Message: "sorry, too many clients already"}), storelink.EUNAVAILABLE},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, storelink.EUNAVAILABLE},
		{"cut mid-answer", fmt.Errorf("insert partner: %w", io.ErrUnexpectedEOF), storelink.EUNAVAILABLE},
		{"closed", fmt.Errorf("claim: %w", pgconn.ErrConnClosed), storelink.EUNAVAILABLE},
		{"unique violation", &pgconn.PgError{Code: "23505"}, storelink.EINTERNAL},
		{"other", errors.New("boom"), storelink.EINTERNAL},
		{"canceled by the caller", context.Canceled, storelink.EINTERNAL},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Fault(c.err)
			if code := storelink.ErrorCode(got); code != c.want {
				t.Fatalf("Fault(%v) = %v, want code %s", c.err, got, c.want)
			}
			var e *storelink.Error
			if c.want == storelink.EUNAVAILABLE && (!errors.As(got, &e) || e.RetryAfter < 1) {
				t.Fatalf("Fault(%v) = %v without a Retry-After", c.err, got)
			}
			if c.want == storelink.EINTERNAL && got != c.err {
				t.Fatalf("Fault(%v) = %v, want it unchanged", c.err, got)
			}
		})
	}
}
