package storelink_test

import (
	"testing"
	"time"

	"storelink"
)

// Every upload takes at least MinUpload: a one-byte file takes 64 KiB, and
// the bucket holds exactly size/64 KiB of them; what Give puts back is
// what Take took.
func TestCapacityMinUpload(t *testing.T) {
	p := storelink.CapacityPolicy{Base: 1 << 20, Window: time.Hour, MinUpload: 64 << 10}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b, c, err := p.Take(nil, 0, 1, now)
	if err != nil || c.BytesLeft != 1<<20-64<<10 {
		t.Fatalf("a 1-byte upload: %+v, %v; want %d bytes left", c, err, 1<<20-64<<10)
	}
	taken := 1
	for ; taken < 100; taken++ {
		next, _, err := p.Take(&b, 0, 1, now)
		if err != nil {
			if storelink.ErrorCode(err) != storelink.ERATELIMIT {
				t.Fatalf("tiny upload %d: %v, want rate_limited", taken+1, err)
			}
			break
		}
		b = next
	}
	if want := (1 << 20) / (64 << 10); taken != want {
		t.Fatalf("%d one-byte uploads fit in a bucket of 1 MiB, want %d (1 MiB / 64 KiB)", taken, want)
	}
	// Fits says the same before a body is read.
	if err := p.Fits(p.Peek(&b, 0, now), 1); storelink.ErrorCode(err) != storelink.ERATELIMIT {
		t.Fatalf("Fits of a 1-byte upload in an empty bucket: %v, want rate_limited", err)
	}
	// A cancelled tiny upload gives back its 64 KiB, not its byte.
	b = p.Give(&b, 0, 1, now)
	if c := p.Peek(&b, 0, now); c.BytesLeft != 64<<10 {
		t.Fatalf("after giving back a 1-byte upload: %d bytes left, want %d", c.BytesLeft, 64<<10)
	}
	// Files of MinUpload or more are charged their size.
	if _, c, err := p.Take(nil, 0, 100<<10, now); err != nil || c.BytesLeft != 1<<20-100<<10 {
		t.Fatalf("a 100 KiB upload: %+v, %v", c, err)
	}
}

// In a bucket smaller than MinUpload a small file takes the whole bucket
// rather than being refused as larger than it.
func TestCapacityMinUploadSmallBucket(t *testing.T) {
	p := storelink.CapacityPolicy{Base: 32 << 10, Window: time.Hour, MinUpload: 64 << 10}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b, c, err := p.Take(nil, 0, 10, now)
	if err != nil || c.BytesLeft != 0 {
		t.Fatalf("a 10-byte upload in a 32 KiB bucket: %+v, %v; want the bucket emptied", c, err)
	}
	if _, _, err := p.Take(&b, 0, 10, now); storelink.ErrorCode(err) != storelink.ERATELIMIT {
		t.Fatalf("the next: %v, want rate_limited", err)
	}
	if _, _, err := p.Take(nil, 0, 32<<10+1, now); storelink.ErrorCode(err) != storelink.ETOOLARGE {
		t.Fatalf("a file larger than the bucket: %v, want too_large", err)
	}
}
