package sqlite

import (
	"context"
	"slices"
	"sync"
)

// turn admits its holders one at a time, in the order they asked: a
// waiter is let in when the holder before it gives the turn, and not
// before any that came after it (takeAhead's waiters aside). The order is
// the turn's own (lists of waiters under a mutex), not the order in which
// the runtime happens to wake goroutines blocked on a channel. The zero
// turn is free.
type turn struct {
	mu      sync.Mutex
	held    bool
	ahead   []chan struct{} // takeAhead's, first come first
	waiters []chan struct{} // take's, first come first
}

// take waits for the turn; it returns ctx's error, holding nothing, when
// ctx ends first. A nil error is the turn, which may have come just as ctx
// ended.
func (t *turn) take(ctx context.Context) error { return t.wait(ctx, &t.waiters) }

// takeAhead is take for a waiter that goes ahead of take's waiters, behind
// the takeAhead waiters that came before it.
func (t *turn) takeAhead(ctx context.Context) error { return t.wait(ctx, &t.ahead) }

func (t *turn) wait(ctx context.Context, line *[]chan struct{}) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t.mu.Lock()
	if !t.held {
		t.held = true
		t.mu.Unlock()
		return nil
	}
	ready := make(chan struct{})
	*line = append(*line, ready)
	t.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
	}
	t.mu.Lock()
	if i := slices.Index(*line, ready); i >= 0 {
		*line = slices.Delete(*line, i, i+1)
		t.mu.Unlock()
		return ctx.Err()
	}
	t.mu.Unlock()
	return nil // the turn came as ctx ended
}

// give hands the turn to the first waiter ahead, else to the first other
// waiter, or frees it.
func (t *turn) give() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.handOn() {
		t.held = false
	}
}

// passOn hands the turn on as give does and tells whether anyone took it;
// when nobody waits, the caller keeps the turn.
func (t *turn) passOn() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.handOn()
}

// handOn lets the first waiter ahead in, else the first other waiter, and
// tells whether there was one. t.mu is held.
func (t *turn) handOn() bool {
	for _, line := range []*[]chan struct{}{&t.ahead, &t.waiters} {
		if len(*line) > 0 {
			ready := (*line)[0]
			*line = slices.Delete(*line, 0, 1)
			close(ready)
			return true
		}
	}
	return false
}

// waiting tells how many wait for the turn.
func (t *turn) waiting() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.ahead) + len(t.waiters)
}
