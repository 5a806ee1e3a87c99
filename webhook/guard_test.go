package webhook

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"storelink"
)

func TestWebhookValidateURL(t *testing.T) {
	tests := []struct {
		url     string
		private bool   // allowPrivate
		want    string // part of the message; "" when accepted
	}{
		{url: "https://partner.example.com/hooks/${eventId}"},
		{url: "http://partner.example.com:8080/in?event=${eventId}"},
		{url: "https://8.8.8.8/hook"},
		{url: "https://[2001:4860:4860::8888]/hook"},
		{url: "http://172.32.0.1/"},  // just outside 172.16/12
		{url: "http://100.128.0.1/"}, // just outside 100.64/10

		{url: "http://169.254.169.254/", want: "cloud metadata"},
		{url: "http://169.254.169.254/latest/meta-data/", want: "169.254.169.254 is a cloud metadata address"},
		{url: "http://[fd00:ec2::254]/", want: "cloud metadata"},
		{url: "http://169.254.1.1/", want: "link-local"},
		{url: "http://[fe80::1%25eth0]/", want: "link-local"},
		{url: "http://10.0.0.1/", want: "private"},
		{url: "http://172.16.5.4/", want: "private"},
		{url: "http://192.168.1.1:8080/", want: "private"},
		{url: "http://[fd12:3456::1]/", want: "private"},
		{url: "http://127.0.0.1:8090/", want: "loopback"},
		{url: "http://127.8.9.10/", want: "loopback"},
		{url: "http://[::1]/", want: "loopback"},
		{url: "http://[::ffff:127.0.0.1]/", want: "loopback"},
		{url: "http://[::ffff:a9fe:a9fe]/", want: "cloud metadata"},
		{url: "http://[64:ff9b::a00:1]/", want: "private"}, // NAT64 of 10.0.0.1
		{url: "http://[2002:7f00:1::]/", want: "loopback"}, // 6to4 of 127.0.0.1
		{url: "http://[::127.0.0.1]/", want: "IPv4-compatible"},
		{url: "http://[fec0::1]/", want: "fec0::1 is a site-local address"},
		{url: "http://[feff:ffff::1]/", want: "site-local"},
		{url: "http://localhost:8080/", want: "loopback host"},
		{url: "http://api.localhost/", want: "loopback host"},
		{url: "http://0.0.0.0/", want: "unspecified"},
		{url: "http://[::]/", want: "unspecified"},
		{url: "http://0.1.2.3/", want: "this-network"},
		{url: "http://100.64.0.1/", want: "CGNAT"},
		{url: "http://100.100.100.200/", want: "CGNAT"},
		{url: "http://224.0.0.1/", want: "multicast"},
		{url: "http://255.255.255.255/", want: "reserved"},
		{url: "http://2130706433/", want: "not a valid host name"},
		{url: "http://0x7f.1/", want: "not a valid host name"},
		{url: "http://127.1/", want: "not a valid host name"},

		{url: "http://10.0.0.1/", private: true},
		{url: "http://[::1]:8090/${eventId}", private: true},
		{url: "http://169.254.169.254/", private: true},
		{url: "http://localhost:8090/", private: true},

		{url: "ftp://x", want: "http or https"},
		{url: "ftp://x", private: true, want: "http or https"},
		{url: "file:///etc/passwd", want: "http or https"},
		{url: "javascript:alert(1)", want: "http or https"},
		{url: "//example.com/x", want: "http or https"},
		{url: "", want: "http or https"},
		{url: "http://user:pw@host/", want: "user name or password"},
		{url: "http://user:pw@host/", private: true, want: "user name or password"},
		{url: "https://token@partner.example.com/", want: "user name or password"},
		{url: "http:///path", want: "a host is required"},
		{url: "http://:8080/", want: "a host is required"},
		{url: "http://exa mple.com/", want: "not a valid absolute URL"},
		{url: "https://partner.example.com/" + strings.Repeat("a", 2100), want: "longer than 2048"},
		{url: "http://partner.example.com:1/"},
		{url: "http://partner.example.com:65535/"},
		{url: "http://partner.example.com:/"}, // an empty port is the scheme's
		{url: "http://partner.example.com:0/", want: "port must be 1 to 65535 (got 0)"},
		{url: "http://partner.example.com:65536/", want: "port must be 1 to 65535"},
		{url: "http://127.0.0.1:99999999999999999999/", private: true, want: "port must be 1 to 65535"},
		{url: "https://partner.example.com/a\u0085b", want: "control character U+0085"},
		{url: "https://partner.example.com/a\xffb", want: "not valid UTF-8"},
	}
	for _, tt := range tests {
		err := ValidateURL(tt.url, tt.private)
		if tt.want == "" {
			if err != nil {
				t.Errorf("ValidateURL(%q, %v) = %v, want nil", tt.url, tt.private, err)
			}
			continue
		}
		var e *storelink.Error
		if !errors.As(err, &e) || e.Code != storelink.EUNPROCESSABLE || !strings.Contains(e.Message, tt.want) {
			t.Errorf("ValidateURL(%q, %v) = %v, want unprocessable %q", tt.url, tt.private, err, tt.want)
			continue
		}
		if strings.Contains(e.Message, "pw") || strings.Contains(e.Message, "token") {
			t.Errorf("ValidateURL(%q) message %q repeats credentials", tt.url, e.Message)
		}
		// A refusal that --webhook-allow-private lifts names it, for
		// whoever runs the service on one machine to try it; others do not.
		if lifted := ValidateURL(tt.url, true) == nil; lifted != strings.Contains(e.Message, "--webhook-allow-private") {
			t.Errorf("ValidateURL(%q) message %q: naming --webhook-allow-private is %v, want %v", tt.url, e.Message, !lifted, lifted)
		}
	}
}

func TestWebhookBlockedReason(t *testing.T) {
	for addr, want := range map[string]string{
		"8.8.8.8": "", "1.1.1.1": "", "2606:4700::1111": "", "172.15.255.255": "", "192.169.0.1": "",
		"100.63.255.255": "", "198.17.255.255": "", "::ffff:8.8.8.8": "", "64:ff9b::808:808": "",
		"127.0.0.1": "loopback", "::1": "loopback", "::ffff:7f00:1": "loopback",
		"10.255.255.255": "private", "172.31.0.1": "private", "192.168.0.1": "private", "fc00::1": "private",
		"169.254.0.1": "link-local", "fe80::abcd": "link-local", "169.254.169.254": "cloud metadata",
		"0.0.0.0": "unspecified", "::": "unspecified", "100.127.255.255": "shared (CGNAT)",
		"ff02::1": "multicast", "239.255.255.250": "multicast", "198.18.0.1": "benchmarking",
		"192.0.0.170": "IETF protocol", "64:ff9b:1::1": "local NAT64", "64:ff9b::a9fe:a9fe": "cloud metadata",
		"fec0::1": "site-local", "fed0:1:2::3": "site-local", "feff:ffff:ffff:ffff::1": "site-local",
		"febf:ffff::1": "link-local", "ff00::1": "multicast",
	} {
		if got := blockedReason(netip.MustParseAddr(addr)); got != want {
			t.Errorf("blockedReason(%s) = %q, want %q", addr, got, want)
		}
	}
}

// TestWebhookSendRefusesPrivateAtDial: with private addresses refused, the
// guard stops the connection to loopback at dial time, whether the URL names
// the address or a host name resolving to it, and the test server is never
// reached. Allowing private addresses lets the same request through.
func TestWebhookSendRefusesPrivateAtDial(t *testing.T) {
	var called atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { called.Add(1) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	guarded := NewClient(time.Second, false)
	defer guarded.CloseIdleConnections()
	urls := []string{srv.URL + "/hook", "http://[::ffff:127.0.0.1]:" + port + "/hook"}
	if addrs, err := net.LookupHost("localhost"); err == nil && len(addrs) > 0 {
		urls = append(urls, "http://localhost:"+port+"/hook")
	}
	for _, u := range urls {
		res := guarded.Send(context.Background(), testRequest(t, u), time.Now())
		if res.Success() || !errors.Is(res.Err, ErrAddressNotAllowed) || !strings.Contains(res.Err.Error(), "is not allowed (loopback)") {
			t.Errorf("Send(%s) = %+v, want the address refused", u, res)
		}
	}
	if n := called.Load(); n != 0 {
		t.Fatalf("server reached %d times through the guard", n)
	}

	open := NewClient(time.Second, true)
	defer open.CloseIdleConnections()
	if res := open.Send(context.Background(), testRequest(t, srv.URL+"/hook"), time.Now()); !res.Success() {
		t.Fatalf("with allowPrivate, Send = %+v, want success", res)
	}
}

func TestWebhookDialGuard(t *testing.T) {
	for addr, refused := range map[string]bool{
		"127.0.0.1:80": true, "[::1]:443": true, "[fe80::1%eth0]:80": true, "169.254.169.254:80": true,
		"10.1.2.3:8080": true, "[::ffff:192.168.1.1]:80": true, "garbage": true, "[fec0::1]:80": true,
		"93.184.215.14:443": false, "[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:443": false,
	} {
		err := dialGuard("tcp", addr, nil)
		if (err != nil) != refused || (err != nil && !errors.Is(err, ErrAddressNotAllowed)) {
			t.Errorf("dialGuard(%s) = %v, want refused %v", addr, err, refused)
		}
	}
}
