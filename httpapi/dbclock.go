package httpapi

import (
	"context"
	"net/http"
	"sync"
	"time"

	"storelink"
)

// DefaultDatabaseTimeout is how long a request may wait for the database
// when Deps does not say.
const DefaultDatabaseTimeout = 10 * time.Second

// dbTimeoutRetry is the Retry-After, in seconds, of a request whose
// database did not answer in time.
const dbTimeoutRetry = 5

// dbClock bounds the time a request waits for the database: the request's
// context ends with the clock's cause once the request has spent the
// database timeout outside reading its body. Reading the body is bounded
// by the body timeout instead, so the clock stands still while a handler
// waits for body bytes; everything else a handler does is work on the
// database or quick. A database that accepts connections and never
// answers thus costs a request the timeout, not the driver's own limits.
type dbClock struct {
	mu     sync.Mutex
	limit  time.Duration
	spent  time.Duration // outside body reads, up to since
	since  time.Time     // start of the current run; zero while a body read stands it still
	idle   bool          // the timer went off while the clock stood still
	timer  *time.Timer
	cancel context.CancelCauseFunc
	cause  error
}

// withDBClock returns r with a context that the clock ends, and the clock;
// its stop must be called when the request is answered.
func withDBClock(r *http.Request, limit time.Duration) (*http.Request, *dbClock) {
	ctx, cancel := context.WithCancelCause(r.Context())
	e := storelink.Errorf(storelink.EUNAVAILABLE,
		"The database did not answer within %s. Retry after %d seconds.", limit, dbTimeoutRetry)
	e.RetryAfter = dbTimeoutRetry
	c := &dbClock{limit: limit, since: time.Now(), cancel: cancel, cause: e}
	c.timer = time.AfterFunc(limit, c.fire)
	return r.WithContext(context.WithValue(ctx, dbClockKey{}, c)), c
}

// dbClockKey is the context key of a request's dbClock.
type dbClockKey struct{}

// OutsideDB runs fn with the request's database clock standing still: work
// that waits on something other than the database and has bounds of its
// own (a test send, which the webhook timeout bounds). The dashboard's test
// sends use it too. A request the API did not clock runs fn as it is.
func OutsideDB(r *http.Request, fn func()) {
	c, _ := r.Context().Value(dbClockKey{}).(*dbClock)
	c.pause()
	defer c.resume()
	fn()
}

func (c *dbClock) fire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.since.IsZero() {
		c.idle = true
		return
	}
	if left := c.limit - c.spent - time.Since(c.since); left > 0 {
		c.timer.Reset(left)
		return
	}
	c.cancel(c.cause)
}

// pause stands the clock still while the body is read.
func (c *dbClock) pause() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.since.IsZero() {
		c.spent += time.Since(c.since)
		c.since = time.Time{}
	}
}

// resume starts the clock again after a body read.
func (c *dbClock) resume() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.since.IsZero() {
		return
	}
	c.since = time.Now()
	if c.idle {
		c.idle = false
		if left := c.limit - c.spent; left > 0 {
			c.timer.Reset(left)
		} else {
			c.cancel(c.cause)
		}
	}
}

func (c *dbClock) stop() {
	c.timer.Stop()
	c.cancel(nil)
}

// ended tells why the request's context ended (storelink.RequestEnded).
// A request that has spent its database timeout counts as timed out even
// when the clock's timer has not yet run: a wait of the driver's own that
// is as long as the timeout (a connect_timeout of the same length) may end
// a moment before the timer ends the context, and the request still waited
// the database the whole timeout.
func ended(r *http.Request) (timeout error, gone bool) {
	timeout, gone = storelink.RequestEnded(r.Context())
	if timeout == nil && !gone {
		if c, _ := r.Context().Value(dbClockKey{}).(*dbClock); c.over() {
			timeout = c.cause
		}
	}
	return timeout, gone
}

// over tells whether the clock has spent its limit.
func (c *dbClock) over() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	spent := c.spent
	if !c.since.IsZero() {
		spent += time.Since(c.since)
	}
	return spent >= c.limit
}

// StatusClientGone is the status the request log records for a request
// whose client went away before it was answered (nginx's convention); no
// answer is written, and it is no server error.
const StatusClientGone = 499
