package httpapi

import (
	"net/http/httptest"
	"testing"
	"time"

	"storelink"
)

// A partner takes at most its share of a pool, and the others go on taking
// theirs until the pool is spent; what is given back is taken again.
func TestPoolShares(t *testing.T) {
	p := newPool(5, 2)
	for i, c := range []struct {
		partner string
		want    refusal
	}{
		{"P", granted}, {"P", granted}, {"P", overShare}, // P at its share
		{"Q", granted}, {"Q", granted}, {"Q", overShare},
		{OperatorShare, granted},          // the operator's own share
		{"R", overPool}, {"P", overShare}, // the pool is spent
	} {
		if got := p.take(c.partner, 1); got != c.want {
			t.Fatalf("take %d (partner %q) = %v, want %v", i+1, c.partner, got, c.want)
		}
	}
	p.give("Q", 1)
	if got := p.take("R", 1); got != granted {
		t.Fatalf("take after Q gave one back = %v, want granted", got)
	}
	if p.holding("P") != 2 || p.holding("Q") != 1 || p.holding("R") != 1 || p.inUse() != 5 {
		t.Fatalf("held P %d Q %d R %d, in use %d", p.holding("P"), p.holding("Q"), p.holding("R"), p.inUse())
	}
}

// A download whose answer cannot take a write deadline gets no place: it
// could hold one for ever.
func TestDownloadsNeedAWriteDeadline(t *testing.T) {
	d := NewDownloads(1, 1, time.Minute)
	if _, err := d.Take(httptest.NewRecorder(), "P"); err == nil || storelink.ErrorCode(err) != storelink.EINTERNAL {
		t.Fatalf("Take on a writer without deadlines: %v, want an internal error", err)
	}
	if d.places.inUse() != 0 {
		t.Fatalf("%d places held after a refused download", d.places.inUse())
	}
}
