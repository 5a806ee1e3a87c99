package httpapi

import (
	"fmt"
	"testing"
	"time"
)

// testLimiter is a limiter of perMinute on a clock the test moves.
func testLimiter(perMinute int) (*AuthLimiter, func(time.Duration)) {
	l := NewAuthLimiter(perMinute)
	now := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return now }
	return l, func(d time.Duration) { now = now.Add(d) }
}

// wantBlocked fails unless addr is blocked (with that Retry-After) or not.
func wantBlocked(t *testing.T, l *AuthLimiter, addr string, blocked bool, retryAfter int) {
	t.Helper()
	after, got := l.Blocked(addr)
	if got != blocked || after != retryAfter {
		t.Fatalf("Blocked(%s) = %d, %v; want %d, %v", addr, after, got, retryAfter, blocked)
	}
}

// Twenty failures a minute: the 21st attempt is refused for the three
// seconds a failure takes to refill, then one more failure is allowed.
func TestAuthLimiterBucket(t *testing.T) {
	l, advance := testLimiter(20)
	for i := range 20 {
		wantBlocked(t, l, "192.0.2.1:1000", false, 0)
		l.Failed(fmt.Sprintf("192.0.2.1:%d", 1000+i)) // the port does not matter
	}
	wantBlocked(t, l, "192.0.2.1:2000", true, 3)
	wantBlocked(t, l, "192.0.2.2:1000", false, 0) // another address
	advance(2 * time.Second)
	wantBlocked(t, l, "192.0.2.1:1000", true, 1)
	advance(time.Second)
	wantBlocked(t, l, "192.0.2.1:1000", false, 0)
	l.Failed("192.0.2.1:1000")
	wantBlocked(t, l, "192.0.2.1:1000", true, 3)
	// A whole minute refills the bucket: twenty more.
	advance(time.Minute)
	for range 20 {
		wantBlocked(t, l, "192.0.2.1:1000", false, 0)
		l.Failed("192.0.2.1:1000")
	}
	wantBlocked(t, l, "192.0.2.1:1000", true, 3)
}

// Failures that were in flight when the bucket ran out still count: forty
// guesses at once cost the address the time forty take to refill.
func TestAuthLimiterParallelFailures(t *testing.T) {
	l, advance := testLimiter(20)
	for range 40 {
		l.Failed("192.0.2.1:1")
	}
	wantBlocked(t, l, "192.0.2.1:1", true, 63)
	advance(62 * time.Second)
	wantBlocked(t, l, "192.0.2.1:1", true, 1)
	advance(time.Second)
	wantBlocked(t, l, "192.0.2.1:1", false, 0)
}

// IPv6 addresses count per /64; an IPv4 address is the same whether it
// comes as IPv4 or IPv4-mapped IPv6.
func TestAuthLimiterAddresses(t *testing.T) {
	l, _ := testLimiter(2)
	l.Failed("[2001:db8:1:2::1]:1")
	l.Failed("[2001:db8:1:2:ffff::9]:2")
	wantBlocked(t, l, "[2001:db8:1:2::77]:3", true, 30)
	wantBlocked(t, l, "[2001:db8:1:3::1]:3", false, 0)

	l.Failed("198.51.100.7:1")
	l.Failed("[::ffff:198.51.100.7]:2")
	wantBlocked(t, l, "198.51.100.7:3", true, 30)
	wantBlocked(t, l, "198.51.100.8:3", false, 0)
}

// The table never holds more than maxTrackedAddresses: beyond them,
// addresses share the overflow bucket, and a minute later the refilled
// buckets are forgotten and new addresses get their own again.
func TestAuthLimiterBoundedMemory(t *testing.T) {
	l, advance := testLimiter(20)
	for i := range maxTrackedAddresses {
		l.Failed(fmt.Sprintf("10.%d.%d.%d:1", i>>16&255, i>>8&255, i&255))
	}
	if len(l.buckets) != maxTrackedAddresses {
		t.Fatalf("tracked %d addresses, want %d", len(l.buckets), maxTrackedAddresses)
	}
	// Twenty failures of untracked addresses empty the shared bucket.
	for i := range 20 {
		l.Failed(fmt.Sprintf("172.16.0.%d:1", i))
	}
	if len(l.buckets) != maxTrackedAddresses {
		t.Fatalf("tracked %d addresses, want no more than %d", len(l.buckets), maxTrackedAddresses)
	}
	wantBlocked(t, l, "172.16.1.1:1", true, 3)
	wantBlocked(t, l, "10.0.0.1:1", false, 0) // a tracked address keeps its own bucket

	advance(time.Minute)
	wantBlocked(t, l, "172.16.1.1:1", false, 0)
	if len(l.buckets) != 0 {
		t.Fatalf("after a minute %d buckets are kept, want the refilled ones forgotten", len(l.buckets))
	}
	l.Failed("172.16.1.1:1")
	if _, ok := l.buckets[limitKey("172.16.1.1:1")]; !ok {
		t.Fatal("a new address is not tracked after the sweep")
	}
}
