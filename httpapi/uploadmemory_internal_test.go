package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"storelink"
)

// readBody reserves the memory of a body in the budget as it grows and
// gives all of it back with lean, whether the body was taken or refused;
// a body that does not fit is refused as unavailable with a Retry-After.
func TestReadBodyReservesUploadMemory(t *testing.T) {
	mem := newUploadMemory(1<<20, 1<<20)
	put := func(n int, declared bool) *http.Request {
		r := httptest.NewRequest("PUT", "/stock/c/f.csv", io.MultiReader(bytes.NewReader(make([]byte, n))))
		r.ContentLength = -1
		if declared {
			r.ContentLength = int64(n)
		}
		return r
	}

	// A declared body reserves its length, no more, while it is held.
	body, _, lean, err := readBody(put(600<<10, true), 1<<20, nil, mem, "P")
	if err != nil || body.Len() != 600<<10 {
		t.Fatalf("readBody: %d bytes, %v", body.Len(), err)
	}
	if mem.inUse() != 600<<10 {
		t.Fatalf("%d bytes reserved for a body of %d", mem.inUse(), 600<<10)
	}
	// Another partner's that cannot fit beside it: refused before it is
	// read when declared, as it grows when not.
	for _, declared := range []bool{true, false} {
		_, _, lean2, err := readBody(put(500<<10, declared), 1<<20, nil, mem, "Q")
		var e *storelink.Error
		if !asError(err, &e) || e.Code != storelink.EUNAVAILABLE || e.RetryAfter < 1 {
			t.Fatalf("body beyond the budget (declared %v): %v, want unavailable with Retry-After", declared, err)
		}
		lean2()
		if mem.inUse() != 600<<10 {
			t.Fatalf("%d bytes reserved after a refused body (declared %v), want %d", mem.inUse(), declared, 600<<10)
		}
	}
	lean()
	if mem.inUse() != 0 {
		t.Fatalf("%d bytes reserved after lean, want 0", mem.inUse())
	}
	// A body too large gives back what it reserved too.
	_, _, lean, err = readBody(put(1<<20+1, false), 1<<20, nil, newUploadMemory(4<<20, 4<<20), "P")
	if storelink.ErrorCode(err) != storelink.ETOOLARGE {
		t.Fatalf("body of max+1 bytes: %v, want too large", err)
	}
	lean()
	// The whole budget can be taken by one body of the largest size.
	body, _, lean, err = readBody(put(1<<20, false), 1<<20, nil, mem, "P")
	if err != nil || body.Len() != 1<<20 || mem.inUse() != 1<<20 {
		t.Fatalf("body of the largest size in a budget of that size: %d bytes, %v, %d reserved", body.Len(), err, mem.inUse())
	}
	lean()
	if mem.inUse() != 0 {
		t.Fatalf("%d bytes reserved after lean, want 0", mem.inUse())
	}
}

// A partner's bodies take at most its share of the budget: beyond it the
// partner gets 429 partner_busy with a Retry-After, while another
// partner's body of the largest size is still taken.
func TestReadBodyUploadMemoryShare(t *testing.T) {
	mem := newUploadMemory(2<<20, 1<<20)
	put := func(n int, declared bool) *http.Request {
		r := httptest.NewRequest("PUT", "/stock/c/f.csv", io.MultiReader(bytes.NewReader(make([]byte, n))))
		r.ContentLength = -1
		if declared {
			r.ContentLength = int64(n)
		}
		return r
	}
	_, _, leanP, err := readBody(put(600<<10, true), 1<<20, nil, mem, "P")
	if err != nil {
		t.Fatal(err)
	}
	defer leanP()
	for _, declared := range []bool{true, false} {
		_, _, lean, err := readBody(put(500<<10, declared), 1<<20, nil, mem, "P")
		var e *storelink.Error
		if !asError(err, &e) || e.Code != storelink.EBUSY || e.RetryAfter < 1 {
			t.Fatalf("P's body beyond its share (declared %v): %v, want partner_busy with Retry-After", declared, err)
		}
		lean()
	}
	body, _, leanQ, err := readBody(put(1<<20, false), 1<<20, nil, mem, "Q")
	if err != nil || body.Len() != 1<<20 {
		t.Fatalf("Q's body of the largest size beside P's at its share: %d bytes, %v", body.Len(), err)
	}
	leanQ()
	if mem.holding("P") != 600<<10 || mem.holding("Q") != 0 {
		t.Fatalf("held: P %d, Q %d; want %d and 0", mem.holding("P"), mem.holding("Q"), 600<<10)
	}
}
