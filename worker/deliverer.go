package worker

import (
	"context"
	"log/slog"
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
	// Lease must outlast an attempt (the webhook timeout) with room to
	// record it.
	Lease time.Duration
	// Workers is the number of attempts in flight at once; PerEndpoint caps
	// those to one endpoint, so a slow endpoint cannot hold them all.
	Workers     int
	PerEndpoint int
	// Interval is how often due deliveries are looked for when nothing
	// wakes the loop (retries come due, another process wrote events).
	Interval time.Duration

	wake    chan struct{}
	metrics deliveryMetrics
}

type deliveryMetrics struct {
	outcomes *prometheus.CounterVec
	latency  prometheus.Histogram
}

// NewDeliverer returns a deliverer with its metrics registered on reg.
func NewDeliverer(store storelink.WebhookService, client *webhook.Client, retry storelink.RetryPolicy, timeout time.Duration,
	logger *slog.Logger, owner string, reg prometheus.Registerer) *Deliverer {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	d := &Deliverer{
		Store: store, Client: client, Retry: retry, Logger: logger, Owner: owner,
		Lease: timeout + 30*time.Second, Workers: 128, PerEndpoint: 16, Interval: time.Second,
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

// Run delivers until ctx is done, then lets the attempts in flight finish
// (each is bounded by the webhook timeout) and records them.
func (d *Deliverer) Run(ctx context.Context) error {
	results := make(chan storelink.AttemptResult, d.Workers)
	// outstanding counts the attempts started whose results the recorder
	// has not yet taken: when it has them all, it records at once.
	var outstanding atomic.Int64
	recorded := make(chan struct{})
	go func() {
		d.record(results, &outstanding)
		close(recorded)
	}()
	done := make(chan struct{}, d.Workers)
	ticker := time.NewTicker(d.Interval)
	defer ticker.Stop()
	inflight := 0
	claim := true
	for ctx.Err() == nil {
		if free := d.Workers - inflight; claim && free > 0 {
			jobs, err := d.Store.ClaimDeliveries(ctx, d.Owner, d.Lease, free, d.PerEndpoint)
			if err != nil && ctx.Err() == nil {
				d.Logger.Error("claim deliveries", "error", err)
			}
			for i := range jobs {
				inflight++
				outstanding.Add(1)
				go func(j *storelink.DeliveryJob) {
					results <- d.attempt(j)
					done <- struct{}{}
				}(&jobs[i])
			}
		}
		claim = true
		select {
		case <-ctx.Done():
		case <-done:
			// No claim for the slot yet: the attempt holds its lease, and
			// with it its endpoint's place under the cap and its order's
			// turn, until its result is recorded, and the recorder wakes the
			// loop then. A claim now would mostly find nothing, and hold up
			// the recording on SQLite's one writer.
			inflight--
			claim = false
		case <-d.wake:
		case <-ticker.C:
		}
	}
	for ; inflight > 0; inflight-- {
		<-done
	}
	close(results)
	<-recorded
	return nil
}

// attempt makes one delivery attempt and decides what it means.
func (d *Deliverer) attempt(j *storelink.DeliveryJob) storelink.AttemptResult {
	keys := make([][]byte, 0, len(j.Secrets))
	for _, s := range j.Secrets {
		if k, err := webhook.ParseSecret(s); err == nil {
			keys = append(keys, k)
		}
	}
	start := time.Now()
	// Not the loop's context: a stop lets the attempt finish within the
	// webhook timeout rather than cutting it off and counting a failure.
	res := d.Client.Send(context.Background(), webhook.Request{URL: j.URL, EventID: j.EventID, Body: j.Body, Keys: keys, APIKey: j.APIKey}, start)
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
	d.metrics.outcomes.WithLabelValues([]string{"succeeded", "retry", "failed", "gone"}[r.Outcome]).Inc()
	if r.Outcome != storelink.OutcomeSucceeded {
		d.Logger.Warn("webhook attempt failed", "delivery_id", j.DeliveryID, "event_id", j.EventID, "endpoint_id", j.EndpointID,
			"attempt", j.Attempt, "status", res.StatusCode, "error", a.Error, "outcome", r.Outcome)
	}
	return r
}

// recordBatch and recordDelay bound how results are grouped into one
// transaction: one commit for many attempts keeps the database from being
// the limit of the delivery rate.
const (
	recordBatch = 128
	recordDelay = 5 * time.Millisecond
)

// record writes results in batches until results is closed. A batch is
// written when it is full, recordDelay after its first result, or as soon
// as every attempt started has handed in its result: waiting longer would
// gather nothing more, and the next events of these orders, and the
// endpoint's places under its cap, wait for the record.
func (d *Deliverer) record(results <-chan storelink.AttemptResult, outstanding *atomic.Int64) {
	var batch []storelink.AttemptResult
	flush := func() {
		if len(batch) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.Store.RecordAttempts(ctx, batch); err != nil {
			// The leases run out and the deliveries are tried again: at
			// least once, never lost.
			d.Logger.Error("record delivery attempts", "error", err, "count", len(batch))
		}
		batch = batch[:0]
		d.Wake() // the next events of these orders may go now
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case r, ok := <-results:
			if !ok {
				flush()
				return
			}
			if len(batch) == 0 {
				timer.Reset(recordDelay)
			}
			batch = append(batch, r)
			if outstanding.Add(-1) == 0 || len(batch) >= recordBatch {
				timer.Stop()
				flush()
			}
		case <-timer.C:
			flush()
		}
	}
}
