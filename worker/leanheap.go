package worker

import (
	"os"
	"runtime/debug"
	"sync"
)

// leanHeap collects garbage more often while large feeds are applied. The
// heap of an import holds its body and the rows in flight, and at Go's
// default (GOGC=100) it could grow to twice that before a collection: a
// 10 MiB import peaked at 93–101 MiB of RSS against a budget of 100. With
// GOGC=50 while it runs it peaks at about 86 MiB for about the same speed
// (bench/stock-import). The rest of the time, deliveries and order calls,
// whose heap is a few MB, keep the default: collecting twice as often there
// would cost them CPU for nothing.
//
// The setting is the process's, so it is lowered once for however many
// feeds are being applied and restored when the last is done. An operator
// who set GOGC chose for themselves; it is then left alone.
type leanHeap struct {
	mu     sync.Mutex
	active int
	saved  int
}

// leanGCPercent is the GOGC while a large feed is applied, and leanFrom the
// body size from which a feed counts as large.
const (
	leanGCPercent = 50
	leanFrom      = 1 << 20
)

// operatorGOGC tells whether the operator set GOGC.
var operatorGOGC = os.Getenv("GOGC") != ""

// enter lowers the GC percent for a feed of size bytes, if it is large,
// and returns the function that undoes it.
func (h *leanHeap) enter(size int64) (leave func()) {
	if size < leanFrom || operatorGOGC {
		return func() {}
	}
	h.mu.Lock()
	if h.active == 0 {
		h.saved = debug.SetGCPercent(leanGCPercent)
	}
	h.active++
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		if h.active--; h.active == 0 {
			debug.SetGCPercent(h.saved)
		}
		h.mu.Unlock()
	}
}
