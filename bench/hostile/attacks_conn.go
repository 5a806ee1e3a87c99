package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"
)

// dialRaw opens a TCP connection to addr from local (nil: any loopback
// address), its receive buffer cut to rcvbuf bytes when rcvbuf > 0 (a
// reader that reads nothing then holds the sender at once).
func dialRaw(ctx context.Context, addr string, local net.Addr, rcvbuf int) (net.Conn, error) {
	d := net.Dialer{Timeout: 3 * time.Second, LocalAddr: local}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
			})
			if err != nil {
				return err
			}
			return serr
		}
	}
	return d.DialContext(ctx, "tcp", addr)
}

// readStatus reads an HTTP answer's status code from nc, waiting at most d.
func readStatus(nc net.Conn, d time.Duration) (string, error) {
	_ = nc.SetReadDeadline(time.Now().Add(d))
	line, err := bufio.NewReaderSize(nc, 64).ReadString('\n')
	_ = nc.SetReadDeadline(time.Time{})
	if err != nil {
		return "", err
	}
	f := strings.Fields(line)
	if len(f) < 2 {
		return "", fmt.Errorf("status line %q", line)
	}
	return f[1], nil
}

// holdSlow keeps one slow connection open until ctx ends: it sends start,
// then one more piece every second or so; when serve closes it, it opens
// another. It returns once ctx has ended and its connection is closed.
func holdSlow(ctx context.Context, e *env, cs *conns, what string, start []byte, piece func(i int) []byte) {
	for ctx.Err() == nil {
		nc, err := dialRaw(ctx, e.addr, nil, 0)
		if err != nil {
			if ctx.Err() == nil {
				e.tally.add(what + " dial " + failOf(err))
			}
			if !pace(ctx, 500*time.Millisecond) {
				return
			}
			continue
		}
		cs.add(nc)
		e.tally.add(what + " opened")
		_ = nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, err = nc.Write(start)
		for i := 0; err == nil; i++ {
			if !pace(ctx, time.Duration(800+rand.IntN(400))*time.Millisecond) {
				break
			}
			_ = nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_, err = nc.Write(piece(i))
		}
		cs.drop(nc)
		if ctx.Err() != nil {
			return
		}
		e.tally.add(what + " closed by serve")
		if !pace(ctx, 200*time.Millisecond) {
			return
		}
	}
}

// slowClients holds -slow-conns connections without credentials: half send
// their headers a line a second, half send a form body to the portal's and
// the dashboard's sign-in a byte a second.
func slowClients(ctx context.Context, e *env) {
	cs := newConns()
	defer cs.closeAll()
	n := e.cfg.slowConns
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// Spread the dials over about a second and a half.
			if !pace(ctx, time.Duration(i)*1500*time.Millisecond/time.Duration(n)) {
				return
			}
			if i%2 == 0 {
				start := []byte("GET /portal/login HTTP/1.1\r\nHost: " + e.addr + "\r\n")
				holdSlow(ctx, e, cs, "slow-headers", start, func(j int) []byte { return fmt.Appendf(nil, "X-Slow-%d: a\r\n", j) })
				return
			}
			path := "/portal/login"
			if i%4 == 1 {
				path = "/dashboard/login"
			}
			start := []byte("POST " + path + " HTTP/1.1\r\nHost: " + e.addr + "\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 16000\r\n\r\nclient_id=")
			holdSlow(ctx, e, cs, "slow-body", start, func(int) []byte { return []byte{'a'} })
		})
	}
	wg.Wait()
}

// bigHeaders opens 1,000 connections, each sending 1,000 header lines of
// 1,000 bytes (under Go's 1 MiB MaxHeaderBytes) and never the blank line
// that would end them, then holds them until the attack ends.
func bigHeaders(ctx context.Context, e *env) {
	const conns, lines = 1000, 1000
	var head bytes.Buffer
	head.WriteString("GET /portal/login HTTP/1.1\r\nHost: " + e.addr + "\r\n")
	for i := range lines {
		fmt.Fprintf(&head, "X-Pad-%04d: %s\r\n", i, strings.Repeat("a", 1000-len("X-Pad-0000: \r\n")))
	}
	cs := newConns()
	defer cs.closeAll()
	sem := make(chan struct{}, 32) // connections sending their headers at once
	var wg sync.WaitGroup
	for range conns {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			nc, err := dialRaw(ctx, e.addr, nil, 0)
			if err != nil {
				<-sem
				if ctx.Err() == nil {
					e.tally.add("dial " + failOf(err))
				}
				return
			}
			cs.add(nc)
			_ = nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			_, err = nc.Write(head.Bytes())
			<-sem
			switch {
			case ctx.Err() != nil:
			case err != nil:
				e.tally.add("send " + failOf(err))
			default:
				e.tally.add("1 MB of headers sent")
			}
		})
	}
	wg.Wait()
	<-ctx.Done()
}
