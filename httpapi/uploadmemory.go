package httpapi

import (
	"sync"

	"storelink"
	"storelink/gcmode"
)

// DefaultMaxUploadMemory is the memory all upload and validation bodies
// together may take in this process when Deps does not say.
const DefaultMaxUploadMemory = 256 << 20

// uploadMemoryRetryAfter is the Retry-After of the 503 given when the
// budget is spent: it frees as the bodies being received are stored or
// checked, which for files sent at an ordinary pace takes a few seconds.
const uploadMemoryRetryAfter = 5

// uploadMemory is the process-wide budget of memory that request bodies
// of uploads and validations hold. The per-client in-flight limit bounds
// what one client makes this process hold; this bounds what all of them
// do together. Bodies reserve the buffers they are received into as the
// buffers grow, so a body that is declared but not sent reserves nothing.
type uploadMemory struct {
	mu   sync.Mutex
	max  int64
	used int64
}

func (m *uploadMemory) reserve(n int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.used+n > m.max {
		return false
	}
	m.used += n
	return true
}

func (m *uploadMemory) release(n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.used -= n
}

// fits tells whether n more bytes fit now. It reserves nothing: it lets a
// body whose declared length cannot fit be refused before it is read.
func (m *uploadMemory) fits(n int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used+n <= m.max
}

// errUploadMemory is the 503 of a body that does not fit in the budget.
func (m *uploadMemory) errFull() error {
	e := storelink.Errorf(storelink.EUNAVAILABLE,
		"The service is busy receiving other files: the %d bytes of memory it keeps for bodies being received are taken, "+
			"and nothing of this one was kept. Send it again after Retry-After.", m.max)
	e.RetryAfter = uploadMemoryRetryAfter
	return e
}

// minBodyBuffer is the first buffer of a body, so that a small body does
// not grow its buffer many times.
const minBodyBuffer = 4 << 10

// trustDeclaredFrom is how much of a declared body must have arrived
// before its buffer is made the declared size at once. A client that
// declares 10 MiB and sends a byte costs a few KiB; one that has sent a
// megabyte is sending its file, and doubling up to the declared size would
// copy it again each time and hold two copies at the last step.
const trustDeclaredFrom = 1 << 20

// bodyBuffer receives a body into memory reserved in mem (none when mem is
// nil). Its buffer doubles as bytes arrive, up to limit: the declared
// Content-Length when there is one (net/http delivers no more), else the
// largest file size, beyond which Write refuses the body as too large. It
// turns on gc's eager collection once it holds gc.LargeFrom bytes.
type bodyBuffer struct {
	buf      []byte
	limit    int64
	declared bool  // limit is the declared Content-Length
	max      int64 // the largest file size, for the error
	mem      *uploadMemory
	reserved int64
	gc       *gcmode.Governor // nil: garbage collection is left as it is
	end      func()
}

func (b *bodyBuffer) Write(p []byte) (int, error) {
	need := int64(len(b.buf)) + int64(len(p))
	if need > int64(cap(b.buf)) {
		if need > b.limit {
			return 0, tooLarge(b.max)
		}
		size := min(max(2*int64(cap(b.buf)), need, minBodyBuffer), b.limit)
		if b.declared && need >= trustDeclaredFrom {
			size = b.limit
		}
		if b.mem != nil {
			if !b.mem.reserve(size - b.reserved) {
				return 0, b.mem.errFull()
			}
			b.reserved = size
		}
		grown := make([]byte, len(b.buf), size)
		copy(grown, b.buf)
		b.buf = grown
	}
	b.buf = append(b.buf, p...)
	if b.end == nil && b.gc != nil && int64(len(b.buf)) >= b.gc.LargeFrom {
		b.end = b.gc.HoldLarge(int64(len(b.buf)))
	}
	return len(p), nil
}

// done is called once the body is no longer in memory: it gives back the
// reservation and ends the eager collection.
func (b *bodyBuffer) done() {
	if b.mem != nil {
		b.mem.release(b.reserved)
		b.reserved = 0
	}
	if b.end != nil {
		b.end()
		b.end = nil
	}
}
