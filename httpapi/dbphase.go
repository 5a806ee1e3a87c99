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

// A request works on the database in phases, and the phases together have
// the database timeout. Between two phases the request waits on something
// else that has bounds of its own: its body arriving (the body and
// first-byte timeouts, set as the connection's read deadlines, body.go) or
// a test send (the webhook timeout). Such a wait is no phase: it costs no
// database time, and the database timeout cannot cut it.
//
// Each phase is a context.WithDeadlineCause over the request's own context
// (which ends when the client goes away), with the database time that the
// earlier phases left; its cause is the 503 with a Retry-After. A database
// that accepts connections and never answers thus costs a request the
// timeout, not the driver's own limits, however the request's time is cut
// into phases.
//
// ServeHTTP starts the first phase, so a handler that reads no body and
// sends no test works in one phase, on r.Context(). A handler reads its
// body, or sends a test, inside OutsideDB, and goes on with the request
// that OutsideDB returns: its context is the next phase's, and the earlier
// phase's context has ended. An upload is thus two phases, the checks
// before its body and the accepting after it. A download is one: the file
// is read into memory in it, and writing it out uses no context (the
// write deadline of Downloads bounds a slow reader).
type dbPhases struct {
	base  context.Context // the request's own context, with dbPhasesKey
	cause error

	// mu guards what follows: the handler's goroutine starts and ends
	// phases, ended reads them.
	mu       sync.Mutex
	left     time.Duration   // database time the ended phases left
	began    time.Time       // the current phase's start
	deadline time.Time       // the current phase's end: began+left
	phase    context.Context // nil between phases
	cancel   context.CancelFunc
}

// dbPhasesKey is the context key of a request's dbPhases.
type dbPhasesKey struct{}

// startDB returns r with the context of its first database phase, and the
// phases; their stop must be called when the request is answered.
func startDB(r *http.Request, limit time.Duration) (*http.Request, *dbPhases) {
	e := storelink.Errorf(storelink.EUNAVAILABLE,
		"The database did not answer within %s. Retry after %d seconds.", limit, dbTimeoutRetry)
	e.RetryAfter = dbTimeoutRetry
	p := &dbPhases{cause: e, left: limit}
	p.base = context.WithValue(r.Context(), dbPhasesKey{}, p)
	return r.WithContext(p.next()), p
}

// next starts the next phase, with the time left, and returns its
// context.
func (p *dbPhases) next() context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.began = time.Now()
	p.deadline = p.began.Add(p.left)
	p.phase, p.cancel = context.WithDeadlineCause(p.base, p.deadline, p.cause)
	return p.phase
}

// end ends the current phase: the time it took is spent.
func (p *dbPhases) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.left = max(p.left-time.Since(p.began), 0)
	p.cancel()
	p.phase = nil
}

// stop ends the last phase once the request is answered.
func (p *dbPhases) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cancel()
}

// OutsideDB ends the request's current database phase, runs wait, and
// returns r with the context of the next phase, which has the database
// time left. wait is work that waits on something other than the database
// and has bounds of its own: reading the body, or a test send (the webhook
// timeout bounds it). Its ctx is the request's context without a database
// deadline: it ends when the client goes away. The request's earlier
// contexts have ended; the handler goes on with the request returned. The
// dashboard's form reads and test sends use it too. A request the API did
// not serve runs wait with its context and is returned as it is.
func OutsideDB(r *http.Request, wait func(ctx context.Context)) *http.Request {
	p, _ := r.Context().Value(dbPhasesKey{}).(*dbPhases)
	if p == nil {
		wait(r.Context())
		return r
	}
	p.end()
	wait(p.base)
	return r.WithContext(p.next())
}

// ended tells why the request's context ended, as storelink.Ended
// does, whichever of the request's contexts r has: the database timeout
// when the current phase ran out of time before the client went away, gone
// when the client went away. A phase that has reached its deadline counts
// as timed out even when its context has not yet ended: a wait of the
// driver's own that is as long as the timeout (a connect_timeout of the
// same length) may end a moment before the phase's timer does, and the
// request still waited the database the whole timeout. Between phases
// (inside OutsideDB) nothing times out.
func ended(r *http.Request) (timeout error, gone bool) {
	p, _ := r.Context().Value(dbPhasesKey{}).(*dbPhases)
	if p == nil {
		return storelink.Ended(r.Context())
	}
	p.mu.Lock()
	phase, deadline := p.phase, p.deadline
	p.mu.Unlock()
	switch {
	case phase != nil && context.Cause(phase) == p.cause:
		return p.cause, false
	case p.base.Err() != nil:
		return nil, true
	case phase != nil && !time.Now().Before(deadline):
		return p.cause, false
	}
	return nil, false
}

// StatusClientGone is the status the request log records for a request
// whose client went away before it was answered (nginx's convention); no
// answer is written, and it is no server error.
const StatusClientGone = 499
