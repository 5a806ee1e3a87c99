package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The walk's operator token and secret key.
const (
	adminToken = "sla_specwalk_0123456789abcdef0123456789abcdef0123456789abcdef"
	secretKey  = "5e" + "c0ffee00112233445566778899aabbccddeeff00112233445566778899aabb"
)

// moduleRoot is the folder of the storelink module the walk runs in.
func moduleRoot(ctx context.Context) (string, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if root == "." || root == "" {
		return "", errors.New("run the walk inside the storelink module (go run ./bench/specwalk)")
	}
	return root, nil
}

// buildServe builds cmd/storelink into dir and returns its path.
func buildServe(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "storelink")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/storelink")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/storelink: %v\n%s", err, out)
	}
	return bin, nil
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// proc is a child process of the walk whose output goes to a log file and
// which is ready once a line of its standard output starts with ready.
type proc struct {
	name string
	logs string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the exit, once done is closed
}

// startProc starts cmd and waits (60 s at most) until it is ready: until
// it prints a line holding ready, or, with probe, until a GET of probe
// gets an answer.
func startProc(ctx context.Context, name string, cmd *exec.Cmd, logs, ready, probe string) (*proc, error) {
	logf, err := os.OpenFile(logs, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	p := &proc{name: name, logs: logs, cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	listening := make(chan struct{})
	var copied sync.WaitGroup
	copied.Add(1)
	go func() {
		defer copied.Done()
		said := false
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if !said && ready != "" && strings.Contains(sc.Text(), ready) {
				said = true
				close(listening)
			}
		}
		_, _ = io.Copy(logf, stdout)
	}()
	go func() {
		copied.Wait()
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	if probe != "" {
		go probeUntil(probe, listening, p.done)
	}
	select {
	case <-listening:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s exited before listening (%v); see %s", name, p.err, logs)
	case <-time.After(60 * time.Second):
		p.stop()
		return nil, fmt.Errorf("%s did not listen within 60s; see %s", name, logs)
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
}

// probeUntil sends GET url every 100 ms until one gets an answer, then
// closes ready; it gives up when the process exits or after 60 s.
func probeUntil(url string, ready, exited chan struct{}) {
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
			close(ready)
			return
		}
		select {
		case <-exited:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// alive tells whether the process is still running.
func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *proc) exitErr() error {
	if p.alive() {
		return nil
	}
	return p.err
}

// stop ends the process (the walk's own child, by its pid): SIGTERM, then
// SIGKILL after 5 s.
func (p *proc) stop() {
	if !p.alive() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(5 * time.Second):
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
	}
}

// serve is `storelink serve` on a fresh SQLite data folder.
type serve struct{ *proc }

// startServe starts serve on 127.0.0.1:port with the walk's token and key,
// webhooks to loopback allowed (the receiver), failed authentications not
// limited (the walk sends many wrong keys on purpose) and a short retry
// schedule.
func startServe(ctx context.Context, bin, dir string, port int) (*serve, error) {
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(bin, "serve", "--addr", addr, "--data", data, "--admin-token", adminToken,
		"--secret-key", secretKey, "--webhook-allow-private", "--webhook-timeout", "2s",
		"--webhook-retry-schedule", "100ms", "--auth-failures-per-minute", "1000000",
		"--capacity-base", "1GiB")
	cmd.Env = append(os.Environ(), "STORELINK_ADMIN_TOKEN=", "STORELINK_DATABASE_URL=", "STORELINK_TRUSTED_PROXIES=")
	p, err := startProc(ctx, "serve", cmd, filepath.Join(dir, "serve.log"), "storelink: listening on ", "")
	if err != nil {
		return nil, err
	}
	return &serve{p}, nil
}

// prismProc is one `prism proxy` in front of serve.
type prismProc struct {
	*proc
	url string
}

// startPrism starts `prism proxy spec upstream --errors` on a free loopback
// port; validateRequests false adds --validate-request=false.
func startPrism(ctx context.Context, bin, spec, upstream string, validateRequests bool, logs string) (*prismProc, error) {
	port, err := freePort()
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
	p, err := startProc(ctx, name, cmd, logs, "", url+"/healthz")
	if err != nil {
		return nil, err
	}
	return &prismProc{proc: p, url: url}, nil
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
