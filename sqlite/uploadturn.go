package sqlite

import (
	"context"
	"sync"
)

// uploadTurn hands the upload calls' write transactions their turn at the
// write connection one at a time: the processor's (claims and applies)
// before every accept that waits, the accepts first come first served.
//
// The write pool alone hands its one connection to a random waiter
// (database/sql). With dozens of uploads arriving at once, the processor,
// one waiter among them, would get the connection about once in as many
// hand-overs: it then applied a small fraction of what was accepted and
// its backlog grew without bound. Going first bounds its wait to the
// transaction in progress; it cannot keep the accepts out for long, since
// each of its transactions applies what accepts left waiting. Among the
// accepts, first come first served bounds an accept's wait by the number
// of those before it.
//
// The holder of the turn still takes the connection from the write pool,
// where it meets the writers that are not upload calls (order calls, the
// deliverer's rounds), a few at most.
type uploadTurn struct {
	mu      sync.Mutex
	busy    bool
	first   []chan struct{} // the processor's, in arrival order
	waiting []chan struct{} // the accepts', in arrival order
}

// take waits for the turn, before the accepts when first, and returns
// ctx's error when ctx ends first.
func (t *uploadTurn) take(ctx context.Context, first bool) error {
	t.mu.Lock()
	if !t.busy {
		t.busy = true
		t.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	if first {
		t.first = append(t.first, ch)
	} else {
		t.waiting = append(t.waiting, ch)
	}
	t.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	t.mu.Lock()
	queued := drop(&t.first, ch) || drop(&t.waiting, ch)
	t.mu.Unlock()
	if !queued { // the turn was handed over meanwhile: hand it on
		t.give()
	}
	return ctx.Err()
}

// give ends a turn, handing it to the next waiter.
func (t *uploadTurn) give() {
	t.mu.Lock()
	defer t.mu.Unlock()
	var next chan struct{}
	switch {
	case len(t.first) > 0:
		next, t.first = t.first[0], t.first[1:]
	case len(t.waiting) > 0:
		next, t.waiting = t.waiting[0], t.waiting[1:]
	default:
		t.busy = false
		return
	}
	close(next)
}

// drop removes ch from the queue q and tells whether it was there.
func drop(q *[]chan struct{}, ch chan struct{}) bool {
	for i, c := range *q {
		if c == ch {
			*q = append((*q)[:i], (*q)[i+1:]...)
			return true
		}
	}
	return false
}
