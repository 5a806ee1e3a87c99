package httpapi

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// ConnLimit bounds the open connections of an http.Server. A connection
// that is kept alive between requests costs a slot like any other, yet
// serves nobody; so when every slot is taken and a new client has
// connected, the connection that has been idle the longest is closed to
// make room, as nginx and HAProxy do. Idle connections therefore never keep
// a new client out; only connections in the middle of a request do, and
// those are bounded by the header and body timeouts.
//
// A cap per remote address is not what keeps the slots here: behind a
// reverse proxy or a NAT every client has the same address, and a cap that
// fits them leaves one address free to take every slot anyway.
//
// The server must use ConnState with the Listener's connections.
type ConnLimit struct {
	max     int
	mu      sync.Mutex
	open    int
	idle    map[*limitConn]time.Time // each with the time it went idle
	waiting int                      // Accepts waiting for a slot
	changed chan struct{}            // closed when a slot frees or a connection goes idle
}

// NewConnLimit returns a limit of max open connections.
func NewConnLimit(max int) *ConnLimit {
	return &ConnLimit{max: max, idle: make(map[*limitConn]time.Time), changed: make(chan struct{})}
}

// Listener wraps ln so that at most max of its connections are open. A
// connection beyond is accepted and waits, unserved, for a slot; the
// ones after it wait in the listen queue.
func (l *ConnLimit) Listener(ln net.Listener) net.Listener {
	return &limitListener{Listener: ln, l: l, done: make(chan struct{})}
}

// ConnState is the http.Server's ConnState: it tells the limit which
// connections are idle.
func (l *ConnLimit) ConnState(nc net.Conn, st http.ConnState) {
	c := ownConn(nc)
	if c == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.released {
		return
	}
	if st == http.StateIdle {
		l.idle[c] = time.Now()
		if l.waiting > 0 {
			l.notify()
		}
		return
	}
	delete(l.idle, c)
}

// ownConn finds the limit's connection inside the one the server sees
// (httpapi.Listener wraps it to watch the framing).
func ownConn(nc net.Conn) *limitConn {
	for {
		switch c := nc.(type) {
		case *limitConn:
			return c
		case *framingConn:
			nc = c.Conn
		default:
			return nil
		}
	}
}

// notify wakes the Accepts waiting for a slot; l.mu is held.
func (l *ConnLimit) notify() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// acquire takes a slot, closing the longest-idle connection while none is
// free; it gives up (false) when done is closed.
func (l *ConnLimit) acquire(done <-chan struct{}) bool {
	for {
		l.mu.Lock()
		if l.open < l.max {
			l.open++
			l.mu.Unlock()
			return true
		}
		var oldest *limitConn
		var since time.Time
		for c, t := range l.idle {
			if oldest == nil || t.Before(since) {
				oldest, since = c, t
			}
		}
		if oldest != nil {
			delete(l.idle, oldest)
			l.mu.Unlock()
			// Closing releases its slot. A request the client may just
			// have begun on it is lost as with any keep-alive connection
			// the server closes; clients retry such a request on a new
			// connection.
			_ = oldest.Close()
			continue
		}
		changed := l.changed
		l.waiting++
		l.mu.Unlock()
		select {
		case <-changed:
		case <-done:
		}
		l.mu.Lock()
		l.waiting--
		l.mu.Unlock()
		select {
		case <-done:
			return false
		default:
		}
	}
}

func (l *ConnLimit) release(c *limitConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.released = true
	delete(l.idle, c)
	l.open--
	if l.waiting > 0 {
		l.notify()
	}
}

type limitListener struct {
	net.Listener
	l         *ConnLimit
	done      chan struct{}
	closeOnce sync.Once
}

// Accept accepts the next connection and then waits for a slot, so that
// an idle connection is closed only for a client that is really there.
func (ll *limitListener) Accept() (net.Conn, error) {
	c, err := ll.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if !ll.l.acquire(ll.done) {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	return &limitConn{Conn: c, l: ll.l}, nil
}

func (ll *limitListener) Close() error {
	ll.closeOnce.Do(func() { close(ll.done) })
	return ll.Listener.Close()
}

type limitConn struct {
	net.Conn
	l        *ConnLimit
	once     sync.Once
	released bool // guarded by l.mu
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c) })
	return err
}
