package httpapi

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"storelink"
)

// DefaultBodyTimeout is the time a request body has to arrive in full when
// Deps does not say.
const DefaultBodyTimeout = 60 * time.Second

// closeLinger bounds how long a connection that is being closed with its
// request body unread still takes in what the client sends. The answer is
// already out; reading for a moment lets a client that is still sending
// see it before the connection is reset, and never lets a slow sender hold
// the connection.
const closeLinger = 500 * time.Millisecond

// DefaultFirstByteTimeout is the time the first byte of a request body has
// to arrive when Deps does not say, counted from when the service first
// reads the body (when it sends 100 Continue to a client that asked). A
// client sends its body right after its headers; 10 s covers three TCP
// retransmissions (1, 2 and 4 s), while a client that sends headers and
// then nothing holds its connection no longer.
const DefaultFirstByteTimeout = 10 * time.Second

// trackedBody is the request body as handlers see it. It counts the bytes
// actually read (for the request log), turns the read deadlines into the
// first-byte and body timeouts' 408 (or, while shutting down, a 503), and
// tells whether the body was read to its end.
type trackedBody struct {
	io.ReadCloser
	rc        *http.ResponseController
	timeout   time.Duration
	firstByte time.Duration
	n         atomic.Int64
	asked     bool // only the reading goroutine touches it
	// mu orders the deadline changes: of the first read, the first byte,
	// reaching the end, a cut and closing. A body read to its end keeps
	// no deadline.
	mu      sync.Mutex
	whole   time.Time // the body timeout's deadline
	firstAt time.Time // the first byte's deadline, zero before the first read and after the first byte
	cutAt   time.Time // set with cut
	eof     atomic.Bool
	cut     atomic.Bool // a shutdown brought the deadline forward
}

func (b *trackedBody) Read(p []byte) (int, error) {
	if !b.asked {
		b.asked = true
		if b.n.Load() == 0 {
			b.mu.Lock()
			b.firstAt = time.Now().Add(b.firstByte)
			b.armLocked()
			b.mu.Unlock()
		}
	}
	n, err := b.ReadCloser.Read(p)
	if n > 0 && b.n.Add(int64(n)) == int64(n) {
		b.mu.Lock()
		b.firstAt = time.Time{}
		b.armLocked()
		b.mu.Unlock()
	}
	switch {
	case err == io.EOF:
		// From here the connection reads ahead for the next request; the
		// body's deadline must not end that read (net/http would cancel
		// the request's context).
		b.mu.Lock()
		b.eof.Store(true)
		_ = b.rc.SetReadDeadline(time.Time{})
		b.mu.Unlock()
	case err != nil && errors.Is(err, os.ErrDeadlineExceeded):
		return n, b.timedOut()
	}
	return n, err
}

// armLocked sets the connection's read deadline to the earliest of the
// body's deadlines; b.mu is held.
func (b *trackedBody) armLocked() {
	if b.eof.Load() {
		return
	}
	d := b.whole
	if !b.firstAt.IsZero() && b.firstAt.Before(d) {
		d = b.firstAt
	}
	if b.cut.Load() && b.cutAt.Before(d) {
		d = b.cutAt
	}
	_ = b.rc.SetReadDeadline(d)
}

// timedOut is the error of a read that met the deadline: which one it was.
func (b *trackedBody) timedOut() error {
	b.mu.Lock()
	cut := b.cut.Load() && !time.Now().Before(b.cutAt)
	first := !b.firstAt.IsZero() && b.firstAt.Before(b.whole)
	b.mu.Unlock()
	switch {
	case cut:
		e := storelink.Errorf(storelink.EUNAVAILABLE,
			"The service is shutting down and the body had not arrived in full (%d bytes received); nothing was kept. Send it again.", b.n.Load())
		e.RetryAfter = shutdownRetryAfter
		return e
	case first && b.n.Load() == 0:
		return storelink.Errorf(storelink.EBODYTIMEOUT,
			"No byte of the body arrived within %s of the service reading it; nothing was kept.", b.firstByte)
	}
	return storelink.Errorf(storelink.EBODYTIMEOUT,
		"The body did not arrive in full within %s (%d bytes received); nothing was kept.", b.timeout, b.n.Load())
}

// shutdownRetryAfter is the Retry-After of a body cut by a shutdown: about
// the time a restarted process takes to listen again.
const shutdownRetryAfter = 5

// bodies keeps the bodies being read, so that a shutdown can cut the ones
// still arriving instead of waiting for them.
type bodies struct {
	mu    sync.Mutex
	live  map[*trackedBody]struct{}
	cutAt time.Time // when shutting down: the deadline of every body
}

// track replaces r's body with a trackedBody whose read deadline is the
// body timeout, and the first-byte timeout from its first read. It returns
// the request to hand on and the body (nil when the request has none);
// untrack must be called before the handler returns.
func (s *Server) track(w http.ResponseWriter, r *http.Request, start time.Time) (*http.Request, *trackedBody) {
	if r.Body == nil || r.Body == http.NoBody {
		return r, nil
	}
	b := &trackedBody{ReadCloser: r.Body, rc: http.NewResponseController(w), timeout: s.BodyTimeout,
		firstByte: s.FirstByteTimeout, whole: start.Add(s.BodyTimeout)}
	s.bodies.mu.Lock()
	if !s.bodies.cutAt.IsZero() {
		b.cut.Store(true)
		b.cutAt = s.bodies.cutAt // b is not shared yet
	}
	s.bodies.live[b] = struct{}{}
	s.bodies.mu.Unlock()
	b.mu.Lock()
	b.armLocked()
	b.mu.Unlock()
	// A copy, so that net/http's own view of the request (the body it
	// drains or not after the answer) stays its own.
	r2 := r.WithContext(r.Context())
	r2.Body = b
	return r2, b
}

// untrack ends the tracking of b. closing tells that the answer closes
// the connection with the body not read to its end (statusWriter said
// Connection: close): its read deadline is then brought close, so that
// net/http does not wait for the rest of the body before closing.
func (s *Server) untrack(b *trackedBody, closing bool) {
	if b == nil {
		return
	}
	s.bodies.mu.Lock()
	delete(s.bodies.live, b)
	s.bodies.mu.Unlock()
	if closing {
		b.mu.Lock()
		_ = b.rc.SetReadDeadline(time.Now().Add(closeLinger))
		b.mu.Unlock()
	}
}

// CutBodies is for shutting down: every request body that has not arrived
// in full within grace from now is cut, and its request answered 503, so
// that a stalled upload cannot hold the shutdown. Bodies that arrive in
// time are handled as usual; requests that start later get the same end.
func (s *Server) CutBodies(grace time.Duration) {
	end := time.Now().Add(grace)
	s.bodies.mu.Lock()
	defer s.bodies.mu.Unlock()
	s.bodies.cutAt = end
	for b := range s.bodies.live {
		b.mu.Lock()
		if !b.eof.Load() {
			b.cut.Store(true)
			b.cutAt = end
			b.armLocked()
		}
		b.mu.Unlock()
	}
}

// bodyUnread tells whether a request had a body that was not read to its
// end; a request without a body has nothing unread.
func bodyUnread(b *trackedBody) bool { return b != nil && !b.eof.Load() }

func bodyBytes(b *trackedBody) int64 {
	if b == nil {
		return 0
	}
	return b.n.Load()
}
