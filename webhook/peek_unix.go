//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package webhook

import (
	"net"
	"syscall"
)

// socketReadable tells whether anything is waiting on nc's socket: bytes,
// its end or an error. It does not wait and reads nothing.
func socketReadable(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	readable := false
	err = rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// n == 0 without an error: the receiver closed the connection.
		readable = n > 0 || err == nil || (err != syscall.EAGAIN && err != syscall.EWOULDBLOCK)
	})
	return readable || err != nil
}
