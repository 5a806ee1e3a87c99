package httpapi

import (
	"container/heap"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// The bounds of serve's http.Server (NewHTTPServer).
const (
	// HeaderTimeout is the time a client has to send a request's headers,
	// from the connection's accept or, on a kept-alive connection, from
	// the first bytes of the next request. A client sends them in one or
	// two TCP segments right after connecting; 5 s leaves room for two
	// retransmissions (1 s, then 2 s) and a slow mobile round trip, and is
	// all a client that sends nothing or trickles its headers holds a slot.
	HeaderTimeout = 5 * time.Second
	// MaxHeaderBytes bounds one request's line and headers (net/http
	// answers 431 beyond it, reading at most 4 KiB more). Our cookies and
	// keys take well under 1 KiB; 64 KiB is twice what nginx accepts by
	// default (4 buffers of 8 KiB), so no proxy in front sends more.
	MaxHeaderBytes = 64 << 10
	// IdleTimeout closes a kept-alive connection that sends no new
	// request; the connection limit closes it sooner when a new client
	// needs its slot.
	IdleTimeout = 2 * time.Minute
)

// DefaultMaxConnectionsPerAddress is the connections one remote address
// (IPv6: one /64) may have open when nothing else is configured: a
// partner's exporter with several clients uploading at once and a browser
// behind the same NAT fit, and one address alone cannot take more than an
// eighth of the default 1024 slots.
const DefaultMaxConnectionsPerAddress = 128

// DefaultHeaderBudget bounds the bytes of headers that all connections
// together have sent and whose request has not begun (ConnLimit.HeaderBudget
// when 0): 512 header sections of the largest size allowed.
const DefaultHeaderBudget = 32 << 20

// NewHTTPServer is the http.Server of serve: handler h on connections of a
// Listener(l.Listener(…)), with the header timeout and size above.
func NewHTTPServer(h http.Handler, l *ConnLimit) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: HeaderTimeout, MaxHeaderBytes: MaxHeaderBytes,
		IdleTimeout: IdleTimeout, ConnContext: ConnContext, ConnState: l.ConnState}
}

// ConnLimit bounds the open connections of an http.Server, the connections
// of one remote address, and the memory of headers still arriving.
//
// When every slot is taken and a new client has connected, the connection
// that has sent nothing for the longest is closed to make room, whatever it
// is doing: idle between requests, trickling headers, stalled in a body, or
// waiting for its answer. A connection's time is that of its last read that
// returned data (or of its accept), so a client that keeps sending keeps its
// slot and one that stalls loses it first; the newcomer is always served.
//
// Bytes read on a connection before its request has begun (the headers,
// and between requests the start of the next) are charged to HeaderBudget;
// when the budget is exceeded, the connections holding the most such bytes
// are closed until it is not. Closing the largest rather than the newcomer
// means that a few clients sending large headers slowly cannot make every
// other client's small headers be refused. Reads are of at most 4 KiB (the
// server's buffer), so the header bytes held stay below HeaderBudget plus
// 4 KiB per open connection.
//
// Set the exported fields before the Listener is used. The server must use
// ConnState with the Listener's connections.
type ConnLimit struct {
	// PerAddress caps the open connections of one remote address (IPv6:
	// one /64); a connection beyond is closed as soon as it is accepted.
	// 0 is no cap.
	PerAddress int
	// Exempt, when set, tells the addresses that PerAddress does not
	// apply to: reverse proxies, whose connections carry every client's
	// requests.
	Exempt func(netip.Addr) bool
	// HeaderBudget bounds the header bytes held by all connections
	// together (DefaultHeaderBudget when 0).
	HeaderBudget int64

	max   int
	epoch time.Time
	hdr   atomic.Int64 // header bytes held now, over all connections

	mu      sync.Mutex
	open    int
	conns   connHeap // open connections, the one that sent least recently first
	perAddr map[netip.Addr]int
	waiting int           // Accepts waiting for a slot
	changed chan struct{} // closed when a slot frees
}

// NewConnLimit returns a limit of max open connections.
func NewConnLimit(max int) *ConnLimit {
	return &ConnLimit{max: max, epoch: time.Now(), perAddr: map[netip.Addr]int{}, changed: make(chan struct{})}
}

// Listener wraps ln so that at most max of its connections are open.
func (l *ConnLimit) Listener(ln net.Listener) net.Listener {
	return &limitListener{Listener: ln, l: l, done: make(chan struct{})}
}

// ConnState is the http.Server's ConnState: it tells the limit when a
// connection's request has begun, so that its headers are no longer
// charged.
func (l *ConnLimit) ConnState(nc net.Conn, st http.ConnState) {
	c := ownConn(nc)
	if c == nil {
		return
	}
	switch st {
	case http.StateActive:
		c.inHeader.Store(false)
		l.hdr.Add(-c.hdr.Swap(0))
	case http.StateNew, http.StateIdle:
		c.inHeader.Store(true)
	}
}

// HeaderBytes is the header bytes held now by all connections together.
func (l *ConnLimit) HeaderBytes() int64 { return l.hdr.Load() }

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

func (l *ConnLimit) now() int64 { return int64(time.Since(l.epoch)) }

func (l *ConnLimit) headerBudget() int64 {
	if l.HeaderBudget > 0 {
		return l.HeaderBudget
	}
	return DefaultHeaderBudget
}

// admit takes nc in: nil and refused when its address is at its cap, nil
// alone when done closed while it waited for a slot. At the limit it closes
// the connection that has sent least recently.
func (l *ConnLimit) admit(nc net.Conn, done <-chan struct{}) (c *limitConn, refused bool) {
	addr := remoteAddr(nc)
	capped := l.PerAddress > 0 && (l.Exempt == nil || !l.Exempt(addr))
	c = &limitConn{Conn: nc, l: l, idx: -1}
	c.inHeader.Store(true)
	l.mu.Lock()
	defer l.mu.Unlock()
	if capped {
		key := limitKey(addr)
		if l.perAddr[key] >= l.PerAddress {
			return nil, true
		}
		l.perAddr[key]++
		c.addrKey, c.counted = key, true
	}
	for l.open >= l.max {
		if v := l.leastRecentLocked(); v != nil {
			l.mu.Unlock()
			// Closing releases its slot before Close returns. What it was
			// sending or waiting for is lost, as with any connection the
			// server closes; clients send such a request again.
			_ = v.Close()
			l.mu.Lock()
			continue
		}
		// Every open connection is being closed by another Accept.
		changed := l.changed
		l.waiting++
		l.mu.Unlock()
		select {
		case <-changed:
		case <-done:
		}
		l.mu.Lock()
		l.waiting--
		select {
		case <-done:
			l.uncountLocked(c)
			return nil, false
		default:
		}
	}
	l.open++
	c.key = l.now()
	c.sent.Store(c.key)
	heap.Push(&l.conns, c)
	return c, false
}

// leastRecentLocked takes out of l.conns the connection that has sent least
// recently, nil when there is none. A connection's key in the heap is its
// sent time as last seen, never later than its true one: the root whose key
// is still true is the least recent of all, and a root whose key is stale
// is brought up to date and sunk, a cost paid once per read that moved it.
func (l *ConnLimit) leastRecentLocked() *limitConn {
	for len(l.conns) > 0 {
		c := l.conns[0]
		if s := c.sent.Load(); s != c.key {
			c.key = s
			heap.Fix(&l.conns, 0)
			continue
		}
		return heap.Pop(&l.conns).(*limitConn)
	}
	return nil
}

// shedHeaders closes the connections holding the most header bytes until
// those held are within the budget again.
func (l *ConnLimit) shedHeaders() {
	var shed []*limitConn
	l.mu.Lock()
	for l.hdr.Load() > l.headerBudget() {
		var most *limitConn
		var n int64
		for _, c := range l.conns {
			if h := c.hdr.Load(); h > n {
				most, n = c, h
			}
		}
		if most == nil {
			break
		}
		l.hdr.Add(-most.hdr.Swap(0))
		shed = append(shed, most)
	}
	l.mu.Unlock()
	for _, c := range shed {
		_ = c.Close()
	}
}

func (l *ConnLimit) release(c *limitConn) {
	c.gone.Store(true)
	l.hdr.Add(-c.hdr.Swap(0))
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.idx >= 0 {
		heap.Remove(&l.conns, c.idx)
	}
	l.uncountLocked(c)
	l.open--
	if l.waiting > 0 {
		close(l.changed)
		l.changed = make(chan struct{})
	}
}

func (l *ConnLimit) uncountLocked(c *limitConn) {
	if !c.counted {
		return
	}
	c.counted = false
	if n := l.perAddr[c.addrKey] - 1; n > 0 {
		l.perAddr[c.addrKey] = n
	} else {
		delete(l.perAddr, c.addrKey)
	}
}

// remoteAddr is nc's remote address, unmapped and without zone; the zero
// address when it has none.
func remoteAddr(nc net.Conn) netip.Addr {
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap().WithZone("")
	}
	ap, err := netip.ParseAddrPort(nc.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap().WithZone("")
}

type limitListener struct {
	net.Listener
	l         *ConnLimit
	done      chan struct{}
	closeOnce sync.Once
}

// Accept accepts the next connection that its address's cap lets in; at
// the limit it makes room for it, so that room is made only for a client
// that is really there.
func (ll *limitListener) Accept() (net.Conn, error) {
	for {
		nc, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c, refused := ll.l.admit(nc, ll.done)
		if c != nil {
			return c, nil
		}
		_ = nc.Close()
		if !refused {
			return nil, net.ErrClosed
		}
	}
}

func (ll *limitListener) Close() error {
	ll.closeOnce.Do(func() { close(ll.done) })
	return ll.Listener.Close()
}

type limitConn struct {
	net.Conn
	l *ConnLimit

	sent     atomic.Int64 // l.now() of the last read that returned data, or of the accept
	inHeader atomic.Bool  // reads are of headers: no request has begun since the last ended
	hdr      atomic.Int64 // header bytes charged to l.hdr
	gone     atomic.Bool  // released: reads charge nothing
	once     sync.Once

	// Guarded by l.mu.
	key     int64 // sent as l.conns last saw it
	idx     int   // in l.conns; -1 when not in it
	addrKey netip.Addr
	counted bool // in l.perAddr under addrKey
}

// Read notes the time of reads that return data, without a lock, and
// charges header bytes to the budget.
func (c *limitConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.sent.Store(c.l.now())
		if c.inHeader.Load() {
			c.hdr.Add(int64(n))
			over := c.l.hdr.Add(int64(n)) > c.l.headerBudget()
			if c.gone.Load() {
				// Released meanwhile: its charge went back, and this one too.
				c.l.hdr.Add(-c.hdr.Swap(0))
			} else if over {
				c.l.shedHeaders()
			}
		}
	}
	return n, err
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c) })
	return err
}

// connHeap orders connections by the time they last sent, as last seen.
type connHeap []*limitConn

func (h connHeap) Len() int           { return len(h) }
func (h connHeap) Less(i, j int) bool { return h[i].key < h[j].key }
func (h connHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *connHeap) Push(x any) {
	c := x.(*limitConn)
	c.idx = len(*h)
	*h = append(*h, c)
}
func (h *connHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	c.idx = -1
	return c
}
