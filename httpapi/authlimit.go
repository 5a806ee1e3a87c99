package httpapi

import (
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"storelink"
)

// DefaultAuthFailuresPerMinute is the failed authentications a remote
// address may make per minute when nothing else is configured.
const DefaultAuthFailuresPerMinute = 20

// maxTrackedAddresses bounds the limiter's memory. Addresses beyond it
// share one bucket until tracked ones refill and are forgotten.
const maxTrackedAddresses = 10000

// AuthLimiter limits failed authentications (a wrong admin token, a wrong
// API key, a refused dashboard login) per remote address, so that guessing
// a credential cannot go faster than the limit. Each address has a token
// bucket that holds perMinute failures and refills evenly over a minute;
// only failures take from it. While an address's bucket is empty every
// attempt from it is refused with 429, even one with the right credentials:
// otherwise a guesser would learn from the answer which guess was right.
// Failures that were already in flight when the bucket ran out still count
// (the bucket goes below zero), so parallel guesses buy no extra rate.
//
// The address is the connection's (http.Request.RemoteAddr), never a
// header such as X-Forwarded-For, which a client can write itself. Behind a
// reverse proxy every client therefore shares the proxy's bucket. IPv6
// addresses count per /64, the block one host is usually given.
//
// It is in memory and per process: a full bucket is the same as none and
// is forgotten, at most maxTrackedAddresses are kept, and addresses beyond
// them share one overflow bucket, so a flood of addresses can neither grow
// the table nor reset the buckets in it.
type AuthLimiter struct {
	mu        sync.Mutex
	perMinute float64
	now       func() time.Time
	buckets   map[netip.Addr]*failBucket
	overflow  failBucket
	lastSweep time.Time
}

// failBucket holds the failures an address may still make, as of at.
type failBucket struct {
	left float64
	at   time.Time
}

// NewAuthLimiter returns a limiter that lets each address fail perMinute
// times a minute; DefaultAuthFailuresPerMinute when perMinute is not
// positive.
func NewAuthLimiter(perMinute int) *AuthLimiter {
	if perMinute <= 0 {
		perMinute = DefaultAuthFailuresPerMinute
	}
	return &AuthLimiter{perMinute: float64(perMinute), now: time.Now, buckets: map[netip.Addr]*failBucket{},
		overflow: failBucket{left: float64(perMinute)}}
}

// Blocked tells whether attempts from remoteAddr are refused now, and when
// not, in how many whole seconds (at least 1) the next one is taken.
func (l *AuthLimiter) Blocked(remoteAddr string) (retryAfter int, blocked bool) {
	key := limitKey(remoteAddr)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.bucket(key, now, false)
	if b == nil {
		return 0, false
	}
	left := l.refill(b, now)
	if left >= 1 {
		return 0, false
	}
	// The nanosecond off keeps float rounding from adding a whole second.
	wait := time.Duration((1 - left) / l.perMinute * float64(time.Minute))
	return max(1, int(math.Ceil((wait - time.Nanosecond).Seconds()))), true
}

// Failed counts a failed authentication from remoteAddr.
func (l *AuthLimiter) Failed(remoteAddr string) {
	key := limitKey(remoteAddr)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.bucket(key, now, true)
	b.left = l.refill(b, now) - 1
	b.at = now
}

// refill returns what b holds at now.
func (l *AuthLimiter) refill(b *failBucket, now time.Time) float64 {
	elapsed := now.Sub(b.at).Seconds()
	if elapsed <= 0 {
		return b.left
	}
	return min(l.perMinute, b.left+elapsed*l.perMinute/60)
}

// bucket returns key's bucket; the overflow bucket when key is not tracked
// and the table is full; nil when key is not tracked and create is false.
func (l *AuthLimiter) bucket(key netip.Addr, now time.Time, create bool) *failBucket {
	if b, ok := l.buckets[key]; ok {
		return b
	}
	since := now.Sub(l.lastSweep)
	if since >= time.Minute || (len(l.buckets) >= maxTrackedAddresses && since >= time.Second) {
		l.sweep(now)
	}
	if len(l.buckets) >= maxTrackedAddresses {
		return &l.overflow
	}
	if !create {
		return nil
	}
	b := &failBucket{left: l.perMinute, at: now}
	l.buckets[key] = b
	return b
}

// sweep forgets the buckets that have refilled.
func (l *AuthLimiter) sweep(now time.Time) {
	l.lastSweep = now
	for k, b := range l.buckets {
		if l.refill(b, now) >= l.perMinute {
			delete(l.buckets, k)
		}
	}
}

// limitKey is the address a request's failures count against: the IP of
// RemoteAddr, an IPv6 one cut to its /64. An address that does not parse
// (no real connection has one) counts as the zero address.
func limitKey(remoteAddr string) netip.Addr {
	var a netip.Addr
	if ap, err := netip.ParseAddrPort(remoteAddr); err == nil {
		a = ap.Addr()
	} else if a, err = netip.ParseAddr(remoteAddr); err != nil {
		return netip.Addr{}
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		a = p.Addr()
	}
	return a
}

// refuseBlocked answers 429 with Retry-After when the request's address has
// failed to authenticate too often, whatever credentials it brings now.
func (s *Server) refuseBlocked(w http.ResponseWriter, r *http.Request) bool {
	after, blocked := s.AuthLimit.Blocked(r.RemoteAddr)
	if !blocked {
		return false
	}
	w.Header().Set("Retry-After", strconv.Itoa(after))
	writeProblem(w, r, storelink.EAUTHLIMIT, "Too many failed authentication attempts from this address; no attempt from it is taken for "+
		strconv.Itoa(after)+" seconds.")
	return true
}
