package httpapi

import "time"

// SetMaxTrackedAddresses lets a test fill the limiter's table with fewer
// addresses than maxTrackedAddresses.
func (l *AuthLimiter) SetMaxTrackedAddresses(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.maxAddrs = n
}

// SetClock has the limit read the time from now, so that a test moves
// time rather than waiting for it.
func (l *RateLimit) SetClock(now func() time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.now = now
}
