// Package gcmode sets how eagerly storelink serve collects garbage: rarely
// while its heap is small, eagerly while a large stock file is in memory.
//
// The heap of a busy deliverer or of order calls is small, and at Go's
// default (GOGC=100) a small heap is collected very often; collecting when
// it has grown four times past what is live (GOGC=400) spends a few MB to
// save that CPU. A 10 MiB upload is the opposite case: its body is live
// while it is accepted and while it is applied, and collecting twice as
// often while it is in memory (GOGC=50) keeps the process's peak memory
// down at little cost. bench/README.md has what was measured.
//
// serve makes one Governor from its configuration and hands it to the API
// (bodies being received) and to the upload processor (bodies being
// applied). An operator who set GOGC chose for themselves; the Governor
// then leaves the setting alone.
package gcmode

import (
	"runtime/debug"
	"sync"
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
	// operatorSet is true when the operator set GOGC: nothing is changed.
	operatorSet bool
}

// New returns serve's Governor; getenv is the process environment, read
// for GOGC only.
func New(getenv func(string) string) *Governor {
	return &Governor{SmallHeap: 400, LargeBody: 50, LargeFrom: 1 << 20, operatorSet: getenv("GOGC") != ""}
}

// process is the bookkeeping of the process's one GC setting: whatever
// number of Governors and serves a process runs (tests run several), the
// setting they share is counted once.
var process struct {
	mu      sync.Mutex
	large   int // large bodies in memory
	serving int // serves started and not yet stopped
	saved   int // the GC percent to set back when the last large body is done
	before  int // the GC percent to set back when the last serve stops
}

// Start puts the process on SmallHeap for a serve and returns the function
// that sets back what was there before. Several serves in one process
// share it: the first sets it, the last to stop sets back, whatever order
// they stop in.
func (g *Governor) Start() (stop func()) {
	if g == nil || g.operatorSet {
		return func() {}
	}
	process.mu.Lock()
	if process.serving == 0 {
		process.before = setNow(g.SmallHeap)
	}
	process.serving++
	process.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			process.mu.Lock()
			if process.serving--; process.serving == 0 {
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
