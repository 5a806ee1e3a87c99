package dbtest

import (
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// Statements passes the connections of a PostgreSQL client through to the
// server unchanged, on a loopback address, and counts the statements the
// client has the server run: the Execute messages of the extended protocol
// and the Query messages of the simple one. It tells how many statements a
// call makes on a real database, with no hook in the driver.
type Statements struct {
	n  atomic.Int64
	ln net.Listener
	wg sync.WaitGroup
}

// CountStatements starts a Statements in front of the server of the URL u
// (postgres://… with sslmode=disable, as the tests' database is) and returns
// it with the URL that reaches the server through it. It ends with t.
func CountStatements(t testing.TB, u string) (*Statements, string) {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatalf("CountStatements: the URL cannot be parsed")
	}
	server := parsed.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Statements{ln: ln}
	s.wg.Add(1)
	go s.accept(server)
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	parsed.Host = ln.Addr().String()
	return s, parsed.String()
}

// Count is how many statements the clients have had run so far.
func (s *Statements) Count() int64 { return s.n.Load() }

func (s *Statements) accept(server string) {
	defer s.wg.Done()
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", server)
		if err != nil {
			c.Close()
			continue
		}
		conns.Add(2)
		go func() {
			defer conns.Done()
			_, _ = io.Copy(c, up)
			c.Close()
		}()
		go func() {
			defer conns.Done()
			s.count(io.TeeReader(c, up))
			c.Close()
			up.Close()
		}()
	}
}

// count reads the client's side of a connection, which r also writes to
// the server, until it ends: first the start-up messages (untyped; an SSL
// or GSS encryption request comes before the start-up message proper),
// then typed messages.
func (s *Statements) count(r io.Reader) {
	var head [8]byte
	for {
		if _, err := io.ReadFull(r, head[:8]); err != nil {
			return
		}
		n := int64(binary.BigEndian.Uint32(head[:4])) - 8
		code := binary.BigEndian.Uint32(head[4:8])
		if _, err := io.CopyN(io.Discard, r, n); err != nil {
			return
		}
		if code != 80877103 && code != 80877104 { // SSLRequest, GSSENCRequest
			break
		}
	}
	for {
		if _, err := io.ReadFull(r, head[:5]); err != nil {
			return
		}
		if head[0] == 'E' || head[0] == 'Q' {
			s.n.Add(1)
		}
		if _, err := io.CopyN(io.Discard, r, int64(binary.BigEndian.Uint32(head[1:5]))-4); err != nil {
			return
		}
	}
}
