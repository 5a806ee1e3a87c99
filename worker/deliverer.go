package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"storelink"
	"storelink/webhook"
)

// Deliverer sends order events to webhook endpoints. Deliveries are rows
// claimed with a lease; a crashed deliverer's rows are claimed again when
// the lease runs out, so every event is delivered at least once.
type Deliverer struct {
	Store  storelink.WebhookService
	Client *webhook.Client
	Retry  storelink.RetryPolicy
	Logger *slog.Logger
	Owner  string
	// Lease must outlast an attempt (the webhook timeout) and the wait of a
	// delivery claimed ahead for the attempts before it to the same endpoint
	// (claimAhead more), with room to record it.
	Lease time.Duration
	// Workers is the number of attempts in flight at once; PerEndpoint caps
	// those to one endpoint, so a slow endpoint cannot hold them all. Up to
	// claimAhead times as many again are claimed ahead, to go as places
	// free.
	Workers     int
	PerEndpoint int
	// Interval is how often due deliveries are looked for when nothing
	// wakes the loop (retries come due, another process wrote events).
	Interval time.Duration

	wake    chan struct{}
	metrics deliveryMetrics
	keys    keyCache
}

type deliveryMetrics struct {
	outcomes *prometheus.CounterVec
	latency  prometheus.Histogram
	// byOutcome is outcomes' counter of each storelink.Outcome.
	byOutcome [4]prometheus.Counter
}

// keyCache holds the signing keys of the secrets seen, so that each is
// decoded once rather than for every event sent with it.
type keyCache struct {
	mu   sync.RWMutex
	keys map[string][]byte // nil: not a valid secret
}

// maxKeys bounds keyCache; past it, keys are decoded each time.
const maxKeys = 4096

// signingKeys returns the keys of secrets, skipping any that is not valid.
func (c *keyCache) signingKeys(secrets []string) [][]byte {
	keys := make([][]byte, 0, len(secrets))
	for _, s := range secrets {
		c.mu.RLock()
		k, ok := c.keys[s]
		c.mu.RUnlock()
		if !ok {
			k, _ = webhook.ParseSecret(s)
			c.mu.Lock()
			if c.keys == nil {
				c.keys = map[string][]byte{}
			}
			if len(c.keys) < maxKeys {
				c.keys[s] = k
			}
			c.mu.Unlock()
		}
		if k != nil {
			keys = append(keys, k)
		}
	}
	return keys
}

// The deliverer's defaults: attempts in flight in all, and to one endpoint
// at most (serve's --webhook-concurrency). 32 to one endpoint keep requests
// on the wire while a round's results are recorded, so a fast receiver is
// not left waiting on the bookkeeping; an endpoint that answers slowly gets
// no more than that many requests at once, and its retries back off.
const (
	DefaultWorkers     = 128
	DefaultPerEndpoint = 32
)

// NewDeliverer returns a deliverer with its metrics registered on reg.
func NewDeliverer(store storelink.WebhookService, client *webhook.Client, retry storelink.RetryPolicy, timeout time.Duration,
	logger *slog.Logger, owner string, reg prometheus.Registerer) *Deliverer {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	d := &Deliverer{
		Store: store, Client: client, Retry: retry, Logger: logger, Owner: owner,
		Lease: (1+claimAhead)*timeout + 30*time.Second, Workers: DefaultWorkers, PerEndpoint: DefaultPerEndpoint, Interval: time.Second,
		wake: make(chan struct{}, 1),
		metrics: deliveryMetrics{
			outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "storelink_webhook_attempts_total",
				Help: "Webhook delivery attempts by outcome: succeeded, retry, failed (schedule spent), gone (410).",
			}, []string{"outcome"}),
			latency: prometheus.NewHistogram(prometheus.HistogramOpts{
				Name: "storelink_webhook_attempt_seconds", Help: "Duration of webhook delivery attempts.",
				Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
			}),
		},
	}
	for o, name := range []string{"succeeded", "retry", "failed", "gone"} {
		d.metrics.byOutcome[o] = d.metrics.outcomes.WithLabelValues(name)
	}
	pending := func(age bool) func() float64 {
		return func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n, oldest, err := store.PendingDeliveries(ctx)
			switch {
			case err != nil:
				return -1
			case age:
				return oldest.Seconds()
			}
			return float64(n)
		}
	}
	reg.MustRegister(d.metrics.outcomes, d.metrics.latency,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "storelink_webhook_pending_deliveries", Help: "Deliveries not yet succeeded or failed.",
		}, pending(false)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "storelink_webhook_oldest_pending_seconds", Help: "Age of the oldest pending delivery.",
		}, pending(true)))
	return d
}

// Wake makes the loop look for due deliveries now; it never blocks.
func (d *Deliverer) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// claimAhead is how many rounds of attempts are claimed ahead of those in
// flight, per endpoint (of PerEndpoint each) and in all (of Workers). With
// one, an endpoint that answers a round faster than the transaction that
// records the round before would wait for it; two keep it busy, and the
// transactions longer.
const claimAhead = 2

// recordBatch and recordDelay bound how results are grouped into one
// transaction: one commit for many attempts keeps the database from being
// the limit of the delivery rate.
const (
	recordBatch = 128
	recordDelay = 5 * time.Millisecond
)

// Run delivers until ctx is done, then lets the attempts in flight finish
// (each is bounded by the webhook timeout) and records them; the
// deliveries claimed ahead are given back.
//
// One loop does all the bookkeeping, each round in one transaction: it
// records the results in and, in the same transaction, claims deliveries
// for after the attempts in flight. An endpoint has at most PerEndpoint
// attempts in flight and claimAhead times as many claimed to go next, so
// that the next rounds are on hand when attempts end: the database records
// and claims while the endpoint receives, rather than each waiting for the
// other in turn. A claimed delivery goes as soon as its endpoint has fewer
// than PerEndpoint in flight, and fewer than Workers are in flight in all.
//
// Results are recorded when at least as many are in as attempts are still
// in flight (so when every attempt has handed in its own, waiting longer
// would gather nothing more, and the next events of these orders wait for
// the record), when recordBatch are in, or recordDelay after the first came
// in: one commit for many results keeps the database from being the limit
// of the delivery rate, and leaves the one writer to the order calls
// between rounds.
func (d *Deliverer) Run(ctx context.Context) error {
	s := &sending{d: d, load: map[string]int{}, signal: make(chan struct{}, 1)}
	s.idle = sync.NewCond(&s.mu)
	var workers sync.WaitGroup
	for range d.Workers {
		workers.Go(s.work)
	}
	defer func() {
		s.mu.Lock()
		s.closed = true
		s.idle.Broadcast()
		s.mu.Unlock()
		workers.Wait()
		// No attempt is left: the kept-alive connections are of no more use.
		d.Client.CloseIdleConnections()
	}()
	claim := true
	ticker := time.NewTicker(d.Interval)
	defer ticker.Stop()
	delay := time.NewTimer(time.Hour)
	delay.Stop()
	timing := false // delay runs, since the batch's first result
	late := false   // and has fired
	done := ctx.Done()
	var spare []storelink.AttemptResult
	for {
		s.mu.Lock()
		flush := len(s.batch) > 0 && (len(s.batch) >= s.running || len(s.batch) >= recordBatch || late)
		limit := 0
		if (claim || flush) && ctx.Err() == nil {
			limit = claimAhead*d.Workers - len(s.claimed)
		}
		var record []storelink.AttemptResult
		if flush {
			record, s.batch = s.batch, spare[:0]
		} else if len(s.batch) > 0 && !timing {
			delay.Reset(recordDelay)
			timing = true
		}
		over := ctx.Err() != nil && s.running == 0 && len(s.claimed) == 0 && len(s.batch) == 0
		s.mu.Unlock()
		if flush || limit > 0 {
			jobs := d.recordAndClaim(ctx, record, limit)
			if flush {
				clear(record)
				spare = record
				delay.Stop()
				timing, late = false, false
			}
			claim = false
			if len(jobs) > 0 {
				s.add(jobs)
			}
			continue
		}
		if over {
			return nil
		}
		select {
		case <-s.signal:
		case <-delay.C:
			late = true
		case <-d.wake:
			claim = true
		case <-ticker.C:
			claim = true
		case <-done:
			done = nil // stopping: no more claims
			d.release(s)
		}
	}
}

// release gives back the deliveries claimed and not yet started.
func (d *Deliverer) release(s *sending) {
	s.mu.Lock()
	jobs := make([]storelink.DeliveryJob, len(s.claimed))
	for i, j := range s.claimed {
		jobs[i] = *j
	}
	s.claimed = nil
	s.mu.Unlock()
	// Only at a stop: bounded as the rest of a stop is.
	ctx, cancel := context.WithTimeout(context.Background(), stopBound)
	defer cancel()
	if err := d.Store.ReleaseClaims(ctx, jobs); err != nil {
		// Their leases run out and they go again: at least once.
		d.Logger.Error("release claimed deliveries", "error", err, "count", len(jobs))
	}
}

// sending is the deliveries claimed and not yet recorded, shared by Run's
// loop and the workers that make the attempts. A worker that has made an
// attempt takes the next delivery that may go itself, and tells the loop
// only when there is something for it to do: handing each attempt and each
// result over between goroutines would cost more than the attempt.
type sending struct {
	d       *Deliverer
	mu      sync.Mutex
	idle    *sync.Cond // workers with nothing to send wait here
	claimed []*storelink.DeliveryJob
	running int            // attempts in flight
	load    map[string]int // attempts in flight by endpoint
	batch   []storelink.AttemptResult
	closed  bool
	// signal tells the loop that results came in: the first of a batch,
	// or enough to record.
	signal chan struct{}
}

// add adds claimed deliveries and wakes as many idle workers as may go.
func (s *sending) add(jobs []storelink.DeliveryJob) {
	s.mu.Lock()
	for i := range jobs {
		s.claimed = append(s.claimed, &jobs[i])
	}
	// How many may go now, as s.next would count them.
	n, running, load := 0, s.running, map[string]int{}
	for _, j := range s.claimed {
		if running < s.d.Workers && s.load[j.EndpointID]+load[j.EndpointID] < s.d.PerEndpoint {
			n++
			running++
			load[j.EndpointID]++
		}
	}
	s.mu.Unlock()
	for range n {
		s.idle.Signal()
	}
}

// next takes the first claimed delivery that may go, or nil; s.mu is held.
func (s *sending) next() *storelink.DeliveryJob {
	if s.running >= s.d.Workers {
		return nil
	}
	for i, j := range s.claimed {
		if s.load[j.EndpointID] < s.d.PerEndpoint {
			s.claimed = slices.Delete(s.claimed, i, i+1)
			s.running++
			s.load[j.EndpointID]++
			return j
		}
	}
	return nil
}

// work makes attempts until Run ends.
func (s *sending) work() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		j := s.next()
		for j == nil {
			if s.closed {
				return
			}
			s.idle.Wait()
			j = s.next()
		}
		s.mu.Unlock()
		r := s.d.attempt(j)
		s.mu.Lock()
		s.batch = append(s.batch, r)
		s.running--
		if s.load[j.EndpointID]--; s.load[j.EndpointID] == 0 {
			delete(s.load, j.EndpointID)
		}
		// Counted as Run counts: the attempts still in flight are those
		// that will be once this worker has taken its next.
		if len(s.batch) == 1 || len(s.batch) >= s.running+min(1, s.startable()) || len(s.batch) >= recordBatch {
			select {
			case s.signal <- struct{}{}:
			default:
			}
		}
	}
}

// startable tells whether a claimed delivery may go now; s.mu is held.
func (s *sending) startable() int {
	if s.running >= s.d.Workers {
		return 0
	}
	for _, j := range s.claimed {
		if s.load[j.EndpointID] < s.d.PerEndpoint {
			return 1
		}
	}
	return 0
}

// stopBound is how long the bookkeeping of a stop (recording the attempts
// made, giving back claimed deliveries) may wait for the database: what it
// cannot do by then is left to the leases, which run out, and the
// deliveries go again, at least once.
const stopBound = 3 * time.Second

// recordAndClaim records batch and claims up to limit deliveries. A record
// that fails is logged: the leases run out and the deliveries are tried
// again, at least once, never lost. The store caps the deliveries leased
// per endpoint, those in flight and those claimed ahead of them; the
// attempts in flight are capped at PerEndpoint as they start.
func (d *Deliverer) recordAndClaim(ctx context.Context, batch []storelink.AttemptResult, limit int) []storelink.DeliveryJob {
	// Not the loop's context: a stop must not cut off the record of the
	// attempts made. Still, once the loop stops, a database that does not
	// answer gets stopBound, not the whole time.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	defer context.AfterFunc(ctx, func() { time.AfterFunc(stopBound, cancel) })()
	jobs, err := d.Store.RecordAndClaim(tctx, batch, d.Owner, d.Lease, limit, (1+claimAhead)*d.PerEndpoint)
	if err != nil {
		d.Logger.Error("record delivery attempts and claim deliveries", "error", err, "count", len(batch))
	}
	return jobs
}

// send sends j. A panic while sending (in the HTTP client, on an answer
// it did not expect) is the attempt's failure, not the process's: the
// delivery is tried again on its schedule, and every other goes on.
func (d *Deliverer) send(j *storelink.DeliveryJob, keys [][]byte, start time.Time) (res webhook.Result) {
	defer func() {
		if p := recover(); p != nil {
			d.Logger.Error("webhook attempt panicked", "delivery_id", j.DeliveryID, "endpoint_id", j.EndpointID, "panic", fmt.Sprint(p))
			res = webhook.Result{Err: errors.New("internal error while sending"), Duration: time.Since(start)}
		}
	}()
	// Not the loop's context: a stop lets the attempt finish within the
	// webhook timeout rather than cutting it off and counting a failure.
	return d.Client.Send(context.Background(), webhook.Request{URL: j.URL, EventID: j.EventID, Body: j.Body, Keys: keys, APIKey: j.APIKey}, start)
}

// attempt makes one delivery attempt and decides what it means.
func (d *Deliverer) attempt(j *storelink.DeliveryJob) storelink.AttemptResult {
	start := time.Now()
	var res webhook.Result
	if j.Unsealable != "" {
		// Nothing can be signed or sent: the attempt fails at once, and
		// the delivery follows the retry schedule, so that it goes out once
		// the endpoint's secret is rotated.
		res.Err = errors.New(j.Unsealable)
	} else {
		res = d.send(j, d.keys.signingKeys(j.Secrets), start)
	}
	a := storelink.Attempt{Number: j.Attempt, At: start.UTC(), DurationMS: res.Duration.Milliseconds(), StatusCode: res.StatusCode, Response: res.Excerpt}
	if res.Err != nil {
		a.Error = res.Err.Error()
	}
	r := storelink.AttemptResult{Job: j, Attempt: a}
	now := time.Now()
	switch {
	case res.Success():
		r.Outcome = storelink.OutcomeSucceeded
	case res.StatusCode == 410:
		r.Outcome = storelink.OutcomeGone
	default:
		var more bool
		if r.NextAt, more = d.Retry.Next(j.Try, res.RetryAfter, now); more {
			r.Outcome = storelink.OutcomeRetry
		} else {
			r.Outcome = storelink.OutcomeFailed
		}
	}
	d.metrics.latency.Observe(res.Duration.Seconds())
	d.metrics.byOutcome[r.Outcome].Inc()
	if r.Outcome != storelink.OutcomeSucceeded {
		d.Logger.Warn("webhook attempt failed", "delivery_id", j.DeliveryID, "event_id", j.EventID, "endpoint_id", j.EndpointID,
			"attempt", j.Attempt, "status", res.StatusCode, "error", a.Error, "outcome", r.Outcome)
	}
	return r
}
