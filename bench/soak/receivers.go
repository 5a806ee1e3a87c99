package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"storelink/bench/internal/benchproc"
	"storelink/webhook"
)

// Receiver profiles: how a webhook receiver answers.
const (
	// steady answers 204 at once, and 500 now and then.
	profileSteady = "steady"
	// flaky answers 503 or 429 with Retry-After: 1, or 500, about half the
	// time; otherwise it takes up to 600 ms, or now and then longer than
	// the webhook timeout (the attempt fails, whatever it answers).
	profileFlaky = "flaky"
	// picky takes some states only; it answers 410 while the soak makes it
	// "gone", which disables its endpoint until the soak enables it again.
	profilePicky = "picky"
	// late takes the uploads' stock_upload.finished events only, and is
	// down from the setup to the heal: the events of the uploads that
	// ended in the workload's first part fail for good (the retry schedule
	// is spent), and the soak recovers them (POST …/recover) once it is up;
	// it answers as steady does.
	profileLate = "late"
)

// uploadEventKind is the event that tells an upload ended.
const uploadEventKind = "stock_upload.finished"

// pickyStates are the states the picky endpoint subscribes to.
var pickyStates = []string{"cancelled", "fulfilled", "returned", "marketplace_warehouse_returned"}

// hit is one POST a receiver got: an order's event (order, state), or an
// upload's (upload, with state its type).
type hit struct {
	id, order, state string
	upload           string
	body             []byte
	arrived          time.Time
	answered         time.Time
	status           int
	cut              bool // the answer never left: the connection was gone or closed
	bad              string
}

// success tells whether the attempt reached storelink as a success: a 2xx
// answered within the webhook timeout, on a connection still open.
func (h hit) success() bool {
	return h.status >= 200 && h.status < 300 && !h.cut && h.answered.Sub(h.arrived) < webhookTimeout
}

// window is a span during which an endpoint was (perhaps) disabled.
type window struct{ start, end time.Time }

// receiver is a webhook endpoint's receiver on a loopback port of its own.
type receiver struct {
	name, profile string
	client        *clientModel
	endpointID    string
	states        []string // nil: every state
	port          int

	mu        sync.Mutex
	keys      [][]byte
	srv       *http.Server
	down      bool
	goneUntil time.Time
	goneFirst time.Time // the first 410 of the current gone window
	gone      []window  // when the endpoint may have been disabled
	hits      []hit
	rng       *rand.Rand
}

func newReceiver(c *clientModel, profile string, seed uint64) (*receiver, error) {
	port, err := benchproc.FreePort()
	if err != nil {
		return nil, err
	}
	r := &receiver{name: fmt.Sprintf("c%d-%s", c.idx, profile), profile: profile, client: c, port: port,
		rng: rand.New(rand.NewPCG(seed, seed+1))}
	switch profile {
	case profilePicky:
		r.states = pickyStates
	case profileLate:
		r.states = []string{uploadEventKind}
	}
	return r, r.up()
}

func (r *receiver) url() string {
	return "http://127.0.0.1:" + strconv.Itoa(r.port) + "/hook/${eventId}"
}

// up listens again on the receiver's port (tried for 5 s: the port may be
// in TIME_WAIT's hands for a moment).
func (r *receiver) up() error {
	var ln net.Listener
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ln, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(r.port))
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("receiver %s: %w", r.name, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(r.serveHTTP), ReadHeaderTimeout: 5 * time.Second}
	r.mu.Lock()
	r.srv, r.down = srv, false
	r.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
	return nil
}

// goDown closes the listener and every connection: attempts are refused
// until up.
func (r *receiver) goDown() {
	r.mu.Lock()
	srv := r.srv
	r.down = true
	r.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

func (r *receiver) close() { r.goDown() }

// setGone makes the receiver answer 410 for d.
func (r *receiver) setGone(d time.Duration) {
	r.mu.Lock()
	r.goneUntil, r.goneFirst = time.Now().Add(d), time.Time{}
	r.mu.Unlock()
}

// endGone records the window during which the endpoint may have been
// disabled: from the first 410 to the enabling call's answer.
func (r *receiver) endGone(enabled time.Time) {
	r.mu.Lock()
	if !r.goneFirst.IsZero() {
		r.gone = append(r.gone, window{r.goneFirst, enabled})
	}
	r.goneFirst = time.Time{}
	r.mu.Unlock()
}

func (r *receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	h := hit{arrived: time.Now(), id: req.Header.Get(webhook.HeaderID)}
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	h.body = body
	var ev struct {
		State    string `json:"state"`
		OrderID  string `json:"order_id"`
		Type     string `json:"type"`
		UploadID string `json:"upload_id"`
	}
	if err == nil {
		err = json.Unmarshal(body, &ev)
	}
	h.state, h.order, h.upload = ev.State, ev.OrderID, ev.UploadID
	if ev.Type != "" {
		h.state = ev.Type
	}
	r.mu.Lock()
	switch {
	case err != nil:
		h.bad = "body: " + err.Error()
	case req.URL.Path != "/hook/"+h.id:
		h.bad = fmt.Sprintf("path %s for webhook-id %s", req.URL.Path, h.id)
	default:
		if err := webhook.Verify(r.keys, req.Header, body, time.Now(), 5*time.Minute); err != nil {
			h.bad = "signature: " + err.Error()
		}
	}
	status, wait, retryAfter := r.decide(h.arrived)
	if status == http.StatusGone && r.goneFirst.IsZero() {
		r.goneFirst = h.arrived
	}
	r.mu.Unlock()

	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
		}
	}
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	// The answer reached storelink unless the connection was gone before
	// it was written, or writing it failed (the receiver went down).
	answered := time.Now()
	gone := req.Context().Err() != nil
	w.WriteHeader(status)
	flushErr := http.NewResponseController(w).Flush()
	r.mu.Lock()
	h.status, h.answered = status, answered
	h.cut = gone || flushErr != nil
	r.hits = append(r.hits, h)
	r.mu.Unlock()
}

// decide picks the answer by profile; r.mu is held.
func (r *receiver) decide(now time.Time) (status int, wait time.Duration, retryAfter string) {
	if now.Before(r.goneUntil) {
		return http.StatusGone, 0, ""
	}
	x := r.rng.Float64()
	switch r.profile {
	case profileFlaky:
		switch {
		case x < 0.2:
			return http.StatusServiceUnavailable, 0, "1"
		case x < 0.3:
			return http.StatusTooManyRequests, 0, "1"
		case x < 0.4:
			return http.StatusInternalServerError, 0, ""
		case x < 0.5:
			return http.StatusOK, webhookTimeout + 600*time.Millisecond, ""
		default:
			return http.StatusOK, time.Duration(r.rng.Int64N(int64(600 * time.Millisecond))), ""
		}
	default:
		if x < 0.03 {
			return http.StatusInternalServerError, 0, ""
		}
		return http.StatusNoContent, time.Duration(r.rng.Int64N(int64(20 * time.Millisecond))), ""
	}
}

// snapshot is every hit so far.
func (r *receiver) snapshot() []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hit(nil), r.hits...)
}

// wants tells whether the endpoint subscribes to events of state.
func (r *receiver) wants(state string) bool {
	if r.states == nil {
		return true
	}
	for _, s := range r.states {
		if s == state {
			return true
		}
	}
	return false
}

// setKey installs the endpoint's signing secret.
func (r *receiver) setKey(secret string) error {
	key, err := webhook.ParseSecret(secret)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.keys = [][]byte{key}
	r.mu.Unlock()
	return nil
}
