package httpapi_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"storelink/httpapi"
)

// limitedServer serves h as serve does (httpapi.NewHTTPServer on a
// Listener of l), on 127.0.0.1; tweak, when set, changes the server first
// (shorter timeouts for a quick test).
func limitedServer(t *testing.T, l *httpapi.ConnLimit, h http.Handler, tweak func(*http.Server)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpapi.NewHTTPServer(h, l)
	if tweak != nil {
		tweak(srv)
	}
	go func() { _ = srv.Serve(httpapi.Listener(l.Listener(ln))) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// bodyReader answers GET with 200 at once, and reads the body of other
// requests a byte at a time, telling reads of each byte on its channel by
// the request's path, before answering 200.
type bodyReader chan string

func (ch bodyReader) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		buf := make([]byte, 1)
		for {
			n, err := r.Body.Read(buf)
			if n > 0 {
				select {
				case ch <- r.URL.Path:
				default: // nobody waits for so many
				}
			}
			if err != nil {
				if err != io.EOF {
					return
				}
				break
			}
		}
	}
	_, _ = io.WriteString(w, "ok")
}

// waitRead waits until the handler has read a body byte of path.
func (ch bodyReader) waitRead(t *testing.T, path string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case p := <-ch:
			if p == path {
				return
			}
		case <-deadline:
			t.Fatalf("the server read no body byte of %s within 10s", path)
		}
	}
}

// client is one connection written by hand, from a loopback address.
type client struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialFrom(t *testing.T, addr, from string) *client {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, from, err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, c: c, br: bufio.NewReader(c)}
}

func (c *client) send(s string) error {
	_ = c.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := io.WriteString(c.c, s)
	return err
}

func (c *client) mustSend(s string) {
	c.t.Helper()
	if err := c.send(s); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// answer reads one answer within d.
func (c *client) answer(d time.Duration) (int, error) {
	_ = c.c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// closed tells whether the server closed the connection (end of stream or
// reset) within d, with no answer on it.
func (c *client) closed(d time.Duration) bool {
	c.t.Helper()
	_ = c.c.SetReadDeadline(time.Now().Add(d))
	b, err := c.br.ReadByte()
	if err == nil {
		c.t.Fatalf("the server answered (%q…) instead of closing", b)
	}
	ne, ok := err.(net.Error)
	return !ok || !ne.Timeout()
}

// get sends GET / and wants its 200.
func (c *client) get(what string) {
	c.t.Helper()
	c.mustSend("GET / HTTP/1.1\r\nHost: storelink\r\n\r\n")
	if code, err := c.answer(10 * time.Second); err != nil || code != http.StatusOK {
		c.t.Fatalf("%s: GET / = %d, %v; want 200", what, code, err)
	}
}

// hold begins a POST to path whose body has 10 bytes, sends the first
// and waits until the server has read it.
func (c *client) hold(h bodyReader, path string) {
	c.t.Helper()
	c.mustSend("POST " + path + " HTTP/1.1\r\nHost: storelink\r\nContent-Length: 10\r\n\r\na")
	h.waitRead(c.t, path)
}

// finish sends the rest of a held body and wants its 200.
func (c *client) finish(what string) {
	c.t.Helper()
	if err := c.send("bcdefghij"); err != nil {
		c.t.Fatalf("%s: send the rest of the body: %v", what, err)
	}
	if code, err := c.answer(10 * time.Second); err != nil || code != http.StatusOK {
		c.t.Fatalf("%s: %d, %v; want 200", what, code, err)
	}
}

// A client that sends its headers a line at a time, never ending them, is
// closed after the header timeout, with its slot; meanwhile and after, a
// new client is served.
func TestConnLimitClosesSlowHeaders(t *testing.T) {
	l := httpapi.NewConnLimit(2)
	addr := limitedServer(t, l, bodyReader(make(chan string, 1000)),
		func(s *http.Server) { s.ReadHeaderTimeout = 300 * time.Millisecond })
	slow := dialFrom(t, addr, "127.0.0.1")
	slow.mustSend("GET / HTTP/1.1\r\nHost: storelink\r\n")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; i < 200; i++ { // a header line every 50 ms, for 10 s at most
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if slow.send(fmt.Sprintf("X-Slow-%d: y\r\n", i)) != nil {
				return
			}
		}
	}()
	dialFrom(t, addr, "127.0.0.1").get("a client beside the slow one")
	if !slow.closed(10 * time.Second) {
		t.Fatal("a client trickling its headers was not closed within 10s, with a header timeout of 300ms")
	}
	dialFrom(t, addr, "127.0.0.1").get("a client after the slow one was closed")
}

// One address may have PerAddress connections open: one more is closed as
// soon as it is accepted, without an answer, while another address is
// served and the address's open connections go on. An exempt address (a
// reverse proxy) has no cap.
func TestConnLimitPerAddress(t *testing.T) {
	h := bodyReader(make(chan string, 1000))
	l := httpapi.NewConnLimit(8)
	l.PerAddress = 2
	addr := limitedServer(t, l, h, nil)
	held := []*client{dialFrom(t, addr, "127.0.0.1"), dialFrom(t, addr, "127.0.0.1")}
	for i, c := range held {
		c.hold(h, fmt.Sprintf("/held-%d", i))
	}
	third := dialFrom(t, addr, "127.0.0.1")
	_ = third.send("GET / HTTP/1.1\r\nHost: storelink\r\n\r\n")
	if !third.closed(10 * time.Second) {
		t.Fatal("a third connection from 127.0.0.1 with PerAddress 2 was not closed")
	}
	dialFrom(t, addr, "127.0.0.2").get("another address")
	for i, c := range held {
		c.finish(fmt.Sprintf("held connection %d", i))
	}

	exempt := httpapi.NewConnLimit(8)
	exempt.PerAddress = 2
	exempt.Exempt = func(a netip.Addr) bool { return a == netip.MustParseAddr("127.0.0.1") }
	addr = limitedServer(t, exempt, h, nil)
	for i := range 4 {
		c := dialFrom(t, addr, "127.0.0.1")
		c.hold(h, fmt.Sprintf("/proxied-%d", i))
		defer c.finish(fmt.Sprintf("connection %d from an exempt address", i))
	}
}

// At the connection limit a new client is served at once: the connection
// that has sent least recently is closed for it, though it is in the
// middle of a request, while those that sent since go on.
func TestConnLimitClosesLeastRecentSender(t *testing.T) {
	h := bodyReader(make(chan string, 1000))
	l := httpapi.NewConnLimit(4)
	addr := limitedServer(t, l, h, nil)
	held := make([]*client, 4)
	for i := range held {
		held[i] = dialFrom(t, addr, "127.0.0.1")
		held[i].hold(h, fmt.Sprintf("/held-%d", i))
	}
	// held[0] sends a byte more: held[1] is now the one that sent least
	// recently, though held[0] is older.
	held[0].mustSend("b")
	h.waitRead(t, "/held-0")

	dialFrom(t, addr, "127.0.0.1").get("a new client at the limit")
	if !held[1].closed(10 * time.Second) {
		t.Fatal("the connection that sent least recently is still open")
	}
	if err := held[0].send("cdefghij"); err != nil {
		t.Fatal(err)
	}
	if code, err := held[0].answer(10 * time.Second); err != nil || code != http.StatusOK {
		t.Fatalf("held connection 0, which sent since: %d, %v; want 200", code, err)
	}
	for _, i := range []int{2, 3} {
		held[i].finish(fmt.Sprintf("held connection %d", i))
	}
}

// Connections that each send large headers without ending them cannot
// hold more header bytes together than the budget (plus a read of 4 KiB
// each): the ones holding most are closed, those left are served once
// they end their headers, and so is a new client meanwhile.
func TestConnLimitHeaderBudget(t *testing.T) {
	const (
		budget = 96 << 10
		conns  = 6
		each   = 40 << 10 // in lines of 1 KiB
		slack  = conns * 4 << 10
	)
	l := httpapi.NewConnLimit(conns + 2)
	l.HeaderBudget = budget
	addr := limitedServer(t, l, bodyReader(make(chan string, 1000)), func(s *http.Server) {
		s.MaxHeaderBytes = 1 << 20 // not what closes them here
		s.ReadHeaderTimeout = time.Minute
	})
	line := "X-Pad: " + strings.Repeat("p", 1024-len("X-Pad: \r\n")) + "\r\n"
	type result struct {
		code int
		err  error
	}
	clients := make([]*client, conns)
	results := make([]chan result, conns)
	for i := range clients {
		clients[i] = dialFrom(t, addr, "127.0.0.1")
		results[i] = make(chan result, 1)
		go func(c *client, res chan<- result) {
			code, err := c.answer(time.Minute)
			res <- result{code, err}
		}(clients[i], results[i])
		// A write refused because the server closed the connection is
		// one of the closes looked for.
		_ = clients[i].send("GET / HTTP/1.1\r\nHost: storelink\r\n" + strings.Repeat(line, each/1024))
	}

	// Wait until enough are closed for the rest to fit, noting the most
	// header bytes held meanwhile.
	closed := make([]bool, conns)
	nClosed, most := 0, int64(0)
	for deadline := time.Now().Add(10 * time.Second); nClosed*each < conns*each-budget-slack; time.Sleep(10 * time.Millisecond) {
		most = max(most, l.HeaderBytes())
		for i, res := range results {
			select {
			case r := <-res:
				if r.err == nil {
					t.Fatalf("connection %d answered %d before the end of its headers", i, r.code)
				}
				closed[i] = true
				nClosed++
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d connections closed within 10s, holding %d header bytes with a budget of %d", nClosed, conns, l.HeaderBytes(), budget)
		}
	}
	if most > budget+slack {
		t.Fatalf("%d header bytes held at once, with a budget of %d", most, budget)
	}
	dialFrom(t, addr, "127.0.0.1").get("a new client beside large headers")

	served := 0
	for i, c := range clients {
		if closed[i] {
			continue
		}
		_ = c.send("\r\n")
		if r := <-results[i]; r.err == nil && r.code == http.StatusOK {
			served++
		}
	}
	if served == 0 || served*each > budget+slack {
		t.Fatalf("%d of %d connections served once their headers ended, want 1 to %d", served, conns, (budget+slack)/each)
	}
	t.Logf("%d of %d connections with %d KiB of headers each closed, %d served, budget %d KiB, most held %d KiB",
		nClosed, conns, each>>10, served, budget>>10, most>>10)
}

// The memory that connections sending headers without ending them take in
// the server: 256 connections with 60 KiB each (under MaxHeaderBytes),
// against a header budget of 4 MiB and, for comparison, of 1 GiB (none in
// effect). Reported as the growth of the live heap once the server has
// read what it could.
func BenchmarkConnLimitHeaderMemory(b *testing.B) {
	const conns, each = 256, 60 << 10
	line := "X-Pad: " + strings.Repeat("p", 1024-len("X-Pad: \r\n")) + "\r\n"
	head := "GET / HTTP/1.1\r\nHost: storelink\r\n" + strings.Repeat(line, each/1024-1)
	for _, budget := range []int64{4 << 20, 1 << 30} {
		b.Run(fmt.Sprintf("budget=%dMiB", budget>>20), func(b *testing.B) {
			for b.Loop() {
				l := httpapi.NewConnLimit(conns + 8)
				l.HeaderBudget = budget
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				srv := httpapi.NewHTTPServer(http.NotFoundHandler(), l)
				srv.ReadHeaderTimeout = time.Minute
				go func() { _ = srv.Serve(httpapi.Listener(l.Listener(ln))) }()
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				cs := make([]net.Conn, 0, conns)
				for range conns {
					c, err := net.Dial("tcp", ln.Addr().String())
					if err != nil {
						b.Fatal(err)
					}
					cs = append(cs, c)
					_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
					_, _ = io.WriteString(c, head)
				}
				// The server has read what it could once the bytes held
				// stop changing.
				for last, still, deadline := int64(-1), 0, time.Now().Add(30*time.Second); still < 10 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
					if h := l.HeaderBytes(); h == last {
						still++
					} else {
						last, still = h, 0
					}
				}
				held := l.HeaderBytes()
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "heap-MiB")
				b.ReportMetric(float64(held)/(1<<20), "held-MiB")
				for _, c := range cs {
					c.Close()
				}
				_ = srv.Close()
			}
		})
	}
}
