package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"

	"storelink/bench/internal/serveproc"
)

// The walk's operator token and secret key.
const (
	adminToken = "sla_specwalk_0123456789abcdef0123456789abcdef0123456789abcdef"
	secretKey  = "5e" + "c0ffee00112233445566778899aabbccddeeff00112233445566778899aabb"
)

// serve is `storelink serve` on a fresh SQLite data folder.
type serve struct{ *serveproc.Proc }

// startServe starts serve on 127.0.0.1:port with the walk's token and key,
// webhooks to loopback allowed (the receiver), failed authentications not
// limited (the walk sends many wrong keys on purpose) and a short retry
// schedule.
func startServe(ctx context.Context, bin, dir string, port int) (*serve, error) {
	p, err := serveproc.Serve(ctx, bin, dir, port, adminToken,
		"--secret-key", secretKey, "--webhook-allow-private", "--webhook-timeout", "2s",
		"--webhook-retry-schedule", "100ms", "--auth-failures-per-minute", "1000000",
		"--capacity-base", "1GiB")
	if err != nil {
		return nil, err
	}
	return &serve{p}, nil
}

// prismProc is one `prism proxy` in front of serve.
type prismProc struct {
	*serveproc.Proc
	url string
}

// startPrism starts `prism proxy spec upstream --errors` on a free loopback
// port; validateRequests false adds --validate-request=false.
func startPrism(ctx context.Context, bin, spec, upstream string, validateRequests bool, logs string) (*prismProc, error) {
	port, err := serveproc.FreePort()
	if err != nil {
		return nil, err
	}
	// Logging at warn: at info Prism logs every body it forwards, which
	// makes a 1 MiB request take a second.
	args := []string{"proxy", spec, upstream, "--errors", "-p", strconv.Itoa(port), "-h", "127.0.0.1", "-v", "warn"}
	name := "prism (requests validated)"
	if !validateRequests {
		args = append(args, "--validate-request=false")
		name = "prism (requests not validated)"
	}
	cmd := exec.Command(bin, args...)
	// No colours in the log; Prism's own update check stays off.
	cmd.Env = append(os.Environ(), "FORCE_COLOR=0", "NO_COLOR=1", "NO_UPDATE_NOTIFIER=1")
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	// At warn Prism does not say it listens: it is ready once it answers
	// (Prism's own error while serve is not up yet is an answer).
	p, err := serveproc.Start(ctx, name, cmd, logs, "", url+"/healthz")
	if err != nil {
		return nil, err
	}
	return &prismProc{Proc: p, url: url}, nil
}

// receiver is the webhook endpoints' address: it answers 204 to every
// delivery and test send.
type receiver struct {
	url string
	srv *http.Server
}

func startReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
			w.WriteHeader(http.StatusNoContent)
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}
	go func() { _ = srv.Serve(ln) }()
	return &receiver{url: "http://" + ln.Addr().String() + "/hook", srv: srv}, nil
}

func (r *receiver) close() { _ = r.srv.Close() }
