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
)

// listenConfig is the configuration of storelink listen.
type listenConfig struct {
	Addr string
	Keys [][]byte
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

func parseListenConfig(args []string, getenv func(string) string, stderr io.Writer) (*listenConfig, error) {
	c := &listenConfig{Addr: "127.0.0.1:8090"}
	if v := getenv("STORELINK_LISTEN_ADDR"); v != "" {
		c.Addr = v
	}
	var secrets []string
	fs := flag.NewFlagSet("storelink listen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Addr, "addr", c.Addr, "listen address (STORELINK_LISTEN_ADDR)")
	fs.Var(secretsValue{&secrets}, "secret", "whsec_ signing secret; repeat or separate with commas during a rotation (STORELINK_WEBHOOK_SECRET)")
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
	return c, nil
}

// listen is the partner-side webhook receiver: it verifies,
// deduplicates and prints events, one JSON line each on stdout, until ctx
// ends.
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
	srv := &http.Server{
		Handler:           newReceiver(c.Keys, stdout, errOut, time.Now),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
	}
	fmt.Fprintf(errOut, "storelink: listening on http://%s\n", ln.Addr())

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
	keys   [][]byte
	now    func() time.Time
	stderr io.Writer

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
