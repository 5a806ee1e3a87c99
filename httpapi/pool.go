package httpapi

import "sync"

// OperatorShare is the key of the operator's share of a pool divided per
// partner: the operator is no partner, and gets a share of its own beside
// theirs. Partner ids are never empty.
const OperatorShare = ""

// refusal says why a pool did not give what was asked: the partner holds
// its share (429, it is the partner's own limit) or the pool is spent
// (503, busy for everyone).
type refusal int

const (
	granted refusal = iota
	overShare
	overPool
)

// pool is an amount shared by the partners of a process (bytes of memory,
// places of downloads or test sends): all of them together hold at most
// total, one partner (all its clients together) at most share. A share is
// well under the total, so that one partner, or a few, at their share
// leave room for every other.
type pool struct {
	mu    sync.Mutex
	total int64
	share int64
	used  int64
	held  map[string]int64 // by partner; no entry holds nothing
}

func newPool(total, share int64) *pool {
	return &pool{total: total, share: min(share, total), held: make(map[string]int64)}
}

// check tells whether partner could take n more now, taking nothing.
func (p *pool) check(partner string, n int64) refusal {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.checkLocked(partner, n)
}

func (p *pool) checkLocked(partner string, n int64) refusal {
	switch {
	case p.held[partner]+n > p.share:
		return overShare
	case p.used+n > p.total:
		return overPool
	}
	return granted
}

// take takes n for partner when both its share and the pool have room.
func (p *pool) take(partner string, n int64) refusal {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.checkLocked(partner, n); r != granted {
		return r
	}
	p.used += n
	p.held[partner] += n
	return granted
}

// give gives back n that partner took.
func (p *pool) give(partner string, n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.used -= n
	if p.held[partner] -= n; p.held[partner] <= 0 {
		delete(p.held, partner)
	}
}

// holding is what partner holds now.
func (p *pool) holding(partner string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held[partner]
}

// inUse is what all partners hold now.
func (p *pool) inUse() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}
