package httpapi

import (
	"bytes"
	"net/http/httptest"
	"os"
	"runtime/debug"
	"testing"

	"storelink/gcmode"
)

// gcPercent reads the GC percent without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// readBody turns on eager collection by the bytes that arrived, never by
// the declared Content-Length: a small body that declares 10 MiB leaves
// the GC setting alone; a body of 2 MiB lowers it until it is released.
func TestReadBodyHoldsLargeByBytesReceived(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set: gcmode leaves the GC setting to the operator")
	}
	gc := gcmode.New(os.Getenv)
	defer debug.SetGCPercent(debug.SetGCPercent(gc.SmallHeap))
	small := httptest.NewRequest("PUT", "/stock/c/f.csv", bytes.NewReader([]byte("store;ean\n")))
	small.ContentLength = 10 << 20
	body, _, release, err := readBody(small, 10<<20, gc, nil, "")
	if err != nil || body.Len() != 10 {
		t.Fatalf("readBody: %d bytes, %v", body.Len(), err)
	}
	if got := gcPercent(); got != gc.SmallHeap {
		t.Fatalf("GC percent %d with 10 bytes in memory (10 MiB declared), want %d", got, gc.SmallHeap)
	}
	release()

	large := httptest.NewRequest("PUT", "/stock/c/f.csv", bytes.NewReader(make([]byte, 2<<20)))
	large.ContentLength = -1
	body, _, release, err = readBody(large, 10<<20, gc, nil, "")
	if err != nil || body.Len() != 2<<20 {
		t.Fatalf("readBody: %d bytes, %v", body.Len(), err)
	}
	if got := gcPercent(); got != gc.LargeBody {
		t.Fatalf("GC percent %d with 2 MiB in memory, want %d", got, gc.LargeBody)
	}
	release()
	if got := gcPercent(); got != gc.SmallHeap {
		t.Fatalf("GC percent %d after release, want %d back", got, gc.SmallHeap)
	}
}
