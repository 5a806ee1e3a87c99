package webhook

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// The client speaks HTTP/1.1 itself over kept-alive connections, one
// attempt at a time on each, in the goroutine that makes the attempt: the
// request is written with net/http's Request.Write and the answer read
// with its ReadResponse, and the connections are kept here. net/http's
// Transport hands every request to two goroutines of its connection and
// back: on loopback an attempt here takes about three quarters of a bare
// Transport's time, signing included (BenchmarkSend), and serve delivered
// a fifth more events a second. Webhooks need none of what the Transport adds:
// no proxy, no redirects, no compression, no HTTP/2 (one endpoint gets a
// bounded number of attempts at once, each on a connection of its own).

const (
	// maxHeadBytes bounds a response's head, 1xx heads included each.
	maxHeadBytes = 64 << 10
	// maxIdle is how long a connection is kept unused; a receiver may
	// close it sooner, in which case the attempt that finds it closed goes
	// again on a new one.
	maxIdle = 30 * time.Second
	// maxIdlePerHost and maxIdleConns bound the connections kept: at least
	// as many to one endpoint as the deliverer may have attempts in flight
	// to it (worker.Deliverer's PerEndpoint, at most its 128 Workers).
	maxIdlePerHost = 128
	maxIdleConns   = 256
	// max1xx is how many informational answers may come before the final
	// one, as in net/http.
	max1xx = 5
)

// errHeadTooLarge is the failure of an answer whose head is too long.
var errHeadTooLarge = errors.New("response head larger than 64 KiB")

// target is an endpoint URL as the client sends to it.
type target struct {
	url *url.URL
	// key names the connections that may carry a request to url:
	// scheme://host:port.
	key, addr, serverName string
	// host is the Host header.
	host string
	tls  bool
	err  error // the URL's verdict: not sent when set
}

func newTarget(raw string) target {
	if err := checkURL(raw); err != nil {
		return target{err: err}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return target{err: errors.New("invalid URL")}
	}
	// The Host header as net/http's NewRequest makes it: without an empty
	// port ("host:"); Request.Write gives a name outside ASCII in its
	// ASCII form.
	t := target{url: u, host: strings.TrimSuffix(u.Host, ":"), serverName: u.Hostname(), tls: u.Scheme == "https"}
	// A name outside ASCII (IDN) is dialled and checked against the
	// certificate in its ASCII (punycode) form, as net/http does: the
	// resolver and certificates know no other.
	if !isASCII(t.serverName) {
		ascii, err := idna.Lookup.ToASCII(t.serverName)
		if err != nil {
			return target{err: errors.New("invalid URL: the host name is not a valid international domain name")}
		}
		t.serverName = ascii
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if t.tls {
			port = "443"
		}
	}
	t.addr = net.JoinHostPort(t.serverName, port)
	t.key = u.Scheme + "://" + t.addr
	return t
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// conn is one kept-alive connection.
type conn struct {
	key  string
	nc   net.Conn
	lim  limitedReader // between nc and br
	br   *bufio.Reader
	bw   *bufio.Writer
	idle time.Time // since when it waits in the pool
}

// limitedReader reads at most n bytes more and counts what it read.
type limitedReader struct {
	r    io.Reader
	n    int64
	read int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errHeadTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	l.read += int64(n)
	return n, err
}

// pool holds the idle connections by target key, the most recently used
// last. A timer closes those idle too long, also when no attempt comes
// any more.
type pool struct {
	mu    sync.Mutex
	idle  map[string][]*conn
	count int
	timer *time.Timer // runs while connections are kept
	// idleFor is how long a connection is kept unused: maxIdle, or less in
	// a test.
	idleFor time.Duration
}

func (p *pool) maxIdle() time.Duration {
	if p.idleFor > 0 {
		return p.idleFor
	}
	return maxIdle
}

// get takes the most recently used idle connection to key, or nil.
func (p *pool) get(key string, now time.Time) *conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.idle[key]
	for len(list) > 0 {
		c := list[len(list)-1]
		list[len(list)-1] = nil
		list = list[:len(list)-1]
		p.count--
		if now.Sub(c.idle) < p.maxIdle() {
			p.idle[key] = list
			return c
		}
		c.nc.Close()
	}
	delete(p.idle, key)
	return nil
}

// put keeps c for the next attempt to its target, unless enough are kept.
func (p *pool) put(c *conn, now time.Time) {
	c.idle = now
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.count >= maxIdleConns || len(p.idle[c.key]) >= maxIdlePerHost {
		c.nc.Close()
		return
	}
	if p.idle == nil {
		p.idle = map[string][]*conn{}
	}
	p.idle[c.key] = append(p.idle[c.key], c)
	p.count++
	if p.timer == nil {
		p.timer = time.AfterFunc(p.maxIdle(), p.sweepNow)
	}
}

// sweepNow is the timer's: it closes the connections idle too long and
// runs again while any are kept.
func (p *pool) sweepNow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timer == nil {
		return // closeAll ran meanwhile
	}
	p.sweep(time.Now())
	if p.count > 0 {
		p.timer.Reset(p.maxIdle())
	} else {
		p.timer = nil
	}
}

// sweep closes the connections idle for p.maxIdle() or longer; p.mu is
// held.
func (p *pool) sweep(now time.Time) {
	for key, list := range p.idle {
		n := 0
		for n < len(list) && now.Sub(list[n].idle) >= p.maxIdle() {
			list[n].nc.Close()
			n++
		}
		if n > 0 {
			p.count -= n
			if n == len(list) {
				delete(p.idle, key)
			} else {
				p.idle[key] = append(list[:0:0], list[n:]...)
			}
		}
	}
}

// closeAll closes every idle connection.
func (p *pool) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, list := range p.idle {
		for _, c := range list {
			c.nc.Close()
		}
	}
	p.idle, p.count = nil, 0
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
}

// dial opens a connection to t, with TLS for https, by deadline.
func (c *Client) dial(ctx context.Context, t target, deadline time.Time) (*conn, error) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	nc, err := c.dialer.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	if t.tls {
		cfg := c.tlsConfig.Clone()
		cfg.ServerName = t.serverName
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		nc = tc
	}
	cn := &conn{key: t.key, nc: nc}
	cn.lim.r = nc
	cn.br = bufio.NewReader(&cn.lim)
	cn.bw = bufio.NewWriter(nc)
	return cn, nil
}

// exchange is one request and its answer on one connection.
type exchange struct {
	resp *http.Response
	// answered tells whether any byte of an answer came back: an exchange
	// on a kept-alive connection that fails before is made again on a new
	// connection.
	answered bool
}

// roundTrip writes req on cn and reads the head of its final answer. The
// connection's deadline, set by canceler.use, bounds both.
func (cn *conn) roundTrip(req *http.Request) (exchange, error) {
	cn.lim.read = 0
	err := req.Write(cn.bw)
	if err == nil {
		err = cn.bw.Flush()
	}
	if err != nil {
		// A receiver may answer before it has read the whole request (413
		// for a body too large) and close the connection, so that the rest
		// cannot be written: its answer, if it came, is the attempt's. The
		// connection is not kept.
		x, rerr := cn.readAnswer(req)
		if rerr != nil {
			return exchange{answered: x.answered}, err
		}
		x.resp.Close = true
		return x, nil
	}
	return cn.readAnswer(req)
}

// readAnswer reads the head of the final answer to req.
func (cn *conn) readAnswer(req *http.Request) (exchange, error) {
	for range max1xx + 1 {
		cn.lim.n = maxHeadBytes + int64(cn.br.Size())
		resp, err := http.ReadResponse(cn.br, req)
		x := exchange{resp: resp, answered: cn.lim.read > 0}
		if err != nil {
			return x, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			// The body is bounded by readBounded and the deadline.
			cn.lim.n = 1 << 62
			return x, nil
		}
		// An informational answer: the final one follows.
	}
	return exchange{answered: true}, errors.New("too many informational (1xx) answers")
}

// unsolicited tells whether anything came on the idle connection cn since
// its last answer was read: bytes no request asked for (a second answer,
// a 408 before the receiver closes it), its end, or an error. Such a
// connection carries no further request: what came would be read as that
// request's answer. net/http's Transport finds the same with a read
// pending on each idle connection; here the connection is looked at when
// it is taken, without waiting. It may leave cn's read deadline passed:
// canceler.use sets it again.
func (cn *conn) unsolicited() bool {
	if cn.br.Buffered() > 0 {
		return true
	}
	nc := cn.nc
	if tc, ok := nc.(*tls.Conn); ok {
		// What tls.Conn took from the socket and has not handed out: a read
		// with a deadline passed returns it, or fails at once without
		// reading the socket, and leaves the connection usable.
		tc.SetReadDeadline(aLongTimeAgo)
		if _, err := cn.br.Peek(1); !errors.Is(err, os.ErrDeadlineExceeded) {
			return true
		}
		nc = tc.NetConn()
	}
	return socketReadable(nc)
}

// stale tells whether err, on a connection that was kept alive, is the
// receiver having closed it before the request came: nothing of an answer
// came back, and the connection was reset or closed.
func stale(x exchange, err error) bool {
	if x.answered {
		return false
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
