package webhook

import (
	"errors"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/net/http/httpguts"

	"storelink"
)

// ErrAddressNotAllowed is wrapped by the error of an attempt refused because
// the endpoint's host resolved to an address of the service's own network.
var ErrAddressNotAllowed = errors.New("address not allowed")

// maxURLLength bounds a registered URL; browsers and proxies start failing
// around 2 KB anyway.
const maxURLLength = 2048

// sampleEventID stands for ${eventId} when a URL is checked before any event.
const sampleEventID = "00000000-0000-0000-0000-000000000000"

// ValidateURL checks an endpoint URL when it is registered, so that the
// partner hears at once rather than through failed deliveries: http or
// https, a host, no user name or password (credentials belong in api_key,
// which is kept sealed), and, unless allowPrivate, no literal loopback,
// private, link-local or metadata address. Host names are checked again,
// after resolution, when each attempt dials. The error is an
// EUNPROCESSABLE *storelink.Error whose message never repeats the URL, which
// may carry a token.
func ValidateURL(raw string, allowPrivate bool) error {
	u, err := parseURL(raw)
	if err != nil {
		return err
	}
	if allowPrivate {
		return nil
	}
	host := u.Hostname()
	if lower := strings.ToLower(strings.TrimSuffix(host, ".")); lower == "localhost" || strings.HasSuffix(lower, ".localhost") {
		return storelink.Errorf(storelink.EUNPROCESSABLE, "url: %s is a loopback host, which is not allowed for webhooks%s", host, allowPrivateHint)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if reason := blockedReason(a); reason != "" {
			return storelink.Errorf(storelink.EUNPROCESSABLE, "url: %s is a %s address, which is not allowed for webhooks%s", host, reason, allowPrivateHint)
		}
	}
	return nil
}

// allowPrivateHint ends ValidateURL's refusal of an address: who runs the
// service (a developer trying it on one machine, often) can lift it.
const allowPrivateHint = " unless the operator starts serve with --webhook-allow-private (for development: it also lets webhooks reach the service's own network)."

// parseURL is the part of ValidateURL that also holds at send time, whatever
// allowPrivate says.
// maxAPIKeyLength bounds an endpoint's api_key, which goes in the head of
// every request: receivers refuse heads of more than a few KiB.
const maxAPIKeyLength = 1024

// ValidateAPIKey checks an endpoint's api_key, sent as the x-api-key
// header: a header value of at most maxAPIKeyLength bytes, without control
// characters (which would end the header or be refused by the receiver),
// and without white space at either end (which receivers drop).
func ValidateAPIKey(key string) error {
	if len(key) > maxAPIKeyLength {
		return storelink.Errorf(storelink.EUNPROCESSABLE, "api_key: longer than %d characters.", maxAPIKeyLength)
	}
	if !httpguts.ValidHeaderFieldValue(key) {
		return storelink.Errorf(storelink.EUNPROCESSABLE, "api_key: must not contain control characters such as line breaks: it is sent as a header.")
	}
	if strings.TrimSpace(key) != key {
		return storelink.Errorf(storelink.EUNPROCESSABLE, "api_key: must not begin or end with white space.")
	}
	return nil
}

func parseURL(raw string) (*url.URL, error) {
	if len(raw) > maxURLLength {
		return nil, storelink.Errorf(storelink.EUNPROCESSABLE, "url: longer than %d characters.", maxURLLength)
	}
	if p := storelink.TextProblem(raw); p != "" {
		return nil, storelink.Errorf(storelink.EUNPROCESSABLE, "url: %s.", p)
	}
	u, err := url.Parse(strings.ReplaceAll(raw, "${eventId}", sampleEventID))
	if err != nil {
		return nil, storelink.Errorf(storelink.EUNPROCESSABLE, "url: not a valid absolute URL.")
	}
	// url.Parse takes any run of digits as a port; a dial would then fail
	// on every attempt.
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, storelink.Errorf(storelink.EUNPROCESSABLE, "url: the port must be 1 to 65535 (got %s).", p)
		}
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, storelink.Errorf(storelink.EUNPROCESSABLE, "url: the scheme must be http or https.")
	case u.User != nil:
		return nil, storelink.Errorf(storelink.EUNPROCESSABLE, "url: must not contain a user name or password; give an api_key instead.")
	case u.Hostname() == "":
		return nil, storelink.Errorf(storelink.EUNPROCESSABLE, "url: a host is required.")
	}
	host := u.Hostname()
	if _, err := netip.ParseAddr(host); err != nil && numericLastLabel(host) {
		// 2130706433, 0x7f.1 or 127.1: resolvers read these as IPv4
		// addresses in forms no real host name takes.
		return nil, storelink.Errorf(storelink.EUNPROCESSABLE, "url: %s is not a valid host name.", host)
	}
	return u, nil
}

func numericLastLabel(host string) bool {
	host = strings.TrimSuffix(host, ".")
	last := host[strings.LastIndexByte(host, '.')+1:]
	if strings.HasPrefix(strings.ToLower(last), "0x") {
		return true
	}
	for _, c := range last {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// The ranges refused besides those netip classifies itself.
var blockedPrefixes = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)"}, // also Alibaba's metadata, 100.100.100.200
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"}, // and the broadcast address
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local NAT64"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"}, // deprecated (RFC 3879), still routed inside some networks
}

var (
	metadataV4 = netip.MustParseAddr("169.254.169.254")
	metadataV6 = netip.MustParseAddr("fd00:ec2::254")
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour  = netip.MustParsePrefix("2002::/16")
)

// blockedReason says why an address must not be reached from the service
// unless private addresses are allowed, or "" when it may be. IPv4 inside
// IPv6 (mapped, NAT64, 6to4) is judged by the IPv4 address it reaches.
func blockedReason(a netip.Addr) string {
	a = a.WithZone("").Unmap()
	switch {
	case a == metadataV4 || a == metadataV6:
		return "cloud metadata"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsMulticast():
		return "multicast"
	case nat64.Contains(a):
		b := a.As16()
		return blockedReason(netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(a):
		b := a.As16()
		return blockedReason(netip.AddrFrom4([4]byte(b[2:6])))
	}
	for _, p := range blockedPrefixes {
		if p.prefix.Contains(a) {
			return p.reason
		}
	}
	return ""
}

// blockedError is the refusal of one resolved address at dial time.
type blockedError struct {
	addr   string
	reason string
}

func (e *blockedError) Error() string {
	return "address " + e.addr + " is not allowed (" + e.reason + ")"
}

func (e *blockedError) Is(target error) bool { return target == ErrAddressNotAllowed }

// dialGuard is a net.Dialer Control function: it runs after the host name
// was resolved and before each connect, on the address actually dialled, so
// that neither DNS rebinding nor a name that resolves to 127.0.0.1 gets past.
func dialGuard(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &blockedError{addr: address, reason: "unparsable"}
	}
	if reason := blockedReason(ap.Addr()); reason != "" {
		return &blockedError{addr: ap.Addr().WithZone("").String(), reason: reason}
	}
	return nil
}
