package worker

import (
	"context"
	"log/slog"
	"time"

	"storelink"
)

// FileSweeper removes the files of finished uploads once the retention has
// passed since they were received: the files are kept for partners to
// download (the file and its error file), and no longer than promised.
// Every process may run one; the store lets each file go once.
type FileSweeper struct {
	Uploads   storelink.UploadService
	Retention time.Duration
	// Interval is how often expired files are looked for.
	Interval time.Duration
	Logger   *slog.Logger
}

// DefaultUploadRetention is how long an upload's files are kept when the
// operator does not say.
const DefaultUploadRetention = 7 * 24 * time.Hour

// Run sweeps at once and then every Interval until ctx is done.
func (f *FileSweeper) Run(ctx context.Context) error {
	logger := f.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(f.Interval)
	defer t.Stop()
	for {
		f.sweep(ctx, logger)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// sweepTimeout bounds one sweep; what it leaves, the next one takes.
const sweepTimeout = time.Minute

func (f *FileSweeper) sweep(ctx context.Context, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, sweepTimeout)
	defer cancel()
	n, err := f.Uploads.ExpireFiles(ctx, f.Retention)
	switch {
	case err != nil && ctx.Err() == nil:
		logger.Error("remove expired upload files", "error", err, "removed", n)
	case n > 0:
		logger.Info("removed expired upload files", "removed", n, "retention", f.Retention.String())
	}
}
