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
	"sync"
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
	c := testClient(t, 2*time.Second)
	// A certificate no one vouches for is refused.
	res := c.Send(context.Background(), testRequest(t, srv.URL), time.Now())
	if res.Err == nil || !strings.Contains(res.Err.Error(), "TLS certificate not accepted") {
		t.Fatalf("Send to an unknown certificate = %+v, want it refused", res)
	}
	c.tlsConfig.RootCAs = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
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

// The pool hands out the most recently used connection of a target and
// never one idle for maxIdle or longer.
func TestWebhookPoolIdle(t *testing.T) {
	var closed []string
	var mu sync.Mutex
	mk := func(key, name string) *conn {
		return &conn{key: key, nc: closeNoter{name: name, closed: &closed, mu: &mu}}
	}
	var p pool
	defer p.closeAll()
	t0 := time.Now()
	p.put(mk("a", "a1"), t0)
	p.put(mk("a", "a2"), t0.Add(time.Second))
	p.put(mk("b", "b1"), t0)
	if c := p.get("a", t0.Add(2*time.Second)); c == nil || c.nc.(closeNoter).name != "a2" {
		t.Fatalf("get = %v, want a2, the most recently used", c)
	}
	if c := p.get("a", t0.Add(maxIdle)); c != nil || len(closed) != 1 || closed[0] != "a1" {
		t.Fatalf("get after maxIdle = %v, closed %v; want nothing, a1 closed", c, closed)
	}
	p.closeAll()
	if len(closed) != 2 || closed[1] != "b1" || p.count != 0 {
		t.Fatalf("closeAll: closed %v, %d kept", closed, p.count)
	}
}

// Connections left idle are closed when their time is up, though no
// attempt comes any more; the pool's timer stops once none is kept.
func TestWebhookPoolClosesIdle(t *testing.T) {
	var closed []string
	var mu sync.Mutex
	p := pool{idleFor: 30 * time.Millisecond}
	defer p.closeAll()
	p.put(&conn{key: "a", nc: closeNoter{name: "a1", closed: &closed, mu: &mu}}, time.Now())
	p.put(&conn{key: "b", nc: closeNoter{name: "b1", closed: &closed, mu: &mu}}, time.Now().Add(40*time.Millisecond))
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.mu.Lock()
		count, running := p.count, p.timer != nil
		p.mu.Unlock()
		mu.Lock()
		n := len(closed)
		mu.Unlock()
		if count == 0 && n == 2 && !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 5s: %d kept, closed %v, timer running %v; want both closed, the timer stopped", count, closed, running)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type closeNoter struct {
	net.Conn
	name   string
	closed *[]string
	mu     *sync.Mutex
}

func (c closeNoter) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	*c.closed = append(*c.closed, c.name)
	return nil
}

// BenchmarkSend compares an attempt of Client.Send with a bare net/http
// Transport posting the same body with the same headers to the same
// receiver, from 32 goroutines (worker.DefaultPerEndpoint) each, in the
// same run; the receiver runs in this process and is part of both costs:
//
//	go test ./webhook -run '^$' -bench Send -benchtime 100000x
func BenchmarkSend(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(srv.Close)
	const workers = 32
	parallel := func(b *testing.B, f func() error) {
		var n atomic.Int64
		var wg sync.WaitGroup
		b.ResetTimer()
		for range workers {
			wg.Go(func() {
				for n.Add(1) <= int64(b.N) {
					if err := f(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	req := testRequest(b, srv.URL+"/hook")
	var bare, ours float64
	b.Run("bare", func(b *testing.B) {
		tr := &http.Transport{MaxIdleConnsPerHost: 128}
		defer tr.CloseIdleConnections()
		h := http.Header{}
		testClient(b, time.Second).setHeaders(h, req, time.Now())
		parallel(b, func() error {
			r, _ := http.NewRequest(http.MethodPost, req.URL, strings.NewReader(string(req.Body)))
			r.Header = h.Clone()
			resp, err := tr.RoundTrip(r)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return nil
		})
		bare = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("client", func(b *testing.B) {
		c := testClient(b, time.Second)
		parallel(b, func() error {
			if res := c.Send(context.Background(), req, time.Now()); !res.Success() {
				return res.Err
			}
			return nil
		})
		ours = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	if bare > 0 && ours > 0 {
		b.Logf("per request, receiver included: bare net/http Transport %.1f µs, Client.Send %.1f µs; Client.Send takes %.2f of the bare time",
			bare/1e3, ours/1e3, ours/bare)
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
