package webhook

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"storelink"
)

const (
	// maxHeadBytes bounds a response's head, each informational (1xx) head
	// included: a WAF's cookies and policies take tens of KiB, and nothing
	// more is read from an endpoint that sends without end.
	maxHeadBytes = 64 << 10
	// maxIdle is how long a connection is kept unused. A receiver may close
	// it sooner; the Transport then finds it closed, and a request that it
	// took is sent again on a new connection (see setHeaders).
	maxIdle = 30 * time.Second
	// maxIdlePerHost and maxIdleConns bound the connections kept: as many
	// to one endpoint as the deliverer may have attempts in flight to it
	// (worker.MaxPerEndpoint, --webhook-concurrency's most), so that a busy
	// endpoint's connections are reused rather than dialled again after
	// each answer; and in all, enough for each of a thousand endpoints that
	// take events at once to keep one (the least used are closed first),
	// since dialling and closing a connection costs more than an attempt
	// on one. An idle connection costs a few tens of KiB (its buffers and two
	// goroutines) and a file descriptor.
	maxIdlePerHost = 128
	maxIdleConns   = 1024
)

// newTransport returns the Transport that every attempt of a Client goes
// through. It is net/http's, tuned for webhooks:
//
//   - no proxy from the environment: the guard must see the endpoint's
//     address, not a proxy's, and events leave by no path the operator did
//     not configure for them;
//   - the dial guard in DialContext, unless allowPrivate: it judges every
//     address actually dialled, after DNS, so that neither a name resolving
//     to 127.0.0.1 nor DNS rebinding gets past;
//   - TLS 1.2 or later, the certificate checked against the URL's host (the
//     Transport sends and checks an international name in its ASCII form);
//   - HTTP/2 when the endpoint offers it over TLS, so that the attempts in
//     flight to one endpoint share a connection; HTTP/1.1 otherwise;
//   - no compression: the excerpt kept is what the endpoint sent;
//   - a bounded head; the body is bounded by Send, which reads at most
//     drainSize of it.
//
// The attempt's context carries its one deadline, from the dial to the
// last byte of the body read; the dial and handshake timeouts only bound
// the Transport's own work when no attempt waits for it any more.
func newTransport(timeout time.Duration, allowPrivate bool) *http.Transport {
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		dialer.Control = dialGuard
	}
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    timeout,
		ForceAttemptHTTP2:      true,
		DisableCompression:     true,
		MaxIdleConns:           maxIdleConns,
		MaxIdleConnsPerHost:    maxIdlePerHost,
		IdleConnTimeout:        maxIdle,
		MaxResponseHeaderBytes: maxHeadBytes,
	}
}

// checkTarget is the verdict on an endpoint URL at send time: what
// ValidateURL checks whatever allowPrivate says, and a host name outside
// ASCII that has an ASCII (punycode) form, the only one the resolver and
// certificates know.
func checkTarget(raw string) error {
	u, err := parseURL(raw)
	if err != nil {
		return errors.New("invalid URL: " + strings.TrimPrefix(storelink.ErrorMessage(err), "url: "))
	}
	if host := u.Hostname(); !isASCII(host) {
		if _, err := idna.Lookup.ToASCII(host); err != nil {
			return errors.New("invalid URL: the host name is not a valid international domain name")
		}
	}
	return nil
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
