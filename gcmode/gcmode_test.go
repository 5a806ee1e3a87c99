package gcmode

import (
	"os"
	"runtime/debug"
	"sync"
	"testing"
)

// percent reads the GC percent without changing it.
func percent() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

// governor is serve's Governor for this process, skipping the test when
// the operator set GOGC (the Governor then leaves it alone).
func governor(t *testing.T) *Governor {
	t.Helper()
	g := New(os.Getenv)
	if g.operatorSet {
		t.Skip("GOGC is set in the environment: gcmode leaves it alone")
	}
	return g
}

// A large body lowers the GC percent while it is in memory, however many
// are at once, and the serve setting comes back when the last is done; a
// small body leaves it alone, a body of unknown size counts as large.
func TestHoldLarge(t *testing.T) {
	g := governor(t)
	stop := g.Start()
	defer stop()
	if p := percent(); p != g.SmallHeap {
		t.Fatalf("serving: GOGC %d, want %d", p, g.SmallHeap)
	}
	g.HoldLarge(g.LargeFrom - 1)()
	if p := percent(); p != g.SmallHeap {
		t.Fatalf("after a small body: GOGC %d, want %d", p, g.SmallHeap)
	}
	var wg sync.WaitGroup
	releases := make(chan func(), 8)
	for i := range 8 {
		size := int64(10 << 20)
		if i == 0 {
			size = -1
		}
		wg.Go(func() { releases <- g.HoldLarge(size) })
	}
	wg.Wait()
	if p := percent(); p != g.LargeBody {
		t.Fatalf("while 8 large bodies are in memory: GOGC %d, want %d", p, g.LargeBody)
	}
	for range 7 {
		release := <-releases
		release()
		release() // a second call changes nothing
	}
	if p := percent(); p != g.LargeBody {
		t.Fatalf("while 1 is still in memory: GOGC %d, want %d", p, g.LargeBody)
	}
	(<-releases)()
	if p := percent(); p != g.SmallHeap {
		t.Fatalf("after the last: GOGC %d, want %d", p, g.SmallHeap)
	}
}

// Start and its stop while a body is in memory take effect when the last
// body is done, not in the middle of it.
func TestStartWhileHoldingLarge(t *testing.T) {
	g := governor(t)
	was := debug.SetGCPercent(100)
	defer debug.SetGCPercent(was)
	release := g.HoldLarge(-1)
	stop := g.Start()
	if p := percent(); p != g.LargeBody {
		t.Fatalf("Start while holding a large body: GOGC %d, want %d", p, g.LargeBody)
	}
	release()
	if p := percent(); p != g.SmallHeap {
		t.Fatalf("after the body: GOGC %d, want %d", p, g.SmallHeap)
	}
	release = g.HoldLarge(-1)
	stop()
	release()
	if p := percent(); p != 100 {
		t.Fatalf("after stop and the body: GOGC %d, want 100", p)
	}
}

// Two serves in one process, each with its Governor, stopping in the order
// they started: the setting from before the first comes back when the last
// stops.
func TestStartTwice(t *testing.T) {
	a, b := governor(t), governor(t)
	was := debug.SetGCPercent(100)
	defer debug.SetGCPercent(was)
	stopA := a.Start()
	stopB := b.Start()
	stopA()
	stopA() // a second call changes nothing
	if p := percent(); p != b.SmallHeap {
		t.Fatalf("one serve still running: GOGC %d, want %d", p, b.SmallHeap)
	}
	stopB()
	if p := percent(); p != 100 {
		t.Fatalf("both stopped: GOGC %d, want 100", p)
	}
}

// An operator's GOGC is left alone, and so is the setting when there is
// no Governor at all.
func TestLeftAlone(t *testing.T) {
	was := debug.SetGCPercent(123)
	defer debug.SetGCPercent(was)
	operator := New(func(k string) string {
		if k == "GOGC" {
			return "123"
		}
		return ""
	})
	var none *Governor
	for _, g := range []*Governor{operator, none} {
		stop := g.Start()
		release := g.HoldLarge(-1)
		if p := percent(); p != 123 {
			t.Fatalf("GOGC %d, want the 123 that was set", p)
		}
		release()
		stop()
	}
}

// A small live heap is collected at SmallHeap; a larger one grows by
// Headroom at most, but is never collected more eagerly than LargeBody.
func TestSmallPercent(t *testing.T) {
	g := New(func(string) string { return "" })
	const mib = 1 << 20
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, 400},
		{8 * mib, 400},
		{12 * mib, 400},
		{24 * mib, 200},
		{64 * mib, 75},
		{96 * mib, 50},
		{1024 * mib, 50},
	} {
		if got := g.smallPercent(tc.live); got != tc.want {
			t.Errorf("live %d MiB: GOGC %d, want %d", tc.live/mib, got, tc.want)
		}
	}
}
