package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
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

// A body is held in pieces of at most storelink.ChunkSize, in order, whether
// its length was declared or not and however the reads cut it: no buffer
// larger than a piece is ever made, the bytes and their hash are those
// sent, and the memory reserved is the pieces' (at most one piece more than
// the body) and all given back.
func TestReadBodyHoldsPieces(t *testing.T) {
	want := make([]byte, 3*storelink.ChunkSize+12345)
	for i := range want {
		want[i] = byte(i * 7)
	}
	sum := sha256.Sum256(want)
	for _, declared := range []bool{true, false} {
		for _, read := range []int{1000, 64 << 10, storelink.ChunkSize + 1} {
			mem := newUploadMemory(64<<20, 64<<20)
			r := httptest.NewRequest("PUT", "/stock/c/f.csv", &cutReader{b: want, n: read})
			r.ContentLength = -1
			if declared {
				r.ContentLength = int64(len(want))
			}
			body, hash, release, err := readBody(r, 10<<20, nil, mem, "P")
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range body {
				if len(p) == 0 || cap(p) > storelink.ChunkSize {
					t.Fatalf("declared %v, reads of %d: piece %d of %d bytes (capacity %d); want 1 to %d", declared, read, i, len(p), cap(p), storelink.ChunkSize)
				}
			}
			if !bytes.Equal(body.Bytes(), want) || hash != hex.EncodeToString(sum[:]) {
				t.Fatalf("declared %v, reads of %d: %d bytes, hash %s; want the %d bytes sent", declared, read, body.Len(), hash, len(want))
			}
			if n := mem.inUse(); n < int64(len(want)) || n > int64(len(want))+storelink.ChunkSize {
				t.Fatalf("declared %v, reads of %d: %d bytes reserved for a body of %d", declared, read, n, len(want))
			}
			release()
			if n := mem.inUse(); n != 0 {
				t.Fatalf("%d bytes reserved after release", n)
			}
		}
	}
}

// cutReader reads b at most n bytes at a time.
type cutReader struct {
	b []byte
	n int
}

func (r *cutReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), r.n)], r.b)
	r.b = r.b[k:]
	return k, nil
}
