package worker

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"storelink"
	"storelink/webhook"
)

// An endpoint's limit starts at one, grows by one with each success that
// came while the endpoint used its whole limit, up to PerEndpoint, and
// halves with a slow failure, once for the attempts that were in flight
// together; an endpoint is slow from a slow attempt, or attempts in flight
// that have gone quiet, until a quick one.
func TestPaceRules(t *testing.T) {
	t.Parallel()
	const after = time.Second
	t0 := time.Unix(1_800_000_000, 0)
	type step struct {
		start, end int // attempts started, then ended
		took       time.Duration
		ok         bool
	}
	for _, tc := range []struct {
		name      string
		steps     []step
		limit     int
		slow      bool
		leaseCap  int
		quietSlow bool // slow 2 s after the last step, by its attempts in flight
	}{
		{name: "new", limit: 1, leaseCap: 3},
		{name: "a success at the limit grows it", steps: []step{{start: 1, end: 1, took: 50 * time.Millisecond, ok: true}},
			limit: 2, leaseCap: 6},
		{name: "successes grow it to PerEndpoint at most", steps: []step{
			{start: 1, end: 1, took: time.Millisecond, ok: true}, {start: 2, end: 2, took: time.Millisecond, ok: true},
			{start: 3, end: 3, took: time.Millisecond, ok: true}, {start: 4, end: 4, took: time.Millisecond, ok: true},
			{start: 4, end: 4, took: time.Millisecond, ok: true}},
			limit: 4, leaseCap: 12},
		{name: "a success below the limit does not grow it", steps: []step{
			{start: 1, end: 1, took: time.Millisecond, ok: true}, {start: 1, end: 1, took: time.Millisecond, ok: true}},
			limit: 2, leaseCap: 6},
		{name: "a timeout halves it and makes the endpoint slow", steps: []step{
			{start: 1, end: 1, ok: true}, {start: 2, end: 2, ok: true}, {start: 3, end: 3, ok: true},
			{start: 1, end: 1, took: 10 * time.Second}},
			limit: 2, slow: true, leaseCap: 2},
		{name: "timeouts of attempts in flight together halve it once", steps: []step{
			{start: 1, end: 1, ok: true}, {start: 2, end: 2, ok: true}, {start: 3, end: 3, ok: true},
			{start: 4, end: 4, took: 10 * time.Second}},
			limit: 2, slow: true, leaseCap: 2},
		{name: "a timeout of an attempt begun after the halving halves it again", steps: []step{
			{start: 1, end: 1, ok: true}, {start: 2, end: 2, ok: true}, {start: 3, end: 3, ok: true},
			{start: 4, end: 4, took: 10 * time.Second}, {start: 1, end: 1, took: 10 * time.Second}},
			limit: 1, slow: true, leaseCap: 1},
		{name: "never below one", steps: []step{{start: 1, end: 1, took: 10 * time.Second}, {start: 1, end: 1, took: 10 * time.Second}},
			limit: 1, slow: true, leaseCap: 1},
		{name: "a quick failure changes nothing but slowness", steps: []step{
			{start: 1, end: 1, took: 10 * time.Second}, {start: 1, end: 1, took: time.Millisecond}},
			limit: 1, leaseCap: 3},
		{name: "a slow success grows it all the same", steps: []step{{start: 1, end: 1, took: 2 * time.Second, ok: true}},
			limit: 2, slow: true, leaseCap: 2},
		{name: "a quick success makes it fast again", steps: []step{
			{start: 1, end: 1, took: 10 * time.Second}, {start: 1, end: 1, took: time.Millisecond, ok: true}},
			limit: 2, leaseCap: 6},
		{name: "attempts in flight that go quiet make it slow", steps: []step{{start: 1}},
			limit: 1, leaseCap: 3, quietSlow: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &endpointPace{limit: startLimit}
			now := t0
			for _, s := range tc.steps {
				for range s.start {
					p.claimed++
					p.started(now)
				}
				now = now.Add(s.took)
				for range s.end {
					p.ended(now, s.took, after, s.ok, 4)
				}
			}
			if p.limit != tc.limit || p.isSlow(now, after) != tc.slow || p.leaseCap(now, after) != tc.leaseCap {
				t.Errorf("limit %d, slow %v, lease cap %d; want %d, %v, %d",
					p.limit, p.isSlow(now, after), p.leaseCap(now, after), tc.limit, tc.slow, tc.leaseCap)
			}
			if later := now.Add(2 * after); p.isSlow(later, after) != (tc.slow || tc.quietSlow) {
				t.Errorf("slow %s later: %v, want %v", 2*after, p.isSlow(later, after), tc.slow || tc.quietSlow)
			}
		})
	}
}

// A claimed delivery whose lease would run out before its attempt ends and
// is recorded is set aside to be given back, not sent; the next one goes.
func TestSendingSetsAsideExpiringLeases(t *testing.T) {
	t.Parallel()
	d := &Deliverer{Workers: 4, PerEndpoint: 4, Timeout: time.Second}
	s := newSending(d)
	now := time.Now()
	s.add([]storelink.DeliveryJob{{DeliveryID: "short", EndpointID: "e"}}, now.Add(d.Timeout+leaseRoom-time.Millisecond))
	s.add([]storelink.DeliveryJob{{DeliveryID: "long", EndpointID: "e"}}, now.Add(d.Timeout+leaseRoom+time.Second))
	s.mu.Lock()
	defer s.mu.Unlock()
	c, _, ok := s.next(now)
	if !ok || c.job.DeliveryID != "long" {
		t.Fatalf("next = %+v, %v; want the delivery whose lease holds", c.job, ok)
	}
	if stale := s.takeStale(); len(stale) != 1 || stale[0].DeliveryID != "short" {
		t.Fatalf("set aside %+v, want the one whose lease would run out", stale)
	}
	if p := s.paces["e"]; p.claimed != 0 || p.running != 1 || len(s.claimed) != 0 {
		t.Errorf("after: %d claimed, %d running, %d in the list", p.claimed, p.running, len(s.claimed))
	}
}

// hanger is an endpoint that answers nothing, holding each request until
// the client gives up, until released; then it answers 200 at once. It
// counts the requests it held at once, and those that came after one of
// its requests had been given up (the deliverer then knows the endpoint
// slow), at once across the hangers of a group.
type hanger struct {
	*httptest.Server
	release chan struct{}
	group   *hangGroup
	mu      sync.Mutex
	ended   int // requests given up
	held    int
	peak    int
	got     map[string]int // answered, by webhook-id
}

type hangGroup struct {
	mu   sync.Mutex
	held []context.Context // requests after a give-up, held now
	peak int               // of them, open at once at most
}

// closeShows bounds how long a request that arrives waits for the
// requests held before it to show that their client closed them: the
// deliverer closes an attempt it gives up before it starts the next, but
// the server sees the close only when its reader of that connection runs,
// which on a loaded machine can come after the next request.
const closeShows = time.Second

// arrive counts a request after a give-up among those of the group open at
// once: itself and those held before it that are still open closeShows
// after it came.
func (g *hangGroup) arrive(ctx context.Context) {
	g.mu.Lock()
	others := slices.Clone(g.held)
	g.held = append(g.held, ctx)
	g.mu.Unlock()
	deadline := time.After(closeShows)
	open := 1
	for _, c := range others {
		if c.Err() != nil {
			continue
		}
		select {
		case <-c.Done():
		case <-deadline:
			if c.Err() == nil {
				open++
			}
			deadline = closed
		}
	}
	g.mu.Lock()
	g.peak = max(g.peak, open)
	g.mu.Unlock()
}

// leave takes a request off the group's held ones.
func (g *hangGroup) leave(ctx context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = slices.DeleteFunc(g.held, func(c context.Context) bool { return c == ctx })
}

// closed is a channel that is always ready.
var closed = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

func newHanger(t *testing.T, group *hangGroup, release chan struct{}) *hanger {
	h := &hanger{release: release, group: group, got: map[string]int{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h.mu.Lock()
		h.held++
		h.peak = max(h.peak, h.held)
		later := h.ended > 0
		h.mu.Unlock()
		if later {
			group.arrive(r.Context())
		}
		var given bool
		select {
		case <-r.Context().Done():
			given = true
		case <-release:
		}
		h.mu.Lock()
		h.held--
		if given {
			h.ended++
		} else {
			h.got[r.Header.Get(webhook.HeaderID)]++
		}
		h.mu.Unlock()
		if later {
			group.leave(r.Context())
		}
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hanger) state() (held, peak, ended int, got map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	got = map[string]int{}
	for id, n := range h.got {
		got[id] = n
	}
	return h.held, h.peak, h.ended, got
}

// Endpoints that hang hold one attempt each (they never answered, so their
// limit never grew), and a healthy endpoint's events all go through while
// they hang, though with PerEndpoint attempts each they would hold every
// worker. Once they answer, every event reaches every endpoint once.
func TestDelivererHangingEndpointsIsolated(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	release := make(chan struct{})
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	group := &hangGroup{}
	var hangers []*hanger
	for range 4 {
		h := newHanger(t, group, release)
		hangers = append(hangers, h)
		f.endpoint(h.URL)
	}
	healthy := newCounter(t, nil, 0)
	f.endpoint(healthy.URL)
	var ids []string
	for range 20 {
		ids = append(ids, f.event()) // each to all five endpoints
	}
	d := f.deliverer("test", time.Minute)
	d.Workers, d.PerEndpoint = 8, 4
	run(t, d)

	waitFor(t, 10*time.Second, "every event at the healthy endpoint while the others hang", func() bool {
		_, _, total := healthy.state()
		return total == len(ids)
	})
	for i, h := range hangers {
		if held, peak, ended, _ := h.state(); held != 1 || peak != 1 || ended != 0 {
			t.Errorf("hanging endpoint %d: %d held, at most %d, %d given up; want one held all along", i, held, peak, ended)
		}
	}
	close(release)
	released = true
	for i, h := range hangers {
		waitFor(t, 10*time.Second, "every event at the endpoints that hung", func() bool {
			_, _, _, got := h.state()
			return len(got) == len(ids)
		})
		_, peak, _, got := h.state()
		for _, id := range ids {
			if got[id] != 1 {
				t.Errorf("endpoint %d got event %s %d times, want once", i, id, got[id])
			}
		}
		if peak > d.PerEndpoint {
			t.Errorf("endpoint %d had %d requests at once, want at most %d", i, peak, d.PerEndpoint)
		}
	}
	for _, id := range ids {
		if n := healthy.count(id); n != 1 {
			t.Errorf("healthy endpoint got event %s %d times, want once", id, n)
		}
	}
}

// Attempts to endpoints known to be slow (their attempts timed out) hold at
// most Workers/slowShare together, whatever their number: here one, for
// three endpoints that each keep timing out and being retried. Once they
// answer, every event gets through.
func TestDelivererSlowShare(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	release := make(chan struct{})
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	group := &hangGroup{}
	var hangers []*hanger
	for range 3 {
		h := newHanger(t, group, release)
		hangers = append(hangers, h)
		f.endpoint(h.URL)
	}
	var ids []string
	for range 3 {
		ids = append(ids, f.event())
	}
	const timeout = 200 * time.Millisecond
	schedule := make([]time.Duration, 100)
	for i := range schedule {
		// Long enough that a receiver has seen an attempt given up before
		// the retry comes, on a loaded machine too: it counts what it
		// holds, and counts a request until it sees it given up.
		schedule[i] = 100 * time.Millisecond
	}
	d := NewDeliverer(f.service.Webhooks, webhook.NewClient(timeout, true), storelink.RetryPolicy{Schedule: schedule},
		timeout, nil, "test", prometheus.NewRegistry())
	d.Workers, d.PerEndpoint, d.Interval = slowShare, 4, 10*time.Millisecond // a slow share of one attempt
	run(t, d)

	waitFor(t, 20*time.Second, "the endpoints timed out again and again", func() bool {
		ended := 0
		for _, h := range hangers {
			_, _, n, _ := h.state()
			ended += n
		}
		return ended >= 3+6
	})
	group.mu.Lock()
	peak := group.peak
	group.mu.Unlock()
	if peak != 1 {
		t.Errorf("attempts to endpoints known slow: at most %d at once, want 1 (Workers/slowShare)", peak)
	}
	close(release)
	released = true
	for i, h := range hangers {
		waitFor(t, 10*time.Second, "every event at the endpoints once they answer", func() bool {
			_, _, _, got := h.state()
			return len(got) == len(ids)
		})
		if _, _, _, got := h.state(); len(got) != len(ids) {
			t.Errorf("endpoint %d got %v", i, got)
		}
	}
}

// An endpoint that answers gets more attempts at once as it answers, up to
// PerEndpoint and never more; each event goes once.
func TestDelivererLimitGrows(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rec := newCounter(t, nil, 20*time.Millisecond)
	f.endpoint(rec.URL)
	var ids []string
	for range 40 {
		ids = append(ids, f.event())
	}
	d := f.deliverer("test", 5*time.Second)
	d.Workers, d.PerEndpoint = 8, 4
	run(t, d)
	waitFor(t, 10*time.Second, "every event delivered", func() bool {
		_, _, total := rec.state()
		return total >= len(ids)
	})
	if _, peak, _ := rec.state(); peak != 4 {
		t.Errorf("at most %d requests at once, want 4 (PerEndpoint, reached as the endpoint answered)", peak)
	}
	for _, id := range ids {
		if n := rec.count(id); n != 1 {
			t.Errorf("event %s received %d times, want once", id, n)
		}
	}
}
