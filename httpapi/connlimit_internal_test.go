package httpapi

import (
	"fmt"
	"math/rand/v2"
	"net"
	"testing"
)

// fakeConn is a connection that only tells when it is closed.
type fakeConn struct {
	net.Conn
	id     int
	closed *[]int
}

func (c fakeConn) Close() error { *c.closed = append(*c.closed, c.id); return nil }
func (c fakeConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(10, 0, byte(c.id>>8), byte(c.id))}
}
func (c fakeConn) Read(p []byte) (int, error) { return len(p), nil }

// The cost of an accept at the limit, with n connections open and 16
// reads that returned data between two accepts (each moving a connection
// in the order of the least recent): the connection closed to make room
// is found in O(log n), amortised over the reads.
func BenchmarkConnLimitAccept(b *testing.B) {
	for _, n := range []int{1024, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			l := NewConnLimit(n)
			var closed []int
			conns := make([]*limitConn, n)
			for i := range conns {
				conns[i], _ = l.admit(fakeConn{id: i, closed: &closed}, nil)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			buf := make([]byte, 512)
			for b.Loop() {
				for range 16 {
					_, _ = conns[rng.IntN(n)].Read(buf)
				}
				closed = closed[:0]
				c, _ := l.admit(fakeConn{closed: &closed}, nil)
				if len(closed) != 1 {
					b.Fatalf("%d connections closed for one accept at the limit", len(closed))
				}
				conns[closed[0]] = c
				c.Conn = fakeConn{id: closed[0], closed: &closed}
			}
		})
	}
}

// The cost of shedding at the header budget with n connections open, each
// holding some header bytes, when one read of 4 KiB exceeds it: a scan of
// the open connections, paid only when the budget is exceeded.
func BenchmarkConnLimitHeaderShed(b *testing.B) {
	for _, n := range []int{1024, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			l := NewConnLimit(n + 1)
			l.HeaderBudget = int64(n)*256 + 1024
			var closed []int
			conns := make([]*limitConn, n)
			for i := range conns {
				conns[i], _ = l.admit(fakeConn{id: i, closed: &closed}, nil)
				_, _ = conns[i].Read(make([]byte, 256))
			}
			big := make([]byte, 4096)
			for b.Loop() {
				closed = closed[:0]
				c := conns[0]
				for len(closed) == 0 {
					_, _ = c.Read(big)
				}
				conns[0], _ = l.admit(fakeConn{id: 0, closed: &closed}, nil)
			}
		})
	}
}
