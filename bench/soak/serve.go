package main

import (
	"bytes"
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

// The soak's operator token and secret key, the same for every process.
const (
	adminToken = "sla_soak_0123456789abcdef0123456789abcdef0123456789abcdef"
	secretKey  = "5e" + "c0ffee00112233445566778899aabbccddeeff00112233445566778899aabb"
	// webhookTimeout is the serves' --webhook-timeout: a receiver that takes
	// longer has failed the attempt, whatever it answers.
	webhookTimeout = 2 * time.Second
)

// retrySchedule is long enough (about 45 s of retries) that no delivery
// fails for good while a receiver is down for a few seconds or answers
// errors half the time.
var retrySchedule = "100ms,200ms,400ms,800ms" + strings.Repeat(",1s", 40)

// buildServe builds cmd/storelink once into dir and returns its path.
func buildServe(ctx context.Context, dir string) (string, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if root == "." || root == "" {
		return "", errors.New("run the soak inside the storelink module (go run ./bench/soak)")
	}
	bin := filepath.Join(dir, "storelink")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/storelink")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/storelink: %v\n%s", err, out)
	}
	return bin, nil
}

// freePort asks the kernel for a free loopback port. A serve keeps its port
// across restarts, so that clients find it where it was.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// serve is one `storelink serve` process, started again after each fault.
type serve struct {
	idx  int
	bin  string
	args []string
	url  string
	logs string // stderr of every run, appended

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	exitErr  error
	expected bool     // the soak stopped it
	deaths   []string // exits the soak did not cause
	runs     int
}

func newServe(idx int, bin, dir, dbURL string) (*serve, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, fmt.Sprintf("serve%d", idx))
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{"serve", "--addr", addr, "--data", data, "--admin-token", adminToken, "--secret-key", secretKey,
		"--webhook-allow-private", "--webhook-timeout", webhookTimeout.String(), "--webhook-retry-schedule", retrySchedule,
		"--upload-lease", "5s", "--capacity-base", "4GiB", "--max-waiting-uploads", "50", "--database-timeout", "5s"}
	if dbURL != "" {
		args = append(args, "--database", dbURL)
	}
	return &serve{idx: idx, bin: bin, args: args, url: "http://" + addr, logs: filepath.Join(dir, fmt.Sprintf("serve%d.log", idx))}, nil
}

// start starts the process and waits (30 s at most) until it listens.
func (s *serve) start(ctx context.Context) error {
	logf, err := os.OpenFile(s.logs, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Env = append(os.Environ(), "STORELINK_ADMIN_TOKEN=", "STORELINK_DATABASE_URL=")
	cmd.Stderr = logf
	listening := make(chan struct{})
	cmd.Stdout = &lineWatcher{out: logf, prefix: "storelink: listening on ", seen: listening}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start serve %d: %w", s.idx, err)
	}
	exited := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.exited, s.expected, s.exitErr = cmd, exited, false, nil
	s.runs++
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logf.Close()
		s.mu.Lock()
		s.exitErr = err
		if !s.expected {
			s.deaths = append(s.deaths, fmt.Sprintf("serve %d (pid %d) exited by itself at %s: %v", s.idx, cmd.Process.Pid, time.Now().Format(time.TimeOnly), err))
		}
		s.mu.Unlock()
		close(exited)
	}()
	select {
	case <-listening:
		return nil
	case <-exited:
		return fmt.Errorf("serve %d exited before listening; see %s", s.idx, s.logs)
	case <-time.After(30 * time.Second):
		s.signal(syscall.SIGKILL)
		return fmt.Errorf("serve %d did not listen within 30s; see %s", s.idx, s.logs)
	case <-ctx.Done():
		s.signal(syscall.SIGKILL)
		return ctx.Err()
	}
}

// signal sends sig to the running process (the soak's own child, by pid)
// and marks its exit as expected.
func (s *serve) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	select {
	case <-s.exited:
		return
	default:
	}
	s.expected = true
	_ = s.cmd.Process.Signal(sig)
}

// wait waits for the process to exit, at most d; it tells whether it did
// and with what.
func (s *serve) wait(d time.Duration) (bool, error) {
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	if exited == nil {
		return true, nil
	}
	select {
	case <-exited:
		s.mu.Lock()
		defer s.mu.Unlock()
		return true, s.exitErr
	case <-time.After(d):
		return false, nil
	}
}

// alive tells whether the current process is running.
func (s *serve) alive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exited == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// stopForGood ends the process at the end of the soak: SIGTERM, then
// SIGKILL after 40 s.
func (s *serve) stopForGood() {
	s.signal(syscall.SIGTERM)
	if done, _ := s.wait(40 * time.Second); !done {
		s.signal(syscall.SIGKILL)
		s.wait(5 * time.Second)
	}
}

// unexpectedDeaths lists the exits the soak did not cause.
func (s *serve) unexpectedDeaths() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.deaths...)
}

// ready waits until /readyz answers 200, at most d.
func (s *serve) ready(ctx context.Context, d time.Duration) bool {
	c := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(d); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(200 * time.Millisecond) {
		resp, err := c.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
	}
	return false
}

// lineWatcher copies a serve's standard output into its log, each line
// marked, and closes seen at the first line that starts with prefix.
type lineWatcher struct {
	out    io.Writer
	prefix string
	seen   chan struct{}
	buf    []byte
	said   bool
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		fmt.Fprintf(w.out, "stdout: %s\n", line)
		if !w.said && strings.HasPrefix(line, w.prefix) {
			w.said = true
			close(w.seen)
		}
	}
}
