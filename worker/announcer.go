package worker

import (
	"context"
	"log/slog"
	"time"
)

// Announcer writes the events of the uploads that ended
// (stock_upload.finished) for the endpoints that ask for them: woken when
// this process ended an upload, and every Interval for those that another
// process, or this one before a restart, left due.
type Announcer struct {
	// Announce writes the events of up to limit due uploads and returns how
	// many it took (service.Orders.AnnounceUploads).
	Announce func(ctx context.Context, limit int) (int, error)
	// Delivering, when set, is told that deliveries were queued.
	Delivering func()
	Interval   time.Duration
	Logger     *slog.Logger

	wake chan struct{}
}

// announceBatch is how many uploads' events one transaction writes.
const announceBatch = 64

// announceTimeout bounds one round; what it leaves, the next one takes.
const announceTimeout = 30 * time.Second

// NewAnnouncer returns an announcer that looks for due events every
// interval and when woken.
func NewAnnouncer(announce func(ctx context.Context, limit int) (int, error), delivering func(), interval time.Duration, logger *slog.Logger) *Announcer {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Announcer{Announce: announce, Delivering: delivering, Interval: interval, Logger: logger, wake: make(chan struct{}, 1)}
}

// Wake makes the announcer look for due events now; it never blocks.
func (a *Announcer) Wake() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// Run announces at once, then when woken or every Interval, until ctx is
// done.
func (a *Announcer) Run(ctx context.Context) error {
	t := time.NewTicker(a.Interval)
	defer t.Stop()
	for {
		a.round(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-a.wake:
		case <-t.C:
		}
	}
}

// round writes due events until none is left, or an error (logged; the
// next round tries again).
func (a *Announcer) round(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, announceTimeout)
	defer cancel()
	for {
		n, err := a.Announce(ctx, announceBatch)
		if err != nil {
			if ctx.Err() == nil {
				a.Logger.Error("write the events of ended uploads", "error", err)
			}
			return
		}
		if n > 0 && a.Delivering != nil {
			a.Delivering()
		}
		if n < announceBatch {
			return
		}
	}
}
