package httpapi_test

import (
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"storelink/httpapi"
)

// The client address of a request from a trusted proxy is the rightmost
// address of its forwarding header that is not a trusted proxy; from any
// other peer, or with a header that is not a list of addresses, it is the
// peer's own.
func TestTrustedProxiesClientAddr(t *testing.T) {
	tp, err := httpapi.ParseTrustedProxies("127.0.0.0/8, 10.0.0.0/8,2001:db8:ff::/48, 192.0.2.9")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, peer string
		header     map[string][]string
		want       string
	}{
		{"no header", "127.0.0.1:5000", nil, "127.0.0.1"},
		{"one hop", "127.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"203.0.113.5"}}, "203.0.113.5"},
		{"client-written entries to the left", "127.0.0.1:5000",
			map[string][]string{"X-Forwarded-For": {"198.51.100.1, 203.0.113.5"}}, "203.0.113.5"},
		{"trusted hops skipped", "127.0.0.1:5000",
			map[string][]string{"X-Forwarded-For": {"198.51.100.1, 203.0.113.5, 10.1.2.3", "192.0.2.9"}}, "203.0.113.5"},
		{"all hops trusted", "127.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"10.0.0.7, 10.0.0.8"}}, "10.0.0.7"},
		{"IPv6 with a port", "127.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"[2001:db8:1::5]:443"}}, "2001:db8:1::5"},
		{"IPv4 with a port", "127.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"203.0.113.5:443"}}, "203.0.113.5"},
		{"untrusted IPv6 peer", "[::1]:5000", map[string][]string{"X-Forwarded-For": {"2001:db8:1::5"}}, "::1"},
		{"IPv6 proxy", "[2001:db8:ff:1::2]:5000", map[string][]string{"X-Forwarded-For": {"2001:db8:1::5"}}, "2001:db8:1::5"},
		{"IPv4-mapped", "[::ffff:127.0.0.1]:5000", map[string][]string{"X-Forwarded-For": {"::ffff:203.0.113.5"}}, "203.0.113.5"},
		{"untrusted peer", "198.51.100.7:5000", map[string][]string{"X-Forwarded-For": {"203.0.113.5"}}, "198.51.100.7"},
		{"untrusted peer, Forwarded", "198.51.100.7:5000", map[string][]string{"Forwarded": {"for=203.0.113.5"}}, "198.51.100.7"},
		{"malformed", "127.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"203.0.113.5, not-an-ip"}}, "127.0.0.1"},
		{"malformed on the way", "127.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"garbage, 203.0.113.5, 10.0.0.1"}}, "203.0.113.5"},
		{"empty", "127.0.0.1:5000", map[string][]string{"X-Forwarded-For": {""}}, "127.0.0.1"},
		{"Forwarded", "127.0.0.1:5000", map[string][]string{"Forwarded": {`for=198.51.100.1, for=203.0.113.5;proto=https;by=10.0.0.1`}}, "203.0.113.5"},
		{"Forwarded, IPv6 quoted with a port", "127.0.0.1:5000",
			map[string][]string{"Forwarded": {`For="[2001:db8:1::5]:4711", for=10.0.0.2`}}, "2001:db8:1::5"},
		{"Forwarded, quoted comma", "127.0.0.1:5000", map[string][]string{"Forwarded": {`for=203.0.113.5;host="a,b"`}}, "203.0.113.5"},
		{"Forwarded unknown", "127.0.0.1:5000", map[string][]string{"Forwarded": {"for=unknown"}}, "127.0.0.1"},
		{"Forwarded obfuscated", "127.0.0.1:5000", map[string][]string{"Forwarded": {"for=_hidden"}}, "127.0.0.1"},
		{"Forwarded without for", "127.0.0.1:5000", map[string][]string{"Forwarded": {"proto=https"}}, "127.0.0.1"},
		{"Forwarded unclosed quote", "127.0.0.1:5000", map[string][]string{"Forwarded": {`for="203.0.113.5`}}, "127.0.0.1"},
		{"both agree", "127.0.0.1:5000",
			map[string][]string{"Forwarded": {"for=203.0.113.5"}, "X-Forwarded-For": {"203.0.113.5"}}, "203.0.113.5"},
		// The proxy sets one header and passes the other from the client.
		{"both disagree", "127.0.0.1:5000",
			map[string][]string{"Forwarded": {"for=198.51.100.66"}, "X-Forwarded-For": {"203.0.113.5"}}, "127.0.0.1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/orders", nil)
			r.RemoteAddr = c.peer
			for k, vs := range c.header {
				for _, v := range vs {
					r.Header.Add(k, v)
				}
			}
			if got := tp.ClientAddr(r); got != netip.MustParseAddr(c.want) {
				t.Fatalf("ClientAddr = %v, want %s", got, c.want)
			}
		})
	}
	// Trusting no one, the peer is the client whatever the headers.
	r := httptest.NewRequest("GET", "/orders", nil)
	r.RemoteAddr = "127.0.0.1:5000"
	r.Header.Set("X-Forwarded-For", "203.0.113.5")
	if got := (httpapi.TrustedProxies{}).ClientAddr(r); got != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("ClientAddr with no trusted proxies = %v, want the peer", got)
	}
}

// The list takes prefixes and single addresses; anything else, or a
// prefix that trusts every address, is refused naming the entry.
func TestParseTrustedProxies(t *testing.T) {
	tp, err := httpapi.ParseTrustedProxies(" 10.1.2.3/8 ,192.0.2.9,,fd00::/8")
	if err != nil || tp.String() != "10.0.0.0/8,192.0.2.9/32,fd00::/8" {
		t.Fatalf("ParseTrustedProxies = %q, %v", tp.String(), err)
	}
	if !tp.Contains(netip.MustParseAddr("10.200.0.1")) || !tp.Contains(netip.MustParseAddr("::ffff:192.0.2.9")) ||
		tp.Contains(netip.MustParseAddr("192.0.2.10")) {
		t.Fatal("Contains does not match the prefixes")
	}
	if tp, err := httpapi.ParseTrustedProxies(""); err != nil || tp.Contains(netip.MustParseAddr("127.0.0.1")) {
		t.Fatalf("an empty list = %v, %v; want one that trusts no one", tp, err)
	}
	for _, bad := range []string{"10.0.0.0/33", "proxy.example", "0.0.0.0/0", "::/0", "fe80::1%eth0", "::ffff:10.0.0.0/104"} {
		if _, err := httpapi.ParseTrustedProxies("127.0.0.1," + bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseTrustedProxies(%q) = %v, want an error naming it", bad, err)
		}
	}
}
