package worker

import (
	"context"
	"log/slog"
	"time"
)

// KeyUseFlusher writes when the API keys were last used
// (service.Partners.FlushKeyUses) every Interval, and once more when it is
// stopped, so that an orderly stop loses none.
type KeyUseFlusher struct {
	Flush    func(context.Context) error
	Interval time.Duration
	Logger   *slog.Logger
}

// DefaultKeyUseInterval is how often key uses are written: a key's last
// use is shown to the minute.
const DefaultKeyUseInterval = time.Minute

// Run flushes every Interval until ctx is done, then once more.
func (f *KeyUseFlusher) Run(ctx context.Context) error {
	logger := f.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(f.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			f.flush(last, logger)
			return nil
		case <-t.C:
			f.flush(ctx, logger)
		}
	}
}

func (f *KeyUseFlusher) flush(ctx context.Context, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, sweepTimeout)
	defer cancel()
	if err := f.Flush(ctx); err != nil {
		logger.Error("record when API keys were last used", "error", err)
	}
}
