package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"storelink/bench/internal/benchproc"
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
// errors half the time; the late receiver's deliveries, down from the
// setup, fail for good after it (awaitLateFailure), to be recovered
// (recoverLate). A schedule of 24 attempts (about 21 s) was tried: a flaky
// receiver down for 8 s lost a delivery in one run of two.
var retrySchedule = "100ms,200ms,400ms,800ms" + strings.Repeat(",1s", 40)

// serve is one `storelink serve` process, started again after each fault.
type serve struct {
	idx  int
	bin  string
	args []string
	url  string
	logs string // stderr and stdout of every run, appended

	mu       sync.Mutex
	proc     *benchproc.Proc // the current run's process, nil before the first
	expected bool            // the soak stopped it
	deaths   []string        // exits the soak did not cause
	runs     int
}

func newServe(idx int, bin, dir, dbURL string) (*serve, error) {
	port, err := benchproc.FreePort()
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
	cmd := exec.Command(s.bin, s.args...)
	cmd.Env = benchproc.ServeEnv()
	s.mu.Lock()
	s.expected = false
	s.runs++
	s.mu.Unlock()
	p, err := benchproc.Start(ctx, benchproc.Spec{Name: fmt.Sprintf("serve %d", s.idx), Cmd: cmd, Logs: s.logs, Ready: benchproc.Listening})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	go func() {
		<-p.Done()
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.expected && s.proc == p {
			s.deaths = append(s.deaths, fmt.Sprintf("serve %d (pid %d) exited by itself at %s: %v", s.idx, p.Pid(), time.Now().Format(time.TimeOnly), p.Err()))
		}
	}()
	return nil
}

// current is the current run's process, nil before the first.
func (s *serve) current() *benchproc.Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// signal sends sig to the running process and marks its exit as expected.
func (s *serve) signal(sig syscall.Signal) {
	s.mu.Lock()
	p := s.proc
	if p != nil && p.Alive() {
		s.expected = true
	}
	s.mu.Unlock()
	if p != nil {
		p.Signal(sig)
	}
}

// wait waits for the process to exit, at most d; it tells whether it did
// and with what.
func (s *serve) wait(d time.Duration) (bool, error) {
	p := s.current()
	if p == nil {
		return true, nil
	}
	if !p.Wait(d) {
		return false, nil
	}
	return true, p.Err()
}

// alive tells whether the current process is running.
func (s *serve) alive() bool {
	p := s.current()
	return p != nil && p.Alive()
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
	return benchproc.WaitReady(ctx, s.url+"/readyz", d) == nil
}
