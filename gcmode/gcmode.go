// Package gcmode sets how eagerly storelink serve collects garbage: rarely
// while its heap is small, eagerly while a large stock file is in memory.
//
// The heap of a busy deliverer or of order calls is a few MB; at Go's
// default (GOGC=100) a heap that small is collected dozens of times a
// second, a noticeable share of the deliverer's CPU. Collecting when it has
// grown four times past what is live (GOGC=400) buys deliveries and order
// calls a second for a few MB more (bench/webhooks, bench/orders). A 10 MiB
// upload is the opposite case: its body is live while it is accepted and
// while it is applied, and at GOGC=400, or even at the default, the
// import's peak RSS can pass the 100 MiB budget; collecting twice as often
// while it is in memory (GOGC=50) keeps it under at about the same speed
// (bench/stock-import). bench/README.md has the figures.
//
// The setting is the process's, so Lean lowers it once for however many
// large files are in memory and sets it back when the last is done. An
// operator who set GOGC chose for themselves; it is then left alone.
package gcmode

import (
	"os"
	"runtime/debug"
	"sync"
)

const (
	// Relaxed is the GOGC of serve while no large file is in memory.
	Relaxed = 400
	// LeanPercent is the GOGC while one is.
	LeanPercent = 50
	// LargeFrom is the size from which a file counts as large.
	LargeFrom = 1 << 20
)

// operatorGOGC tells whether the operator set GOGC.
var operatorGOGC = os.Getenv("GOGC") != ""

var lean struct {
	mu      sync.Mutex
	active  int // large files in memory
	relaxed int // serve processes running (Relax not yet undone)
	saved   int // the GOGC to set back when the last file is done
	before  int // the GOGC to set back when the last serve is done
}

// Relax sets the GOGC of a serve process, unless the operator set it, and
// returns the function that sets back what was there before. Several
// serves in one process (tests) share it: the first relaxes, the last to
// stop sets back, whatever order they stop in.
func Relax() (restore func()) {
	if operatorGOGC {
		return func() {}
	}
	lean.mu.Lock()
	if lean.relaxed == 0 {
		lean.before = setNow(Relaxed)
	}
	lean.relaxed++
	lean.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			lean.mu.Lock()
			if lean.relaxed--; lean.relaxed == 0 {
				setNow(lean.before)
			}
			lean.mu.Unlock()
		})
	}
}

// setNow sets percent and returns the setting it replaces; while a file is
// in memory, the setting for when the last is done. lean.mu is held.
func setNow(percent int) int {
	if lean.active > 0 {
		was := lean.saved
		lean.saved = percent
		return was
	}
	return debug.SetGCPercent(percent)
}

// Lean lowers the GC percent while a file of size bytes is in memory, if
// it is large or its size is not known (size < 0), and returns the
// function that ends it.
func Lean(size int64) (done func()) {
	if (size >= 0 && size < LargeFrom) || operatorGOGC {
		return func() {}
	}
	lean.mu.Lock()
	if lean.active == 0 {
		lean.saved = debug.SetGCPercent(LeanPercent)
	}
	lean.active++
	lean.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			lean.mu.Lock()
			if lean.active--; lean.active == 0 {
				debug.SetGCPercent(lean.saved)
			}
			lean.mu.Unlock()
		})
	}
}
