package webhook

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// HTTP/1.1 on the wire, from receivers that do not behave as a plain
// server does: stray answers, early answers, cut bodies; cancellation and
// odd hosts.

// tlsRawServer is rawServer over TLS, with httptest's certificate; the
// client returned trusts it.
func tlsRawServer(t *testing.T, handle func(c net.Conn)) (string, *Client) {
	t.Helper()
	ts := httptest.NewUnstartedServer(http.NotFoundHandler())
	ts.StartTLS()
	cfg := ts.TLS.Clone()
	roots := ts.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	ts.Close()
	addr := rawServer(t, func(c net.Conn) { handle(tls.Server(c, cfg)) })
	c := testClient(t, 2*time.Second)
	c.transport.TLSClientConfig.RootCAs = roots
	return addr, c
}

// The tests of stray answers wait, before the next attempt, until the
// client has dropped the connection the stray answer came on. The
// Transport reads each connection as it goes idle and drops it when
// anything comes; a request sent in the instant before it has looked would
// take what came for its own answer. Only a receiver that answers twice
// brings that about, and the standard library's window is accepted.

// An answer no request asked for that follows a large answer in the same
// write is not taken for the next request's answer, also when it is not in
// the Transport's buffer, over TLS too.
func TestWebhookSendUnaskedAnswerAfterLargeBody(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		scheme := "http"
		if useTLS {
			scheme = "https"
		}
		for _, size := range []int{13000, 14000, 16000, 24000, 40000} {
			t.Run(fmt.Sprintf("%s %d", scheme, size), func(t *testing.T) {
				var n atomic.Int32
				handle := answeringOn(func(c net.Conn, _ string) bool {
					if n.Add(1) == 1 {
						io.WriteString(c, fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", size, strings.Repeat("x", size))+
							"HTTP/1.1 500 Unasked\r\nContent-Length: 0\r\n\r\n")
						return true
					}
					io.WriteString(c, "HTTP/1.1 202 Accepted\r\nContent-Length: 4\r\n\r\nmine")
					return true
				})
				var addr string
				var c *Client
				if useTLS {
					addr, c = tlsRawServer(t, handle)
				} else {
					addr, c = rawServer(t, handle), testClient(t, 2*time.Second)
				}
				closed := closings(c)
				url := scheme + "://" + addr + "/"
				if res := c.Send(context.Background(), testRequest(t, url), time.Now()); res.StatusCode != 200 {
					t.Fatalf("first attempt: %+v", res)
				}
				waitUntil(t, "the connection with the unasked answer dropped", func() bool { return closed.Load() == 1 })
				if res := c.Send(context.Background(), testRequest(t, url), time.Now()); res.StatusCode != 202 || res.Excerpt != "mine" {
					t.Fatalf("second attempt: status %d, excerpt %q, err %v; want its own 202", res.StatusCode, res.Excerpt, res.Err)
				}
			})
		}
	}
}

// An answer no request asked for, in the same write as the answer before
// or while the connection is idle, is not taken for the next request's
// answer.
func TestWebhookSendUnaskedAnswer(t *testing.T) {
	for _, tt := range []struct {
		name  string
		pause time.Duration
	}{{"in the same write", 0}, {"while idle", 50 * time.Millisecond}} {
		t.Run(tt.name, func(t *testing.T) {
			var n atomic.Int32
			addr := answering(t, func(c net.Conn, _ string) bool {
				if n.Add(1) > 1 {
					io.WriteString(c, "HTTP/1.1 202 Accepted\r\nContent-Length: 4\r\n\r\nmine")
					return true
				}
				first, unasked := "HTTP/1.1 204 No Content\r\n\r\n", "HTTP/1.1 500 Unasked\r\nContent-Length: 0\r\n\r\n"
				if tt.pause == 0 {
					io.WriteString(c, first+unasked)
				} else {
					io.WriteString(c, first)
					time.Sleep(tt.pause)
					io.WriteString(c, unasked)
				}
				return true
			})
			c := testClient(t, time.Second)
			closed := closings(c)
			if res := c.Send(context.Background(), testRequest(t, "http://"+addr+"/"), time.Now()); res.StatusCode != 204 {
				t.Fatalf("first attempt: %+v", res)
			}
			waitUntil(t, "the connection with the unasked answer dropped", func() bool { return closed.Load() == 1 })
			if res := c.Send(context.Background(), testRequest(t, "http://"+addr+"/"), time.Now()); res.StatusCode != 202 || res.Excerpt != "mine" {
				t.Fatalf("second attempt: %+v, want its own 202", res)
			}
		})
	}
}

// A receiver that closes an idle connection with a 408 (as some servers
// and load balancers do on their idle timeout): the next attempt goes on
// a new connection and gets its own answer, not the 408.
func TestWebhookSendIdle408(t *testing.T) {
	var n atomic.Int32
	addr := answering(t, func(c net.Conn, _ string) bool {
		if n.Add(1) == 1 {
			io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
			time.Sleep(50 * time.Millisecond) // the 408 comes once the connection is idle
			io.WriteString(c, "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
			return false
		}
		io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		return true
	})
	c := testClient(t, time.Second)
	closed := closings(c)
	for i := range 2 {
		if res := c.Send(context.Background(), testRequest(t, "http://"+addr+"/"), time.Now()); !res.Success() {
			t.Fatalf("attempt %d: %+v, want a 204", i, res)
		}
		if i == 0 {
			waitUntil(t, "the connection closed with a 408 dropped", func() bool { return closed.Load() == 1 })
		}
	}
}

// A canceled attempt ends at once also while the body of the answer is
// read, not at the timeout.
func TestWebhookSendCancelDuringBody(t *testing.T) {
	srv := holdingServer(t, stalledBody)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(200*time.Millisecond, cancel)
	res := testClient(t, 5*time.Second).Send(ctx, testRequest(t, srv.URL), time.Now())
	if res.Success() || res.Err == nil || !strings.Contains(res.Err.Error(), "canceled") || res.Duration > 2*time.Second {
		t.Fatalf("Send = %+v, want canceled promptly", res)
	}
}

// An attempt whose context is canceled before it starts sends nothing,
// also when a kept-alive connection is at hand.
func TestWebhookSendCanceledBeforeSend(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	c := testClient(t, time.Second)
	if res := c.Send(context.Background(), testRequest(t, srv.URL), time.Now()); !res.Success() {
		t.Fatalf("first attempt: %+v", res)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 5 {
		if res := c.Send(ctx, testRequest(t, srv.URL), time.Now()); res.Err == nil || res.Err.Error() != "canceled" {
			t.Fatalf("Send with a canceled context = %+v, want canceled", res)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("the receiver saw %d requests, want 1", n)
	}
}

// An empty body goes as net/http sends it: Content-Length: 0, not chunked.
func TestWebhookSendEmptyBody(t *testing.T) {
	got := make(chan string, 1)
	addr := answering(t, func(c net.Conn, head string) bool {
		got <- head
		io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		return false
	})
	req := testRequest(t, "http://"+addr+"/")
	req.Body = nil
	if res := testClient(t, time.Second).Send(context.Background(), req, time.Now()); !res.Success() {
		t.Fatalf("Send = %+v", res)
	}
	if head := <-got; !strings.Contains(head, "\r\nContent-Length: 0\r\n") || strings.Contains(strings.ToLower(head), "transfer-encoding") {
		t.Fatalf("request head:\n%s\nwant Content-Length: 0 and no Transfer-Encoding", head)
	}
}

// An answer whose body ends before its Content-Length (or its last chunk)
// is not complete: the attempt fails, as one whose body stalls does, and
// its connection is not kept.
func TestWebhookSendTruncatedBody(t *testing.T) {
	for _, tt := range []struct{ name, answer string }{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial"},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7\r\npartial\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := answering(t, func(c net.Conn, _ string) bool {
				io.WriteString(c, tt.answer)
				return false
			})
			res := testClient(t, time.Second).Send(context.Background(), testRequest(t, "http://"+addr+"/"), time.Now())
			if res.Success() || res.Err == nil || !strings.Contains(res.Err.Error(), "connection closed before a complete answer") {
				t.Fatalf("Send = %+v, want a failed attempt", res)
			}
			if res.StatusCode != 200 || res.Excerpt != "partial" {
				t.Fatalf("Send = %+v, want the status and what came of the body", res)
			}
		})
	}
}

// redirectDials has every connection of c, which has not sent yet, dialled
// to addr on loopback whatever address the Transport asks for, and reports
// the addresses asked for.
func redirectDials(c *Client, addr string) <-chan string {
	asked := make(chan string, 10)
	var d net.Dialer
	c.transport.DialContext = func(ctx context.Context, network, a string) (net.Conn, error) {
		select {
		case asked <- a:
		default:
		}
		return d.DialContext(ctx, network, addr)
	}
	return asked
}

// An empty port is the scheme's: the host is dialled on port 80, and the
// Host header is sent without the colon.
func TestWebhookSendHostEmptyPort(t *testing.T) {
	got := make(chan string, 1)
	addr := answering(t, func(c net.Conn, head string) bool {
		got <- head
		io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		return false
	})
	c := testClient(t, time.Second)
	asked := redirectDials(c, addr)
	if res := c.Send(context.Background(), testRequest(t, "http://partner.example.com:/hook"), time.Now()); !res.Success() {
		t.Fatalf("Send = %+v", res)
	}
	if a := <-asked; a != "partner.example.com:80" {
		t.Fatalf("dialled %q, want partner.example.com:80", a)
	}
	if head := <-got; !strings.Contains(head, "\r\nHost: partner.example.com\r\n") {
		t.Fatalf("request head:\n%s\nwant Host: partner.example.com", head)
	}
}

// A host name outside ASCII (IDN) is dialled, named in TLS and checked
// against the certificate by its ASCII (punycode) form: the resolver and
// the certificate know no other.
func TestWebhookSendIDNHost(t *testing.T) {
	sni := make(chan string, 1)
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.TLS = &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		sni <- h.ServerName
		return nil, nil
	}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	srv.StartTLS()
	defer srv.Close()
	c := trusting(testClient(t, 2*time.Second), srv)
	asked := redirectDials(c, srv.Listener.Addr().String())
	res := c.Send(context.Background(), testRequest(t, "https://bücher.example/hook"), time.Now())
	// The test certificate is for example.com and 127.0.0.1.
	if res.Err == nil || !strings.Contains(res.Err.Error(), "TLS certificate not accepted") || !strings.Contains(res.Err.Error(), "xn--bcher-kva.example") {
		t.Fatalf("Send = %+v, want the certificate refused for xn--bcher-kva.example", res)
	}
	if a, name := <-asked, <-sni; a != "xn--bcher-kva.example:443" || name != "xn--bcher-kva.example" {
		t.Fatalf("dialled %q with server name %q, want the punycode name", a, name)
	}
	// A name that has no ASCII form is refused before anything is sent.
	res = c.Send(context.Background(), testRequest(t, "https://\u0300a.example/hook"), time.Now())
	if res.Err == nil || !strings.Contains(res.Err.Error(), "not a valid international domain name") {
		t.Fatalf("Send to an invalid IDN = %+v, want it refused", res)
	}
}

// A receiver that answers before it has read the whole request (413 for a
// body too large), while the body is still being sent. When it then reads
// the rest, as net/http's server does, its answer is the attempt's. When it
// closes at once instead, the body cannot be written to its end; the
// Transport then reports the answer or the broken connection, whichever it
// sees first, and the attempt ends either way, at once.
func TestWebhookSendEarlyAnswer(t *testing.T) {
	for _, tt := range []struct {
		name         string
		readsTheRest bool
	}{{"then reads the rest", true}, {"then closes", false}} {
		t.Run(tt.name, func(t *testing.T) {
			addr := rawServer(t, func(c net.Conn) {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					if l, err := br.ReadString('\n'); err != nil || l == "\r\n" {
						break
					}
				}
				io.WriteString(c, "HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
				if tt.readsTheRest {
					io.Copy(io.Discard, br)
				}
			})
			req := testRequest(t, "http://"+addr+"/")
			req.Body = make([]byte, 32<<20) // more than the sockets' buffers hold
			res := testClient(t, 5*time.Second).Send(context.Background(), req, time.Now())
			if tt.readsTheRest && (res.StatusCode != 413 || res.Err != nil) {
				t.Fatalf("Send = %+v, want the receiver's 413", res)
			}
			if !tt.readsTheRest && res.StatusCode != 413 && (res.Err == nil || !strings.HasPrefix(res.Err.Error(), "connection ")) {
				t.Fatalf("Send = %+v, want the receiver's 413 or the connection's end", res)
			}
			if res.Duration > 2*time.Second {
				t.Fatalf("Send took %v, want it to end when the receiver answered", res.Duration)
			}
		})
	}
}

// An IPv6 literal host is dialled by its address and sent as net/http
// sends it: the Host header with its brackets and port. (Checked in the
// review; it holds.)
func TestWebhookSendIPv6Host(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skip("no IPv6 loopback:", err)
	}
	ln.Close()
	got := make(chan string, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Host + " " + r.RequestURI
	}))
	srv.Listener, err = net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	url := fmt.Sprintf("http://[::1]:%d/a%%2Fb?x=1", port)
	if res := testClient(t, time.Second).Send(context.Background(), testRequest(t, url), time.Now()); !res.Success() {
		t.Fatalf("Send = %+v", res)
	}
	if h, want := <-got, fmt.Sprintf("[::1]:%d /a%%2Fb?x=1", port); h != want {
		t.Fatalf("the receiver saw %q, want %q", h, want)
	}
}
