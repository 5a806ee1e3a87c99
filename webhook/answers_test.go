package webhook

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The answers of receivers that do not behave as a plain HTTP server
// does, on the wire: each attempt ends within the timeout with what the
// receiver really answered, and never takes one request's answer for
// another's.

// rawServer runs handle on each connection accepted on loopback.
func rawServer(t *testing.T, handle func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return ln.Addr().String()
}

// waitUntil polls cond, for at most 5s, until it is true.
func waitUntil(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("not %s after 5s", what)
		}
	}
}

// closings counts the connections c closes from now on.
func closings(c *Client) *atomic.Int32 {
	n := new(atomic.Int32)
	dial := c.transport.DialContext
	c.transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &closeCounting{Conn: conn, n: n}, nil
	}
	return n
}

// closeCounting is a connection that counts its first Close.
type closeCounting struct {
	net.Conn
	n    *atomic.Int32
	once sync.Once
}

func (c *closeCounting) Close() error {
	c.once.Do(func() { c.n.Add(1) })
	return c.Conn.Close()
}

// answering runs a raw server that reads each request of a connection and
// has answer write its answer; the connection is closed when answer
// returns false.
func answering(t *testing.T, answer func(c net.Conn, head string) bool) string {
	t.Helper()
	return rawServer(t, answeringOn(answer))
}

// answeringOn is answering's loop on a connection of any kind.
func answeringOn(answer func(c net.Conn, head string) bool) func(c net.Conn) {
	return func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			head, err := readHead(br)
			if err != nil || !answer(c, head) {
				return
			}
		}
	}
}

// readHead reads one request, its head and a Content-Length body, and
// returns the head.
func readHead(br *bufio.Reader) (string, error) {
	var head strings.Builder
	n := 0
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return head.String(), err
		}
		head.WriteString(line)
		if strings.HasPrefix(strings.ToLower(line), "content-length:") {
			fmt.Sscanf(strings.TrimSpace(line[len("content-length:"):]), "%d", &n)
		}
		if line == "\r\n" {
			break
		}
	}
	_, err := io.CopyN(io.Discard, br, int64(n))
	return head.String(), err
}

// An https endpoint that takes the connection and never answers the TLS
// handshake times out like one that never answers the request.
func TestWebhookSendTLSHandshakeTimeout(t *testing.T) {
	addr := rawServer(t, func(c net.Conn) {
		defer c.Close()
		io.Copy(io.Discard, c) // never answers the handshake: reads until the client leaves
	})
	done := make(chan Result, 1)
	go func() {
		done <- testClient(t, 300*time.Millisecond).Send(context.Background(), testRequest(t, "https://"+addr+"/hook"), time.Now())
	}()
	select {
	case res := <-done:
		if res.Err == nil || !strings.Contains(res.Err.Error(), "timeout after 300ms") {
			t.Fatalf("Send = %+v, want a timeout", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an attempt with a 300ms timeout still runs after 5s: the TLS handshake has no deadline")
	}
}

// A Content-Length is no promise: a huge one is not allocated, and a long
// body is not waited for; the status and the excerpt count.
func TestWebhookSendContentLengthBodies(t *testing.T) {
	for _, tt := range []struct {
		name, length string
		trickle      bool
	}{
		{"beyond any memory", "900000000000000000", false},
		{"100 MB, slowly", "100000000", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := answering(t, func(c net.Conn, _ string) bool {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+tt.length+"\r\n\r\n")
				chunk := strings.Repeat("x", 128<<10)
				for range 100 {
					if _, err := io.WriteString(c, chunk); err != nil {
						break
					}
					if tt.trickle {
						time.Sleep(10 * time.Millisecond)
					}
				}
				return false
			})
			res := testClient(t, 2*time.Second).Send(context.Background(), testRequest(t, "http://"+addr+"/"), time.Now())
			if !res.Success() || len(res.Excerpt) != excerptSize || res.Duration > time.Second {
				t.Fatalf("Send = status %d, %d bytes of excerpt, err %v, in %v; want a 200 with a full excerpt, at once",
					res.StatusCode, len(res.Excerpt), res.Err, res.Duration)
			}
		})
	}
}

// A receiver that closes kept-alive connections after a short idle time
// (Node's default is 5s): every attempt gets through, on a new connection
// when the old one was closed meanwhile.
func TestWebhookSendStaleKeepAlive(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.IdleTimeout = 50 * time.Millisecond
	var closed atomic.Int32
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := testClient(t, 2*time.Second)
	for i := range 5 {
		if res := c.Send(context.Background(), testRequest(t, srv.URL), time.Now()); !res.Success() {
			t.Fatalf("attempt %d after the receiver closed the idle connection: %+v", i, res)
		}
		waitUntil(t, "the idle connection closed by the receiver", func() bool { return closed.Load() == int32(i+1) })
	}
}

// A receiver that takes a request on a kept-alive connection and closes
// it without an answer: the request goes once more, on a new connection,
// as net/http does; the receiver deduplicates by webhook-id.
func TestWebhookSendClosedBeforeAnswer(t *testing.T) {
	var hits atomic.Int32
	addr := answering(t, func(c net.Conn, _ string) bool {
		if hits.Add(1) == 2 {
			return false // the second request: no answer
		}
		io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		return true
	})
	c := testClient(t, time.Second)
	for i := range 2 {
		if res := c.Send(context.Background(), testRequest(t, "http://"+addr+"/"), time.Now()); !res.Success() {
			t.Fatalf("attempt %d: %+v", i, res)
		}
	}
	if n := hits.Load(); n != 3 {
		t.Fatalf("the receiver saw %d requests, want 3 (the unanswered one sent again)", n)
	}
}

// Informational answers (103 Early Hints) before the final one: each
// attempt gets its own final answer, not the one before's.
func TestWebhookSendInformationalAnswers(t *testing.T) {
	var n atomic.Int32
	addr := answering(t, func(c net.Conn, _ string) bool {
		i := n.Add(1)
		io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
		time.Sleep(20 * time.Millisecond) // the final answer comes later than the 103
		code := 200
		if i%2 == 0 {
			code = 500
		}
		fmt.Fprintf(c, "HTTP/1.1 %d X\r\nContent-Length: 9\r\n\r\nanswer-%02d", code, i)
		return true
	})
	c := testClient(t, time.Second)
	for i := 1; i <= 4; i++ {
		res := c.Send(context.Background(), testRequest(t, "http://"+addr+"/"), time.Now())
		want := 200
		if i%2 == 0 {
			want = 500
		}
		if res.StatusCode != want || res.Excerpt != fmt.Sprintf("answer-%02d", i) {
			t.Fatalf("attempt %d: %+v, want its own %d", i, res, want)
		}
	}
}

// A response head of tens of KiB (a WAF's cookies and security policy) is
// read.
func TestWebhookSendLargeResponseHead(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", strings.Repeat("a", 40<<10))
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	if res := testClient(t, time.Second).Send(context.Background(), testRequest(t, srv.URL), time.Now()); !res.Success() {
		t.Fatalf("Send = %+v, want a 200", res)
	}
}

// A path registered with characters outside ASCII goes escaped, as a
// request target must be.
func TestWebhookSendEscapesPath(t *testing.T) {
	got := make(chan string, 1)
	addr := answering(t, func(c net.Conn, head string) bool {
		got <- strings.SplitN(head, "\r\n", 2)[0]
		io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		return false
	})
	if res := testClient(t, time.Second).Send(context.Background(), testRequest(t, "http://"+addr+"/café/hook?x=1#part"), time.Now()); !res.Success() {
		t.Fatalf("Send = %+v", res)
	}
	if line := <-got; line != "POST /caf%C3%A9/hook?x=1 HTTP/1.1" {
		t.Fatalf("request line %q, want the path escaped and no fragment", line)
	}
}
