package httpapi

import (
	"storelink"
	"storelink/gcmode"
)

// DefaultMaxUploadMemory is the memory all upload bodies together may take in this process when Deps does not say.
const DefaultMaxUploadMemory = 256 << 20

// DefaultUploadMemoryShare is the share of the upload memory one partner
// may hold when Deps does not say: a quarter of the budget, and at least
// one file of the largest size. Three partners at their share leave a
// quarter (64 MiB, six files of the default largest size) to all others.
func DefaultUploadMemoryShare(budget, maxFileSize int64) int64 {
	return min(max(maxFileSize, budget/4), budget)
}

// uploadMemoryRetryAfter is the Retry-After of the 503 given when the
// budget is spent, and of the 429 given when the partner holds its share:
// both free as the bodies being received are stored or checked, which for
// files sent at an ordinary pace takes a few seconds.
const uploadMemoryRetryAfter = 5

// uploadMemory is the process-wide budget of memory that request bodies
// of uploads hold (a validation is checked as it arrives and holds none), divided per partner: all bodies
// together hold at most the budget, those of one partner's clients at most
// its share, so that a partner sending slowly cannot take the memory of
// every other. Bodies reserve the buffers they are received into as the
// buffers grow, so a body that is declared but not sent reserves nothing.
type uploadMemory struct{ *pool }

func newUploadMemory(budget, share int64) *uploadMemory {
	return &uploadMemory{newPool(budget, share)}
}

// reserve reserves n more bytes for a body of partner's, or says why not.
func (m *uploadMemory) reserve(partner string, n int64) error {
	return m.refused(m.take(partner, n))
}

func (m *uploadMemory) release(partner string, n int64) { m.give(partner, n) }

// fits tells whether n more bytes fit now. It reserves nothing: it lets a
// body whose declared length cannot fit be refused before it is read.
func (m *uploadMemory) fits(partner string, n int64) error {
	return m.refused(m.check(partner, n))
}

// refused is the error of a body that does not fit: 429 partner_busy at
// the partner's share, 503 when the budget is spent.
func (m *uploadMemory) refused(r refusal) error {
	var e *storelink.Error
	switch r {
	case granted:
		return nil
	case overShare:
		e = storelink.Errorf(storelink.EBUSY,
			"The bodies this partner's clients are sending hold the %d bytes of memory one partner may take at once, "+
				"and nothing of this one was kept. Send it again after Retry-After, once one of them has been answered.", m.share)
	default:
		e = storelink.Errorf(storelink.EUNAVAILABLE,
			"The service is busy receiving other files: the %d bytes of memory it keeps for bodies being received are taken, "+
				"and nothing of this one was kept. Send it again after Retry-After.", m.total)
	}
	e.RetryAfter = uploadMemoryRetryAfter
	return e
}

// minBodyBuffer is the first buffer of a body, so that a small body does
// not grow its buffer many times.
const minBodyBuffer = 4 << 10

// bodyBuffer receives a body into memory reserved in mem for partner (none
// when mem is nil), in pieces (storelink.Chunks): the first doubles as
// bytes arrive, up to storelink.ChunkSize, and those after are of that
// size, each up to limit: the declared Content-Length when there is one
// (net/http delivers no more), else the largest file size, beyond which
// Write refuses the body as too large. Nothing is copied again once it is
// in a full piece, and no allocation is larger than a piece. It turns on
// gc's eager collection once it holds gc.LargeFrom bytes.
type bodyBuffer struct {
	chunks   storelink.Chunks
	n        int64 // bytes held
	limit    int64
	max      int64 // the largest file size, for the error
	mem      *uploadMemory
	partner  string
	reserved int64
	gc       *gcmode.Governor // nil: garbage collection is left as it is
	end      func()
}

func (b *bodyBuffer) Write(p []byte) (int, error) {
	if b.n+int64(len(p)) > b.limit {
		return 0, tooLarge(b.max)
	}
	written := len(p)
	for len(p) > 0 {
		last := len(b.chunks) - 1
		if last < 0 || len(b.chunks[last]) == cap(b.chunks[last]) {
			if err := b.more(len(p)); err != nil {
				return 0, err
			}
			continue
		}
		c := b.chunks[last]
		k := min(cap(c)-len(c), len(p))
		b.chunks[last] = append(c, p[:k]...)
		p = p[k:]
		b.n += int64(k)
	}
	if b.end == nil && b.gc != nil && b.n >= b.gc.LargeFrom {
		b.end = b.gc.HoldLarge(b.n)
	}
	return written, nil
}

// more makes room for need more bytes (at least one), all pieces being
// full: the first piece grows while it is smaller than a piece, else a new
// piece is added. Neither goes past limit.
func (b *bodyBuffer) more(need int) error {
	left := b.limit - b.n
	grow := len(b.chunks) == 1 && cap(b.chunks[0]) < storelink.ChunkSize
	var size int64
	switch {
	case len(b.chunks) == 0:
		size = max(int64(need), minBodyBuffer)
	case grow:
		size = max(2*int64(cap(b.chunks[0])), b.n+int64(need))
	default:
		size = storelink.ChunkSize
	}
	size = min(size, storelink.ChunkSize)
	if grow {
		size = min(size, b.limit)
	} else {
		size = min(size, left)
	}
	more := size
	if grow {
		more -= int64(cap(b.chunks[0]))
	}
	if b.mem != nil {
		if err := b.mem.reserve(b.partner, more); err != nil {
			return err
		}
		b.reserved += more
	}
	if grow {
		grown := make([]byte, len(b.chunks[0]), size)
		copy(grown, b.chunks[0])
		b.chunks[0] = grown
		return nil
	}
	b.chunks = append(b.chunks, make([]byte, 0, size))
	return nil
}

// done is called once the body is no longer in memory: it gives back the
// reservation and ends the eager collection.
func (b *bodyBuffer) done() {
	if b.mem != nil {
		b.mem.release(b.partner, b.reserved)
		b.reserved = 0
	}
	if b.end != nil {
		b.end()
		b.end = nil
	}
}
