package httpapi

import (
	"hash/maphash"
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

// maxTrackedAddresses bounds the addresses the limiter keeps, at under 100
// bytes each. Beyond it a failure from a new address is not recorded: it is
// answered 429 instead of 401 (see AuthLimiter).
const maxTrackedAddresses = 100_000

// maxTrackedTargets bounds the credentials the limiter keeps a bucket for;
// the targets beyond it share one bucket.
const maxTrackedTargets = 10_000

// recentFailure is how long an address counts as one that has failed, for
// the targets under attack.
const recentFailure = 10 * time.Minute

// AuthLimiter limits failed authentications (a wrong admin token, a wrong
// API key, a refused dashboard login or portal sign-in) so that guessing a
// credential cannot go fast, while a partner or the operator bringing the
// right credentials from an address that has not failed is never refused.
//
// It keeps two kinds of token bucket, each holding perMinute failures and
// refilling evenly over a minute; only failures take from them. One per
// remote address (IPv6 per /64, the block one host is usually given): while
// it is empty every attempt from the address is refused, even one with the
// right credentials, since otherwise the answer would tell a guesser which
// guess was right. And one per target, the credential tried: a client id
// for an API key, the admin token for itself. A target's bucket empties
// only when guesses come at it from many addresses; while it is empty, an
// address that has failed in the last recentFailure (at anything) is
// refused on that target. So a guesser spread over many addresses gets
// about one guess per fresh address per recentFailure at a target under
// attack, rather than perMinute a minute each, and a clean address is
// never refused: the address's own failures, or a flood from others, never
// lock out the right credentials. A refusal comes before the credentials
// are looked at and says nothing of them.
//
// Memory is bounded: at most maxTrackedAddresses addresses and
// maxTrackedTargets targets are kept (the targets beyond share one bucket;
// a target is keyed by a hash, never the credential itself). Buckets that
// have refilled, and addresses whose last failure is older than
// recentFailure, are forgotten. When the address table is full of
// addresses that failed lately, a new address that fails is answered 429
// with Retry-After rather than 401, and is not recorded. Unrecorded
// failures still empty their target's bucket, and while the table is full
// an address it does not know is refused at a target whose bucket is
// empty: otherwise a flood of fresh addresses could guess without limit.
//
// So that the newcomer waits then, not the clean address, the limiter also
// remembers the pairs of address and target that authenticated (Succeeded)
// in the last goodFor, at most maxGoodPairs of them (about 10 MB), the
// least recent evicted first. While the table is full, an address that
// authenticated at a target is taken there as a clean one; a failure at the
// target forgets the pair. A pair is added only with the right credentials
// for its target, so a guesser cannot add any; and it is a pair, not an
// address, so that a partner signing in at its own client between guesses
// at another's stays a newcomer at the client under attack. A partner
// with the right key and many addresses could push others' pairs out, but
// each target holds at most maxGoodPerTarget pairs (a new address beyond
// it is not remembered), so it would take as many clients as maxGoodPairs
// over that, which only the operator creates; and a pushed-out pair waits
// only while its target is under attack and the table full.
//
// It is in memory and per process: a restart forgets it, and each process
// of a PostgreSQL installation counts on its own.
type AuthLimiter struct {
	mu         sync.Mutex
	perMinute  float64
	now        func() time.Time
	epoch      time.Time // what the times in buckets count from
	seed       maphash.Seed
	maxAddrs   int
	maxTargets int
	addrs      map[netip.Addr]addrState
	targets    map[uint64]*bucket
	overflow   bucket // the targets' beyond maxTargets
	lastSweep  time.Duration
	good       goodSet
}

// bucket holds the failures still allowed, as of at.
type bucket struct {
	left float64
	at   time.Duration // since the limiter's epoch
}

// addrState is an address's bucket and the time of its last failure.
type addrState struct {
	bucket
	last time.Duration
}

// NewAuthLimiter returns a limiter that lets each address fail perMinute
// times a minute; DefaultAuthFailuresPerMinute when perMinute is not
// positive.
func NewAuthLimiter(perMinute int) *AuthLimiter {
	if perMinute <= 0 {
		perMinute = DefaultAuthFailuresPerMinute
	}
	return &AuthLimiter{perMinute: float64(perMinute), now: time.Now, seed: maphash.MakeSeed(),
		maxAddrs: maxTrackedAddresses, maxTargets: maxTrackedTargets,
		addrs: map[netip.Addr]addrState{}, targets: map[uint64]*bucket{}, overflow: bucket{left: float64(perMinute)},
		good: newGoodSet(maxGoodPairs, maxGoodPerTarget)}
}

// Blocked tells whether an attempt from addr at clientID's API key ("" for
// the admin token) is refused now, and if so in how many whole seconds (at
// least 1) it would be taken.
func (l *AuthLimiter) Blocked(addr netip.Addr, clientID string) (retryAfter int, blocked bool) {
	key, tkey := limitKey(addr), l.targetKey(clientID)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	a, known := l.addrs[key]
	if !known {
		l.sweepIfDue(now)
	}
	var wait time.Duration
	if known {
		if left := l.level(a.bucket, now); left < 1 {
			wait = l.until(left)
		}
	}
	// suspect is how much longer the address counts as one that failed.
	var suspect time.Duration
	if known {
		suspect = a.last + recentFailure - now
	} else if len(l.addrs) >= l.maxAddrs && !l.good.has(newGoodKey(key, tkey), now) {
		suspect = math.MaxInt64
	}
	if suspect > 0 {
		if t := l.target(tkey, now, false); t != nil {
			if left := l.level(*t, now); left < 1 {
				wait = max(wait, min(l.until(left), suspect))
			}
		}
	}
	if wait <= 0 {
		return 0, false
	}
	return seconds(wait), true
}

// Failed counts a failed attempt from addr at clientID's API key ("" for
// the admin token). It is not counted against the address when the table
// is full of addresses that failed lately: then counted is false, and the
// failure must be answered as a refusal after retryAfter seconds. Either
// way the address is no longer taken for one that authenticated there.
func (l *AuthLimiter) Failed(addr netip.Addr, clientID string) (retryAfter int, counted bool) {
	key, tkey := limitKey(addr), l.targetKey(clientID)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	l.good.drop(newGoodKey(key, tkey))
	t := l.target(tkey, now, true)
	// A deeper debt than what refills in recentFailure would only lengthen
	// the Retry-After of addresses that are no longer suspect by then.
	t.left, t.at = max(l.level(*t, now)-1, -l.perMinute*recentFailure.Minutes()), now
	a, known := l.addrs[key]
	if !known {
		if len(l.addrs) >= l.maxAddrs {
			l.sweepIfDue(now)
		}
		if len(l.addrs) >= l.maxAddrs {
			wait := l.until(0)
			if left := l.level(*t, now); left < 1 {
				wait = max(wait, l.until(left))
			}
			return seconds(wait), false
		}
		a.bucket = bucket{left: l.perMinute, at: now}
	}
	a.left, a.at, a.last = l.level(a.bucket, now)-1, now, now
	l.addrs[key] = a
	return 0, true
}

// Succeeded records that an attempt from addr at clientID's API key (""
// for the admin token) brought the right credentials, so that the address
// is taken there while the table is full. It must be called only for an
// attempt that Blocked let through.
func (l *AuthLimiter) Succeeded(addr netip.Addr, clientID string) {
	k := newGoodKey(limitKey(addr), l.targetKey(clientID))
	l.mu.Lock()
	defer l.mu.Unlock()
	l.good.add(k, l.clock())
}

// clock is the time since the limiter's epoch, its first look at the clock.
func (l *AuthLimiter) clock() time.Duration {
	now := l.now()
	if l.epoch.IsZero() {
		l.epoch = now
	}
	return now.Sub(l.epoch)
}

// level returns what b holds at now.
func (l *AuthLimiter) level(b bucket, now time.Duration) float64 {
	elapsed := now - b.at
	if elapsed <= 0 {
		return b.left
	}
	return min(l.perMinute, b.left+elapsed.Minutes()*l.perMinute)
}

// until is how long a bucket at left takes to hold one failure again.
func (l *AuthLimiter) until(left float64) time.Duration {
	return time.Duration((1 - left) / l.perMinute * float64(time.Minute))
}

// seconds is d in whole seconds, rounded up, at least 1; the nanosecond
// off keeps float rounding from adding a whole second.
func seconds(d time.Duration) int {
	return max(1, int(math.Ceil((d - time.Nanosecond).Seconds())))
}

// targetKey is what clientID's credential is kept under.
func (l *AuthLimiter) targetKey(clientID string) uint64 {
	return maphash.String(l.seed, clientID)
}

// target returns the bucket of the target keyed key: its own, the shared
// overflow one when it has none and the table is full, and nil (a full
// bucket) when it has none and create is false.
func (l *AuthLimiter) target(key uint64, now time.Duration, create bool) *bucket {
	if b, ok := l.targets[key]; ok {
		return b
	}
	if len(l.targets) >= l.maxTargets {
		l.sweepIfDue(now)
	}
	if len(l.targets) >= l.maxTargets {
		return &l.overflow
	}
	if !create {
		return nil
	}
	b := &bucket{left: l.perMinute, at: now}
	l.targets[key] = b
	return b
}

// sweepIfDue sweeps once a minute, and once a second while a table is
// full, so that a flood of new addresses does not make every request walk
// the table.
func (l *AuthLimiter) sweepIfDue(now time.Duration) {
	since := now - l.lastSweep
	full := len(l.addrs) >= l.maxAddrs || len(l.targets) >= l.maxTargets
	if since >= time.Minute || (full && since >= time.Second) {
		l.sweep(now)
	}
}

// sweep forgets the buckets that have refilled, keeping an address while
// it counts as one that failed.
func (l *AuthLimiter) sweep(now time.Duration) {
	l.lastSweep = now
	for k, a := range l.addrs {
		if l.level(a.bucket, now) >= l.perMinute && now-a.last >= recentFailure {
			delete(l.addrs, k)
		}
	}
	for k, b := range l.targets {
		if l.level(*b, now) >= l.perMinute {
			delete(l.targets, k)
		}
	}
}

// limitKey is the address failures count against: an IPv6 one cut to its
// /64.
func limitKey(a netip.Addr) netip.Addr {
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		a = p.Addr()
	}
	return a
}

// refuseBlocked answers 429 with Retry-After when an attempt from the
// request's client address at clientID ("" for the admin token) is
// refused, whatever credentials it brings.
func (s *Server) refuseBlocked(w http.ResponseWriter, r *http.Request, addr netip.Addr, clientID string) bool {
	after, blocked := s.AuthLimit.Blocked(addr, clientID)
	if blocked {
		writeAuthLimited(w, r, after)
	}
	return blocked
}

// failed counts a failed authentication; false when it could not be
// counted, and was answered with 429 instead.
func (s *Server) failed(w http.ResponseWriter, r *http.Request, addr netip.Addr, clientID string) bool {
	after, counted := s.AuthLimit.Failed(addr, clientID)
	if !counted {
		writeAuthLimited(w, r, after)
	}
	return counted
}

func writeAuthLimited(w http.ResponseWriter, r *http.Request, after int) {
	w.Header().Set("Retry-After", strconv.Itoa(after))
	writeProblem(w, r, storelink.EAUTHLIMIT, "Too many failed authentication attempts from this address, or from many addresses at these credentials; no attempt from this address is taken for "+
		strconv.Itoa(after)+" seconds.")
}
