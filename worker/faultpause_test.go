package worker

import (
	"testing"
	"time"

	"storelink"
)

// The pause after a fault doubles while faults go on, is shared by the
// workers (a fault during a pause does not lengthen it), stops at
// faultPauseMax, and starts again at faultPauseMin after a successful apply
// or long after the last pause.
func TestFaultPause(t *testing.T) {
	var f faultPause
	t0 := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	steps := []struct {
		name string
		now  time.Duration
		want time.Duration
	}{
		{"first fault", 0, time.Second},
		{"another worker's, during the pause", 500 * time.Millisecond, 500 * time.Millisecond},
		{"right after the pause", 1100 * time.Millisecond, 2 * time.Second},
		{"again", 3200 * time.Millisecond, 4 * time.Second},
		{"again", 7300 * time.Millisecond, 8 * time.Second},
		{"again", 15400 * time.Millisecond, 16 * time.Second},
		{"at the most", 31500 * time.Millisecond, faultPauseMax},
		{"stays at the most", 61600 * time.Millisecond, faultPauseMax},
		{"long after the last pause", 61600*time.Millisecond + faultPauseMax + 31*time.Second, faultPauseMin},
	}
	for _, s := range steps {
		if got := f.fault(at(s.now)); got != s.want {
			t.Fatalf("%s (at %s): pause %s, want %s", s.name, s.now, got, s.want)
		}
		if got := f.wait(at(s.now)); got != s.want {
			t.Fatalf("%s (at %s): wait %s, want %s", s.name, s.now, got, s.want)
		}
	}
	now := 61600*time.Millisecond + faultPauseMax + 31*time.Second
	f.fault(at(now + 2*time.Second))
	f.healed()
	if got := f.fault(at(now + 5*time.Second)); got != faultPauseMin {
		t.Fatalf("first fault after a successful apply: pause %s, want %s", got, faultPauseMin)
	}
	if got := f.wait(at(now + time.Hour)); got != 0 {
		t.Fatalf("wait after the pause = %s, want 0", got)
	}
}

// Claims kept after a failed release are handed out once.
func TestFaultPauseKeep(t *testing.T) {
	var f faultPause
	if f.pending() || len(f.take()) != 0 {
		t.Fatal("a new pause has claims to release")
	}
	f.keep(&storelink.Claim{Upload: storelink.Upload{ID: "a"}})
	f.keep(&storelink.Claim{Upload: storelink.Upload{ID: "a"}})
	if !f.pending() {
		t.Fatal("no claim pending after keep")
	}
	if got := f.take(); len(got) != 1 || got[0].ID != "a" {
		t.Fatalf("take = %v, want the one claim", got)
	}
	if f.pending() || len(f.take()) != 0 {
		t.Fatal("a claim was handed out twice")
	}
}
