package webhook

import (
	"bytes"
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
	// defaultTimeout is serve's --webhook-timeout default.
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
	// Test marks a test send (HeaderTest): an example event that is no
	// order's, sent to check the endpoint.
	Test bool
}

// HeaderTest is the header that marks a test send, "true": its event is an
// example, of no real order.
const HeaderTest = "webhook-test"

// Target is the URL an attempt of the event goes to: the endpoint's URL
// with every ${eventId} replaced by the event id.
func Target(endpointURL, eventID string) string {
	if !strings.Contains(endpointURL, "${eventId}") {
		return endpointURL
	}
	return strings.ReplaceAll(endpointURL, "${eventId}", url.PathEscape(eventID))
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

// Client sends webhooks through net/http's Transport (see newTransport).
// It is safe for concurrent use and keeps connections alive between
// attempts, since one partner endpoint receives many events in a row. It
// sends each request as it is, with the Transport's RoundTrip, which
// follows no redirect: a redirect is a failed attempt with its 3xx, since
// following it would send a signed event to a URL the partner never
// registered. (An http.Client would parse the Location of a 3xx before
// asking whether to follow it, and fail an attempt whose Location is no
// URL instead of recording its status.)
type Client struct {
	timeout   time.Duration
	transport *http.Transport
	// verdicts holds each endpoint URL's verdict (it depends on the URL
	// alone), and signers the HMACs of each key: an endpoint receives many
	// events in a row.
	verdicts memo[string, error]
	signers  signers
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
	return &Client{timeout: timeout, transport: newTransport(timeout, allowPrivate)}
}

// CloseIdleConnections closes the kept-alive connections, at shutdown.
func (c *Client) CloseIdleConnections() { c.transport.CloseIdleConnections() }

// Send makes one attempt: POST the body, signed with every key at now, to
// the URL with ${eventId} replaced, and read a bounded part of the answer.
// It never returns a Go error: every failure is in the Result.
func (c *Client) Send(ctx context.Context, r Request, now time.Time) Result {
	start := time.Now()
	res := c.send(ctx, r, now)
	res.Duration = time.Since(start)
	return res
}

func (c *Client) send(parent context.Context, r Request, now time.Time) Result {
	target := Target(r.URL, r.EventID)
	var verdict error
	if target != r.URL {
		verdict = checkTarget(target) // a URL per event: not kept
	} else {
		verdict = c.verdicts.get(target, checkTarget)
	}
	if verdict != nil {
		return Result{Err: verdict}
	}
	if r.APIKey != "" && ValidateAPIKey(r.APIKey) != nil {
		// Refused at registration; one registered before that rule is not
		// sent as it would go out.
		return Result{Err: errors.New("invalid api_key: not a valid header value")}
	}
	if err := parent.Err(); err != nil {
		// Nothing is sent for an attempt canceled already.
		return Result{Err: c.attemptError(parent, err)}
	}
	// One deadline for the whole attempt: dial, TLS handshake, request,
	// head and body of the answer.
	ctx, cancel := context.WithTimeout(parent, c.timeout)
	defer cancel()
	// A *bytes.Reader gives the request its Content-Length (0 for an empty
	// body, never chunked) and a GetBody, with which the Transport sends it
	// again on a new connection when a kept-alive one turns out closed.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(r.Body))
	if err != nil {
		return Result{Err: errors.New("invalid URL")}
	}
	c.setHeaders(req.Header, r, now)
	resp, err := c.transport.RoundTrip(req)
	if err != nil {
		return Result{Err: c.attemptError(parent, err)}
	}
	defer resp.Body.Close() // a body not read to its end closes its connection
	res := Result{StatusCode: resp.StatusCode}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return res // not HTTP any more
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		res.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), now)
	}
	excerpt, err := readBounded(resp.Body)
	res.Excerpt = excerpt
	if err != nil {
		// The status came but the body did not, in time: the answer is not
		// complete, so the attempt has failed. The receiver deduplicates.
		res.Err = fmt.Errorf("reading the response: %w", c.attemptError(parent, err))
	}
	return res
}

// The values of the headers that are the same on every request.
var (
	contentTypeJSON = []string{"application/json"}
	userAgent       = []string{UserAgent}
	testValue       = []string{"true"}
)

// setHeaders writes the headers of a delivery. The Standard Webhooks
// names go into the map as written, lower case, so that they go on the wire
// exactly as the specification spells them.
func (c *Client) setHeaders(h http.Header, r Request, now time.Time) {
	// The Transport only reads the headers: the shared values are safe.
	h["Content-Type"] = contentTypeJSON
	h["User-Agent"] = userAgent
	// Receivers deduplicate by webhook-id, so a request may go twice. An
	// Idempotency-Key without a value tells the Transport so, and is not
	// sent: a request on a kept-alive connection that the receiver closed
	// before answering goes once more on a new connection.
	h["Idempotency-Key"] = nil
	ts := now.Unix()
	values := []string{r.EventID, strconv.FormatInt(ts, 10), c.signers.header(r.Keys, r.EventID, ts, r.Body), r.APIKey}
	h[HeaderID] = values[0:1:1]
	h[HeaderTimestamp] = values[1:2:2]
	h[HeaderSignature] = values[2:3:3]
	if r.APIKey != "" {
		h["x-api-key"] = values[3:4:4]
	}
	if r.Test {
		h[HeaderTest] = testValue
	}
}

// excerptBuffers holds the buffers readBounded reads the start of a body
// into.
var excerptBuffers = sync.Pool{New: func() any { return new([excerptSize]byte) }}

// readBounded keeps the start of a body and reads at most drainSize of
// it. A body read to its end lets the Transport keep the connection; one
// longer than drainSize is left unread, and the connection is closed with
// it.
func readBounded(body io.Reader) (text string, err error) {
	buf := excerptBuffers.Get().(*[excerptSize]byte)
	defer excerptBuffers.Put(buf)
	// Not io.ReadFull, which turns the body's io.ErrUnexpectedEOF (the
	// connection closed before the Content-Length or the last chunk) into
	// the io.ErrUnexpectedEOF of a short body read to its end.
	n := 0
	for n < len(buf) && err == nil {
		var m int
		m, err = body.Read(buf[n:])
		n += m
	}
	if err == nil {
		// One byte more than is read at most: a body of drainSize is read
		// to its end.
		_, err = io.CopyN(io.Discard, body, drainSize-excerptSize+1)
	}
	if err == io.EOF {
		err = nil // the end of the body, or longer than drainSize
	}
	return excerpt(buf[:n], n == excerptSize), err
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
// The text never names the URL, which may hold a token: an error around it
// (*url.Error) is described by its cause. The cause stays reachable with
// errors.Is and As.
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
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		msg = "timeout after " + c.timeout.String()
		if !errors.Is(err, context.DeadlineExceeded) {
			// A timeout of the Transport's own: the attempt's, as the
			// context's is.
			err = errors.Join(context.DeadlineExceeded, err)
		}
	case strings.Contains(err.Error(), "server response headers exceeded"):
		// net/http's refusal of a head past MaxResponseHeaderBytes has no
		// type of its own.
		msg = "response head larger than 64 KiB"
	case errors.Is(err, syscall.ECONNREFUSED):
		msg = "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		msg = "connection reset"
	case errors.Is(err, syscall.EPIPE):
		msg = "connection closed by the endpoint while sending"
	case errors.As(err, &dnsErr):
		msg = "cannot resolve host " + dnsErr.Name
		if dnsErr.IsNotFound {
			msg = "host " + dnsErr.Name + " not found"
		}
	case errors.As(err, &certErr):
		msg = "TLS certificate not accepted: " + certErr.Err.Error()
	case errors.As(err, &recErr):
		msg = "TLS handshake failed: the endpoint does not speak TLS"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
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
