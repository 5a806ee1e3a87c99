// Package worker runs storelink's background loops. The domain tables are the
// queues: the processor claims upload rows with a lease, so a crashed worker's
// uploads are claimed again when the lease runs out.
package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"storelink"
	"storelink/feed"
	"storelink/gcmode"
)

// MaxAttempts is how often an upload is claimed before it is given up on.
// An upload that kills its processor every time would otherwise block its
// client's later uploads for ever.
//
// A claim whose apply fails for a fault of the service (Processor.Fault) is
// given back uncounted, so an accepted upload is never given up on because
// the disk was full or the database away, however long that lasts. A claim
// still counts when its processor dies, when the claim's own answer is lost
// on the way back, or, on PostgreSQL with several processes, when its
// release fails and its lease runs out and another process claims the
// upload before this one can release it: each of those takes an outage
// during an apply, so giving up takes more than MaxAttempts of them.
const MaxAttempts = 3

// DefaultBatch bounds the small uploads a processor claims and applies
// together, in one transaction. Applying a file of a few rows costs less
// than the commit that makes it durable; a batch shares one commit. The
// bounds keep a batch's apply to a few milliseconds of row writes (256 KiB
// of CSV is about 4,000 rows); a larger file is applied alone, as it always
// was, its check streaming beside its writes.
var DefaultBatch = storelink.BatchLimit{Uploads: 256, Bytes: 256 << 10}

// Processor applies accepted stock uploads, oldest first, in acceptance
// order per client.
type Processor struct {
	Uploads storelink.UploadService
	Logger  *slog.Logger
	// Owner names this process in leases.
	Owner string
	// Lease is how long a claim holds before another worker may take over.
	Lease time.Duration
	// Interval is how often the queue is polled when nothing wakes the loop,
	// to pick up what a crash or another process left.
	Interval time.Duration
	// Workers is the number of claims (an upload, or a batch of small
	// ones) processed at once.
	Workers int
	// Batch bounds the uploads claimed and applied together; Uploads 1
	// applies each alone.
	Batch storelink.BatchLimit
	// Fault tells a fault of the service from other errors: it returns
	// ENOSPACE for a full disk and EUNAVAILABLE for a database that cannot
	// be reached (the store's Fault function). After a fault the workers
	// pause, and an apply that failed for one gives its claim back
	// uncounted. Nil: no error is a fault.
	Fault func(error) error
	// GC lowers the GC percent while a large file is being applied;
	// optional (nil leaves the setting alone).
	GC *gcmode.Governor

	wake    chan struct{}
	metrics processorMetrics
	pace    pace
	faults  faultPause
	// gate keeps claims (shared) apart from releases (exclusive): a claim
	// being given back is never claimed again by another worker before the
	// release is made, which would count it.
	gate sync.RWMutex
}

type processorMetrics struct {
	processed *prometheus.CounterVec
	rows      *prometheus.CounterVec
	duration  prometheus.Histogram
	lag       prometheus.Histogram
}

// NewProcessor returns a processor with its metrics registered on reg.
func NewProcessor(uploads storelink.UploadService, logger *slog.Logger, owner string, reg prometheus.Registerer) *Processor {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p := &Processor{
		Uploads: uploads, Logger: logger, Owner: owner,
		Lease: time.Minute, Interval: time.Second, Workers: 2, Batch: DefaultBatch,
		wake: make(chan struct{}, 1),
		pace: pace{start: time.Now()},
		metrics: processorMetrics{
			processed: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "storelink_uploads_processed_total", Help: "Uploads processed, by final status.",
			}, []string{"status"}),
			rows: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "storelink_feed_rows_total", Help: "Feed rows processed, by result (applied, rejected).",
			}, []string{"result"}),
			duration: prometheus.NewHistogram(prometheus.HistogramOpts{
				Name: "storelink_upload_processing_seconds", Help: "Time from claim to the applied or rejected commit.",
				Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
			}),
			lag: prometheus.NewHistogram(prometheus.HistogramOpts{
				Name:    "storelink_upload_lag_seconds",
				Help:    "Time from an upload's acceptance (its 200) to its applied or rejected commit: the wait and the processing, what a partner waits for.",
				Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600},
			}),
		},
	}
	reg.MustRegister(p.metrics.processed, p.metrics.rows, p.metrics.duration, p.metrics.lag,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "storelink_upload_queue_depth", Help: "Uploads accepted but not yet applied or rejected.",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n, err := uploads.QueueDepth(ctx)
			if err != nil {
				return -1
			}
			return float64(n)
		}),
		newBacklogCollector(uploads))
	return p
}

// Rate is how many uploads per second this process finished over the last
// minute. With several processes on one database each sees its own share,
// so an estimate made from it errs on the long side.
func (p *Processor) Rate() float64 { return p.pace.perSecond(time.Now()) }

// Wake makes an idle worker look at the queue now; it never blocks.
func (p *Processor) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run processes uploads until ctx is done. An upload in the middle of
// processing when ctx ends is rolled back and stays claimable.
func (p *Processor) Run(ctx context.Context) error {
	done := make(chan struct{})
	for range max(p.Workers, 1) {
		go func() {
			defer func() { done <- struct{}{} }()
			p.loop(ctx)
		}()
	}
	for range max(p.Workers, 1) {
		<-done
	}
	return nil
}

func (p *Processor) loop(ctx context.Context) {
	ticker := time.NewTicker(p.Interval)
	defer ticker.Stop()
	for {
		for ctx.Err() == nil {
			if d := p.faults.wait(time.Now()); d > 0 {
				// A wake-up does not cut the pause short: while a fault
				// lasts, new uploads would only fail the same way.
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
			worked, err := p.RunOnce(ctx)
			if err != nil && ctx.Err() == nil {
				if code := faultCode(err); code != "" {
					p.Logger.Warn("process upload: paused by a fault", "code", code,
						"pause_ms", p.faults.wait(time.Now()).Milliseconds(), "error", err)
				} else {
					p.Logger.Error("process upload", "error", err)
				}
			}
			if !worked || err != nil {
				break
			}
			p.Wake() // there may be more: let another worker look too
		}
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-ticker.C:
		}
	}
}

// RunOnce claims and processes one upload, or a batch of small ones; it
// reports whether there was one. An error that is a fault of the service
// (ENOSPACE, EUNAVAILABLE) has started a pause, which Run keeps; its
// claims, if any, were given back.
func (p *Processor) RunOnce(ctx context.Context) (bool, error) {
	if err := p.releasePending(ctx); err != nil {
		return false, err
	}
	p.gate.RLock()
	claims, err := p.Uploads.ClaimBatch(ctx, p.Owner, p.Lease, p.Batch)
	p.gate.RUnlock()
	if err != nil {
		return false, p.faulted(err)
	}
	switch len(claims) {
	case 0:
		return false, nil
	case 1:
		return true, p.runOne(ctx, claims[0])
	}
	return true, p.runBatch(ctx, claims)
}

// runOne processes one claim alone: a large file, an upload claimed
// before, or the only one waiting.
func (p *Processor) runOne(ctx context.Context, c *storelink.Claim) error {
	start := time.Now()
	if c.Attempts > MaxAttempts {
		err := p.Uploads.Fail(ctx, c, storelink.Problem{
			Type:        "Processing failed",
			Message:     fmt.Sprintf("The file could not be processed in %d attempts and was set aside. Please upload it again; if this repeats, contact the marketplace.", MaxAttempts),
			LineNumbers: []storelink.LineRef{},
		})
		p.Logger.Error("upload given up", "upload_id", c.ID, "client_id", c.ClientID, "attempt", c.Attempts, "error", err)
		p.metrics.processed.WithLabelValues(string(storelink.UploadRejected)).Inc()
		p.pace.add(time.Now())
		return err
	}
	u, err := p.apply(ctx, c)
	if err != nil && ctx.Err() == nil {
		if f := p.fault(err); f != nil {
			return p.giveBack(ctx, c, f, err)
		}
	}
	if err != nil {
		return fmt.Errorf("upload %s: %w", c.ID, err)
	}
	p.faults.healed()
	p.processed(c, u, start, 1)
	return nil
}

// runBatch applies claims of small files together (UploadService.ApplyBatch)
// and deals with each one's end as runOne does; none of them was claimed
// before, so none is to be given up on.
func (p *Processor) runBatch(ctx context.Context, claims []*storelink.Claim) error {
	start := time.Now()
	results := p.Uploads.ApplyBatch(ctx, claims, checkSmall)
	var errs []error
	for i, r := range results {
		c := claims[i]
		switch {
		case r.Err == nil:
			p.processed(c, r.Upload, start, len(claims))
			continue
		case ctx.Err() == nil && p.fault(r.Err) != nil:
			errs = append(errs, p.giveBack(ctx, c, p.fault(r.Err), r.Err))
		default:
			errs = append(errs, fmt.Errorf("upload %s: %w", c.ID, r.Err))
		}
	}
	if len(errs) < len(claims) {
		p.faults.healed()
	}
	return errors.Join(errs...)
}

// processed counts and logs a finished upload, processed since start in a
// batch of batch uploads.
func (p *Processor) processed(c *storelink.Claim, u *storelink.Upload, start time.Time, batch int) {
	elapsed := time.Since(start)
	p.pace.add(time.Now())
	p.metrics.duration.Observe(elapsed.Seconds())
	if u.FinishedAt != nil {
		p.metrics.lag.Observe(u.FinishedAt.Sub(u.ReceivedAt).Seconds())
	}
	p.metrics.processed.WithLabelValues(string(u.Status)).Inc()
	p.metrics.rows.WithLabelValues("applied").Add(float64(u.RowsApplied))
	p.metrics.rows.WithLabelValues("rejected").Add(float64(u.RowsRejected))
	p.Logger.Info("upload processed", "upload_id", c.ID, "client_id", c.ClientID, "attempt", c.Attempts,
		"status", u.Status, "rows_total", u.RowsTotal, "rows_applied", u.RowsApplied, "rows_unchanged", u.RowsUnchanged,
		"rows_rejected", u.RowsRejected, "bytes", u.SizeBytes, "batch", batch, "duration_ms", elapsed.Milliseconds())
}

// apply runs the feed check inside the store's apply transaction; a panic in
// the check is turned into an error so one bad file cannot stop the loop.
func (p *Processor) apply(ctx context.Context, c *storelink.Claim) (u *storelink.Upload, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic while processing: %v", r)
		}
	}()
	body := c.Body
	c.Body = nil // the check streams from body; let the claim not pin it too
	defer p.GC.HoldLarge(int64(len(body)))()
	return p.Uploads.Apply(ctx, c, func(stores map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
		return checkInBackground(body, stores, put)
	})
}

// checkSmall is the check of a small file of a batch, on the caller's
// goroutine: for a few rows, a goroutine beside the writes would cost more
// than it saves. A panic in the check is its error, which ends the batch's
// transaction; the uploads are then applied one at a time, and the panic
// is that upload's alone.
func checkSmall(c *storelink.Claim) storelink.FeedApply {
	return func(stores map[string]bool, put func(storelink.StockRow) error) (report storelink.FeedReport, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic while checking: %v", r)
			}
		}()
		return feed.CheckWithErrorFile(bytes.NewReader(c.Body), stores, put, errorFileLimit(len(c.Body)))
	}
}
