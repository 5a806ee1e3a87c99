package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The harness's operator token and secret key.
const (
	adminToken = "sla_hostile_0123456789abcdef0123456789abcdef0123456789abcdef"
	secretKey  = "5e" + "c0ffee00112233445566778899aabbccddeeff00112233445566778899aabb"
)

// buildServe builds cmd/storelink once into dir and returns its path.
func buildServe(ctx context.Context, dir string) (string, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if root == "." || root == "" {
		return "", errors.New("run the harness inside the storelink module (go run ./bench/hostile)")
	}
	bin := filepath.Join(dir, "storelink")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/storelink")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/storelink: %v\n%s", err, out)
	}
	return bin, nil
}

// serveHasFlag tells whether `storelink serve` knows --name, from its usage.
func serveHasFlag(bin, name string) bool {
	out, _ := exec.Command(bin, "serve", "-h").CombinedOutput()
	return bytes.Contains(out, []byte("-"+name+" ")) || bytes.Contains(out, []byte("-"+name+"\n"))
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

// serve is one `storelink serve` process on SQLite in a folder of its own.
type serve struct {
	addr string // host:port
	url  string
	logs string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the exit, once done is closed

	mu      sync.Mutex
	peakRSS int64 // bytes, the largest VmRSS sampled
}

// startServe starts serve on a fresh data folder under dir with the
// defaults, --webhook-allow-private and extra, and waits (30 s at most)
// until it listens.
func startServe(ctx context.Context, bin, dir string, extra []string) (*serve, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	s := &serve{addr: "127.0.0.1:" + strconv.Itoa(port), logs: filepath.Join(dir, "serve.log"), done: make(chan struct{})}
	s.url = "http://" + s.addr
	args := append([]string{"serve", "--addr", s.addr, "--data", data, "--admin-token", adminToken,
		"--secret-key", secretKey, "--webhook-allow-private"}, extra...)
	logf, err := os.OpenFile(s.logs, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = append(os.Environ(), "STORELINK_ADMIN_TOKEN=", "STORELINK_DATABASE_URL=", "STORELINK_TRUSTED_PROXIES=")
	s.cmd.Stderr = logf
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start serve: %w", err)
	}
	listening := make(chan struct{})
	go func() {
		said := false
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintf(logf, "stdout: %s\n", sc.Text())
			if !said && strings.HasPrefix(sc.Text(), "storelink: listening on ") {
				said = true
				close(listening)
			}
		}
		_, _ = io.Copy(logf, stdout)
	}()
	go func() {
		s.err = s.cmd.Wait()
		logf.Close()
		close(s.done)
	}()
	select {
	case <-listening:
		return s, nil
	case <-s.done:
		return nil, fmt.Errorf("serve exited before listening (%v); see %s", s.err, s.logs)
	case <-time.After(30 * time.Second):
		s.kill()
		return nil, fmt.Errorf("serve did not listen within 30s; see %s", s.logs)
	case <-ctx.Done():
		s.kill()
		return nil, ctx.Err()
	}
}

// alive tells whether the process is still running.
func (s *serve) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// kill ends the process (the harness's own child, by its pid) with SIGKILL
// and waits for it: nothing of a run is kept, so nothing needs a clean stop.
func (s *serve) kill() {
	if s.alive() {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
	}
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
	}
}

// memStatus reads VmRSS and VmHWM of the process, in bytes.
func (s *serve) memStatus() (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, 0, err
	}
	return parseMemStatus(b)
}

// parseMemStatus reads VmRSS and VmHWM (kB) of a /proc/<pid>/status text.
func parseMemStatus(b []byte) (rss, hwm int64, err error) {
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %q", k, v)
		}
		if k == "VmRSS" {
			rss = n << 10
		} else {
			hwm = n << 10
		}
	}
	if rss == 0 {
		return 0, 0, errors.New("no VmRSS")
	}
	return rss, hwm, nil
}

// sampleRSS reads VmRSS every 20 ms until ctx ends, keeping the peak, and
// calls over once when it passes limit (so that an attack can be cut before
// it takes the machine's memory).
func (s *serve) sampleRSS(ctx context.Context, limit int64, over func()) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	said := false
	for {
		if rss, _, err := s.memStatus(); err == nil {
			s.mu.Lock()
			s.peakRSS = max(s.peakRSS, rss)
			s.mu.Unlock()
			if rss > limit && !said {
				said = true
				over()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// peak returns the largest of the sampled VmRSS and the kernel's VmHWM.
func (s *serve) peak() int64 {
	_, hwm, _ := s.memStatus()
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.peakRSS, hwm)
}
