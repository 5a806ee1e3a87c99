package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"storelink"
)

// TestDBPhasesSpentCountsAsTimeout: the wait between two phases (a body
// read) costs no database time, and the phase after it has what the first
// left; a request whose phase has reached its deadline is answered as
// timed out, as a wait of the driver's own as long as the timeout
// (pgx's connect_timeout) may end a moment before the phase's context.
func TestDBPhasesSpentCountsAsTimeout(t *testing.T) {
	r, p := startDB(httptest.NewRequest("PUT", "/stock/c/uploads", nil), 30*time.Millisecond)
	defer p.stop()
	first := r.Context()

	r = OutsideDB(r, func(ctx context.Context) {
		if _, ok := ctx.Deadline(); ok {
			t.Error("the wait between phases has a deadline")
		}
		time.Sleep(40 * time.Millisecond) // a body read, which costs no database time
	})
	if timeout, gone := ended(r); timeout != nil || gone {
		t.Fatalf("after a body read alone: ended = %v, %v; want neither", timeout, gone)
	}
	if !errors.Is(first.Err(), context.Canceled) {
		t.Fatalf("the first phase's context after it ended: %v, want canceled", first.Err())
	}

	// The phase after the body read has the 10ms or less the first left.
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the phase after the body read has not ended 10s later")
	}
	timeout, gone := ended(r)
	if gone || storelink.ErrorCode(timeout) != storelink.EUNAVAILABLE ||
		!strings.Contains(storelink.ErrorMessage(timeout), "did not answer within 30ms") {
		t.Fatalf("after the timeout spent outside body reads: ended = %v, %v; want the database timeout", timeout, gone)
	}
	var e *storelink.Error
	if !errors.As(timeout, &e) || e.RetryAfter != dbTimeoutRetry {
		t.Fatalf("the timeout's Retry-After: %v", timeout)
	}
}

// TestDBPhasesClientGone: a request whose client went away is gone, in a
// phase and between phases, whichever of its contexts asks.
func TestDBPhasesClientGone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	outer, p := startDB(httptest.NewRequest("POST", "/admin/partners", nil).WithContext(ctx), time.Hour)
	defer p.stop()
	inner := OutsideDB(outer, func(context.Context) { cancel() })
	for name, r := range map[string]*http.Request{"outer": outer, "inner": inner} {
		if timeout, gone := ended(r); timeout != nil || !gone {
			t.Errorf("%s request after the client went away: ended = %v, %v; want gone", name, timeout, gone)
		}
	}
}
