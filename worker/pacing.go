package worker

import "time"

// How the deliverer keeps slow endpoints from holding up the others.
//
// Attempts in flight are a fixed number (Workers), and an endpoint that
// hangs holds one for the whole webhook timeout: a few such endpoints,
// given as many attempts as the healthy ones, would hold them all and
// starve every other endpoint until their timeouts. So the deliverer paces
// each endpoint by what it has seen of it, in memory (a pace per endpoint
// and process; a restart starts afresh), much as Svix or Convoy keep
// failing endpoints from slowing the others down:
//
//   - An endpoint may have at most its limit of attempts in flight. The
//     limit starts at 1, grows by one with each success that came while the
//     endpoint used its whole limit (up to PerEndpoint), and halves (down to
//     1) with a failure that took slowAfter or more, a timeout mostly, once
//     for the attempts that were in flight together: the slow failure of an
//     attempt begun before the last halving halves nothing more, as TCP
//     cuts its congestion window once for the losses of one window. As with
//     TCP, an endpoint that hangs holds half as many attempts with each
//     round of them timing out, down to a single one, and one that answers
//     soon holds as many as it has events to take (one per order, the rest
//     wait for their turn); one that times out now and then (one attempt in
//     ten, several in flight at once) is not cut down to one for it.
//   - An endpoint is slow from an attempt that took slowAfter or more, or
//     from when its attempts in flight have gone slowAfter without one
//     ending, until an attempt takes less. Attempts started to slow
//     endpoints hold at most Workers/slowShare together, so that however
//     many endpoints hang, the others keep the rest; and a slow endpoint is
//     claimed nothing ahead of its attempts (it answers too slowly for the
//     bookkeeping to keep it waiting). An endpoint that hangs before it is
//     known to, at its first events, holds its limit of one until its
//     timeout: the hanging endpoints take no more than one attempt each.
//   - The store leases an endpoint's deliveries only up to what the pace
//     allows (storelink.ClaimCaps: claimAhead more than the limit, or the
//     limit for a slow one), so that what is claimed can go soon; and a
//     claimed delivery whose lease would not outlast its attempt and the
//     record of its result (leaseRoom) is given back unsent: an attempt is
//     only ever made under a lease that holds until it is recorded, so
//     nothing else can send the delivery meanwhile, nor the next event of
//     its order before it.
//
// Successes grow the limit whatever their speed, so an endpoint that is
// slow but answers still gets its events through, within the slow share.
const (
	startLimit = 1
	slowShare  = 16 // slow endpoints together hold at most Workers/slowShare
	// slowAfter is what makes an attempt slow (or half the webhook
	// timeout, if less): an answer that takes a second holds an attempt as
	// long as twenty 50 ms ones.
	slowAfter = time.Second
	// leaseRoom is how long, at least, a lease must still hold after an
	// attempt's timeout for the attempt to start: the time to record it.
	leaseRoom = 10 * time.Second
	// forgetAfter is how long an endpoint's pace is kept without attempts
	// or claims.
	forgetAfter = 10 * time.Minute
)

// endpointPace is what the deliverer has seen of an endpoint.
type endpointPace struct {
	id      string
	limit   int // attempts in flight at most
	running int // attempts in flight
	claimed int // deliveries claimed, not yet started
	picking int // while sending.startable counts
	// slow is set by an attempt that took slowAfter or more, cleared by
	// one that took less.
	slow bool
	// quiet is since when attempts have been in flight and none ended.
	quiet time.Time
	used  time.Time // when an attempt last started or ended
	// halved is when a slow failure last halved the limit.
	halved time.Time
	// capped is the lease cap the store was last given for it; changed
	// tells it is in sending.changed, to be given the new one.
	capped  int
	changed bool
}

// isSlow tells whether the endpoint is slow at now.
func (p *endpointPace) isSlow(now time.Time, after time.Duration) bool {
	return p.slow || p.running > 0 && now.Sub(p.quiet) >= after
}

// leaseCap is how many of the endpoint's deliveries the store may leave
// leased: in flight and claimed ahead.
func (p *endpointPace) leaseCap(now time.Time, after time.Duration) int {
	if p.isSlow(now, after) {
		return p.limit
	}
	return (1 + claimAhead) * p.limit
}

// defaultCap is the lease cap of an endpoint without a pace: a new one.
const defaultCap = (1 + claimAhead) * startLimit

// started counts an attempt started at now.
func (p *endpointPace) started(now time.Time) {
	if p.running == 0 {
		p.quiet = now
	}
	p.claimed--
	p.running++
	p.used = now
}

// ended counts an attempt that ended at now after took (so began at
// now-took), succeeded or not, and moves the limit as the rules above say;
// perEndpoint is the most it may reach.
func (p *endpointPace) ended(now time.Time, took, after time.Duration, succeeded bool, perEndpoint int) {
	full := p.running >= p.limit // the endpoint used its whole limit
	p.running--
	p.quiet, p.used = now, now
	p.slow = took >= after
	switch {
	case succeeded && full:
		p.limit = min(p.limit+1, perEndpoint)
	case !succeeded && p.slow && !now.Add(-took).Before(p.halved):
		p.limit = max(p.limit/2, 1)
		p.halved = now
	}
}
