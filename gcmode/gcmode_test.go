package gcmode

import (
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

// A large file lowers the GC percent while it is in memory, however many
// are at once, and the relaxed setting comes back when the last is done;
// a small file leaves it alone, a file of unknown size counts as large.
func TestLean(t *testing.T) {
	if operatorGOGC {
		t.Skip("GOGC is set in the environment: gcmode leaves it alone")
	}
	restore := Relax()
	defer restore()
	if p := percent(); p != Relaxed {
		t.Fatalf("relaxed: GOGC %d, want %d", p, Relaxed)
	}
	Lean(LargeFrom - 1)()
	if p := percent(); p != Relaxed {
		t.Fatalf("after a small file: GOGC %d, want %d", p, Relaxed)
	}
	var wg sync.WaitGroup
	dones := make(chan func(), 8)
	for i := range 8 {
		size := int64(10 << 20)
		if i == 0 {
			size = -1
		}
		wg.Go(func() { dones <- Lean(size) })
	}
	wg.Wait()
	if p := percent(); p != LeanPercent {
		t.Fatalf("while 8 large files are in memory: GOGC %d, want %d", p, LeanPercent)
	}
	for range 7 {
		done := <-dones
		done()
		done() // a second call changes nothing
	}
	if p := percent(); p != LeanPercent {
		t.Fatalf("while 1 is still in memory: GOGC %d, want %d", p, LeanPercent)
	}
	(<-dones)()
	if p := percent(); p != Relaxed {
		t.Fatalf("after the last: GOGC %d, want %d", p, Relaxed)
	}
}

// Relax and its restore while a file is in memory take effect when the
// last file is done, not in the middle of it.
func TestRelaxWhileLean(t *testing.T) {
	if operatorGOGC {
		t.Skip("GOGC is set in the environment: gcmode leaves it alone")
	}
	was := debug.SetGCPercent(100)
	defer debug.SetGCPercent(was)
	done := Lean(-1)
	restore := Relax()
	if p := percent(); p != LeanPercent {
		t.Fatalf("Relax while lean: GOGC %d, want %d", p, LeanPercent)
	}
	done()
	if p := percent(); p != Relaxed {
		t.Fatalf("after the file: GOGC %d, want %d", p, Relaxed)
	}
	done = Lean(-1)
	restore()
	done()
	if p := percent(); p != 100 {
		t.Fatalf("after restore and the file: GOGC %d, want 100", p)
	}
}

// Two serves in one process, stopping in the order they started: the
// setting from before the first comes back when the last stops.
func TestRelaxTwice(t *testing.T) {
	if operatorGOGC {
		t.Skip("GOGC is set in the environment: gcmode leaves it alone")
	}
	was := debug.SetGCPercent(100)
	defer debug.SetGCPercent(was)
	a := Relax()
	b := Relax()
	a()
	a() // a second call changes nothing
	if p := percent(); p != Relaxed {
		t.Fatalf("one serve still running: GOGC %d, want %d", p, Relaxed)
	}
	b()
	if p := percent(); p != 100 {
		t.Fatalf("both stopped: GOGC %d, want 100", p)
	}
}
