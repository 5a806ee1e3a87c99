package sqlite

import (
	"context"
	"slices"
	"sync"
)

// uploadTurn hands the upload calls' write transactions (accepts, cancels,
// the processor's claims and applies) their turn at the write connection
// one at a time, first come first served: the callers that find the turn
// taken wait in a line of their own, in the order they came, and each end
// of a turn hands it to the first of them.
//
// The write pool alone hands its one connection to a random waiter
// (database/sql). With dozens of uploads arriving at once the processor,
// one waiter among them, got the connection about once in as many
// hand-overs: it applied a fiftieth of what was accepted and its backlog
// grew without bound. In turn, it waits for the accepts that came before
// it, and then applies, in one batch, what they left waiting: the longer
// the line, the larger its batches (worker.DefaultBatch bounds them), so it
// keeps up with any rate of small uploads the accepts reach. And an accept
// waits for those before it, not for any number that came after.
//
// The holder of the turn still takes the connection from the write pool,
// where it meets the writers that are not upload calls (order calls, the
// deliverer's rounds), a few at most.
type uploadTurn struct {
	mu   sync.Mutex
	held bool
	// line holds the waiters in the order they came, each woken by the
	// close of its channel when the turn is handed to it.
	line []chan struct{}
}

// take waits for the turn; it returns ctx's error when ctx ends first.
func (t *uploadTurn) take(ctx context.Context) error {
	t.mu.Lock()
	if !t.held {
		t.held = true
		t.mu.Unlock()
		return nil
	}
	wake := make(chan struct{})
	t.line = append(t.line, wake)
	t.mu.Unlock()
	select {
	case <-wake:
		return nil
	case <-ctx.Done():
		t.mu.Lock()
		if i := slices.Index(t.line, wake); i >= 0 {
			t.line = slices.Delete(t.line, i, i+1)
			t.mu.Unlock()
			return ctx.Err()
		}
		t.mu.Unlock()
		t.give() // handed the turn as ctx ended: on to the next
		return ctx.Err()
	}
}

// give ends a turn, handing it to the first waiter.
func (t *uploadTurn) give() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.line) == 0 {
		t.held = false
		return
	}
	next := t.line[0]
	t.line = slices.Delete(t.line, 0, 1)
	close(next)
}
