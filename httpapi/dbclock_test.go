package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"storelink"
)

// TestDBClockSpentCountsAsTimeout: a request whose database wait ended on
// a limit of the driver's own as long as the database timeout (pgx's
// connect_timeout) is answered as timed out, though the clock's timer has
// not run yet; time spent reading the body does not count.
func TestDBClockSpentCountsAsTimeout(t *testing.T) {
	r, c := withDBClock(httptest.NewRequest("PUT", "/stock/c/uploads", nil), 30*time.Millisecond)
	defer c.stop()
	c.timer.Stop() // the timer's goroutine has not run yet

	c.pause() // a body read, which the clock does not count
	time.Sleep(40 * time.Millisecond)
	c.resume()
	if timeout, gone := ended(r); timeout != nil || gone {
		t.Fatalf("after a body read alone: ended = %v, %v; want neither", timeout, gone)
	}

	time.Sleep(40 * time.Millisecond)
	timeout, gone := ended(r)
	if gone || storelink.ErrorCode(timeout) != storelink.EUNAVAILABLE ||
		!strings.Contains(storelink.ErrorMessage(timeout), "did not answer within 30ms") {
		t.Fatalf("after the timeout spent outside body reads: ended = %v, %v; want the database timeout", timeout, gone)
	}
}
