//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package webhook

import "net"

// socketReadable cannot look at the socket here: only what the client has
// read already (tls.Conn's and bufio's buffers) is checked.
func socketReadable(net.Conn) bool { return false }
