package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"storelink/bench/internal/benchproc"
)

// The harness's operator token and secret key.
const (
	adminToken = "sla_hostile_0123456789abcdef0123456789abcdef0123456789abcdef"
	secretKey  = "5e" + "c0ffee00112233445566778899aabbccddeeff00112233445566778899aabb"
)

// serve is one `storelink serve` process on SQLite in a folder of its own.
type serve struct {
	*benchproc.Proc
	addr string // host:port
	url  string

	mu      sync.Mutex
	peakRSS int64 // bytes, the largest VmRSS sampled
}

// startServe starts serve on a fresh data folder under dir with the
// defaults, --webhook-allow-private and extra, and waits (30 s at most)
// until it listens.
func startServe(ctx context.Context, bin, dir string, extra []string) (*serve, error) {
	port, err := benchproc.FreePort()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	s := &serve{addr: "127.0.0.1:" + strconv.Itoa(port)}
	s.url = "http://" + s.addr
	args := append([]string{"serve", "--addr", s.addr, "--data", data, "--admin-token", adminToken,
		"--secret-key", secretKey, "--webhook-allow-private"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = benchproc.ServeEnv()
	s.Proc, err = benchproc.Start(ctx, benchproc.Spec{Name: "serve", Cmd: cmd, Logs: filepath.Join(dir, "serve.log"), Ready: benchproc.Listening})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// memStatus reads VmRSS and VmHWM of the process, in bytes.
func (s *serve) memStatus() (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.Pid()))
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
