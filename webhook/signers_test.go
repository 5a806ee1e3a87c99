package webhook

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// The client's signers, which keep an HMAC per key, sign as signatureHeader
// does, with one key or two, from many goroutines at once.
func TestSignersMatchSignatureHeader(t *testing.T) {
	var s signers
	keys := [][]byte{[]byte("first key, 32 bytes long........"), []byte("second")}
	ts := time.Unix(1700000000, 0)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				id := fmt.Sprintf("msg_%d_%d", g, i)
				body := []byte(fmt.Sprintf(`{"n":%d}`, i))
				for _, ks := range [][][]byte{keys[:1], keys[1:], keys} {
					if got, want := s.header(ks, id, ts.Unix(), body), signatureHeader(ks, id, ts, body); got != want {
						t.Errorf("header(%d keys, %s) = %q, want %q", len(ks), id, got, want)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
