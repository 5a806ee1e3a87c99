package worker

import (
	"slices"
	"sync"
	"time"

	"storelink"
)

// sending is the deliveries claimed and not yet recorded, shared by Run's
// loop and the workers that make the attempts, with the endpoints' paces
// (pacing.go). A worker that has made an attempt takes the next delivery
// that may go itself, and tells the loop only when there is something for
// it to do: handing each attempt and each result over between goroutines
// would cost more than the attempt.
type sending struct {
	d       *Deliverer
	mu      sync.Mutex
	idle    *sync.Cond // workers with nothing to send wait here
	claimed []claim
	running int // attempts in flight
	// slowRunning is the attempts in flight that started to slow
	// endpoints; slowCap the most there may be.
	slowRunning, slowCap int
	// slowAfter is what makes an attempt slow (pacing.go).
	slowAfter time.Duration
	paces     map[string]*endpointPace
	batch     []storelink.AttemptResult
	// stale is claimed deliveries to give back unsent: their leases would
	// not outlast their attempts.
	stale  []storelink.DeliveryJob
	closed bool
	// signal tells the loop that results came in (the first of a batch,
	// or enough to record) or deliveries are to be given back.
	signal chan struct{}
	// caps is the endpoints' lease caps as the store is given them (those
	// that are not defaultCap), changed by the loop only; changed is the
	// paces whose cap may have changed since.
	caps    map[string]int
	changed []*endpointPace
}

// claim is a claimed delivery waiting for its attempt.
type claim struct {
	job  *storelink.DeliveryJob
	pace *endpointPace
	// until is when its lease runs out, at the earliest: the lease counted
	// from before the claim began.
	until time.Time
}

func newSending(d *Deliverer) *sending {
	s := &sending{d: d, paces: map[string]*endpointPace{}, caps: map[string]int{}, signal: make(chan struct{}, 1),
		slowCap: max(1, d.Workers/slowShare), slowAfter: slowAfter}
	if d.Timeout > 0 {
		s.slowAfter = min(slowAfter, d.Timeout/2)
	}
	s.idle = sync.NewCond(&s.mu)
	return s
}

// add adds claimed deliveries, whose leases run until until at the
// earliest, and wakes as many idle workers as may go.
func (s *sending) add(jobs []storelink.DeliveryJob, until time.Time) {
	s.mu.Lock()
	for i := range jobs {
		id := jobs[i].EndpointID
		p := s.paces[id]
		if p == nil {
			p = &endpointPace{id: id, limit: startLimit, capped: defaultCap}
			s.paces[id] = p
		}
		p.claimed++
		s.claimed = append(s.claimed, claim{job: &jobs[i], pace: p, until: until})
	}
	n := s.startable(time.Now(), len(jobs))
	s.mu.Unlock()
	for range n {
		s.idle.Signal()
	}
}

// mayStart tells whether an attempt to p may start at now, with picking
// more already counted to it and slow more to slow endpoints; s.mu is
// held.
func (s *sending) mayStart(p *endpointPace, now time.Time, picking, slow int) (ok, isSlow bool) {
	if p.running+picking >= p.limit {
		return false, false
	}
	isSlow = p.isSlow(now, s.slowAfter)
	return !isSlow || s.slowRunning+slow < s.slowCap, isSlow
}

// expiring tells whether c's lease would run out before its attempt, begun
// at now, ends and is recorded.
func (s *sending) expiring(c claim, now time.Time) bool {
	return now.Add(s.d.Timeout + leaseRoom).After(c.until)
}

// startable counts the claimed deliveries that may go now, up to most;
// s.mu is held.
func (s *sending) startable(now time.Time, most int) int {
	n, slow, seen := 0, 0, 0
	for _, c := range s.claimed {
		if n >= most || s.running+n >= s.d.Workers {
			break
		}
		seen++
		ok, isSlow := s.mayStart(c.pace, now, c.pace.picking, slow)
		if !ok || s.expiring(c, now) {
			continue
		}
		c.pace.picking++
		n++
		if isSlow {
			slow++
		}
	}
	for _, c := range s.claimed[:seen] {
		c.pace.picking = 0
	}
	return n
}

// next takes the first claimed delivery that may go, and tells whether it
// counts as slow; it sets aside those whose leases would run out (stale).
// s.mu is held.
func (s *sending) next(now time.Time) (c claim, slow, ok bool) {
	if s.running >= s.d.Workers {
		return claim{}, false, false
	}
	for i := 0; i < len(s.claimed); i++ {
		c := s.claimed[i]
		if s.expiring(c, now) {
			s.claimed = slices.Delete(s.claimed, i, i+1)
			i--
			c.pace.claimed--
			s.stale = append(s.stale, *c.job)
			s.notify()
			continue
		}
		ok, slow := s.mayStart(c.pace, now, 0, 0)
		if !ok {
			continue
		}
		s.claimed = slices.Delete(s.claimed, i, i+1)
		c.pace.started(now)
		s.running++
		if slow {
			s.slowRunning++
		}
		return c, slow, true
	}
	return claim{}, false, false
}

// work makes attempts until Run ends.
func (s *sending) work() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		c, slow, ok := s.next(time.Now())
		for !ok {
			if s.closed {
				return
			}
			s.idle.Wait()
			c, slow, ok = s.next(time.Now())
		}
		s.mu.Unlock()
		start := time.Now()
		r := s.d.attempt(c.job)
		end := time.Now()
		s.mu.Lock()
		s.batch = append(s.batch, r)
		s.running--
		if slow {
			s.slowRunning--
		}
		c.pace.ended(end, end.Sub(start), s.slowAfter, r.Outcome == storelink.OutcomeSucceeded, s.d.PerEndpoint)
		s.change(c.pace)
		// The end and a grown limit may let two more go: this worker takes
		// one, an idle one the other.
		n := s.startable(end, 2)
		if n == 2 {
			s.idle.Signal()
		}
		// Counted as Run counts: the attempts still in flight are those
		// that will be once this worker has taken its next.
		if len(s.batch) == 1 || len(s.batch) >= s.running+min(n, 1) || len(s.batch) >= recordBatch {
			s.notify()
		}
	}
}

// notify wakes the loop; s.mu is held.
func (s *sending) notify() {
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

// change notes that p's lease cap may have changed; s.mu is held.
func (s *sending) change(p *endpointPace) {
	if !p.changed {
		p.changed = true
		s.changed = append(s.changed, p)
	}
}

// claimCaps brings caps up to the paces changed since the last claim and
// returns the caps for the next; s.mu is held. The store reads the map
// during the claim, when only the loop, which is making the claim, could
// change it.
func (s *sending) claimCaps(now time.Time) storelink.ClaimCaps {
	for _, p := range s.changed {
		p.changed = false
		if c := p.leaseCap(now, s.slowAfter); c != p.capped {
			p.capped = c
			if c == defaultCap {
				delete(s.caps, p.id)
			} else {
				s.caps[p.id] = c
			}
		}
	}
	s.changed = s.changed[:0]
	return storelink.ClaimCaps{Default: defaultCap, Of: s.caps, All: (1 + claimAhead) * s.d.PerEndpoint}
}

// waiting is how many claimed deliveries wait to go to endpoints that are
// not slow: those the claims ahead are counted against. A slow endpoint's
// wait for its share, bounded by its cap, takes nothing from the others;
// s.mu is held.
func (s *sending) waiting(now time.Time) int {
	n := 0
	for _, c := range s.claimed {
		if !c.pace.isSlow(now, s.slowAfter) {
			n++
		}
	}
	return n
}

// review runs now and then, from the loop: paces whose attempts have gone
// quiet long enough to make them slow get their new cap, and paces unused
// for forgetAfter are forgotten. s.mu is held.
func (s *sending) review(now time.Time) {
	for id, p := range s.paces {
		switch {
		case p.running > 0:
			if p.leaseCap(now, s.slowAfter) != p.capped {
				s.change(p)
			}
		case p.claimed == 0 && now.Sub(p.used) > forgetAfter && !p.changed:
			delete(s.paces, id)
			delete(s.caps, id)
		}
	}
}

// takeStale returns the deliveries to give back; s.mu is held.
func (s *sending) takeStale() []storelink.DeliveryJob {
	stale := s.stale
	s.stale = nil
	return stale
}
