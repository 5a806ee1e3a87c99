// Package worker runs storelink's background loops. The domain tables are the
// queues: the processor claims upload rows with a lease, so a crashed worker's
// uploads are claimed again when the lease runs out.
package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"storelink"
	"storelink/feed"
	"storelink/gcmode"
)

// MaxFailures is how many times an upload's file may make its processing
// fail before the upload is rejected as "Processing failed", so that it
// stops blocking its client's later uploads. A failure is the file's when
// the check or the apply of that file ends with an error that is no fault
// of the service and no lost lease (the same file fails the same way on
// each try), or panics: a panic is a bug that the file triggers, recovered,
// logged with the upload's id and counted here, and neither the process
// nor the other uploads go down with it. Rows or a file that the checker
// finds bad are no failure: they are the upload's report (applied with
// row errors, or rejected). A failed upload is tried again, alone, after
// FailureDelay, doubled with each failure.
//
// Nothing else is the file's fault. A claim given back for a fault of the
// service (Processor.Fault: a full disk, a lost database) or at an orderly
// stop is not counted at all; one cut short by the process dying, by its
// lease running out, or by a give-back lost on the way, is an interruption
// (storelink.Claim.Interruptions), which never counts as a failure.
const MaxFailures = 3

// MaxInterruptions is how many interruptions an upload may have before it
// is set aside, its report saying that its processing was interrupted so
// often, not that the file is bad. A file that kills the process each time
// (a runtime fatal error, memory) would otherwise block its client's later
// uploads for ever; an interrupted upload is claimed alone, after
// storelink.InterruptedBackoff (up to 5 minutes), so that twenty
// interruptions take about an hour of a process dying each time it applies
// this file, not a few unlucky restarts.
const MaxInterruptions = 20

// DefaultFailureDelay is the processor's FailureDelay.
const DefaultFailureDelay = time.Second

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
	// FailureDelay is how long an upload whose file made its processing
	// fail waits before it is tried again, doubled with each failure.
	FailureDelay time.Duration
	// Finished, when set, is called after claims were processed, whatever
	// came of them: uploads may have ended (the Announcer's Wake).
	Finished func()

	// putHook, set by tests, wraps the put of every apply: a way to make
	// the apply of one file fail or panic with a real database.
	putHook func(c *storelink.Claim, put func(storelink.StockRow) error) func(storelink.StockRow) error
	// aheadHook, set by tests, runs between a file's check ahead and its
	// apply; rowsAhead is checkAhead's bound (maxRowsAhead).
	aheadHook func(c *storelink.Claim)
	rowsAhead int

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
		Lease: time.Minute, Interval: time.Second, Workers: 2, Batch: DefaultBatch, FailureDelay: DefaultFailureDelay,
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
	if len(claims) == 0 {
		return false, nil
	}
	if p.Finished != nil {
		defer p.Finished()
	}
	if len(claims) == 1 {
		return true, p.runOne(ctx, claims[0])
	}
	return true, p.runBatch(ctx, claims)
}

// runOne processes one claim alone: a large file, an upload claimed
// before, or the only one waiting.
func (p *Processor) runOne(ctx context.Context, c *storelink.Claim) error {
	start := time.Now()
	if n := c.Interruptions(); n >= MaxInterruptions {
		return p.setAside(ctx, c, "interrupted", fmt.Sprintf("Processing of the file was interrupted %d times (the service stopped while applying it), "+
			"so it was set aside to let the later uploads go ahead. Please upload it again; if this repeats, contact the marketplace.", n), nil)
	}
	u, err := p.apply(ctx, c)
	if err != nil {
		return p.ended(ctx, c, err)
	}
	p.faults.healed()
	p.processed(c, u, start, 1)
	return nil
}

// runBatch applies claims of small files together (UploadService.ApplyBatch)
// and deals with each one's end as runOne does; none of them was claimed
// before, so none is to be set aside for its interruptions.
func (p *Processor) runBatch(ctx context.Context, claims []*storelink.Claim) error {
	start := time.Now()
	results, err := p.applyBatch(ctx, claims)
	if err != nil {
		// A panic outside the files' checks: which upload caused it is not
		// known, so each is applied alone, where a panic is its own.
		p.Logger.Error("batch apply panicked; applying its uploads one at a time", "uploads", len(claims), "error", err)
		var errs []error
		for _, c := range claims {
			errs = append(errs, p.runOne(ctx, c))
		}
		return errors.Join(errs...)
	}
	var errs []error
	for i, r := range results {
		c := claims[i]
		if r.Err == nil {
			p.processed(c, r.Upload, start, len(claims))
			continue
		}
		errs = append(errs, p.ended(ctx, c, r.Err))
	}
	if len(errs) < len(claims) {
		p.faults.healed()
	}
	return errors.Join(errs...)
}

// applyBatch is ApplyBatch with a panic turned into an error.
func (p *Processor) applyBatch(ctx context.Context, claims []*storelink.Claim) (results []storelink.BatchResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return p.Uploads.ApplyBatch(ctx, claims, p.checkSmall), nil
}

// ended deals with a claim whose apply ended with err. A stop, a fault of
// the service and a lost lease are not the file's: the claim is left to
// ReleaseOwnLeases, given back uncounted, or left to its new holder. Any
// other error is a failure of the file, and counts (MaxFailures).
func (p *Processor) ended(ctx context.Context, c *storelink.Claim, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("upload %s: %w", c.ID, err)
	case p.fault(err) != nil:
		return p.giveBack(ctx, c, p.fault(err), err)
	case storelink.ErrorCode(err) == storelink.ECONFLICT:
		return fmt.Errorf("upload %s: %w", c.ID, err)
	}
	return p.failed(ctx, c, err)
}

// failed counts a failure of c's file: the upload is tried again after
// FailureDelay, doubled with each failure, or, at its MaxFailures-th, set
// aside as "Processing failed". Should the give-back be lost, the lease
// runs out and the claim counts as an interruption instead.
func (p *Processor) failed(ctx context.Context, c *storelink.Claim, err error) error {
	n := c.Failures + 1
	if n >= MaxFailures {
		return p.setAside(ctx, c, "failed", fmt.Sprintf("The file could not be processed: it failed %d times with an internal error "+
			"and was set aside. Please upload it again; if this repeats, contact the marketplace with the upload id.", n), err)
	}
	after := p.FailureDelay << min(n-1, 10)
	p.Logger.Error("upload failed; to be tried again", "upload_id", c.ID, "client_id", c.ClientID, "attempt", c.Attempts,
		"failures", n, "retry_ms", after.Milliseconds(), "error", err)
	if rerr := p.Uploads.Retry(ctx, c, after); rerr != nil {
		return fmt.Errorf("upload %s failed: %v; give back: %w", c.ID, err, p.faulted(rerr))
	}
	return nil
}

// setAside rejects c's upload with a "Processing failed" problem saying
// why (message); cause is the error of its last failure, or nil.
func (p *Processor) setAside(ctx context.Context, c *storelink.Claim, why, message string, cause error) error {
	err := p.Uploads.Fail(ctx, c, storelink.Problem{
		Type: storelink.ProblemProcessing, Message: message, LineNumbers: []storelink.LineRef{},
	})
	p.Logger.Error("upload set aside", "upload_id", c.ID, "client_id", c.ClientID, "why", why, "attempt", c.Attempts,
		"failures", c.Failures, "interruptions", c.Interruptions(), "error", cause, "fail_error", err)
	if err != nil {
		return fmt.Errorf("set upload %s aside: %w", c.ID, p.faulted(err))
	}
	p.metrics.processed.WithLabelValues(string(storelink.UploadRejected)).Inc()
	p.pace.add(time.Now())
	return nil
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

// apply runs the feed check inside the store's apply transaction. A panic
// anywhere in it (the check, the writes) is turned into an error, logged
// with the upload's id and stack, so that one bad file cannot stop the
// loop or the process.
func (p *Processor) apply(ctx context.Context, c *storelink.Claim) (u *storelink.Upload, err error) {
	defer func() {
		if r := recover(); r != nil {
			p.Logger.Error("upload processing panicked", "upload_id", c.ID, "client_id", c.ClientID, "panic", fmt.Sprint(r),
				"stack", string(debug.Stack()))
			u, err = nil, fmt.Errorf("panic while processing: %v", r)
		}
	}()
	body := c.Body
	c.Body = nil // the check streams from body; let the claim not pin it too
	defer p.GC.HoldLarge(body.Len())()
	if ahead, ok := p.checkAhead(ctx, c, body); ok {
		if p.aheadHook != nil {
			p.aheadHook(c)
		}
		return p.Uploads.Apply(ctx, c, func(stores map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
			put = p.hooked(c, put)
			if !maps.Equal(stores, ahead.stores) {
				// A store was added or removed since: checked again, here.
				return checkInBackground(body, stores, put)
			}
			for _, r := range ahead.rows {
				if err := put(r); err != nil {
					return storelink.FeedReport{}, fmt.Errorf("put stock row of line %d: %w", r.Line, err)
				}
			}
			return ahead.report, nil
		})
	}
	return p.Uploads.Apply(ctx, c, func(stores map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
		return checkInBackground(body, stores, p.hooked(c, put))
	})
}

// maxRowsAhead is the most valid rows a check ahead of the apply keeps
// (checkAhead), about a megabyte of them. A check ahead that stops there
// has read about 2% of a 10 MiB feed of valid rows, which is then checked
// again inside the apply; at 50,000 rows the re-sent 10 MiB feed of
// BenchmarkStockImport was 27% slower (docs/benchmarks.md).
const maxRowsAhead = 4096

// checked is a file checked ahead of its apply, against stores.
type checked struct {
	stores map[string]bool
	rows   []storelink.StockRow
	report storelink.FeedReport
}

// checkAhead checks a file before its apply's transaction, against the
// client's stores as they are now, keeping its valid rows; ok is false
// when it has more than maxRowsAhead (the check stops there) or the check
// could not run. The apply then writes the rows kept, unless the stores
// changed in between. So the transaction, which on an embedded database
// every other writer waits for, holds no parsing of a file that is
// rejected, or that drops most of its rows, or that is small: only the
// writes. A file of more valid rows is checked inside the transaction, as
// its rows are written, the parse overlapping the writes that take longer
// (checkInBackground); what the check ahead read of it is done again
// there.
func (p *Processor) checkAhead(ctx context.Context, c *storelink.Claim, body storelink.Chunks) (ch checked, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			p.Logger.Error("upload check ahead panicked", "upload_id", c.ID, "client_id", c.ClientID, "panic", fmt.Sprint(r),
				"stack", string(debug.Stack()))
			ok = false
		}
	}()
	stores, err := p.Uploads.ClientStores(ctx, c.ClientID)
	if err != nil {
		return checked{}, false
	}
	ch.stores = stores
	ch.report, err = feed.CheckWithErrorFile(body.Reader(), stores, func(r storelink.StockRow) error {
		if len(ch.rows) == cmp.Or(p.rowsAhead, maxRowsAhead) {
			return errTooManyAhead
		}
		ch.rows = append(ch.rows, r)
		return nil
	}, errorFileLimit(body.Len()))
	if err != nil {
		return checked{}, false
	}
	return ch, true
}

// errTooManyAhead stops a check ahead at maxRowsAhead valid rows.
var errTooManyAhead = errors.New("more valid rows than a check ahead keeps")

// hooked is put as the test hook wraps it, or put.
func (p *Processor) hooked(c *storelink.Claim, put func(storelink.StockRow) error) func(storelink.StockRow) error {
	if p.putHook == nil {
		return put
	}
	return p.putHook(c, put)
}

// checkSmall is the check of a small file of a batch, on the caller's
// goroutine: for a few rows, a goroutine beside the writes would cost more
// than it saves. A panic in the check is its error, which ends the batch's
// transaction; the uploads are then applied one at a time, and the panic
// is that upload's alone.
func (p *Processor) checkSmall(c *storelink.Claim) storelink.FeedApply {
	return func(stores map[string]bool, put func(storelink.StockRow) error) (report storelink.FeedReport, err error) {
		defer func() {
			if r := recover(); r != nil {
				p.Logger.Error("upload check panicked", "upload_id", c.ID, "client_id", c.ClientID, "panic", fmt.Sprint(r),
					"stack", string(debug.Stack()))
				err = fmt.Errorf("panic while checking: %v", r)
			}
		}()
		return feed.CheckWithErrorFile(c.Body.Reader(), stores, p.hooked(c, put), errorFileLimit(c.Body.Len()))
	}
}
