// Package benchproc starts and stops the child processes of the bench
// harnesses (bench/soak, bench/specwalk, bench/hostile and the other
// programs under bench/): it builds storelink from the module the harness
// runs in, starts a process with its output in a log file, waits until the
// process says it listens (or answers a probe), and ends it.
package benchproc

import (
	"bufio"
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
	"strings"
	"sync"
	"syscall"
	"time"
)

// Listening starts the line that serve prints on its standard output once
// it accepts connections.
const Listening = "storelink: listening on "

// ModuleRoot is the folder of the storelink module the harness runs in;
// harness names it in the error when there is none (go run ./bench/…
// outside the module).
func ModuleRoot(ctx context.Context, harness string) (string, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if root == "." || root == "" {
		return "", fmt.Errorf("run %s inside the storelink module (go run ./bench/%s)", harness, harness)
	}
	return root, nil
}

// BuildServe builds cmd/storelink of the module at root into dir and
// returns the binary's path.
func BuildServe(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "storelink")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/storelink")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/storelink: %v\n%s", err, out)
	}
	return bin, nil
}

// ServeHasFlag tells whether `storelink serve` of bin knows --name, from
// its usage (a harness may run against an older tree).
func ServeHasFlag(bin, name string) bool {
	out, _ := exec.Command(bin, "serve", "-h").CombinedOutput()
	return bytes.Contains(out, []byte("-"+name+" ")) || bytes.Contains(out, []byte("-"+name+"\n"))
}

// ServeEnv is the environment of a serve child: the harness's own, without
// the settings of storelink that would override the flags the harness
// gives (an operator's shell may export them).
func ServeEnv() []string {
	return append(os.Environ(), "STORELINK_ADMIN_TOKEN=", "STORELINK_DATABASE_URL=", "STORELINK_TRUSTED_PROXIES=")
}

// FreePort asks the kernel for a free loopback port.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Spec says how to start a child and when it is ready.
type Spec struct {
	// Name names the process in errors.
	Name string
	// Cmd is the command, not started; its Stdout and Stderr are set by
	// Start.
	Cmd *exec.Cmd
	// Logs is the file that the process's standard error and output are
	// appended to, each output line after "stdout: ".
	Logs string
	// Ready, when set, is the start of the output line that says the
	// process is ready.
	Ready string
	// Probe, when set, is a URL: the process is ready once a GET of it
	// gets an answer, whatever its status.
	Probe string
	// Within is how long the process has to become ready (30 s when 0);
	// past it the process is killed.
	Within time.Duration
}

// Proc is a started child process.
type Proc struct {
	name string
	logs string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the exit, once done is closed
}

// Start starts the process of s and waits until it is ready, has exited,
// Within has passed or ctx ends; it is killed in the last two cases.
func Start(ctx context.Context, s Spec) (*Proc, error) {
	within := s.Within
	if within == 0 {
		within = 30 * time.Second
	}
	logf, err := os.OpenFile(s.Logs, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	p := &Proc{name: s.Name, logs: s.Logs, cmd: s.Cmd, done: make(chan struct{})}
	s.Cmd.Stderr = logf
	stdout, err := s.Cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := s.Cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	ready := make(chan struct{})
	var readyOnce sync.Once
	isReady := func() { readyOnce.Do(func() { close(ready) }) }
	var copied sync.WaitGroup
	copied.Add(1)
	go func() {
		defer copied.Done()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			fmt.Fprintf(logf, "stdout: %s\n", sc.Text())
			if s.Ready != "" && strings.HasPrefix(sc.Text(), s.Ready) {
				isReady()
			}
		}
		_, _ = io.Copy(logf, stdout) // the rest of a line too long to scan
	}()
	go func() {
		copied.Wait()
		p.err = s.Cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	if s.Probe != "" {
		go probe(s.Probe, within, isReady, p.done)
	}
	select {
	case <-ready:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s exited before it was ready (%v); see %s", s.Name, p.err, s.Logs)
	case <-time.After(within):
		p.Kill()
		return nil, fmt.Errorf("%s was not ready within %s; see %s", s.Name, within, s.Logs)
	case <-ctx.Done():
		p.Kill()
		return nil, ctx.Err()
	}
}

// probe sends GET url every 100 ms until one gets an answer, then calls
// ready; it gives up when the process exits or after within.
func probe(url string, within time.Duration, ready func(), exited chan struct{}) {
	c := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(within); time.Now().Before(deadline); {
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
			ready()
			return
		}
		select {
		case <-exited:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Pid is the process's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Logs is the path of the process's log file.
func (p *Proc) Logs() string { return p.logs }

// Done is closed once the process has exited and its output is in the log.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Alive tells whether the process is still running.
func (p *Proc) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Err is how the process exited: nil while it runs or when it exited 0.
func (p *Proc) Err() error {
	if p.Alive() {
		return nil
	}
	return p.err
}

// Signal sends sig to the process (the harness's own child, by its pid)
// unless it has exited.
func (p *Proc) Signal(sig syscall.Signal) {
	if p.Alive() {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Wait waits at most d for the process to exit and tells whether it did.
func (p *Proc) Wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// Stop ends the process: SIGTERM, then SIGKILL if it has not exited after
// grace.
func (p *Proc) Stop(grace time.Duration) {
	p.Signal(syscall.SIGTERM)
	if !p.Wait(grace) {
		p.Kill()
	}
}

// Kill ends the process with SIGKILL and waits for it (10 s at most).
func (p *Proc) Kill() {
	p.Signal(syscall.SIGKILL)
	p.Wait(10 * time.Second)
}

// ErrNotReady is returned by WaitReady when the URL did not answer 200 in
// time.
var ErrNotReady = errors.New("not ready")

// WaitReady waits until GET url answers 200, at most d.
func WaitReady(ctx context.Context, url string, d time.Duration) error {
	c := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s: %w within %s", url, ErrNotReady, d)
}
