package sqlite

import (
	"math"
	"slices"
	"sync"

	"storelink"
)

// leaseBook holds the leases of the deliveries in flight. They live in
// this process's memory, not in the file, and the book is not a cache of
// anything: only one process can hold the file (Open locks it), so a lease
// is always this process's own, no other process could ever read it, and
// none is alive once the process ends. Kept here, a claim writes nothing
// and a round of delivery bookkeeping writes only its results, rather than
// a statement, a row and an index entry per delivery to take each lease and
// clear it again.
//
// What the file holds is what survives. A lease is taken by a claim and
// ends when its result is recorded, when it is given back (ReleaseClaims),
// or at start-up (ReleaseLeases), which begins with an empty book. So an
// attempt in flight when the process died is not counted: its outcome never
// became known, and after the restart the delivery goes again as that
// attempt (receivers deduplicate by webhook-id), first in line. One that has
// run out stays in the book until a claim takes its delivery again, so that
// the next attempt's number and try follow on from it, as they would if it
// had been written down; after a restart they follow on from the file.
//
// The book changes only while the write connection is held (in the
// bookkeeping transaction, Redeliver's or ReleaseClaims'), and a round's
// changes are made after its commit and before the connection is given
// back: a claim or a record that did not commit changes nothing here, and
// no other writer sees the file and the book disagree.
type leaseBook struct {
	mu   sync.Mutex
	held map[string]*deliveryLease // by delivery id
	// soonest is when the first lease in held runs out, at the earliest
	// (math.MinInt64 while one is held by no one): until then expired,
	// which every round asks, has nothing to find and looks at none.
	soonest int64
}

// deliveryLease is a claimed delivery: who holds it, until when (Unix ms), and
// the attempt it was claimed for.
type deliveryLease struct {
	id           string // the delivery's
	seq          int64
	endpointID   string
	order        uint64 // the hash of its order's id (deliveryQueue)
	owner        string // "" for one given back: no result holds it
	until        int64
	attempt, try int
	// lost is the attempt and try of a lease that ran out before this one
	// took the delivery over (0 if none), for the numbering to follow on
	// from should this one be given back unsent.
	lostAttempt, lostTry int
}

// liveLeases returns the leases that have not run out at now, but for
// those ending (the round's results, recorded in the same transaction).
func (b *leaseBook) liveLeases(now int64, ending []*deliveryLease) []*deliveryLease {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*deliveryLease
	for _, l := range b.held {
		if l.until >= now && l.owner != "" && !slices.Contains(ending, l) {
			out = append(out, l)
		}
	}
	return out
}

// expired returns the leases that ran out before now, but for those ending.
func (b *leaseBook) expired(now int64, ending []*deliveryLease) []*deliveryLease {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now <= b.soonest {
		return nil
	}
	// Those ending count for soonest too: should their round not commit,
	// they stay.
	var out []*deliveryLease
	b.soonest = math.MaxInt64
	for _, l := range b.held {
		if l.owner == "" {
			b.soonest = math.MinInt64
		} else {
			b.soonest = min(b.soonest, l.until)
		}
		if (l.until < now || l.owner == "") && !slices.Contains(ending, l) {
			out = append(out, l)
		}
	}
	return out
}

// previous returns the lease that ran out on a delivery claimed again, if
// any: its attempt and try were made, and count. A lease ending (its result
// recorded in the same transaction) is not one: the file has its numbers,
// as its move left them (a park's try does not count).
func (b *leaseBook) previous(id string, ending []*deliveryLease) (attempt, try int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l := b.held[id]; l != nil && !slices.Contains(ending, l) {
		return l.attempt, l.try
	}
	return 0, 0
}

// holder returns the lease of job's delivery if job holds it: the same
// owner and the same attempt (a lease that ran out may have been taken
// again, even by the same owner), or nil.
func (b *leaseBook) holder(job *storelink.DeliveryJob) *deliveryLease {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l := b.held[job.DeliveryID]; l != nil && l.owner == job.Owner && l.attempt == job.Attempt {
		return l
	}
	return nil
}

// redeliverable tells whether a delivery may be made pending again at
// now: not while its lease is live. A lease that ran out keeps its
// attempt's number, for the next claim to follow on from, but its try is
// forgotten, as a redelivery starts the schedule again.
func (b *leaseBook) redeliverable(id string, now int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.held[id]
	if l == nil {
		return true
	}
	if l.until >= now {
		return false
	}
	// The lost attempt's result, should it still come, moves nothing.
	l.owner, l.try = "", 0
	b.soonest = math.MinInt64
	return true
}

// settle applies a committed round: the leases of ended ones go (if they
// are still the ones the round ended), the new ones are taken.
func (b *leaseBook) settle(ended []*deliveryLease, taken map[string]*deliveryLease) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held == nil {
		b.held = map[string]*deliveryLease{}
	}
	for _, l := range ended {
		if b.held[l.id] == l {
			delete(b.held, l.id)
		}
	}
	for id, l := range taken {
		b.held[id] = l
		b.soonest = min(b.soonest, l.until)
	}
}

// release ends the leases jobs hold. One that took over from a lease that
// ran out leaves that one's numbers behind, held by no one, for the next
// claim to follow on from.
func (b *leaseBook) release(jobs []storelink.DeliveryJob) []*deliveryLease {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*deliveryLease
	for _, j := range jobs {
		l := b.held[j.DeliveryID]
		if l == nil || l.owner != j.Owner || l.attempt != j.Attempt {
			continue
		}
		out = append(out, l)
		if l.lostAttempt > 0 {
			b.held[j.DeliveryID] = &deliveryLease{id: l.id, seq: l.seq, endpointID: l.endpointID, order: l.order,
				attempt: l.lostAttempt, try: l.lostTry}
			b.soonest = math.MinInt64
		} else {
			delete(b.held, j.DeliveryID)
		}
	}
	return out
}

// clear ends every lease.
func (b *leaseBook) clear() {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.held)
}
