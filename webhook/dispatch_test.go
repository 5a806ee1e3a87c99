package webhook

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testClient is a client allowed to reach the loopback test servers.
func testClient(tb testing.TB, timeout time.Duration) *Client {
	tb.Helper()
	c := NewClient(timeout, true)
	tb.Cleanup(c.CloseIdleConnections)
	return c
}

func testRequest(tb testing.TB, url string) Request {
	tb.Helper()
	return Request{URL: url, EventID: eventID, Body: []byte(eventBody), Keys: [][]byte{mustKey(tb, specSecret)}}
}

// holdingServer starts a server whose handler may wait on release, which is
// closed when the test ends and before the server is closed, since Close
// waits for handlers.
func holdingServer(tb testing.TB, handler func(release <-chan struct{}) http.HandlerFunc) *httptest.Server {
	tb.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(handler(release))
	tb.Cleanup(srv.Close)
	tb.Cleanup(func() { close(release) })
	return srv
}

func TestWebhookSendSuccess(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, "thanks")
	}))
	defer srv.Close()
	res := testClient(t, time.Second).Send(context.Background(), testRequest(t, srv.URL), time.Now())
	if !res.Success() || res.StatusCode != 202 || res.Err != nil || res.Excerpt != "thanks" || res.Duration <= 0 {
		t.Fatalf("Send = %+v, want a 202 success", res)
	}
}

// TestWebhookSendHeaders checks a delivery's request as the receiver
// sees it, and that it verifies.
func TestWebhookSendHeaders(t *testing.T) {
	type seen struct {
		header http.Header
		body   []byte
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.Header.Clone(), body}
	}))
	defer srv.Close()
	c := testClient(t, time.Second)
	keys := [][]byte{mustKey(t, otherSecret), mustKey(t, specSecret)}
	now := time.Now()

	for _, apiKey := range []string{"partner-key-123", ""} {
		t.Run("api key "+strconv.Quote(apiKey), func(t *testing.T) {
			req := Request{URL: srv.URL, EventID: eventID, Body: []byte(eventBody), Keys: keys, APIKey: apiKey}
			if res := c.Send(context.Background(), req, now); !res.Success() {
				t.Fatalf("Send = %+v", res)
			}
			s := <-got
			want := map[string]string{
				"Content-Type":      "application/json",
				"User-Agent":        "storelink-webhooks/1",
				"Webhook-Id":        eventID,
				"Webhook-Timestamp": strconv.FormatInt(now.Unix(), 10),
				"Webhook-Signature": signatureHeader(keys, eventID, now, []byte(eventBody)),
				"X-Api-Key":         apiKey,
				"Idempotency-Key":   "",
			}
			for name, v := range want {
				if vs := s.header.Values(name); (v == "" && len(vs) != 0) || (v != "" && (len(vs) != 1 || vs[0] != v)) {
					t.Errorf("%s: %q, want %q", name, vs, v)
				}
			}
			if string(s.body) != eventBody {
				t.Errorf("body = %s, want the event byte for byte", s.body)
			}
			if n := len(strings.Fields(s.header.Get("Webhook-Signature"))); n != 2 {
				t.Errorf("%d signatures, want one per key", n)
			}
			for _, k := range keys {
				if err := Verify([][]byte{k}, s.header, s.body, time.Now(), 5*time.Minute); err != nil {
					t.Errorf("Verify: %v", err)
				}
			}
		})
	}
}

// TestWebhookSendWireHeaderNames reads the raw request: the Standard
// Webhooks and x-api-key headers go on the wire in lower case, as the
// specifications spell them.
func TestWebhookSendWireHeaderNames(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	head := make(chan string, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		var b strings.Builder
		r := bufio.NewReader(conn)
		for {
			line, err := r.ReadString('\n')
			b.WriteString(line)
			if err != nil || line == "\r\n" {
				break
			}
		}
		head <- b.String()
		io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	}()
	req := testRequest(t, "http://"+ln.Addr().String()+"/")
	req.APIKey = "k"
	if res := testClient(t, time.Second).Send(context.Background(), req, time.Now()); !res.Success() {
		t.Fatalf("Send = %+v", res)
	}
	h := <-head
	for _, name := range []string{"\r\nwebhook-id: ", "\r\nwebhook-timestamp: ", "\r\nwebhook-signature: v1,", "\r\nx-api-key: k\r\n", "\r\nContent-Type: application/json\r\n"} {
		if !strings.Contains(h, name) {
			t.Errorf("request head lacks %q:\n%s", name, h)
		}
	}
}

// TestWebhookSendTestMark: a test send carries webhook-test: true, spelled
// so on the wire, and a delivery none.
func TestWebhookSendTestMark(t *testing.T) {
	var mu sync.Mutex
	var marks []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		marks = append(marks, strings.Join(r.Header.Values("Webhook-Test"), "|"))
		mu.Unlock()
	}))
	defer srv.Close()
	c := testClient(t, time.Second)
	req := testRequest(t, srv.URL)
	for _, test := range []bool{true, false} {
		req.Test = test
		if res := c.Send(context.Background(), req, time.Now()); !res.Success() {
			t.Fatalf("Send = %+v", res)
		}
	}
	if len(marks) != 2 || marks[0] != "true" || marks[1] != "" {
		t.Fatalf("webhook-test headers = %q, want true on the test send only", marks)
	}
}

// TestTarget: ${eventId} is replaced by the event id, escaped as a path
// segment; a URL without it is left as it is.
func TestTarget(t *testing.T) {
	for _, c := range []struct{ url, id, want string }{
		{"https://p.example/hooks", eventID, "https://p.example/hooks"},
		{"https://p.example/h/${eventId}?e=${eventId}", "a/b c", "https://p.example/h/a%2Fb%20c?e=a%2Fb%20c"},
	} {
		if got := Target(c.url, c.id); got != c.want {
			t.Errorf("Target(%q, %q) = %q, want %q", c.url, c.id, got, c.want)
		}
	}
}

func TestWebhookSendStatuses(t *testing.T) {
	now := time.Date(2025, 11, 21, 8, 20, 0, 0, time.UTC)
	tests := []struct {
		name       string
		status     int
		retryAfter string
		body       string
		wantRetry  time.Duration
	}{
		{name: "500 with an error page", status: 500, body: `{"error":"boom"}`},
		{name: "404", status: 404, body: "no such hook"},
		{name: "410 gone", status: 410},
		{name: "429 seconds", status: 429, retryAfter: "120", wantRetry: 2 * time.Minute},
		{name: "503 HTTP date", status: 503, retryAfter: now.Add(90 * time.Second).Format(http.TimeFormat), wantRetry: 90 * time.Second},
		{name: "503 without Retry-After", status: 503},
		{name: "503 date in the past", status: 503, retryAfter: now.Add(-time.Hour).Format(http.TimeFormat)},
		{name: "429 unreadable", status: 429, retryAfter: "soon"},
		{name: "429 negative", status: 429, retryAfter: "-5"},
		{name: "429 absurdly long", status: 429, retryAfter: "99999999999999999999", wantRetry: 24 * time.Hour},
		{name: "500 Retry-After ignored", status: 500, retryAfter: "60"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			res := testClient(t, time.Second).Send(context.Background(), testRequest(t, srv.URL), now)
			if res.Err != nil || res.StatusCode != tt.status || res.Success() {
				t.Fatalf("Send = %+v, want a failed attempt with %d", res, tt.status)
			}
			if res.RetryAfter != tt.wantRetry {
				t.Errorf("RetryAfter = %v, want %v", res.RetryAfter, tt.wantRetry)
			}
			if res.Excerpt != tt.body {
				t.Errorf("Excerpt = %q, want %q", res.Excerpt, tt.body)
			}
		})
	}
}

// stalledBody answers 200 with the first bytes of a 100-byte body and
// holds the rest until release.
func stalledBody(release <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		<-release
	}
}

// TestWebhookSendTimeout: an endpoint that never answers, or answers the
// status and then stalls the body, fails within the timeout.
func TestWebhookSendTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, tt := range []struct {
		name    string
		handler func(release <-chan struct{}) http.HandlerFunc
	}{
		{"no answer", func(release <-chan struct{}) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				<-release
			}
		}},
		{"status, then a stalled body", stalledBody},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := holdingServer(t, tt.handler)
			res := testClient(t, timeout).Send(context.Background(), testRequest(t, srv.URL), time.Now())
			if res.Success() || res.Err == nil || !strings.Contains(res.Err.Error(), "timeout after 300ms") {
				t.Fatalf("Send = %+v, want a timeout", res)
			}
			if !errors.Is(res.Err, context.DeadlineExceeded) {
				t.Errorf("Err = %v does not wrap context.DeadlineExceeded", res.Err)
			}
			if res.Duration < timeout || res.Duration > timeout+time.Second {
				t.Errorf("Duration = %v, want about %v", res.Duration, timeout)
			}
		})
	}
}

func TestWebhookSendRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	res := testClient(t, time.Second).Send(context.Background(), testRequest(t, "http://"+addr+"/hook"), time.Now())
	if res.Success() || res.Err == nil || res.Err.Error() != "connection refused" {
		t.Fatalf("Send = %+v, want connection refused", res)
	}
}

func TestWebhookSendCanceled(t *testing.T) {
	srv := holdingServer(t, func(release <-chan struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			<-release
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	res := testClient(t, 5*time.Second).Send(ctx, testRequest(t, srv.URL), time.Now())
	if res.Err == nil || res.Err.Error() != "canceled" || res.Duration > 2*time.Second {
		t.Fatalf("Send = %+v, want canceled promptly", res)
	}
}

// TestWebhookSendRedirect: a 3xx is the attempt's answer; the signed event
// never goes to the URL the partner did not register.
func TestWebhookSendRedirect(t *testing.T) {
	var called atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { called.Add(1) }))
	defer target.Close()
	for _, status := range []int{301, 302, 307, 308} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target.URL+"/elsewhere", status)
			}))
			defer srv.Close()
			res := testClient(t, time.Second).Send(context.Background(), testRequest(t, srv.URL), time.Now())
			if res.Success() || res.StatusCode != status || res.Err != nil {
				t.Fatalf("Send = %+v, want a failed attempt with %d", res, status)
			}
		})
	}
	if n := called.Load(); n != 0 {
		t.Fatalf("redirect target called %d times", n)
	}
	// A Location that is no URL is not read either: the 3xx is the answer.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "http://%zz/")
		w.WriteHeader(http.StatusFound)
	}))
	defer srv.Close()
	if res := testClient(t, time.Second).Send(context.Background(), testRequest(t, srv.URL), time.Now()); res.StatusCode != http.StatusFound || res.Err != nil {
		t.Fatalf("Send with an unreadable Location = %+v, want a failed attempt with 302", res)
	}
}

// TestWebhookSendLargeResponse: only the start of a large answer is kept,
// cut on a character boundary, and the attempt is not slowed by the rest.
func TestWebhookSendLargeResponse(t *testing.T) {
	body := "a" + strings.Repeat("é", 1<<20) // the 4096th byte starts an é
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			io.WriteString(w, body)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, "next")
	}))
	defer srv.Close()
	c := testClient(t, 2*time.Second)
	res := c.Send(context.Background(), testRequest(t, srv.URL), time.Now())
	if !res.Success() {
		t.Fatalf("Send = %+v", res)
	}
	if want := body[:excerptSize-1]; res.Excerpt != want {
		t.Fatalf("Excerpt is %d bytes (%q…), want the first %d bytes", len(res.Excerpt), res.Excerpt[:10], len(want))
	}
	// The rest of the large answer is not read as the next one's.
	for range 3 {
		if res := c.Send(context.Background(), testRequest(t, srv.URL), time.Now()); res.StatusCode != http.StatusAccepted || res.Excerpt != "next" {
			t.Fatalf("the attempt after a large answer: %+v, want its own 202", res)
		}
	}
}

// TestWebhookSendReusesConnections: a partner receives many events; they go
// over one kept-alive connection, also after failed attempts with a body.
func TestWebhookSendReusesConnections(t *testing.T) {
	var conns atomic.Int32
	var n atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 0 {
			w.WriteHeader(500)
			io.WriteString(w, strings.Repeat("error ", 2000)) // more than the excerpt
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := testClient(t, time.Second)
	for range 10 {
		c.Send(context.Background(), testRequest(t, srv.URL), time.Now())
	}
	if got := conns.Load(); got != 1 {
		t.Fatalf("%d connections for 10 sequential attempts, want 1", got)
	}
}

func TestWebhookSendEventIDInURL(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.URL.RequestURI()
	}))
	defer srv.Close()
	c := testClient(t, time.Second)
	for _, tt := range []struct{ id, want string }{
		{eventID, "/orders/" + eventID + "/events?id=" + eventID},
		{"odd id/with ?#", "/orders/odd%20id%2Fwith%20%3F%23/events?id=odd%20id%2Fwith%20%3F%23"},
	} {
		req := testRequest(t, srv.URL+"/orders/${eventId}/events?id=${eventId}")
		req.EventID = tt.id
		if res := c.Send(context.Background(), req, time.Now()); !res.Success() {
			t.Fatalf("Send = %+v", res)
		}
		if uri := <-got; uri != tt.want {
			t.Errorf("request URI = %s, want %s", uri, tt.want)
		}
	}
}

func TestWebhookSendInvalidURL(t *testing.T) {
	c := testClient(t, time.Second)
	for _, u := range []string{"ftp://example.com/", "http://user:secret-pw@example.com/", "not a url", "http:///nohost"} {
		res := c.Send(context.Background(), testRequest(t, u), time.Now())
		if res.Err == nil || !strings.HasPrefix(res.Err.Error(), "invalid URL") || strings.Contains(res.Err.Error(), "secret-pw") {
			t.Errorf("Send(%q) = %+v, want an invalid URL error without the URL", u, res)
		}
	}
}

// TestWebhookSendConcurrent sends from many goroutines at once, as the
// delivery workers do, under the race detector when enabled.
func TestWebhookSendConcurrent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	c := testClient(t, 2*time.Second)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if res := c.Send(context.Background(), testRequest(t, srv.URL), time.Now()); !res.Success() {
				t.Errorf("Send = %+v", res)
			}
		})
	}
	wg.Wait()
}
