package storelink

import (
	"fmt"
	"math"
	"time"
)

// Bucket is the stored state of a client's upload token bucket. A client
// without a stored bucket has a full one.
type Bucket struct {
	Tokens    float64
	UpdatedAt time.Time
}

// refill brings the bucket up to now: it refills evenly, size bytes per
// window, and never holds more than size.
func (p CapacityPolicy) refill(b Bucket, size int64, now time.Time) Bucket {
	if elapsed := now.Sub(b.UpdatedAt); elapsed > 0 && p.Window > 0 {
		b.Tokens += float64(size) * elapsed.Seconds() / p.Window.Seconds()
	}
	b.Tokens = math.Min(b.Tokens, float64(size))
	b.UpdatedAt = now
	return b
}

// Charge is what an upload of n bytes takes from a bucket of size bytes: n,
// but at least MinUpload, and never more than the whole bucket for a file
// that fits in it, so that a client with a small bucket can still upload.
func (p CapacityPolicy) Charge(n, size int64) int64 {
	if n >= p.MinUpload || n > size {
		return n
	}
	return min(p.MinUpload, size)
}

// Take takes an upload of n bytes (its Charge) from the bucket of a client
// with the given number of stores. It returns the new state to store and
// the capacity as the client should be told it. Errors: ETOOLARGE when n
// exceeds the whole bucket, so waiting can never help; ERATELIMIT with
// RetryAfter, the whole seconds after which the same n fits.
func (p CapacityPolicy) Take(b *Bucket, stores int, n int64, now time.Time) (Bucket, Capacity, error) {
	size := p.Size(stores)
	cur := Bucket{Tokens: float64(size), UpdatedAt: now}
	if b != nil {
		cur = p.refill(*b, size, now)
	}
	if err := p.fits(cur.Tokens, size, n); err != nil {
		return cur, p.capacity(cur, size), err
	}
	cur.Tokens -= float64(p.Charge(n, size))
	return cur, p.capacity(cur, size), nil
}

// Give puts back into the bucket of a client with the given number of
// stores what Take took for an upload of n bytes, never past its size, and
// returns the new state to store.
func (p CapacityPolicy) Give(b *Bucket, stores int, n int64, now time.Time) Bucket {
	size := p.Size(stores)
	if b == nil {
		return Bucket{Tokens: float64(size), UpdatedAt: now}
	}
	cur := p.refill(*b, size, now)
	cur.Tokens = math.Min(cur.Tokens+float64(p.Charge(n, size)), float64(size))
	return cur
}

// Fits tells, before a body is read, whether n bytes would fit the capacity
// c reported: the same errors as Take, so a client sending a Content-Length
// is turned away before it sends the body.
func (p CapacityPolicy) Fits(c Capacity, n int64) error {
	return p.fits(float64(c.BytesLeft), c.BytesPerWindow, n)
}

func (p CapacityPolicy) fits(tokens float64, size, n int64) error {
	if n > size {
		return Errorf(ETOOLARGE,
			"The file is %d bytes, more than this client's whole upload capacity of %d bytes per %s.", n, size, p.Window)
	}
	if charge := p.Charge(n, size); float64(charge) > tokens+tolerance {
		wait := p.secondsFor(float64(charge)-tokens, size)
		counts := ""
		if charge > n {
			counts = fmt.Sprintf(", and an upload counts as at least %d", charge)
		}
		err := Errorf(ERATELIMIT, "Upload capacity used up: %d bytes are left of %d per %s%s. Retry after %d seconds.",
			int64(tokens), size, p.Window, counts, wait)
		err.RetryAfter = wait
		return err
	}
	return nil
}

// Peek reports the capacity without taking anything.
func (p CapacityPolicy) Peek(b *Bucket, stores int, now time.Time) Capacity {
	size := p.Size(stores)
	cur := Bucket{Tokens: float64(size), UpdatedAt: now}
	if b != nil {
		cur = p.refill(*b, size, now)
	}
	return p.capacity(cur, size)
}

func (p CapacityPolicy) capacity(b Bucket, size int64) Capacity {
	missing := float64(size) - b.Tokens
	return Capacity{
		BytesPerWindow: size,
		BytesLeft:      int64(b.Tokens),
		Window:         p.Window,
		FullIn:         time.Duration(p.secondsFor(missing, size)) * time.Second,
	}
}

// tolerance absorbs float rounding in the refill: a millionth of a byte.
const tolerance = 1e-6

// secondsFor is how many whole seconds the bucket needs to gain bytes,
// rounded up and at least 1. fits compares with a tolerance, so the promised
// moment is never a rounding error short.
func (p CapacityPolicy) secondsFor(bytes float64, size int64) int {
	if bytes <= 0 {
		return 0
	}
	if size <= 0 || p.Window <= 0 {
		return 1
	}
	s := int(math.Ceil(bytes*p.Window.Seconds()/float64(size) - tolerance))
	return max(s, 1)
}
