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
	mem := &uploadMemory{max: 1 << 20}
	put := func(n int, declared bool) *http.Request {
		r := httptest.NewRequest("PUT", "/stock/c/f.csv", io.MultiReader(bytes.NewReader(make([]byte, n))))
		r.ContentLength = -1
		if declared {
			r.ContentLength = int64(n)
		}
		return r
	}

	// A declared body reserves its length, no more, while it is held.
	body, _, lean, err := readBody(put(600<<10, true), 1<<20, nil, mem)
	if err != nil || len(body) != 600<<10 {
		t.Fatalf("readBody: %d bytes, %v", len(body), err)
	}
	if mem.used != 600<<10 {
		t.Fatalf("%d bytes reserved for a body of %d", mem.used, 600<<10)
	}
	// Another that cannot fit beside it: refused before it is read when
	// declared, as it grows when not.
	for _, declared := range []bool{true, false} {
		_, _, lean2, err := readBody(put(500<<10, declared), 1<<20, nil, mem)
		var e *storelink.Error
		if !asError(err, &e) || e.Code != storelink.EUNAVAILABLE || e.RetryAfter < 1 {
			t.Fatalf("body beyond the budget (declared %v): %v, want unavailable with Retry-After", declared, err)
		}
		lean2()
		if mem.used != 600<<10 {
			t.Fatalf("%d bytes reserved after a refused body (declared %v), want %d", mem.used, declared, 600<<10)
		}
	}
	lean()
	if mem.used != 0 {
		t.Fatalf("%d bytes reserved after lean, want 0", mem.used)
	}
	// A body too large gives back what it reserved too.
	_, _, lean, err = readBody(put(1<<20+1, false), 1<<20, nil, &uploadMemory{max: 4 << 20})
	if storelink.ErrorCode(err) != storelink.ETOOLARGE {
		t.Fatalf("body of max+1 bytes: %v, want too large", err)
	}
	lean()
	// The whole budget can be taken by one body of the largest size.
	body, _, lean, err = readBody(put(1<<20, false), 1<<20, nil, mem)
	if err != nil || len(body) != 1<<20 || mem.used != 1<<20 {
		t.Fatalf("body of the largest size in a budget of that size: %d bytes, %v, %d reserved", len(body), err, mem.used)
	}
	lean()
	if mem.used != 0 {
		t.Fatalf("%d bytes reserved after lean, want 0", mem.used)
	}
}
