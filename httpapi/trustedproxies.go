package httpapi

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// TrustedProxies are the reverse proxies whose forwarding headers serve
// believes (serve --trusted-proxies). Behind a proxy every connection comes
// from the proxy, so without them all clients would share its address;
// with them, the client is the address the proxies say they forwarded for.
// The zero value trusts no one: the client is the connection's address.
type TrustedProxies struct {
	prefixes []netip.Prefix
}

// ParseTrustedProxies reads a comma-separated list of CIDR prefixes
// ("10.0.0.0/8,2001:db8::/32"); a bare address stands for itself alone.
// An empty list trusts no one.
func ParseTrustedProxies(list string) (TrustedProxies, error) {
	var t TrustedProxies
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil || a.Zone() != "" {
				return TrustedProxies{}, fmt.Errorf("%q is neither a CIDR prefix (10.0.0.0/8, fd00::/8) nor an IP address", s)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		if p.Addr().Is4In6() {
			return TrustedProxies{}, fmt.Errorf("%q is an IPv4-mapped IPv6 prefix: write the IPv4 prefix instead", s)
		}
		if p.Bits() == 0 {
			// Every client could then write its own address, and have a
			// fresh one, free of failures, for each guess.
			return TrustedProxies{}, fmt.Errorf("%q would trust every address: list your proxies' addresses only", s)
		}
		t.prefixes = append(t.prefixes, p.Masked())
	}
	return t, nil
}

// String lists the prefixes as ParseTrustedProxies reads them.
func (t TrustedProxies) String() string {
	s := make([]string, len(t.prefixes))
	for i, p := range t.prefixes {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// Contains tells whether a is one of the trusted proxies' addresses; an
// IPv4-mapped IPv6 address counts as its IPv4 address.
func (t TrustedProxies) Contains(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, p := range t.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ClientAddr is the address of the client that sent r. When the connection
// comes from a trusted proxy, it is the rightmost address of the
// Forwarded (RFC 7239 for=) or X-Forwarded-For header that is not itself a
// trusted proxy: the entries to its left were written by the client and
// prove nothing. A header from any other peer is ignored, since a client
// can write it. When the header is missing, malformed (a value that is not
// an address, such as "unknown" or an obfuscated node) or the two headers
// disagree, the client is the peer itself: a proxy that forwards such a
// header is not believed about who is behind it.
//
// The address has no zone, and IPv4-mapped addresses are IPv4; a peer
// address that does not parse (no real connection has one) is the zero
// Addr.
func (t TrustedProxies) ClientAddr(r *http.Request) netip.Addr {
	peer := peerAddr(r.RemoteAddr)
	if len(t.prefixes) == 0 || !t.Contains(peer) {
		return peer
	}
	fwd, xff := r.Header.Values("Forwarded"), r.Header.Values("X-Forwarded-For")
	var a, b netip.Addr
	var ok bool
	if len(fwd) > 0 {
		if a, ok = t.rightmost(forwardedFor(strings.Join(fwd, ","))); !ok {
			return peer
		}
	}
	if len(xff) > 0 {
		if b, ok = t.rightmost(strings.Split(strings.Join(xff, ","), ",")); !ok {
			return peer
		}
		if a.IsValid() && a != b {
			return peer
		}
		a = b
	}
	if !a.IsValid() {
		return peer
	}
	return a
}

// rightmost walks hops from the right and returns the first that is not a
// trusted proxy, or the leftmost when all are; false when a hop on the way
// is not an address, or there are none.
func (t TrustedProxies) rightmost(hops []string) (netip.Addr, bool) {
	var a netip.Addr
	for i := len(hops) - 1; i >= 0; i-- {
		var ok bool
		if a, ok = nodeAddr(strings.TrimSpace(hops[i])); !ok {
			return netip.Addr{}, false
		}
		if !t.Contains(a) {
			return a, true
		}
	}
	return a, a.IsValid()
}

// nodeAddr reads one hop: an IP address, bracketed or not, with or without
// a port.
func nodeAddr(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// forwardedFor returns the for= value of each element of a Forwarded
// header (RFC 7239), unquoted, in order; an element without one gives ""
// (not an address), and so does a syntax error, from the element where it
// is on.
func forwardedFor(h string) []string {
	var out []string
	for h != "" {
		elem, rest, bad := cutElement(h)
		h = rest
		var val string
		for _, pair := range elem {
			name, v, _ := strings.Cut(pair, "=")
			if strings.EqualFold(strings.TrimSpace(name), "for") {
				val = v
			}
		}
		if bad {
			return append(out, "")
		}
		out = append(out, val)
	}
	return out
}

// cutElement splits off h's first element (up to a comma outside a quoted
// string) into its name=value pairs, unquoting the values; bad when a
// quoted string is not closed.
func cutElement(h string) (pairs []string, rest string, bad bool) {
	var cur strings.Builder
	quoted := false
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case quoted && c == '\\' && i+1 < len(h):
			i++
			cur.WriteByte(h[i])
		case c == '"':
			quoted = !quoted
		case !quoted && c == ';':
			pairs = append(pairs, cur.String())
			cur.Reset()
		case !quoted && c == ',':
			return append(pairs, cur.String()), h[i+1:], false
		default:
			cur.WriteByte(c)
		}
	}
	return append(pairs, cur.String()), "", quoted
}

// peerAddr is the IP of a connection's RemoteAddr, without zone, IPv4 when
// IPv4-mapped; the zero Addr when it does not parse.
func peerAddr(remoteAddr string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remoteAddr); err == nil {
		return ap.Addr().Unmap().WithZone("")
	}
	if a, err := netip.ParseAddr(remoteAddr); err == nil {
		return a.Unmap().WithZone("")
	}
	return netip.Addr{}
}
