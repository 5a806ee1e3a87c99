// Package serveproc runs `storelink serve`, and the tools the bench programs
// put beside it, as child processes: it builds cmd/storelink, finds free
// loopback ports, starts a process with its output in a log file, waits
// until it is ready and stops it by its own pid.
package serveproc

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

// ModuleRoot is the folder of the storelink module the program runs in.
func ModuleRoot(ctx context.Context) (string, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if root == "." || root == "" {
		return "", errors.New("run it inside the storelink module (go run ./bench/…)")
	}
	return root, nil
}

// Build builds cmd/storelink of the module at root into dir and returns
// the binary's path.
func Build(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "storelink")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/storelink")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/storelink: %v\n%s", err, out)
	}
	return bin, nil
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

// Proc is a child process whose output goes to a log file.
type Proc struct {
	Name string
	Logs string // the log file: the process's standard error and output
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the exit, once done is closed
}

// Start starts cmd and waits (60 s at most) until it is ready: until a line
// of its standard output holds ready, or, with probe, until a GET of probe
// gets an answer.
func Start(ctx context.Context, name string, cmd *exec.Cmd, logs, ready, probe string) (*Proc, error) {
	logf, err := os.OpenFile(logs, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	p := &Proc{Name: name, Logs: logs, cmd: cmd, done: make(chan struct{})}
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
		p.Stop()
		return nil, fmt.Errorf("%s did not listen within 60s; see %s", name, logs)
	case <-ctx.Done():
		p.Stop()
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

// Alive tells whether the process is still running.
func (p *Proc) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// ExitErr is how the process ended; nil while it runs.
func (p *Proc) ExitErr() error {
	if p.Alive() {
		return nil
	}
	return p.err
}

// Stop ends the process (the caller's own child, by its pid): SIGTERM,
// then SIGKILL after 5 s.
func (p *Proc) Stop() {
	if !p.Alive() {
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

// Serve starts `storelink serve` (bin) on 127.0.0.1:port with a fresh
// SQLite database in dir/data, the operator token adminToken and the
// flags extra, its log in dir/serve.log, and waits until it listens. The
// variables that would point it elsewhere (STORELINK_DATABASE_URL,
// STORELINK_ADMIN_TOKEN, STORELINK_TRUSTED_PROXIES) are emptied.
func Serve(ctx context.Context, bin, dir string, port int, adminToken string, extra ...string) (*Proc, error) {
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	args := append([]string{"serve", "--addr", "127.0.0.1:" + strconv.Itoa(port), "--data", data, "--admin-token", adminToken}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "STORELINK_ADMIN_TOKEN=", "STORELINK_DATABASE_URL=", "STORELINK_TRUSTED_PROXIES=")
	return Start(ctx, "serve", cmd, filepath.Join(dir, "serve.log"), "storelink: listening on ", "")
}
