package httpapi

import (
	"net/netip"
	"time"
)

// maxGoodPairs bounds the address and credential pairs the limiter
// remembers as having authenticated, at about 100 bytes each.
const maxGoodPairs = 100_000

// maxGoodPerTarget bounds the pairs one credential holds, so that a partner
// can push out others' pairs only with as many clients as maxGoodPairs
// over this.
const maxGoodPerTarget = 1_000

// goodFor is how long a successful authentication makes its address known
// at its credential.
const goodFor = 24 * time.Hour

// goodKey is an address (cut as limitKey does) and a target's hash; an
// array rather than a netip.Addr keeps the table free of pointers, which
// the garbage collector then does not scan.
type goodKey struct {
	addr   [16]byte
	target uint64
}

// goodEntry is a pair in the list from the most to the least recent
// success; prev and next are indexes in goodSet.entries, -1 for none.
type goodEntry struct {
	key        goodKey
	at         time.Duration
	prev, next int32
}

// goodSet is a bounded set of the pairs that authenticated lately, kept in
// a doubly linked list by their last success so that the least recent is
// evicted first; every operation is O(1) (amortised over expiries).
type goodSet struct {
	max, perTarget int
	index          map[goodKey]int32
	entries        []goodEntry
	head, tail     int32 // the most and the least recent, -1 when empty
	free           int32 // a chain of unused entries through next
	count          map[uint64]int32
}

func newGoodSet(max, perTarget int) goodSet {
	return goodSet{max: max, perTarget: perTarget, index: map[goodKey]int32{}, count: map[uint64]int32{},
		head: -1, tail: -1, free: -1}
}

func newGoodKey(addr netip.Addr, target uint64) goodKey {
	return goodKey{addr: addr.As16(), target: target}
}

// has tells whether k succeeded within goodFor before now.
func (g *goodSet) has(k goodKey, now time.Duration) bool {
	i, ok := g.index[k]
	return ok && now-g.entries[i].at < goodFor
}

// add records a success of k at now. A new pair of a credential that
// already holds perTarget pairs is not remembered.
func (g *goodSet) add(k goodKey, now time.Duration) {
	for g.tail >= 0 && now-g.entries[g.tail].at >= goodFor {
		g.remove(g.tail)
	}
	if i, ok := g.index[k]; ok {
		g.entries[i].at = now
		g.unlink(i)
		g.pushFront(i)
		return
	}
	if g.max <= 0 || int(g.count[k.target]) >= g.perTarget {
		return
	}
	if len(g.index) >= g.max {
		g.remove(g.tail)
	}
	i := g.free
	if i >= 0 {
		g.free = g.entries[i].next
	} else {
		i = int32(len(g.entries))
		g.entries = append(g.entries, goodEntry{})
	}
	g.entries[i] = goodEntry{key: k, at: now}
	g.pushFront(i)
	g.index[k] = i
	g.count[k.target]++
}

// drop forgets k, if it is there.
func (g *goodSet) drop(k goodKey) {
	if i, ok := g.index[k]; ok {
		g.remove(i)
	}
}

func (g *goodSet) remove(i int32) {
	k := g.entries[i].key
	g.unlink(i)
	delete(g.index, k)
	if g.count[k.target]--; g.count[k.target] <= 0 {
		delete(g.count, k.target)
	}
	g.entries[i] = goodEntry{next: g.free}
	g.free = i
}

func (g *goodSet) unlink(i int32) {
	e := &g.entries[i]
	if e.prev >= 0 {
		g.entries[e.prev].next = e.next
	} else {
		g.head = e.next
	}
	if e.next >= 0 {
		g.entries[e.next].prev = e.prev
	} else {
		g.tail = e.prev
	}
}

func (g *goodSet) pushFront(i int32) {
	e := &g.entries[i]
	e.prev, e.next = -1, g.head
	if g.head >= 0 {
		g.entries[g.head].prev = i
	} else {
		g.tail = i
	}
	g.head = i
}
