package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"storelink/webhook"
)

const (
	// listenTolerance is the receiver's: a message signed more than five
	// minutes away from now is refused, which bounds replays.
	listenTolerance = 5 * time.Minute
	// listenSeenIDs is how many webhook-ids are remembered for deduplication.
	listenSeenIDs = 100_000
	// listenMaxBody bounds one event; real ones are a few KB.
	listenMaxBody = 10 << 20
	// forwardTimeout is --forward-timeout's default: under serve's
	// --webhook-timeout default (10s), so that the service hears listen's
	// 502 rather than timing out itself.
	forwardTimeout = 8 * time.Second
	// forwardMaxAnswer bounds the application's answer body that listen
	// reads and passes back to the service; the rest is dropped.
	forwardMaxAnswer = 64 << 10
)

// listenConfig is the configuration of storelink listen.
type listenConfig struct {
	Addr string
	Keys [][]byte
	// ForwardTo is the partner's application that verified deliveries are
	// passed on to; empty when listen only prints them.
	ForwardTo      string
	ForwardTimeout time.Duration
}

// secretsValue collects --secret, repeated or comma-separated.
type secretsValue struct{ list *[]string }

func (v secretsValue) String() string { return "" } // never print a secret, not even a default
func (v secretsValue) Set(s string) error {
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*v.list = append(*v.list, part)
		}
	}
	return nil
}

// defaultListenAddr is where `storelink listen` listens unless told
// otherwise, and so where --demo registers its endpoint.
const defaultListenAddr = "127.0.0.1:8090"

func parseListenConfig(args []string, getenv func(string) string, stderr io.Writer) (*listenConfig, error) {
	c := &listenConfig{Addr: defaultListenAddr, ForwardTimeout: forwardTimeout}
	if v := getenv("STORELINK_LISTEN_ADDR"); v != "" {
		c.Addr = v
	}
	c.ForwardTo = getenv("STORELINK_LISTEN_FORWARD_TO")
	if v := getenv("STORELINK_LISTEN_FORWARD_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, usageError{fmt.Errorf("STORELINK_LISTEN_FORWARD_TIMEOUT: %w", err)}
		}
		c.ForwardTimeout = d
	}
	var secrets []string
	fs := flag.NewFlagSet("storelink listen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Addr, "addr", c.Addr, "listen address (STORELINK_LISTEN_ADDR)")
	fs.Var(secretsValue{&secrets}, "secret", "whsec_ signing secret; repeat or separate with commas during a rotation (STORELINK_WEBHOOK_SECRET)")
	fs.StringVar(&c.ForwardTo, "forward-to", c.ForwardTo, "pass each verified delivery on to this URL (your application) and answer with its status; 502 when it cannot be reached (STORELINK_LISTEN_FORWARD_TO)")
	fs.DurationVar(&c.ForwardTimeout, "forward-timeout", c.ForwardTimeout, "time the application at --forward-to has to answer; later is a 502 (STORELINK_LISTEN_FORWARD_TIMEOUT)")
	if err := fs.Parse(args); err != nil {
		return nil, usageError{err}
	}
	if fs.NArg() > 0 {
		return nil, usageError{fmt.Errorf("unexpected arguments: %v", fs.Args())}
	}
	if len(secrets) == 0 { // flags win over the variable
		secretsValue{&secrets}.Set(getenv("STORELINK_WEBHOOK_SECRET"))
	}
	if len(secrets) == 0 {
		return nil, usageError{errors.New("--secret (or STORELINK_WEBHOOK_SECRET) is required: the whsec_ secret of the endpoint")}
	}
	keys, err := webhook.ParseSecrets(secrets)
	if err != nil {
		return nil, usageError{fmt.Errorf("--secret: %w", err)}
	}
	c.Keys = keys
	if c.ForwardTo != "" {
		u, err := url.Parse(c.ForwardTo)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usageError{fmt.Errorf("--forward-to %q: want an http:// or https:// URL", c.ForwardTo)}
		}
	}
	if c.ForwardTimeout <= 0 {
		return nil, usageError{fmt.Errorf("--forward-timeout %s: want a positive duration", c.ForwardTimeout)}
	}
	return c, nil
}

// listen is the partner-side webhook receiver: it verifies,
// deduplicates and prints events, one JSON line each on stdout, until ctx
// ends. With --forward-to it passes each verified delivery on to the
// partner's application, prints only the events the application accepted,
// and logs the application's status and time of every delivery on stderr.
func listen(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, err := parseListenConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return err
	}
	errOut := &lockedWriter{w: stderr}
	rc := newReceiver(c.Keys, stdout, errOut, time.Now)
	if c.ForwardTo != "" {
		rc.forward = newForwarder(c.ForwardTo, c.ForwardTimeout)
		defer rc.forward.client.CloseIdleConnections()
	}
	srv := &http.Server{
		Handler:           rc,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
	}
	fmt.Fprintf(errOut, "storelink: listening on http://%s\n", ln.Addr())
	if c.ForwardTo != "" {
		fmt.Fprintf(errOut, "storelink listen: forwarding verified deliveries to %s\n", c.ForwardTo)
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// receiver is the HTTP handler of listen.
type receiver struct {
	keys    [][]byte
	now     func() time.Time
	stderr  io.Writer
	forward *forwarder // nil without --forward-to

	mu     sync.Mutex // guards seen and stdout, so lines never interleave
	seen   *idSet
	stdout io.Writer
}

func newReceiver(keys [][]byte, stdout, stderr io.Writer, now func() time.Time) *receiver {
	return &receiver{keys: keys, now: now, stderr: stderr, seen: newIDSet(listenSeenIDs), stdout: stdout}
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST a webhook here", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, listenMaxBody))
	if err != nil {
		http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	if err := webhook.Verify(rc.keys, r.Header, body, rc.now(), listenTolerance); err != nil {
		reason := "bad signature"
		switch {
		case errors.Is(err, webhook.ErrMissingHeaders):
			reason = "missing or malformed webhook headers"
		case errors.Is(err, webhook.ErrStaleTimestamp):
			reason = "timestamp outside the 5 minutes tolerance"
		}
		fmt.Fprintf(rc.stderr, "storelink listen: refused a webhook from %s: %s\n", r.RemoteAddr, reason)
		http.Error(w, reason, http.StatusUnauthorized)
		return
	}
	var line bytes.Buffer
	if err := json.Compact(&line, body); err != nil {
		fmt.Fprintf(rc.stderr, "storelink listen: webhook %q has a body that is not JSON\n", r.Header.Get(webhook.HeaderID))
		http.Error(w, "body is not JSON", http.StatusBadRequest)
		return
	}
	line.WriteByte('\n')

	id := r.Header.Get(webhook.HeaderID)
	if rc.forward != nil {
		rc.forwardDelivery(w, r, id, body, line.Bytes())
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.seen.has(id) {
		io.WriteString(w, "duplicate\n")
		return
	}
	if _, err := rc.stdout.Write(line.Bytes()); err != nil {
		// Not remembered, so that the sender's retry prints it.
		http.Error(w, "cannot write the event", http.StatusInternalServerError)
		return
	}
	rc.seen.add(id)
	io.WriteString(w, "ok\n")
}

// forwarder passes verified deliveries on to the partner's application.
type forwarder struct {
	url    string
	client *http.Client
}

func newForwarder(to string, timeout time.Duration) *forwarder {
	return &forwarder{url: to, client: &http.Client{
		Timeout:   timeout,
		Transport: http.DefaultTransport.(*http.Transport).Clone(),
		// The application's redirect is its answer, passed back as it is.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// hopHeaders are the headers of one connection, not passed on (RFC 9110
// 7.6.1).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// forwardDelivery sends a verified delivery to the application with the
// same method, body and headers, and answers the service with the
// application's status, Retry-After and (bounded) body: a 2xx settles the
// delivery, anything else makes the service retry it. An application that
// cannot be reached or does not answer in time is a 502. An event is
// printed, and remembered as seen, once the application accepted it; a
// redelivery of a seen event is answered 200 without forwarding it again.
func (rc *receiver) forwardDelivery(w http.ResponseWriter, r *http.Request, id string, body, line []byte) {
	rc.mu.Lock()
	dup := rc.seen.has(id)
	rc.mu.Unlock()
	if dup {
		fmt.Fprintf(rc.stderr, "storelink listen: %s: duplicate, already accepted by the application\n", id)
		io.WriteString(w, "duplicate\n")
		return
	}

	f := rc.forward
	req, err := http.NewRequestWithContext(r.Context(), r.Method, f.url, bytes.NewReader(body))
	if err != nil {
		http.Error(w, "cannot forward", http.StatusInternalServerError)
		return
	}
	req.Header = r.Header.Clone()
	for _, h := range hopHeaders {
		req.Header.Del(h)
	}
	req.Header.Del("Accept-Encoding") // the transport asks for gzip itself and undoes it
	start := time.Now()
	resp, err := f.client.Do(req)
	took := time.Since(start).Round(time.Millisecond)
	if err != nil {
		reason := "unreachable"
		if isTimeout(err) {
			reason = "no answer within the forward timeout"
		}
		fmt.Fprintf(rc.stderr, "storelink listen: %s -> %s: %s after %s; answered 502\n", id, f.url, reason, took)
		http.Error(w, "the application at --forward-to is "+reason, http.StatusBadGateway)
		return
	}
	answer, err := io.ReadAll(io.LimitReader(resp.Body, forwardMaxAnswer))
	resp.Body.Close()
	if err != nil {
		fmt.Fprintf(rc.stderr, "storelink listen: %s -> %s: %d, its answer broke off after %s; answered 502\n", id, f.url, resp.StatusCode, took)
		http.Error(w, "the application's answer broke off", http.StatusBadGateway)
		return
	}
	fmt.Fprintf(rc.stderr, "storelink listen: %s -> %s: %d in %s\n", id, f.url, resp.StatusCode, took)

	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		rc.mu.Lock()
		if !rc.seen.has(id) {
			if _, err := rc.stdout.Write(line); err == nil {
				rc.seen.add(id)
			}
		}
		rc.mu.Unlock()
	}
	for _, h := range []string{"Content-Type", "Retry-After"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(answer)
}

// isTimeout reports whether err is a deadline that ran out.
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &t) && t.Timeout())
}

// idSet remembers the last n ids added: enough for the retries of an
// at-least-once sender, in bounded memory.
type idSet struct {
	ids  map[string]struct{}
	ring []string
	next int
}

func newIDSet(n int) *idSet {
	return &idSet{ids: make(map[string]struct{}), ring: make([]string, n)}
}

func (s *idSet) has(id string) bool { _, ok := s.ids[id]; return ok }

func (s *idSet) add(id string) {
	if old := s.ring[s.next]; old != "" {
		delete(s.ids, old)
	}
	s.ring[s.next] = id
	s.ids[id] = struct{}{}
	s.next = (s.next + 1) % len(s.ring)
}

// lockedWriter serialises writes from concurrent handlers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
