package worker

import (
	"runtime/debug"
	"sync"
	"testing"
)

// A large feed lowers the GC percent while it is applied, however many are
// applied at once, and the setting comes back when the last is done; a
// small feed, or a GOGC the operator set, leaves it alone.
func TestLeanHeap(t *testing.T) {
	if operatorGOGC {
		t.Skip("GOGC is set in the environment: leanHeap leaves it alone")
	}
	was := debug.SetGCPercent(100)
	defer debug.SetGCPercent(was)
	percent := func() int {
		p := debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		return p
	}
	var h leanHeap
	h.enter(leanFrom - 1)()
	if p := percent(); p != 100 {
		t.Fatalf("after a small feed: GOGC %d, want 100", p)
	}
	var wg sync.WaitGroup
	leaves := make(chan func(), 8)
	for range 8 {
		wg.Go(func() { leaves <- h.enter(10 << 20) })
	}
	wg.Wait()
	if p := percent(); p != leanGCPercent {
		t.Fatalf("while 8 large feeds are applied: GOGC %d, want %d", p, leanGCPercent)
	}
	for range 7 {
		(<-leaves)()
	}
	if p := percent(); p != leanGCPercent {
		t.Fatalf("while 1 is still applied: GOGC %d, want %d", p, leanGCPercent)
	}
	(<-leaves)()
	if p := percent(); p != 100 {
		t.Fatalf("after the last: GOGC %d, want 100", p)
	}
}
