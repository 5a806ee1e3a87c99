package httpapi

import (
	"fmt"
	"net/netip"
	"runtime"
	"strconv"
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

// ip is the address s, or the address of the address and port s.
func ip(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr()
	}
	return netip.MustParseAddr(s)
}

// nth is the nth of a run of distinct IPv4 addresses in 10.0.0.0/8.
func nth(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
}

// wantBlocked fails unless an attempt from addr at client is blocked (with
// that Retry-After) or not.
func wantBlocked(t *testing.T, l *AuthLimiter, addr, client string, blocked bool, retryAfter int) {
	t.Helper()
	after, got := l.Blocked(ip(addr), client)
	if got != blocked || after != retryAfter {
		t.Fatalf("Blocked(%s, %q) = %d, %v; want %d, %v", addr, client, after, got, retryAfter, blocked)
	}
}

// wantCounted fails unless a failure from addr at client is counted.
func wantCounted(t *testing.T, l *AuthLimiter, addr netip.Addr, client string) {
	t.Helper()
	if after, counted := l.Failed(addr, client); !counted {
		t.Fatalf("Failed(%s, %q) not counted (Retry-After %d)", addr, client, after)
	}
}

// Twenty failures a minute: the 21st attempt is refused for the three
// seconds a failure takes to refill, then one more failure is allowed.
func TestAuthLimiterBucket(t *testing.T) {
	l, advance := testLimiter(20)
	for i := range 20 {
		wantBlocked(t, l, "192.0.2.1", "c1", false, 0)
		wantCounted(t, l, ip("192.0.2.1"), fmt.Sprintf("c%d", i%3)) // the target does not matter
	}
	wantBlocked(t, l, "192.0.2.1", "c9", true, 3)
	wantBlocked(t, l, "192.0.2.2", "c1", false, 0) // another address
	advance(2 * time.Second)
	wantBlocked(t, l, "192.0.2.1", "c1", true, 1)
	advance(time.Second)
	wantBlocked(t, l, "192.0.2.1", "c1", false, 0)
	wantCounted(t, l, ip("192.0.2.1"), "c1")
	wantBlocked(t, l, "192.0.2.1", "c1", true, 3)
	// A whole minute refills the bucket: twenty more.
	advance(time.Minute)
	for range 20 {
		wantBlocked(t, l, "192.0.2.1", "c2", false, 0)
		wantCounted(t, l, ip("192.0.2.1"), "c2")
	}
	wantBlocked(t, l, "192.0.2.1", "c2", true, 3)
}

// Failures that were in flight when the bucket ran out still count: forty
// guesses at once cost the address the time forty take to refill.
func TestAuthLimiterParallelFailures(t *testing.T) {
	l, advance := testLimiter(20)
	for range 40 {
		l.Failed(ip("192.0.2.1"), "c1")
	}
	wantBlocked(t, l, "192.0.2.1", "c2", true, 63)
	advance(62 * time.Second)
	wantBlocked(t, l, "192.0.2.1", "c2", true, 1)
	advance(time.Second)
	wantBlocked(t, l, "192.0.2.1", "c2", false, 0)
}

// IPv6 addresses count per /64; an IPv4 address is the same whether it
// comes as IPv4 or IPv4-mapped IPv6.
func TestAuthLimiterAddresses(t *testing.T) {
	l, _ := testLimiter(2)
	l.Failed(ip("2001:db8:1:2::1"), "c1")
	l.Failed(ip("2001:db8:1:2:ffff::9"), "c2")
	wantBlocked(t, l, "2001:db8:1:2::77", "c3", true, 30)
	wantBlocked(t, l, "2001:db8:1:3::1", "c3", false, 0)

	l.Failed(ip("198.51.100.7"), "c4")
	l.Failed(ip("::ffff:198.51.100.7"), "c5")
	wantBlocked(t, l, "198.51.100.7", "c6", true, 30)
	wantBlocked(t, l, "198.51.100.8", "c6", false, 0)
}

// One address's failures at a client lock out that address only: another
// address that has not failed is taken at the same client and at the admin
// token, while an address that failed lately (at anything) is refused at
// the client under attack until recentFailure has passed or the client's
// bucket has a failure again.
func TestAuthLimiterTargetUnderAttack(t *testing.T) {
	l, advance := testLimiter(20)
	for range 25 {
		l.Failed(ip("192.0.2.1"), "x")
	}
	wantBlocked(t, l, "192.0.2.1", "x", true, 18) // 6 failures short of one, 3 s each
	wantBlocked(t, l, "192.0.2.1", "", true, 18)  // the address is empty, whatever it tries
	wantBlocked(t, l, "192.0.2.2", "x", false, 0)
	wantBlocked(t, l, "192.0.2.2", "", false, 0)

	// 192.0.2.3 mistyped its own client's key: it is refused at x, which
	// is under attack, not at its own client nor at the admin token.
	wantCounted(t, l, ip("192.0.2.3"), "y")
	wantBlocked(t, l, "192.0.2.3", "y", false, 0)
	wantBlocked(t, l, "192.0.2.3", "", false, 0)
	wantBlocked(t, l, "192.0.2.3", "x", true, 18) // as long as x's bucket takes

	// Each fresh address gets one guess at x, then waits for as long as it
	// counts as one that failed: x's debt, capped at what refills in
	// recentFailure, is longer.
	for i := range 300 {
		wantBlocked(t, l, nth(i).String(), "x", false, 0)
		wantCounted(t, l, nth(i), "x")
		if _, blocked := l.Blocked(nth(i), "x"); !blocked {
			t.Fatalf("address %d is taken at x again after its guess", i)
		}
	}
	wantBlocked(t, l, nth(0).String(), "x", true, int(recentFailure.Seconds()))
	wantBlocked(t, l, nth(0).String(), "y", false, 0)
	advance(recentFailure - time.Second)
	wantBlocked(t, l, nth(0).String(), "x", true, 1)
	advance(time.Second)
	wantBlocked(t, l, nth(0).String(), "x", false, 0)
}

// A guesser spread over many addresses, each trying one client's key
// again and again, gets the client's bucket and then one guess per fresh
// address; by the address alone it would have had twenty each.
func TestAuthLimiterDistributedGuesser(t *testing.T) {
	l, advance := testLimiter(20)
	const addresses, tries = 2000, 10
	guesses := 0
	for i := range addresses {
		for range tries {
			advance(10 * time.Millisecond)
			if _, blocked := l.Blocked(nth(i), "x"); !blocked {
				guesses++
				l.Failed(nth(i), "x")
			}
		}
	}
	elapsed := time.Duration(addresses*tries) * 10 * time.Millisecond
	limit := addresses + 20 + int(elapsed.Minutes()*20) + 1
	if guesses > limit {
		t.Fatalf("%d addresses trying %d times each over %v got %d guesses at one client, want at most %d",
			addresses, tries, elapsed, guesses, limit)
	}
	wantBlocked(t, l, "192.0.2.200", "x", false, 0) // a clean address is taken
	t.Logf("%d guesses from %d addresses trying %d times each over %v", guesses, addresses, tries, elapsed)
}

// When the table is full of addresses that failed lately, a failure from a
// newcomer is not counted (the caller answers 429); an address that has not
// failed is still taken at every client not under attack, and at one under
// attack only as often as that client's bucket refills, so a flood of fresh
// addresses cannot guess without limit. When the table's addresses are
// forgotten, newcomers are counted again.
func TestAuthLimiterFullTable(t *testing.T) {
	l, advance := testLimiter(20)
	l.maxAddrs = 100
	for i := range 100 {
		wantCounted(t, l, nth(i), fmt.Sprintf("c%d", i)) // a client each: none under attack
	}
	wantBlocked(t, l, "192.0.2.1", "y", false, 0)
	if after, counted := l.Failed(ip("192.0.2.1"), "y"); counted || after != 3 {
		t.Fatalf("a newcomer's failure in a full table: Retry-After %d, counted %v; want 3, false", after, counted)
	}
	if len(l.addrs) != 100 {
		t.Fatalf("the table holds %d addresses, want its cap 100", len(l.addrs))
	}
	wantBlocked(t, l, "192.0.2.1", "y", false, 0) // not counted: nothing against it

	// A flood of fresh addresses at x, each trying ten times: x's bucket
	// and its refill, nothing more.
	guesses := 0
	for i := range 10000 {
		a := netip.AddrFrom4([4]byte{172, 16, byte(i >> 8), byte(i)})
		for range 10 {
			advance(time.Millisecond)
			if _, blocked := l.Blocked(a, "x"); !blocked {
				guesses++
				l.Failed(a, "x")
			}
		}
	}
	if guesses > 20+int(100*time.Second.Minutes()*20)+1 {
		t.Fatalf("a flood of fresh addresses at one client in a full table got %d guesses, want at most its bucket and refill (54)", guesses)
	}
	// A clean address is taken at any other client and at the admin token;
	// at x only when its bucket refills, like any address the table cannot
	// know.
	wantBlocked(t, l, "192.0.2.2", "y", false, 0)
	wantBlocked(t, l, "192.0.2.2", "", false, 0)
	if _, blocked := l.Blocked(ip("192.0.2.2"), "x"); !blocked {
		t.Fatal("an address the full table does not know is taken at a client under attack")
	}

	advance(recentFailure)
	wantCounted(t, l, ip("192.0.2.1"), "y")
	if len(l.addrs) != 1 {
		t.Fatalf("after recentFailure the table holds %d addresses, want the newcomer alone", len(l.addrs))
	}
	t.Logf("a flood of 100,000 guesses from 10,000 fresh addresses in a full table got %d", guesses)
}

// The targets kept are bounded too: beyond maxTargets the others share one
// bucket, which refuses only addresses that failed lately.
func TestAuthLimiterBoundedTargets(t *testing.T) {
	l, advance := testLimiter(20)
	l.maxTargets = 50
	for i := range 200 {
		l.Failed(nth(i), fmt.Sprintf("made-up-%d", i))
	}
	if len(l.targets) != 50 {
		t.Fatalf("%d targets kept, want the cap 50", len(l.targets))
	}
	wantBlocked(t, l, "192.0.2.1", "another", false, 0)        // clean
	wantBlocked(t, l, nth(199).String(), "another", true, 393) // 131 failures short of one
	advance(time.Minute)
	wantBlocked(t, l, nth(199).String(), "another", false, 0)
	if len(l.targets) != 0 {
		t.Fatalf("a minute later %d targets are kept, want the refilled ones forgotten", len(l.targets))
	}
}

// fullTableAtX fills l's table (of 100 addresses) with more than that many
// fresh addresses failing once each at x, emptying x's bucket.
func fullTableAtX(t *testing.T, l *AuthLimiter) {
	t.Helper()
	l.maxAddrs = 100
	for i := range 150 {
		l.Failed(nth(i), "x")
	}
	if len(l.addrs) != 100 {
		t.Fatalf("the table holds %d addresses, want its cap 100", len(l.addrs))
	}
}

// While the table is full and x under attack, an address that signed in at
// x within goodFor is taken there every time, while one never seen, or seen
// only at another client, is the newcomer and waits. A failure at x makes
// a known address a newcomer again; goodFor after its last success it is
// one too.
func TestAuthLimiterFullTableKnownGood(t *testing.T) {
	l, advance := testLimiter(20)
	l.Succeeded(ip("192.0.2.50"), "x")
	l.Succeeded(ip("2001:db8:5:6::1"), "x")
	l.Succeeded(ip("192.0.2.51"), "y")
	l.Succeeded(ip("192.0.2.52"), "x")
	l.Succeeded(ip("192.0.2.53"), "")
	advance(goodFor - 5*time.Minute)
	fullTableAtX(t, l)
	for range 30 {
		wantBlocked(t, l, "192.0.2.50", "x", false, 0)
		l.Succeeded(ip("192.0.2.50"), "x")
	}
	wantBlocked(t, l, "2001:db8:5:6::99", "x", false, 0) // the same /64
	wantBlocked(t, l, "192.0.2.53", "", false, 0)
	for _, newcomer := range []string{"192.0.2.60", "192.0.2.51", "2001:db8:5:7::1"} {
		if _, blocked := l.Blocked(ip(newcomer), "x"); !blocked {
			t.Fatalf("%s, which never signed in at x, is taken at x in a full table", newcomer)
		}
	}
	wantBlocked(t, l, "192.0.2.51", "y", false, 0) // where it signed in

	// A known address that fails is answered as a newcomer, and is one.
	if _, counted := l.Failed(ip("192.0.2.52"), "x"); counted {
		t.Fatal("a failure from an address the full table does not hold was counted")
	}
	if _, blocked := l.Blocked(ip("192.0.2.52"), "x"); !blocked {
		t.Fatal("an address that failed at x is still taken there in a full table")
	}

	// goodFor after their last success: 192.0.2.50 signed in since, the
	// others are newcomers.
	advance(5 * time.Minute)
	wantBlocked(t, l, "192.0.2.50", "x", false, 0)
	if _, blocked := l.Blocked(ip("2001:db8:5:6::1"), "x"); !blocked {
		t.Fatal("an address whose success at x is goodFor old is still taken there in a full table")
	}
}

// Under churn the remembered pairs stay within their bound, the least
// recent going first; a credential holds at most its share, so a partner
// signing in from many addresses cannot push out another's.
func TestAuthLimiterGoodSetBounded(t *testing.T) {
	l, advance := testLimiter(20)
	l.good = newGoodSet(100, 30)
	l.Succeeded(ip("192.0.2.1"), "y")
	for i := range 10_000 {
		advance(time.Second)
		l.Succeeded(nth(i), fmt.Sprintf("c%d", i%500))
		if i%50 == 0 {
			l.Succeeded(ip("192.0.2.1"), "y") // kept by signing in again
		}
		if n := len(l.good.index); n > 100 || len(l.good.entries) > 100 {
			t.Fatalf("after %d successes %d pairs are kept in %d entries, want at most 100", i+1, n, len(l.good.entries))
		}
	}
	for i := range 1_000 {
		l.Succeeded(nth(20_000+i), "greedy")
	}
	if n := l.good.count[l.targetKey("greedy")]; n != 30 {
		t.Fatalf("one credential holds %d pairs, want its share 30", n)
	}
	fullTableAtX(t, l)
	for _, c := range []struct {
		addr, client string
		known        bool
	}{
		{"192.0.2.1", "y", true},
		{nth(9_999).String(), "c499", true},
		{nth(9_931).String(), "c431", true},
		{nth(9_930).String(), "c430", false}, // the least recent, pushed out by the greedy share
		{nth(0).String(), "c0", false},
		{nth(20_000).String(), "greedy", true},
		{nth(20_999).String(), "greedy", false}, // beyond its share
	} {
		// The client's bucket empties with failures from addresses the
		// table cannot hold, which do not count against the address.
		for range 30 {
			l.Failed(nth(30_000), c.client)
		}
		if _, blocked := l.Blocked(ip(c.addr), c.client); blocked == c.known {
			t.Errorf("%s at %s in a full table: blocked %v, want %v", c.addr, c.client, blocked, !c.known)
		}
	}
}

// BenchmarkAuthLimiterSucceeded fills the remembered pairs to their bound
// and reports the heap they take per pair.
func BenchmarkAuthLimiterSucceeded(b *testing.B) {
	var before, after runtime.MemStats
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&before)
		l := NewAuthLimiter(20)
		for i := range maxGoodPairs {
			l.Succeeded(nth(i), strconv.Itoa(i%(maxGoodPairs/maxGoodPerTarget)))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/maxGoodPairs, "B/pair")
		runtime.KeepAlive(l)
	}
}
