package httpapi

// SetMaxTrackedAddresses lets a test fill the limiter's table with fewer
// addresses than maxTrackedAddresses.
func (l *AuthLimiter) SetMaxTrackedAddresses(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.maxAddrs = n
}
