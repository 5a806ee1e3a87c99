// Package gcmode sets how eagerly storelink serve collects garbage: rarely
// while its heap is small, eagerly while a large stock file is in memory.
//
// The heap of a busy deliverer or of order calls is small, and at Go's
// default (GOGC=100) a small heap is collected very often; collecting when
// it has grown four times past what is live (GOGC=400) spends a few MB to
// save that CPU. A heap that is not small, such as SQLite's queue of a
// million pending deliveries (tens of MB), is let grow by Headroom past
// what is live instead (a lower percent, down to LargeBody's), since four
// times it would be hundreds of MB for CPU that no longer matters. A 10 MiB upload is the opposite case: its body is live
// while it is accepted and while it is applied, and collecting twice as
// often while it is in memory (GOGC=50) keeps the process's peak memory
// down at little cost. docs/benchmarks.md has what was measured.
//
// serve makes one Governor from its configuration and hands it to the API
// (bodies being received) and to the upload processor (bodies being
// applied). An operator who set GOGC chose for themselves; the Governor
// then leaves the setting alone.
package gcmode

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// Governor holds the GC settings of a serve process. A nil *Governor
// changes nothing, for handlers and workers built without one (tests).
type Governor struct {
	// SmallHeap is the GC percent while no large body is in memory.
	SmallHeap int
	// LargeBody is the GC percent while at least one is.
	LargeBody int
	// LargeFrom is the size in bytes from which a body counts as large.
	LargeFrom int64
	// Headroom is the most, in bytes, that SmallHeap lets the heap grow
	// past what is live: above Headroom/SmallHeap*100 live, the percent is
	// lowered to keep to it, down to LargeBody.
	Headroom int64
	// operatorSet is true when the operator set GOGC: nothing is changed.
	operatorSet bool
}

// New returns serve's Governor; getenv is the process environment, read
// for GOGC only.
func New(getenv func(string) string) *Governor {
	return &Governor{SmallHeap: 400, LargeBody: 50, LargeFrom: 1 << 20, Headroom: 48 << 20, operatorSet: getenv("GOGC") != ""}
}

// process is the bookkeeping of the process's one GC setting: whatever
// number of Governors and serves a process runs (tests run several), the
// setting they share is counted once.
var process struct {
	mu      sync.Mutex
	large   int           // large bodies in memory
	serving int           // serves started and not yet stopped
	saved   int           // the GC percent to set back when the last large body is done
	before  int           // the GC percent to set back when the last serve stops
	small   int           // the percent set for the live heap while no large body is in memory
	done    chan struct{} // ends the tuning of small, when the last serve stops
}

// tuneEvery is how often the live heap is looked at to set the percent.
const tuneEvery = time.Second

// smallPercent is the GC percent for a live heap of live bytes while no
// large body is in memory: SmallHeap, or less so as to grow by Headroom at
// most, but not below LargeBody.
func (g *Governor) smallPercent(live uint64) int {
	if live == 0 || g.Headroom <= 0 {
		return g.SmallHeap
	}
	return max(min(g.SmallHeap, int(100*uint64(g.Headroom)/live)), g.LargeBody)
}

// tune sets the percent for the live heap every tuneEvery until done.
func (g *Governor) tune(done chan struct{}) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	t := time.NewTicker(tuneEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		p := g.smallPercent(sample[0].Value.Uint64())
		process.mu.Lock()
		if p != process.small && process.done == done {
			process.small = p
			setNow(p)
		}
		process.mu.Unlock()
	}
}

// Start puts the process on SmallHeap for a serve, lowered as the live
// heap grows (smallPercent, looked at every tuneEvery), and returns the
// function that sets back what was there before. Several serves in one process
// share it: the first sets it, the last to stop sets back, whatever order
// they stop in.
func (g *Governor) Start() (stop func()) {
	if g == nil || g.operatorSet {
		return func() {}
	}
	process.mu.Lock()
	if process.serving == 0 {
		process.before = setNow(g.SmallHeap)
		process.small, process.done = g.SmallHeap, make(chan struct{})
		go g.tune(process.done)
	}
	process.serving++
	process.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			process.mu.Lock()
			if process.serving--; process.serving == 0 {
				close(process.done)
				process.done = nil
				setNow(process.before)
			}
			process.mu.Unlock()
		})
	}
}

// setNow sets percent and returns the setting it replaces; while a large
// body is in memory, the setting for when the last is done. process.mu is
// held.
func setNow(percent int) int {
	if process.large > 0 {
		was := process.saved
		process.saved = percent
		return was
	}
	return debug.SetGCPercent(percent)
}

// HoldLarge lowers the GC percent to LargeBody while a body of size bytes
// is in memory, if it is large or its size is not known (size < 0), and
// returns the function to call once it is no longer held.
func (g *Governor) HoldLarge(size int64) (release func()) {
	if g == nil || g.operatorSet || (size >= 0 && size < g.LargeFrom) {
		return func() {}
	}
	process.mu.Lock()
	if process.large == 0 {
		process.saved = debug.SetGCPercent(g.LargeBody)
	}
	process.large++
	process.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			process.mu.Lock()
			if process.large--; process.large == 0 {
				debug.SetGCPercent(process.saved)
			}
			process.mu.Unlock()
		})
	}
}
