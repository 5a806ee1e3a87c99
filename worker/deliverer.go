package worker

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
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
	// Timeout is the webhook timeout: the longest an attempt takes.
	Timeout time.Duration
	// Lease must outlast an attempt (the webhook timeout) and the wait of a
	// delivery claimed ahead for the attempts before it to the same endpoint
	// (claimAhead more), with room to record it (leaseRoom): a claimed
	// delivery whose lease would not is given back unsent.
	Lease time.Duration
	// Workers is the number of attempts in flight at once; PerEndpoint caps
	// those to one endpoint, each endpoint being paced below it by what it
	// has answered (pacing.go), so that slow endpoints cannot hold them
	// all. Up to claimAhead times as many again are claimed ahead, to go as
	// places free.
	Workers     int
	PerEndpoint int
	// Interval is how often due deliveries are looked for when nothing
	// wakes the loop (retries come due, another process wrote events).
	Interval time.Duration

	wake    chan struct{}
	metrics deliveryMetrics
	keys    keyCache
	// running is Run's sending while it runs, for DropEndpoint.
	running atomic.Pointer[sending]
}

type deliveryMetrics struct {
	outcomes *prometheus.CounterVec
	latency  prometheus.Histogram
	// byOutcome is outcomes' counter of each storelink.Outcome.
	byOutcome [4]prometheus.Counter
}

// The deliverer's defaults: attempts in flight in all, and to one endpoint
// at most (serve's --webhook-concurrency, up to MaxPerEndpoint). An attempt
// mostly waits on the network, and a goroutine and a connection cost little,
// so there are many in flight: the endpoints that hang hold one each until
// their first timeout (pacing.go), a small part of 256. 32 to one endpoint
// keep requests on the wire while a round's results are recorded, so a fast
// receiver is not left waiting on the bookkeeping; an endpoint that answers
// slowly gets fewer (pacing.go), and its retries back off.
const (
	DefaultWorkers     = 256
	DefaultPerEndpoint = 32
	MaxPerEndpoint     = 128
)

// NewDeliverer returns a deliverer with its metrics registered on reg.
func NewDeliverer(store storelink.WebhookService, client *webhook.Client, retry storelink.RetryPolicy, timeout time.Duration,
	logger *slog.Logger, owner string, reg prometheus.Registerer) *Deliverer {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	d := &Deliverer{
		Store: store, Client: client, Retry: retry, Logger: logger, Owner: owner, Timeout: timeout,
		Lease: (1+claimAhead)*timeout + leaseRoom + 20*time.Second, Workers: DefaultWorkers, PerEndpoint: DefaultPerEndpoint, Interval: time.Second,
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
	for _, o := range storelink.Outcomes {
		d.metrics.byOutcome[o] = d.metrics.outcomes.WithLabelValues(o.String())
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
		}, pending(true)),
		// Read from the database at each scrape, so it is the same in every
		// process and after a restart; a counter of this process's failures
		// would be neither.
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "storelink_webhook_failed_deliveries",
			Help: "Deliveries that failed (their retry schedule spent) and wait for a redelivery or a recovery.",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n, err := store.FailedDeliveries(ctx)
			if err != nil {
				return -1
			}
			return float64(n)
		}))
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
// for after the attempts in flight. An endpoint has at most its pace's
// limit of attempts in flight and claimAhead times as many claimed to go
// next (pacing.go), so that the next rounds are on hand when attempts end:
// the database records and claims while the endpoint receives, rather than
// each waiting for the other in turn. A claimed delivery goes as soon as
// its endpoint's pace lets it and fewer than Workers are in flight in all.
//
// Results are recorded when at least as many are in as attempts are still
// in flight (so when every attempt has handed in its own, waiting longer
// would gather nothing more, and the next events of these orders wait for
// the record), when recordBatch are in, or recordDelay after the first came
// in: one commit for many results keeps the database from being the limit
// of the delivery rate, and leaves the one writer to the order calls
// between rounds.
func (d *Deliverer) Run(ctx context.Context) error {
	s := newSending(d)
	d.running.Store(s)
	defer d.running.Store(nil)
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
		now := time.Now()
		s.mu.Lock()
		flush := len(s.batch) > 0 && (len(s.batch) >= s.running || len(s.batch) >= recordBatch || late)
		limit := 0
		var caps storelink.ClaimCaps
		if (claim || flush) && ctx.Err() == nil {
			limit = claimAhead*d.Workers - s.waiting(now)
			caps = s.claimCaps(now)
		}
		var record []storelink.AttemptResult
		if flush {
			record, s.batch = s.batch, spare[:0]
		} else if len(s.batch) > 0 && !timing {
			delay.Reset(recordDelay)
			timing = true
		}
		stale := s.takeStale()
		over := ctx.Err() != nil && s.running == 0 && len(s.claimed) == 0 && len(s.batch) == 0
		s.mu.Unlock()
		if len(stale) > 0 {
			d.giveBack(stale)
			claim = true
			continue
		}
		if flush || limit > 0 {
			jobs := d.recordAndClaim(ctx, record, limit, caps)
			if flush {
				clear(record)
				spare = record
				delay.Stop()
				timing, late = false, false
			}
			claim = false
			if len(jobs) > 0 {
				s.add(jobs, now.Add(d.Lease))
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
			s.mu.Lock()
			s.review(time.Now())
			s.mu.Unlock()
		case <-done:
			done = nil // stopping: no more claims
			d.release(s)
		}
	}
}

// release gives back the deliveries claimed and not yet started.
func (d *Deliverer) release(s *sending) {
	s.mu.Lock()
	jobs := s.takeStale()
	for _, c := range s.claimed {
		jobs = append(jobs, *c.job)
		c.pace.claimed--
	}
	s.claimed = nil
	s.mu.Unlock()
	d.giveBack(jobs)
}

// giveBack gives back claimed deliveries that were not attempted, each
// claimable again at once, as it was before its claim.
func (d *Deliverer) giveBack(jobs []storelink.DeliveryJob) {
	if len(jobs) == 0 {
		return
	}
	// Bounded as a stop is: the leases run out otherwise.
	ctx, cancel := context.WithTimeout(context.Background(), stopBound)
	defer cancel()
	if err := d.Store.ReleaseClaims(ctx, jobs); err != nil {
		// Their leases run out and they go again: at least once.
		d.Logger.Error("release claimed deliveries", "error", err, "count", len(jobs))
	}
}

// DropEndpoint gives back, unsent, the deliveries to the endpoint that
// this deliverer claimed ahead and has not started: the endpoint was
// deleted, and its deliveries cancelled, so none of them is to go out.
// Attempts in flight finish; their results move nothing. It never blocks
// for long: the give-back is bounded as a stop's is.
func (d *Deliverer) DropEndpoint(endpointID string) {
	s := d.running.Load()
	if s == nil {
		return
	}
	var dropped []storelink.DeliveryJob
	s.mu.Lock()
	s.claimed = slices.DeleteFunc(s.claimed, func(c claim) bool {
		if c.job.EndpointID == endpointID {
			dropped = append(dropped, *c.job)
			c.pace.claimed--
			return true
		}
		return false
	})
	s.mu.Unlock()
	if len(dropped) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopBound)
	defer cancel()
	if err := d.Store.ReleaseClaims(ctx, dropped); err != nil {
		// Their leases run out; the deliveries are cancelled, and no
		// claim takes them again.
		d.Logger.Error("give back the deliveries of a deleted endpoint", "error", err, "endpoint_id", endpointID, "count", len(dropped))
	}
}

// stopBound is how long the bookkeeping of a stop (recording the attempts
// made, giving back claimed deliveries) may wait for the database: what it
// cannot do by then is left to the leases, which run out, and the
// deliveries go again, at least once.
const stopBound = 3 * time.Second

// recordAndClaim records batch and claims up to limit deliveries. A record
// that fails is logged: the leases run out and the deliveries are tried
// again, at least once, never lost. The store caps the deliveries leased
// per endpoint, those in flight and those claimed ahead of them, by caps;
// the attempts in flight are capped by the endpoints' paces as they start.
func (d *Deliverer) recordAndClaim(ctx context.Context, batch []storelink.AttemptResult, limit int, caps storelink.ClaimCaps) []storelink.DeliveryJob {
	// Not the loop's context: a stop must not cut off the record of the
	// attempts made. Still, once the loop stops, a database that does not
	// answer gets stopBound, not the whole time.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	defer context.AfterFunc(ctx, func() { time.AfterFunc(stopBound, cancel) })()
	jobs, err := d.Store.RecordAndClaim(tctx, batch, storelink.ClaimRequest{Owner: d.Owner, Lease: d.Lease, Limit: limit, Caps: caps})
	if err != nil {
		d.Logger.Error("record delivery attempts and claim deliveries", "error", err, "count", len(batch))
	}
	return jobs
}
