package worker

import (
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
	// leases, which run out meanwhile, do not count as attempts.
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
