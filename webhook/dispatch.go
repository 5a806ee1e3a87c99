package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"storelink"
)

// UserAgent identifies the sender to partners' logs and firewalls.
const UserAgent = "storelink-webhooks/1"

const (
	// excerptSize is how much of a response is kept for the attempt's
	// record: enough for an error page's message.
	excerptSize = 4 << 10
	// drainSize is how much of a response is read at most; reading a short
	// body to its end lets the connection be reused, and no more is read
	// from an endpoint that answers with a large body.
	drainSize = 64 << 10
	// maxRetryAfter caps a Retry-After so that a wrong header cannot park a
	// delivery for years; it is longer than any step of the default schedule.
	maxRetryAfter = 24 * time.Hour
	// defaultTimeout is CONTRACT's --webhook-timeout default.
	defaultTimeout = 10 * time.Second
)

// Request is one attempt to deliver one event to one endpoint.
type Request struct {
	// URL is the endpoint's URL; ${eventId} in it is replaced by EventID.
	URL string
	// EventID is the event's id, sent as webhook-id.
	EventID string
	// Body is the event JSON, sent and signed byte for byte.
	Body []byte
	// Keys are the signing keys, current first; two during a rotation.
	Keys [][]byte
	// APIKey is sent as x-api-key when not empty.
	APIKey string
}

// Result is what one attempt came to. Either Err is set (nothing usable was
// answered) or StatusCode is.
type Result struct {
	StatusCode int
	// Err is a transport failure (refused, timeout, address not allowed,
	// TLS). Its text is short, names no URL and holds no secret, so it can
	// be recorded and shown to the partner as it is.
	Err      error
	Duration time.Duration
	// RetryAfter is the wait a 429 or 503 asked for, 0 when none.
	RetryAfter time.Duration
	// Excerpt is the start of the response body, valid UTF-8.
	Excerpt string
}

// Success tells whether the endpoint took the event: 2xx in time.
func (r Result) Success() bool { return r.Err == nil && r.StatusCode >= 200 && r.StatusCode < 300 }

// Gone tells whether the endpoint answered 410: it no longer wants events
// and is to be disabled rather than retried.
func (r Result) Gone() bool { return r.Err == nil && r.StatusCode == http.StatusGone }

// Retryable tells whether the attempt failed in a way that is tried again:
// anything but success and 410, including 3xx and 4xx (CONTRACT 6.2).
func (r Result) Retryable() bool { return !r.Success() && !r.Gone() }

// Client sends webhooks. It is safe for concurrent use and keeps
// connections alive between attempts, since one partner endpoint receives
// many events in a row.
//
// It sends with fasthttp rather than net/http: an attempt makes no
// goroutines and no per-request allocations there, and costs about half
// the CPU (13 against 23 µs on this machine, with a net/http receiver),
// which on a busy server is half of what the delivery of an event costs
// besides its bookkeeping. Each request is sent as it is: a redirect is a
// failed attempt with its 3xx, since following it would send a signed
// event to a URL the partner never registered. Webhooks go over HTTP/1.1.
type Client struct {
	http    *fasthttp.Client
	timeout time.Duration
	// checked holds parseURL's verdict on each endpoint URL sent to (it
	// depends on the URL alone), and signers the HMACs of each key: an
	// endpoint receives many events in a row.
	checked memo[string, sendable]
	signers signers
}

// maxMemo bounds each of a Client's memos: past it, the rest is worked out
// each time rather than kept.
const maxMemo = 4096

// memo is a bounded map safe for concurrent use.
type memo[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]V
}

func (m *memo[K, V]) get(k K, compute func(K) V) V {
	m.mu.RLock()
	v, ok := m.m[k]
	m.mu.RUnlock()
	if ok {
		return v
	}
	v = compute(k)
	m.mu.Lock()
	if m.m == nil {
		m.m = map[K]V{}
	}
	if len(m.m) < maxMemo {
		m.m[k] = v
	}
	m.mu.Unlock()
	return v
}

// NewClient returns a client whose every attempt, from dialling to reading
// the response, takes at most timeout (10s when not positive). Unless
// allowPrivate, it refuses at dial time every address of the service's own
// networks: loopback, private, link-local, metadata and the like.
func NewClient(timeout time.Duration, allowPrivate bool) *Client {
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	// No proxy from the environment: the guard must see the endpoint's
	// address, not a proxy's, and events must not leave by a path the
	// operator did not configure for them.
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		dialer.Control = dialGuard
	}
	hc := &fasthttp.Client{
		Name: UserAgent,
		// timeout is what is left of the attempt's. The connection's
		// deadline bounds the TLS handshake, which fasthttp makes while it
		// writes the request, with no read deadline of its own; each
		// request sets its own deadlines after that.
		DialTimeout: func(addr string, timeout time.Duration) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			conn, err := dialer.DialContext(ctx, "tcp", addr)
			if err == nil {
				deadline, _ := ctx.Deadline()
				err = conn.SetDeadline(deadline)
				if err != nil {
					conn.Close()
				}
			}
			return conn, err
		},
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12},
		// At least as many as the deliverer may have attempts in flight to
		// one endpoint (worker.Deliverer's PerEndpoint, at most its 128
		// Workers), so that the next attempts reuse the connections rather
		// than dial again; past it, an attempt waits for one within its
		// timeout.
		MaxConnsPerHost:    256,
		MaxConnWaitTimeout: timeout,
		// Shorter than the idle timeouts receivers commonly keep (Node's
		// 5s, nginx's 75s): fasthttp does not see a connection the other
		// side closed while it was idle until it writes on it.
		MaxIdleConnDuration: 4 * time.Second,
		// The response's head must fit in the read buffer (one per
		// request in flight, from a pool).
		ReadBufferSize: maxResponseHead,
		// The body is read by readBounded, as it comes, not whole into
		// memory first (a Content-Length is no promise).
		StreamResponseBody: true,
		// The URL goes as the partner registered it (escaped by send).
		DisablePathNormalizing: true,
		// A POST is sent again, once, only when a kept-alive connection
		// turns out to have been closed before an answer began (as
		// net/http does): receivers deduplicate by webhook-id.
		RetryIfErr: func(_ *fasthttp.Request, attempts int, err error) (bool, bool) {
			return false, attempts < 2 && (errors.Is(err, io.EOF) || errors.Is(err, fasthttp.ErrConnectionClosed) ||
				errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE))
		},
	}
	return &Client{timeout: timeout, http: hc}
}

// maxResponseHead bounds the status line and headers of an answer (large
// cookies and content security policies from a WAF or CDN fit).
const maxResponseHead = 64 << 10

// CloseIdleConnections closes the kept-alive connections, at shutdown.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// Send makes one attempt: POST the body, signed with every key at now, to
// the URL with ${eventId} replaced, and read a bounded part of the answer.
// It never returns a Go error: every failure is in the Result.
func (c *Client) Send(ctx context.Context, r Request, now time.Time) Result {
	start := time.Now()
	res := c.send(ctx, r, now)
	res.Duration = time.Since(start)
	return res
}

func (c *Client) send(ctx context.Context, r Request, now time.Time) Result {
	var err error
	target := r.URL
	var checked sendable
	if strings.Contains(target, "${eventId}") {
		target = strings.ReplaceAll(target, "${eventId}", url.PathEscape(r.EventID))
		checked = checkURL(target) // a URL per event: not kept
	} else {
		checked = c.checked.get(target, checkURL)
	}
	if checked.err != nil {
		return Result{Err: checked.err}
	}
	target = checked.uri
	if err := ctx.Err(); err != nil {
		return Result{Err: c.attemptError(ctx, err)}
	}
	// The attempt ends at the timeout, or at ctx's deadline if sooner; a
	// ctx cancelled without a deadline is seen once the attempt ends (the
	// deliverer's attempts are never cancelled: a stop lets them finish).
	deadline, byCtx := time.Now().Add(c.timeout), false
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline, byCtx = d, true
	}
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	req.Header.DisableNormalizing()
	req.SetRequestURI(target)
	req.Header.SetMethod(fasthttp.MethodPost)
	c.setHeaders(&req.Header, r, now)
	req.SetBodyRaw(r.Body)
	if err := c.http.DoDeadline(req, resp, deadline); err != nil {
		if byCtx && !time.Now().Before(deadline) {
			// ctx's deadline ended it, whether or not ctx has noticed yet.
			return Result{Err: &attemptErr{msg: "canceled", cause: errors.Join(context.DeadlineExceeded, err)}}
		}
		return Result{Err: c.attemptError(ctx, err)}
	}
	defer resp.CloseBodyStream()
	res := Result{StatusCode: resp.StatusCode()}
	if res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusServiceUnavailable {
		res.RetryAfter = parseRetryAfter(string(resp.Header.Peek("Retry-After")), now)
	}
	excerpt, whole, err := readBounded(resp.BodyStream())
	if !whole || err != nil {
		// The rest of the answer is still on the connection: it is
		// closed rather than kept for the next attempt.
		resp.SetConnectionClose()
	}
	res.Excerpt = excerpt
	if err != nil {
		// The status came but the body did not, in time: the answer is not
		// complete, so the attempt has failed. The receiver deduplicates.
		res.Err = fmt.Errorf("reading the response: %w", c.attemptError(ctx, err))
	}
	return res
}

// sendable is a URL as it goes on the wire, its path escaped as net/http
// escapes it (a partner may register /café), or why it cannot be sent to.
type sendable struct {
	uri string
	err error
}

// checkURL is parseURL's verdict on a URL, as the error of an attempt.
func checkURL(target string) sendable {
	u, err := parseURL(target)
	if err != nil {
		return sendable{err: errors.New("invalid URL: " + strings.TrimPrefix(storelink.ErrorMessage(err), "url: "))}
	}
	u.Fragment, u.RawFragment = "", ""
	return sendable{uri: u.String()}
}

// setHeaders writes the headers of CONTRACT 6.1 (the client adds the
// User-Agent). The Standard Webhooks names go on the wire exactly as the
// specification spells them, in lower case.
func (c *Client) setHeaders(h *fasthttp.RequestHeader, r Request, now time.Time) {
	h.SetContentType("application/json")
	ts := now.Unix()
	var buf [20]byte
	h.Set(HeaderID, r.EventID)
	h.SetBytesV(HeaderTimestamp, strconv.AppendInt(buf[:0], ts, 10))
	h.Set(HeaderSignature, c.signers.header(r.Keys, r.EventID, ts, r.Body))
	if r.APIKey != "" {
		h.Set("x-api-key", r.APIKey)
	}
}

// excerptBuffers holds the buffers readBounded reads the start of a body
// into.
var excerptBuffers = sync.Pool{New: func() any { return new([excerptSize]byte) }}

// readBounded keeps the start of a body and reads at most drainSize of it;
// whole tells whether it read the body to its end.
func readBounded(body io.Reader) (string, bool, error) {
	if body == nil {
		return "", true, nil
	}
	buf := excerptBuffers.Get().(*[excerptSize]byte)
	defer excerptBuffers.Put(buf)
	n, err := io.ReadFull(body, buf[:])
	whole := false
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		err, whole = nil, true
	} else if err == nil {
		var more int64
		more, err = io.Copy(io.Discard, io.LimitReader(body, drainSize-excerptSize+1))
		whole = err == nil && more <= drainSize-excerptSize
	}
	return excerpt(buf[:n], n == excerptSize), whole, err
}

func excerpt(b []byte, cut bool) string {
	if cut {
		// Drop the start of a character that the cut left incomplete.
		for range utf8.UTFMax - 1 {
			if r, size := utf8.DecodeLastRune(b); len(b) == 0 || r != utf8.RuneError || size != 1 {
				break
			}
			b = b[:len(b)-1]
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// parseRetryAfter reads delay-seconds or an HTTP date (RFC 9110 10.2.3).
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseUint(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		d = maxRetryAfter
		if secs < uint64(maxRetryAfter/time.Second) {
			d = time.Duration(secs) * time.Second
		}
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), maxRetryAfter)
}

// attemptError turns a transport error into a short text for the record.
// The *url.Error around it names the URL, which may hold a token, so only
// the cause is described; the cause stays reachable with errors.Is and As.
func (c *Client) attemptError(parent context.Context, err error) error {
	var (
		blocked *blockedError
		dnsErr  *net.DNSError
		certErr *tls.CertificateVerificationError
		recErr  tls.RecordHeaderError
	)
	var msg string
	switch {
	case errors.As(err, &blocked):
		msg = blocked.Error()
	case parent.Err() != nil:
		msg = "canceled"
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err) || errors.Is(err, fasthttp.ErrNoFreeConns):
		msg = "timeout after " + c.timeout.String()
		if !errors.Is(err, context.DeadlineExceeded) {
			// The attempt's deadline passed, as a context's would.
			err = errors.Join(context.DeadlineExceeded, err)
		}
	case errors.Is(err, syscall.ECONNREFUSED):
		msg = "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		msg = "connection reset"
	case errors.As(err, &dnsErr):
		msg = "cannot resolve host " + dnsErr.Name
		if dnsErr.IsNotFound {
			msg = "host " + dnsErr.Name + " not found"
		}
	case errors.As(err, &certErr):
		msg = "TLS certificate not accepted: " + certErr.Err.Error()
	case errors.As(err, &recErr):
		msg = "TLS handshake failed: the endpoint does not speak TLS"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, fasthttp.ErrConnectionClosed):
		msg = "connection closed before a complete answer"
	default:
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		msg = err.Error()
		if len(msg) > 200 {
			msg = msg[:200]
		}
	}
	return &attemptErr{msg: msg, cause: err}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// attemptErr shows its short text and keeps the cause for errors.Is.
type attemptErr struct {
	msg   string
	cause error
}

func (e *attemptErr) Error() string { return e.msg }
func (e *attemptErr) Unwrap() error { return e.cause }
