package worker

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"storelink"
	"storelink/service"
	"storelink/sqlite"
	"storelink/webhook"
)

func TestRetryPolicyNext(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	schedule := []time.Duration{time.Second, time.Minute, time.Hour}
	for _, tc := range []struct {
		name       string
		jitter     float64
		n          int
		retryAfter time.Duration
		lo, hi     time.Duration // the delay lies in [lo, hi]
		last       bool          // no more attempts
	}{
		{name: "first step exact", n: 1, lo: time.Second, hi: time.Second},
		{name: "last step exact", n: 3, lo: time.Hour, hi: time.Hour},
		{name: "first step jittered", jitter: 0.2, n: 1, lo: 800 * time.Millisecond, hi: 1200 * time.Millisecond},
		{name: "second step jittered", jitter: 0.2, n: 2, lo: 48 * time.Second, hi: 72 * time.Second},
		{name: "longer Retry-After wins", jitter: 0.2, n: 1, retryAfter: 30 * time.Second, lo: 30 * time.Second, hi: 30 * time.Second},
		{name: "shorter Retry-After ignored", n: 2, retryAfter: 5 * time.Second, lo: time.Minute, hi: time.Minute},
		{name: "schedule spent", n: 4, last: true},
		{name: "spent even with Retry-After", n: 4, retryAfter: time.Second, last: true},
		{name: "no attempt zero", n: 0, last: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := storelink.RetryPolicy{Schedule: schedule, Jitter: tc.jitter}
			seen := map[time.Time]bool{}
			for range 200 {
				at, more := p.Next(tc.n, tc.retryAfter, now)
				if more == tc.last {
					t.Fatalf("Next(%d) more = %v, want %v", tc.n, more, !tc.last)
				}
				if tc.last {
					return
				}
				if d := at.Sub(now); d < tc.lo || d > tc.hi {
					t.Fatalf("Next(%d, %s) = now + %s, want within [%s, %s]", tc.n, tc.retryAfter, d, tc.lo, tc.hi)
				}
				seen[at] = true
			}
			if tc.jitter > 0 && tc.lo != tc.hi && len(seen) < 100 {
				t.Errorf("only %d different delays in 200: the jitter does not spread retries", len(seen))
			}
		})
	}
}

// fixture is a SQLite database with one client, for deliverers to work on.
type fixture struct {
	t        *testing.T
	db       *sqlite.DB
	service  *service.Services
	clientID string
	orders   atomic.Int64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "storelink.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	key := make([]byte, storelink.SealKeySize)
	_, _ = rand.Read(key)
	sealer, err := storelink.NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	svc := service.New(sqlite.NewDrivers(db), service.WithSealer(sealer))
	p, err := svc.Partners.CreatePartner(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	c, err := svc.Partners.CreateClient(ctx, p.ID, "DE", "EUR")
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, db: db, service: svc, clientID: c.ID}
}

func (f *fixture) endpoint(url string) *storelink.Endpoint {
	f.t.Helper()
	e, err := f.service.Webhooks.CreateEndpoint(context.Background(), f.clientID, storelink.NewEndpoint{URL: url}, webhook.NewSecret())
	if err != nil {
		f.t.Fatal(err)
	}
	return e
}

// event writes an event (a warehouse order: no stock needed) and returns its id.
func (f *fixture) event() string {
	f.t.Helper()
	ctx := context.Background()
	price := storelink.Money(1999)
	o, err := f.service.Orders.CreateWarehouseOrder(ctx, storelink.NewOrder{
		OrderNumber: fmt.Sprintf("W-%d", f.orders.Add(1)), ClientID: f.clientID,
		Items: []storelink.NewItem{{EAN: "4006381333931", MarketplaceArticleNumber: "MP-1", ArticleNumber: "SKU-1", Price: &price}},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	evs, err := f.service.Orders.OrderEvents(ctx, o.ID)
	if err != nil || len(evs) != 1 {
		f.t.Fatalf("events of %s: %v %v", o.ID, evs, err)
	}
	return evs[0].EventID
}

// deliverer returns a deliverer with a short schedule that polls often.
func (f *fixture) deliverer(owner string, timeout time.Duration) *Deliverer {
	d := NewDeliverer(f.service.Webhooks, webhook.NewClient(timeout, true),
		storelink.RetryPolicy{Schedule: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond}, Jitter: 0.2},
		timeout, nil, owner, prometheus.NewRegistry())
	d.Interval = 10 * time.Millisecond
	return d
}

// run runs d until the test ends, or until the returned stop is called;
// stop returns when Run has.
func run(t *testing.T, d *Deliverer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

func (f *fixture) delivery(eventID, endpointID string) storelink.Delivery {
	f.t.Helper()
	list, err := f.service.Webhooks.Deliveries(context.Background(), storelink.DeliveryFilter{ClientID: f.clientID, Limit: 1000})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, d := range list {
		if d.EventID == eventID && d.EndpointID == endpointID {
			return d
		}
	}
	f.t.Fatalf("no delivery of %s to %s", eventID, endpointID)
	return storelink.Delivery{}
}

// counter is a receiver that counts requests per webhook-id, and those in
// flight at once; hold, when not nil, keeps every request until closed.
type counter struct {
	*httptest.Server
	mu       sync.Mutex
	got      map[string]int
	inflight int
	peak     int
	hold     chan struct{}
	delay    time.Duration
}

func newCounter(t *testing.T, hold chan struct{}, delay time.Duration) *counter {
	c := &counter{got: map[string]int{}, hold: hold, delay: delay}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		c.mu.Lock()
		c.inflight++
		c.peak = max(c.peak, c.inflight)
		c.mu.Unlock()
		if c.hold != nil {
			<-c.hold
		}
		time.Sleep(c.delay)
		c.mu.Lock()
		c.inflight--
		c.got[r.Header.Get(webhook.HeaderID)]++
		c.mu.Unlock()
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *counter) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got[id]
}

func (c *counter) state() (inflight, peak, total int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.got {
		total += n
	}
	return c.inflight, c.peak, total
}

func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s after %s", what, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A deliverer that claimed a delivery and died: another takes it when the
// lease runs out, and the dead one's late result changes nothing.
func TestDelivererLeaseRunsOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rec := newCounter(t, nil, 0)
	ep := f.endpoint(rec.URL)
	id := f.event()
	ctx := context.Background()
	const lease = 300 * time.Millisecond
	claimed := time.Now()
	jobs, err := f.service.Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "crashed", Lease: lease, Limit: 10, Caps: storelink.EndpointCap(10)})
	if err != nil || len(jobs) != 1 || jobs[0].EventID != id {
		t.Fatalf("claim = %+v, %v", jobs, err)
	}

	run(t, f.deliverer("live", 5*time.Second))
	waitFor(t, 5*time.Second, "delivered by the live deliverer", func() bool { return rec.count(id) == 1 })
	if waited := time.Since(claimed); waited < lease {
		t.Errorf("delivered %s after the claim, before the lease of %s ran out", waited, lease)
	}
	waitFor(t, 5*time.Second, "succeeded", func() bool { return f.delivery(id, ep.ID).State == storelink.DeliverySucceeded })

	// The crashed deliverer comes back with a failure: it is recorded as its
	// attempt, and the delivery stays succeeded.
	late := storelink.AttemptResult{Job: &jobs[0], Outcome: storelink.OutcomeFailed,
		Attempt: storelink.Attempt{Number: jobs[0].Attempt, At: claimed.UTC(), Error: "timeout after 10s"}}
	if err := f.service.Webhooks.RecordAttempts(ctx, []storelink.AttemptResult{late}); err != nil {
		t.Fatal(err)
	}
	d := f.delivery(id, ep.ID)
	if d.State != storelink.DeliverySucceeded || len(d.Attempts) != 2 {
		t.Fatalf("after the late result: %+v, want succeeded with both attempts", d)
	}
	if d.Attempts[0].Error == "" || d.Attempts[1].StatusCode != 200 {
		t.Errorf("attempts = %+v", d.Attempts)
	}
}

// At start-up every lease is a dead process's (SQLite has one process):
// after ReleaseLeases, what a killed process was sending goes out at once,
// not when its lease (3 × timeout + 30s) runs out.
func TestDelivererReleaseLeasesAtStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rec := newCounter(t, nil, 0)
	ep := f.endpoint(rec.URL)
	id := f.event()
	ctx := context.Background()
	if jobs, err := f.service.Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "killed", Lease: time.Hour, Limit: 10, Caps: storelink.EndpointCap(10)}); err != nil || len(jobs) != 1 {
		t.Fatalf("claim = %+v, %v", jobs, err)
	}
	if err := f.db.ReleaseLeases(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	run(t, f.deliverer("restarted", 5*time.Second))
	waitFor(t, 5*time.Second, "delivered after the restart", func() bool { return rec.count(id) == 1 })
	if took := time.Since(start); took > time.Second {
		t.Errorf("delivered %s after the restart", took)
	}
	waitFor(t, 5*time.Second, "succeeded", func() bool { return f.delivery(id, ep.ID).State == storelink.DeliverySucceeded })
}

// A stop lets the attempt in flight finish and records it before Run
// returns: nothing is sent twice because of an orderly stop.
func TestDelivererStopFinishesAttempt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rec := newCounter(t, nil, 300*time.Millisecond)
	ep := f.endpoint(rec.URL)
	id := f.event()
	stop := run(t, f.deliverer("test", 5*time.Second))
	waitFor(t, 5*time.Second, "sending", func() bool { inflight, _, _ := rec.state(); return inflight == 1 })
	stopped := time.Now()
	stop()
	if took := time.Since(stopped); took < 200*time.Millisecond {
		t.Errorf("Run returned %s after the stop, before the attempt in flight ended", took)
	}
	d := f.delivery(id, ep.ID)
	if d.State != storelink.DeliverySucceeded || len(d.Attempts) != 1 || d.Attempts[0].StatusCode != 200 {
		t.Errorf("delivery after the stop = %+v, want succeeded with its attempt recorded", d)
	}
	if rec.count(id) != 1 {
		t.Errorf("received %d times", rec.count(id))
	}
}

// When Run returns, the connections it kept alive to endpoints are closed:
// a receiver does not hold them open for a deliverer that is gone.
func TestDelivererStopClosesConnections(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var open atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	ep := f.endpoint(srv.URL)
	id := f.event()
	stop := run(t, f.deliverer("test", 5*time.Second))
	waitFor(t, 5*time.Second, "delivered", func() bool { return f.delivery(id, ep.ID).State == storelink.DeliverySucceeded })
	if n := open.Load(); n != 1 {
		t.Fatalf("%d connections open after the delivery, want the 1 kept alive", n)
	}
	stop()
	waitFor(t, 5*time.Second, "closed", func() bool { return open.Load() == 0 })
}
