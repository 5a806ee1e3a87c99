package worker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"storelink"
)

// The pause after a fault starts at faultPauseMin and doubles while faults
// go on, up to faultPauseMax: a full disk or a lost database is not hammered
// with applies that cannot succeed, and work resumes soon after it heals.
const (
	faultPauseMin = time.Second
	faultPauseMax = 30 * time.Second
)

// faultPause is the processor's state across its workers while a fault of
// the service lasts: how long they pause, and the claims they could not give
// back.
type faultPause struct {
	mu    sync.Mutex
	pause time.Duration // the last pause; 0 after a successful apply
	until time.Time
	// unreleased holds claims ended by a fault whose release failed too.
	// They are released before anything is claimed again, so that their
	// leases, which run out meanwhile, do not count as interruptions.
	unreleased map[string]*storelink.Claim
}

// fault records a fault at now and returns how long to pause from now. A
// fault during a pause (another worker's, in the same outage) keeps it; one
// soon after a pause ended doubles it; a first fault, or one long after
// the last pause, starts again at faultPauseMin.
func (f *faultPause) fault(now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case now.Before(f.until):
		return f.until.Sub(now)
	case f.pause > 0 && now.Sub(f.until) <= faultPauseMax:
		f.pause = min(2*f.pause, faultPauseMax)
	default:
		f.pause = faultPauseMin
	}
	f.until = now.Add(f.pause)
	return f.pause
}

// healed ends the growth of the pause: an apply succeeded.
func (f *faultPause) healed() {
	f.mu.Lock()
	f.pause = 0
	f.mu.Unlock()
}

// wait is how much of the pause is left at now.
func (f *faultPause) wait(now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return max(f.until.Sub(now), 0)
}

// keep remembers a claim whose release failed.
func (f *faultPause) keep(c *storelink.Claim) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unreleased == nil {
		f.unreleased = map[string]*storelink.Claim{}
	}
	f.unreleased[c.ID] = c
}

// pending tells whether claims wait to be released.
func (f *faultPause) pending() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.unreleased) > 0
}

// take hands the claims still to be released to one worker, so that no
// two release the same claim; the ones it cannot release it keeps again.
func (f *faultPause) take() []*storelink.Claim {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*storelink.Claim, 0, len(f.unreleased))
	for _, c := range f.unreleased {
		out = append(out, c)
	}
	clear(f.unreleased)
	return out
}

// fault returns err as the fault it is (an *storelink.Error with code
// ENOSPACE or EUNAVAILABLE), or nil when it is none.
func (p *Processor) fault(err error) error {
	if p.Fault == nil || err == nil {
		return nil
	}
	if f := p.Fault(err); faultCode(f) != "" {
		return f
	}
	return nil
}

// faulted starts a pause when err is a fault and returns err, with the
// fault first in its chain so that faultCode finds it.
func (p *Processor) faulted(err error) error {
	if f := p.fault(err); f != nil {
		p.faults.fault(time.Now())
		return fmt.Errorf("%w: %w", f, err)
	}
	return err
}

// faultCode is the code of the fault err is, or "".
func faultCode(err error) string {
	switch code := storelink.ErrorCode(err); code {
	case storelink.ENOSPACE, storelink.EUNAVAILABLE:
		return code
	}
	return ""
}

// giveBack releases a claim whose apply failed for a fault, uncounted and
// for the length of the pause it starts. A release that fails too (the
// database is still away) is made again before the next claim.
func (p *Processor) giveBack(ctx context.Context, c *storelink.Claim, f, err error) error {
	pause := p.faults.fault(time.Now())
	p.gate.Lock()
	defer p.gate.Unlock()
	if rerr := p.Uploads.Release(ctx, c, pause); rerr != nil {
		p.faults.keep(c)
		return fmt.Errorf("upload %s: %w: %w (release: %v)", c.ID, f, err, rerr)
	}
	return fmt.Errorf("upload %s given back: %w: %w", c.ID, f, err)
}

// releasePending makes the releases that failed during a fault. Until they
// are made nothing is claimed: the database that refuses them would fail
// an apply too. A release that fails for another reason is dropped; its
// lease runs out and counts as an interruption.
func (p *Processor) releasePending(ctx context.Context) error {
	if !p.faults.pending() {
		return nil
	}
	p.gate.Lock()
	defer p.gate.Unlock()
	claims := p.faults.take()
	for i, c := range claims {
		err := p.Uploads.Release(ctx, c, 0)
		if err != nil && p.fault(err) != nil {
			for _, c := range claims[i:] {
				p.faults.keep(c)
			}
			return p.faulted(err)
		}
		if err != nil {
			// Not a fault: this claim's lease runs out: an interruption.
			for _, c := range claims[i+1:] {
				p.faults.keep(c)
			}
			return err
		}
		p.Logger.Info("upload given back after a fault", "upload_id", c.ID, "client_id", c.ClientID)
	}
	return nil
}
