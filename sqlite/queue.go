package sqlite

import (
	"container/heap"
	"context"
	"database/sql"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"sync/atomic"

	"storelink"
)

// deliveryQueue is an index of the file's pending deliveries held in
// memory, so that a claim picks what is due without walking an index of
// the file and reading again, each round, the later events of the orders in
// flight. Each pending delivery is in the line of its order and endpoint,
// in the order of their events: only the first of a line may go (an order's
// events arrive in order), and only while it is not in flight. The lines whose first delivery
// may go are in a heap per endpoint, by when it is due and then by its
// place in the queue.
//
// The file is the truth and the queue a cache of it (and of which leases
// in the leaseBook are live). The first round after start-up reads it whole
// from the file's one index of pending deliveries (deliveries_pending, by
// seq), and each round after reads only the deliveries queued since. It can
// be dropped (reset) whenever the write connection is held, losing nothing:
// the next round reads it whole again. A round that fails drops it, as do
// ReleaseLeases and TestAccess.Exec; so does Redeliver when its update fails.
// What a claim picks from it is checked against the row: a delivery no
// longer pending, or not yet due, is not sent.
//
// Between reads it stays true because only this process writes the file,
// and every write to a pending delivery goes through the bookkeeping
// transaction, Redeliver or ReleaseClaims, all on the write connection,
// which then also updates the queue; holding that connection is also what
// keeps the queue's changes (reset included) from racing each other.
// Deliveries queued with their events, by the order transactions, are read
// by the next round (their seq is above any read before: the next round's
// transaction begins after their commit). The one thing set from outside is
// endpointsChanged, after an endpoint was enabled or disabled: the next
// round reads which are disabled, and a claim checks the endpoint of what
// it picked anyway.
//
// Its memory grows with the pending deliveries (BenchmarkQueueMemory), and
// the first round after start-up holds the write connection while it reads
// them all (BenchmarkQueueRead); docs/benchmarks.md has the figures. Orders
// are told apart by a 64-bit hash of their id: two orders whose ids collide
// would share a line, so one would wait for the other, which delays and
// never reorders.
//
// The queue stays because the file cannot be asked as cheaply. A claim
// that read the due deliveries first in their line from the file instead
// (partial indexes on next_attempt_at and on endpoint, order and event;
// the in-flight counts from the lease book; commit 45e72fe of branch
// h-claim) walks, each round, every due row ahead of what it takes: the
// deliveries in flight, the later events of their orders, and the backlog
// of endpoints at their cap (the hanging ones). On bench/webhook-endpoints,
// three pairs interleaved with this queue, serve's CPU per event was
// 0.293 ms against 0.189 (medians, +55%) and the backlog 1,015 events/s
// against 1,233 (−18%): outside the 10% that would have let the queue go
// (docs/benchmarks.md, 2026-11-29 02:23).
type deliveryQueue struct {
	loaded    bool
	last      int64 // the highest seq read from the file
	seed      maphash.Seed
	endpoints map[string]*endpointQueue
	// list is endpoints' values, for pick to walk every round: a slice
	// is walked faster than a map.
	list  []*endpointQueue
	lines map[lineKey]*queueLine
	// endpointsChanged is set when an endpoint was enabled or disabled
	// outside the bookkeeping: the next round reads which are disabled.
	endpointsChanged atomic.Bool
}

// lineKey names the line of an order's deliveries to one endpoint.
type lineKey struct {
	endpoint *endpointQueue
	order    uint64
}

// queueLine is the pending deliveries of an order to an endpoint, by event.
type queueLine struct {
	key     lineKey
	entries []queued
	at      int // in key.endpoint.heads; -1 when not there
	// next and seq are entries[0]'s, kept by fix for the heap's
	// comparisons, which would otherwise follow a pointer more each.
	next, seq int64
}

// queued is a pending delivery: its seq, its event's, when it is due (Unix
// ms), and whether it is in flight (a live lease).
type queued struct {
	seq, eventSeq, next int64
	leased              bool
}

// endpointQueue is an endpoint's lines whose first delivery may go, by
// when it is due, and its deliveries in flight.
type endpointQueue struct {
	id       string
	disabled bool
	leased   int
	heads    lineHeap
	// first is when heads[0]'s first delivery is due (math.MaxInt64 when
	// heads is empty), kept by headsChanged so that pick, which looks at
	// every endpoint each round, reads it here rather than two pointers
	// away.
	first   int64
	picking int // during pick: how many it took
	cap     int // during pick: how many it may have leased
}

// lineHeap orders lines by their first delivery: when due, then seq.
type lineHeap []*queueLine

// before tells whether a's first delivery goes before b's.
func before(a, b *queueLine) bool {
	return a.next < b.next || a.next == b.next && a.seq < b.seq
}

func (h lineHeap) Len() int           { return len(h) }
func (h lineHeap) Less(i, j int) bool { return before(h[i], h[j]) }
func (h lineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].at, h[j].at = i, j
}
func (h *lineHeap) Push(x any) {
	l := x.(*queueLine)
	l.at = len(*h)
	*h = append(*h, l)
}
func (h *lineHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	l.at = -1
	return l
}

// endpointHeap orders endpoints by their first line, for pick.
type endpointHeap []*endpointQueue

func (h endpointHeap) Len() int           { return len(h) }
func (h endpointHeap) Less(i, j int) bool { return before(h[i].heads[0], h[j].heads[0]) }

// headsChanged keeps e.first after a change to e.heads.
func (e *endpointQueue) headsChanged() {
	e.first = math.MaxInt64
	if len(e.heads) > 0 {
		e.first = e.heads[0].next
	}
}
func (h endpointHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *endpointHeap) Push(x any)   { *h = append(*h, x.(*endpointQueue)) }
func (h *endpointHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// The queue's statements. queueSQL reads the pending deliveries queued
// after ?1, in order, from the index of pending deliveries; disabledSQL the
// endpoints that are disabled and not deleted, from their partial index (a
// deleted endpoint's deliveries were cancelled with it, and what the queue
// still holds of them a claim finds not pending, and drops); lastSQL the
// seq of the last delivery queued, pending or not.
const (
	queueSQL = `SELECT seq, event_seq, endpoint_id, order_id, coalesce(next_attempt_at, 9223372036854775807)
		FROM deliveries INDEXED BY deliveries_pending WHERE state = 'pending' AND seq > ?1 ORDER BY seq`
	disabledSQL = `SELECT id FROM endpoints WHERE enabled = 0 AND deleted_at IS NULL`
	lastSQL     = `SELECT coalesce(max(seq), 0) FROM deliveries`
)

// reset drops the queue: the next round reads it from the file.
func (q *deliveryQueue) reset() {
	q.loaded = false
	q.endpoints, q.list, q.lines = nil, nil, nil
}

func (q *deliveryQueue) orderHash(order string) uint64 { return maphash.String(q.seed, order) }

func (q *deliveryQueue) endpoint(id string) *endpointQueue {
	e := q.endpoints[id]
	if e == nil {
		e = &endpointQueue{id: id, first: math.MaxInt64}
		q.endpoints[id] = e
		q.list = append(q.list, e)
	}
	return e
}

// sync brings the queue up to the file in a bookkeeping transaction: read
// whole if it was dropped, or the deliveries queued since the last round;
// which endpoints are disabled, if that may have changed; and the leases
// that ran out at now are in flight no more. ending are the leases the
// round's results end: not in flight, for a queue read whole.
func (q *deliveryQueue) sync(ctx context.Context, tx querier, book *leaseBook, ending []*deliveryLease, now int64) error {
	whole := !q.loaded
	if whole {
		if q.seed == (maphash.Seed{}) {
			q.seed = maphash.MakeSeed()
		}
		q.last = 0
		q.endpoints, q.list, q.lines = map[string]*endpointQueue{}, nil, map[lineKey]*queueLine{}
	}
	if q.endpointsChanged.Swap(false) || whole {
		disabled := map[string]bool{}
		rows, err := tx.QueryContext(ctx, disabledSQL)
		if err != nil {
			return fmt.Errorf("read disabled endpoints: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			disabled[id] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for id, e := range q.endpoints {
			e.disabled = disabled[id]
		}
		for id := range disabled {
			q.endpoint(id).disabled = true
		}
	}
	rows, err := tx.QueryContext(ctx, queueSQL, q.last)
	if err != nil {
		return fmt.Errorf("read queued deliveries: %w", err)
	}
	var endpointID, orderID sql.RawBytes
	for rows.Next() {
		var seq, eventSeq, next int64
		if err := rows.Scan(&seq, &eventSeq, &endpointID, &orderID, &next); err != nil {
			rows.Close()
			return err
		}
		e := q.endpoints[string(endpointID)]
		if e == nil {
			e = q.endpoint(string(endpointID))
		}
		q.add(lineKey{e, maphash.Bytes(q.seed, orderID)}, queued{seq: seq, eventSeq: eventSeq, next: next})
		q.last = seq
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if whole {
		// Read from here on: above the last pending delivery there may
		// be done ones, which a redelivery would otherwise add twice.
		if err := tx.QueryRowContext(ctx, lastSQL).Scan(&q.last); err != nil {
			return fmt.Errorf("read queued deliveries: %w", err)
		}
	}
	q.loaded = true
	if whole {
		for _, l := range book.liveLeases(now, ending) {
			q.lease(l)
		}
	}
	for _, l := range book.expired(now, ending) {
		q.unlease(l, nil)
	}
	return nil
}

// add queues a delivery in its line, in its event's place.
func (q *deliveryQueue) add(k lineKey, d queued) {
	l := q.lines[k]
	if l == nil {
		l = &queueLine{key: k, at: -1, entries: make([]queued, 0, 1)}
		q.lines[k] = l
	}
	for _, p := range l.entries {
		if p.seq == d.seq {
			return // there already (the lines are short)
		}
	}
	i := len(l.entries)
	for i > 0 && l.entries[i-1].eventSeq > d.eventSeq {
		i--
	}
	l.entries = slices.Insert(l.entries, i, d)
	q.fix(l)
}

// fix puts a line where it belongs after its first delivery changed: in
// its endpoint's heap if that one may go, out of it if not, and out of
// the queue once empty.
func (q *deliveryQueue) fix(l *queueLine) {
	h := &l.key.endpoint.heads
	ready := len(l.entries) > 0 && !l.entries[0].leased
	if ready {
		l.next, l.seq = l.entries[0].next, l.entries[0].seq
	}
	switch {
	case ready && l.at < 0:
		heap.Push(h, l)
	case ready:
		heap.Fix(h, l.at)
	case l.at >= 0:
		heap.Remove(h, l.at)
	}
	l.key.endpoint.headsChanged()
	if len(l.entries) == 0 && q.lines[l.key] == l {
		delete(q.lines, l.key)
	}
}

// find returns the line and place of the delivery a lease is for, or nil.
func (q *deliveryQueue) find(l *deliveryLease) (*queueLine, int) {
	e := q.endpoints[l.endpointID]
	if e == nil {
		return nil, -1
	}
	line := q.lines[lineKey{e, l.order}]
	if line == nil {
		return nil, -1
	}
	for i := range line.entries {
		if line.entries[i].seq == l.seq {
			return line, i
		}
	}
	return nil, -1
}

// lease marks a delivery in flight.
func (q *deliveryQueue) lease(l *deliveryLease) {
	if line, i := q.find(l); line != nil && !line.entries[i].leased {
		line.entries[i].leased = true
		line.key.endpoint.leased++
		q.fix(line)
	}
}

// unlease marks a delivery no longer in flight; change, if not nil,
// changes it first.
func (q *deliveryQueue) unlease(l *deliveryLease, change func(*queued)) {
	line, i := q.find(l)
	if line == nil {
		return
	}
	d := &line.entries[i]
	if !d.leased && change == nil {
		return
	}
	if d.leased {
		d.leased = false
		line.key.endpoint.leased--
	}
	if change != nil {
		change(d)
	}
	q.fix(line)
}

// done takes a delivery that succeeded or failed out of the queue.
func (q *deliveryQueue) done(l *deliveryLease) {
	line, i := q.find(l)
	if line == nil {
		return
	}
	if line.entries[i].leased {
		line.key.endpoint.leased--
	}
	line.entries = slices.Delete(line.entries, i, i+1)
	q.fix(line)
}

// pick takes out of their heaps up to limit lines whose first delivery is
// due at now, oldest first across endpoints, each endpoint's up to its cap
// leased; the caller leases their deliveries or puts the lines back (fix).
func (q *deliveryQueue) pick(now int64, limit int, caps storelink.ClaimCaps) []*queueLine {
	due := func(e *endpointQueue) bool {
		return !e.disabled && e.leased+e.picking < e.cap && e.first <= now
	}
	var open endpointHeap
	for _, e := range q.list {
		if e.first <= now && !e.disabled {
			// The leases are all this process's (one holds the file):
			// the owner's cap and every owner's bound count the same.
			if e.cap = caps.Cap(e.id); caps.All > 0 {
				e.cap = min(e.cap, caps.All)
			}
			if due(e) {
				open = append(open, e)
			}
		}
	}
	heap.Init(&open)
	var picked []*queueLine
	for len(picked) < limit && len(open) > 0 {
		e := open[0]
		picked = append(picked, heap.Pop(&e.heads).(*queueLine))
		e.headsChanged()
		if e.picking++; due(e) {
			heap.Fix(&open, 0)
		} else {
			heap.Pop(&open)
		}
	}
	for _, l := range picked {
		l.key.endpoint.picking = 0
	}
	return picked
}

// redeliver makes a delivery pending again, due at d.next: in the queue
// already (pending, perhaps in flight on a lease that ran out), or back
// in its line, in its event's place.
func (q *deliveryQueue) redeliver(endpointID, orderID string, d queued) {
	if !q.loaded || d.seq > q.last {
		return // the next round reads it
	}
	e := q.endpoint(endpointID)
	k := lineKey{e, q.orderHash(orderID)}
	if l := q.lines[k]; l != nil {
		for i := range l.entries {
			if p := &l.entries[i]; p.seq == d.seq {
				if p.leased {
					e.leased--
				}
				*p = d
				q.fix(l)
				return
			}
		}
	}
	q.add(k, d)
}
