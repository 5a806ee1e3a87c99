package sqlite

import (
	"context"
	"errors"
	"testing"
	"time"
)

// lineLen is how many wait in the turn's line.
func lineLen(t *uploadTurn) int { return t.waiting() }

// waitLine waits until n wait in the line, failing after a deadline.
func waitLine(tb testing.TB, t *uploadTurn, n int) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for lineLen(t) != n {
		if time.Now().After(deadline) {
			tb.Fatalf("%d wait for the turn, want %d", lineLen(t), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestUploadTurnFirstComeFirstServed: the turn goes to the waiters in the
// order they came, and a waiter whose context ends leaves the line without
// holding up the others.
func TestUploadTurnFirstComeFirstServed(t *testing.T) {
	turn := &uploadTurn{}
	ctx := context.Background()
	if err := turn.take(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 5)
	quit, cancel := context.WithCancel(ctx)
	defer cancel()
	leaving := make(chan error, 1)
	for i := range 5 {
		if i == 2 {
			go func() { leaving <- turn.take(quit) }()
		} else {
			go func() {
				if err := turn.take(ctx); err != nil {
					t.Error(err)
				}
				got <- i
				turn.give()
			}()
		}
		waitLine(t, turn, i+1)
	}
	cancel()
	if err := <-leaving; !errors.Is(err, context.Canceled) {
		t.Fatalf("take with its context ended = %v, want context.Canceled", err)
	}
	waitLine(t, turn, 4)
	turn.give()
	for _, want := range []int{0, 1, 3, 4} {
		if i := <-got; i != want {
			t.Fatalf("turn taken by waiter %d, want %d", i, want)
		}
	}
	if err := turn.take(ctx); err != nil { // free again
		t.Fatal(err)
	}
}
