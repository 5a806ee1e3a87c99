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
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"storelink"
	"storelink/feed"
	"storelink/gcmode"
)

// MaxAttempts is how often an upload is claimed before it is given up on.
// An upload that kills its processor every time would otherwise block its
// client's later uploads for ever.
const MaxAttempts = 3

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
	// Workers is the number of uploads processed at once.
	Workers int

	wake    chan struct{}
	metrics processorMetrics
	pace    pace
}

type processorMetrics struct {
	processed *prometheus.CounterVec
	rows      *prometheus.CounterVec
	duration  prometheus.Histogram
}

// NewProcessor returns a processor with its metrics registered on reg.
func NewProcessor(uploads storelink.UploadService, logger *slog.Logger, owner string, reg prometheus.Registerer) *Processor {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p := &Processor{
		Uploads: uploads, Logger: logger, Owner: owner,
		Lease: time.Minute, Interval: time.Second, Workers: 2,
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
		},
	}
	reg.MustRegister(p.metrics.processed, p.metrics.rows, p.metrics.duration,
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
			worked, err := p.RunOnce(ctx)
			if err != nil && ctx.Err() == nil {
				p.Logger.Error("process upload", "error", err)
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

// RunOnce claims and processes one upload; it reports whether there was one.
func (p *Processor) RunOnce(ctx context.Context) (bool, error) {
	c, err := p.Uploads.Claim(ctx, p.Owner, p.Lease)
	if err != nil || c == nil {
		return false, err
	}
	start := time.Now()
	log := p.Logger.With("upload_id", c.ID, "client_id", c.ClientID, "attempt", c.Attempts)
	if c.Attempts > MaxAttempts {
		err := p.Uploads.Fail(ctx, c, storelink.Problem{
			Type:        "Processing failed",
			Message:     fmt.Sprintf("The file could not be processed in %d attempts and was set aside. Please upload it again; if this repeats, contact the marketplace.", MaxAttempts),
			LineNumbers: []storelink.LineRef{},
		})
		log.Error("upload given up", "error", err)
		p.metrics.processed.WithLabelValues(string(storelink.UploadRejected)).Inc()
		p.pace.add(time.Now())
		return true, err
	}
	u, err := p.apply(ctx, c)
	if err != nil {
		return true, fmt.Errorf("upload %s: %w", c.ID, err)
	}
	elapsed := time.Since(start)
	p.pace.add(time.Now())
	p.metrics.duration.Observe(elapsed.Seconds())
	p.metrics.processed.WithLabelValues(string(u.Status)).Inc()
	p.metrics.rows.WithLabelValues("applied").Add(float64(u.RowsApplied))
	p.metrics.rows.WithLabelValues("rejected").Add(float64(u.RowsRejected))
	log.Info("upload processed", "status", u.Status, "rows_total", u.RowsTotal, "rows_applied", u.RowsApplied,
		"rows_rejected", u.RowsRejected, "bytes", u.SizeBytes, "duration_ms", elapsed.Milliseconds())
	return true, nil
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
	defer gcmode.Lean(int64(len(body)))()
	return p.Uploads.Apply(ctx, c, func(stores map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
		return checkAhead(body, stores, put)
	})
}

// Rows are handed from the check to the writer in batches of checkBatch, with
// up to checkDepth batches in flight: enough to keep both sides busy, little
// enough (about a megabyte) not to matter for memory.
const (
	checkBatch = 512
	checkDepth = 4
)

// errStopped ends the check when the writer has stopped taking rows.
var errStopped = errors.New("the writer stopped")

// checkAhead runs feed.Check on a goroutine of its own and calls put on the
// caller's goroutine, the one that holds the apply transaction, so that
// decoding and checking the next rows overlaps with writing the earlier ones.
// On a machine with two cores an import then takes about as long as its
// database writes alone. put sees the same rows in the same (file) order as
// when Check calls it directly. A panic in the check comes back as an error.
func checkAhead(body []byte, stores map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
	full := make(chan []storelink.StockRow, checkDepth)
	free := make(chan []storelink.StockRow, checkDepth+1)
	stop := make(chan struct{})
	type result struct {
		report storelink.FeedReport
		err    error
	}
	done := make(chan result, 1)
	go func() {
		var res result
		defer func() {
			if r := recover(); r != nil {
				res.err = fmt.Errorf("panic while checking: %v", r)
			}
			close(full)
			done <- res
		}()
		batch := make([]storelink.StockRow, 0, checkBatch)
		send := func() error {
			select {
			case full <- batch:
			case <-stop:
				return errStopped
			}
			select {
			case batch = <-free:
			default:
				batch = make([]storelink.StockRow, 0, checkBatch)
			}
			return nil
		}
		res.report, res.err = feed.Check(bytes.NewReader(body), stores, func(r storelink.StockRow) error {
			if batch = append(batch, r); len(batch) == checkBatch {
				return send()
			}
			return nil
		})
		if res.err == nil && len(batch) > 0 {
			res.err = send()
		}
	}()

	// Whatever ends the writing (an error of put, a panic), the checker is
	// told to stop, so that it never blocks on a full channel; it then ends
	// at the next row it would hand over.
	var putErr error
	stopped := false
	defer func() {
		if !stopped {
			close(stop)
		}
	}()
	for batch := range full {
		for i := range batch {
			if putErr = put(batch[i]); putErr != nil {
				putErr = fmt.Errorf("put stock row of line %d: %w", batch[i].Line, putErr)
				break
			}
		}
		if putErr != nil {
			close(stop)
			stopped = true
			break
		}
		clear(batch) // let the rows' strings go
		free <- batch[:0]
	}
	res := <-done
	if putErr != nil {
		return res.report, putErr
	}
	return res.report, res.err
}
