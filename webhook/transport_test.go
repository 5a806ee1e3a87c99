package webhook

import (
	"context"
	"crypto/tls"
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

// countingServer is a test server that counts the connections it accepted.
func countingServer(t *testing.T, tlsServer bool, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	if tlsServer {
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, &conns
}

// trusting has c accept the certificates of srv, an httptest TLS server;
// it is called before c's first attempt.
func trusting(c *Client, srv *httptest.Server) *Client {
	c.transport.TLSClientConfig.RootCAs = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	return c
}

// An https endpoint gets the signed request over TLS 1.2 or later, with
// its certificate checked against its name, and the connection is kept.
func TestWebhookSendTLS(t *testing.T) {
	type seen struct {
		version uint16
		id      string
		body    string
	}
	got := make(chan seen, 10)
	srv, conns := countingServer(t, true, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.TLS.Version, r.Header.Get(HeaderID), string(body)}
		io.WriteString(w, "ok")
	})
	// A certificate no one vouches for is refused.
	res := testClient(t, 2*time.Second).Send(context.Background(), testRequest(t, srv.URL), time.Now())
	if res.Err == nil || !strings.Contains(res.Err.Error(), "TLS certificate not accepted") {
		t.Fatalf("Send to an unknown certificate = %+v, want it refused", res)
	}
	c := trusting(testClient(t, 2*time.Second), srv)
	for range 3 {
		res := c.Send(context.Background(), testRequest(t, srv.URL), time.Now())
		if !res.Success() || res.Excerpt != "ok" {
			t.Fatalf("Send over TLS = %+v", res)
		}
		s := <-got
		if s.version < tls.VersionTLS12 || s.id != eventID || s.body != eventBody {
			t.Fatalf("the receiver saw TLS version %x, webhook-id %q, body %q", s.version, s.id, s.body)
		}
	}
	// The first connection failed its handshake; the three attempts share one.
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (the refused one, then one for the three attempts)", n)
	}
	// The name in the URL is the one checked: the test certificate is for
	// example.com and 127.0.0.1, not for localhost.
	res = c.Send(context.Background(), testRequest(t, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)), time.Now())
	if res.Err == nil || !strings.Contains(res.Err.Error(), "TLS certificate not accepted") {
		t.Fatalf("Send to localhost with a certificate for 127.0.0.1 = %+v, want it refused", res)
	}
}

// An https endpoint that offers HTTP/2 gets the attempts over it, signed
// as over HTTP/1.1, one after another on one connection.
func TestWebhookSendHTTP2(t *testing.T) {
	got := make(chan *http.Request, 10)
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		got <- r
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, "over h2")
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	c := trusting(testClient(t, 2*time.Second), srv)
	for i := range 3 {
		now := time.Now()
		if res := c.Send(context.Background(), testRequest(t, srv.URL), now); res.StatusCode != 202 || res.Excerpt != "over h2" {
			t.Fatalf("attempt %d: %+v, want a 202", i, res)
		}
		r := <-got
		body, _ := io.ReadAll(r.Body)
		if r.ProtoMajor != 2 || string(body) != eventBody {
			t.Fatalf("the receiver saw %s with body %q, want HTTP/2 and the event", r.Proto, body)
		}
		if err := Verify([][]byte{mustKey(t, specSecret)}, r.Header, body, now, 5*time.Minute); err != nil {
			t.Fatalf("Verify over HTTP/2: %v", err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 3 attempts over HTTP/2, want 1", n)
	}
}

// A receiver that answers "Connection: close" gets a new connection for
// the next attempt, which succeeds.
func TestWebhookSendConnectionClose(t *testing.T) {
	srv, conns := countingServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusNoContent)
	})
	c := testClient(t, time.Second)
	for i := range 3 {
		if res := c.Send(context.Background(), testRequest(t, srv.URL), time.Now()); !res.Success() {
			t.Fatalf("attempt %d: %+v", i, res)
		}
	}
	if n := conns.Load(); n != 3 {
		t.Fatalf("%d connections for 3 attempts answered with Connection: close, want 3", n)
	}
}

// A response head past 64 KiB fails the attempt rather than be read
// without end; the receiver's next answer is read on a new connection.
func TestWebhookSendHeadTooLarge(t *testing.T) {
	var n atomic.Int32
	srv, conns := countingServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			for i := range 20 {
				w.Header().Set("X-Pad-"+string(rune('a'+i)), strings.Repeat("p", 4<<10))
			}
		}
		w.WriteHeader(http.StatusOK)
	})
	c := testClient(t, time.Second)
	res := c.Send(context.Background(), testRequest(t, srv.URL), time.Now())
	if res.Err == nil || !strings.Contains(res.Err.Error(), "larger than 64 KiB") {
		t.Fatalf("Send with an 80 KiB head = %+v, want it refused", res)
	}
	if res := c.Send(context.Background(), testRequest(t, srv.URL), time.Now()); !res.Success() {
		t.Fatalf("the attempt after: %+v", res)
	}
	if got := conns.Load(); got != 2 {
		t.Fatalf("%d connections, want 2", got)
	}
}

// An api_key that is no valid header value (stored before the rule that
// refuses it) is not sent: the attempt fails and names the field, never
// the key.
func TestWebhookSendInvalidAPIKey(t *testing.T) {
	var hits atomic.Int32
	srv, _ := countingServer(t, false, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	req := testRequest(t, srv.URL)
	req.APIKey = "secret-key\r\nx-injected: 1"
	res := testClient(t, time.Second).Send(context.Background(), req, time.Now())
	if res.Err == nil || !strings.Contains(res.Err.Error(), "invalid api_key") || strings.Contains(res.Err.Error(), "secret-key") {
		t.Fatalf("Send = %+v, want an invalid api_key error without the key", res)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the receiver got %d requests", n)
	}
}
