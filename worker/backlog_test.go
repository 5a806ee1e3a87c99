package worker

import (
	"testing"
	"time"
)

// TestPace: the rate counts what was finished in the last minute, over the
// time since the start when that is shorter; older counts drop out.
func TestPace(t *testing.T) {
	start := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	p := pace{start: start}
	if r := p.perSecond(start); r != 0 {
		t.Fatalf("rate before anything = %v", r)
	}
	for i := range 20 {
		p.add(start.Add(time.Duration(i) * 500 * time.Millisecond)) // 20 over 10 s
	}
	if r := p.perSecond(start.Add(10 * time.Second)); r != 2 {
		t.Fatalf("rate after 10 s = %v, want 2 per second", r)
	}
	if r := p.perSecond(start.Add(59 * time.Second)); r != 20.0/59 {
		t.Fatalf("rate after 59 s = %v, want 20 per 59 s", r)
	}
	if r := p.perSecond(start.Add(65 * time.Second)); r != 8.0/60 {
		t.Fatalf("rate after 65 s = %v, want the 8 of the last minute per 60 s", r)
	}
	if r := p.perSecond(start.Add(2 * time.Minute)); r != 0 {
		t.Fatalf("rate two minutes on = %v, want 0: the counts are older than a minute", r)
	}
	p.add(start.Add(2 * time.Minute)) // reuses a slot of the first minute
	if r := p.perSecond(start.Add(2 * time.Minute)); r != 1.0/60 {
		t.Fatalf("rate after one more = %v, want 1 per 60 s", r)
	}
}
