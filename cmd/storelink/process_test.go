package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary is the storelink command built once for the tests that need a real,
// separate OS process (to kill it with SIGKILL, or to measure its memory).
var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// TestMain removes the built binary when the tests are done. Run with
// bareEnv or epBareEnv set, the binary is a webhook benchmark's bare client
// instead.
func TestMain(m *testing.M) {
	if path := os.Getenv(bareEnv); path != "" {
		os.Exit(runBareClient(path))
	}
	if path := os.Getenv(epBareEnv); path != "" {
		os.Exit(runEPBare(path))
	}
	code := m.Run()
	if binaryPath != "" {
		os.RemoveAll(filepath.Dir(binaryPath))
	}
	os.Exit(code)
}

func storelinkBinary(tb testing.TB) string {
	tb.Helper()
	binaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "storelink-bin")
		if err != nil {
			binaryErr = err
			return
		}
		binaryPath = filepath.Join(dir, "storelink")
		out, err := exec.Command("go", "build", "-o", binaryPath, ".").CombinedOutput()
		if err != nil {
			binaryErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binaryErr != nil {
		tb.Fatal(binaryErr)
	}
	return binaryPath
}

// proc is a running `storelink serve` process.
type proc struct {
	cmd *exec.Cmd
	URL string // http://127.0.0.1:PORT
	// MetricsURL is http://127.0.0.1:PORT/metrics of --metrics-addr, when
	// given.
	MetricsURL string
	Data       string
	stdout     *syncBuffer // all serve printed on its standard output
	stderr     *syncBuffer
	// Demo credentials, when started with --demo on an empty database.
	ClientID, APIKey, PartnerID string
	WebhookSecret               string
	AdminToken                  string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// WriteString appends str.
func (s *syncBuffer) WriteString(str string) (int, error) { return s.Write([]byte(str)) }

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServe starts `storelink serve --addr 127.0.0.1:0 --data DATA args...`
// and waits until it listens. It reads the demo credentials and admin token
// when they are printed. The process is killed when the test ends.
func startServe(tb testing.TB, data string, args ...string) *proc {
	tb.Helper()
	return startServeEnv(tb, data, nil, args...)
}

// startServeEnv is startServe with variables (NAME=value) added to its
// environment.
func startServeEnv(tb testing.TB, data string, env []string, args ...string) *proc {
	tb.Helper()
	bin := storelinkBinary(tb)
	if slices.Contains(args, "--demo") && !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--demo-webhook-url") }) {
		// Not the default 127.0.0.1:8090, where a developer's own
		// `storelink listen` may be running on this machine: port 9
		// (discard), where nothing listens on a test machine, so the demo
		// endpoint's deliveries fail until a test points it elsewhere.
		args = append(slices.Clone(args), "--demo-webhook-url", "http://127.0.0.1:9/webhooks")
	}
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--data", data}, args...)...)
	cmd.Env = append(append(os.Environ(), "STORELINK_ADMIN_TOKEN="), env...)
	p := &proc{cmd: cmd, Data: data, stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Kill() })
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(30 * time.Second)
	for p.URL == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				tb.Fatalf("storelink serve exited before listening:\n%s\n%s", p.stdout, p.stderr)
			}
			p.stdout.WriteString(line + "\n")
			p.parseLine(line)
		case <-deadline:
			tb.Fatalf("storelink serve did not listen within 30s:\n%s\n%s", p.stdout, p.stderr)
		}
	}
	go func() {
		for line := range lines { // keep reading so the process never blocks on stdout
			p.stdout.WriteString(line + "\n")
		}
	}()
	p.AdminToken = givenAdminToken(args, env)
	if b, err := os.ReadFile(filepath.Join(data, "admin-token")); err == nil && p.AdminToken == "" {
		p.AdminToken = strings.TrimSpace(string(b))
	}
	return p
}

// givenAdminToken is the admin token given by --admin-token in args or
// STORELINK_ADMIN_TOKEN in env (the flag wins), or "".
func givenAdminToken(args, env []string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--admin-token="); ok {
			return v
		}
		if a == "--admin-token" && i+1 < len(args) {
			return args[i+1]
		}
	}
	token := ""
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "STORELINK_ADMIN_TOKEN="); ok {
			token = v
		}
	}
	return token
}

// getMetrics GETs p's /metrics with client (http.DefaultClient when nil):
// from the listener of --metrics-addr when p has one, else from the API
// with the admin token.
func (p *proc) getMetrics(client *http.Client) (*http.Response, error) {
	if client == nil {
		client = http.DefaultClient
	}
	if p.MetricsURL != "" {
		return client.Get(p.MetricsURL)
	}
	req, err := http.NewRequest(http.MethodGet, p.URL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+p.AdminToken)
	return client.Do(req)
}

func (p *proc) parseLine(line string) {
	field := func(name string) string {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return strings.TrimSpace(v)
		}
		return ""
	}
	if v := field("client_id"); v != "" {
		p.ClientID = v
	}
	if v := field("api_key"); v != "" {
		p.APIKey = v
	}
	if v := field("partner_id"); v != "" {
		p.PartnerID = v
	}
	if v := field("webhook_secret"); v != "" {
		p.WebhookSecret = v
	}
	if v, ok := strings.CutPrefix(line, "storelink: metrics on "); ok {
		p.MetricsURL = strings.TrimSpace(v)
	}
	if v, ok := strings.CutPrefix(line, "storelink: listening on "); ok {
		p.URL = strings.TrimSpace(v)
	}
}

// Kill ends the process with SIGKILL, as a crash or power cut would.
func (p *proc) Kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		_ = p.cmd.Wait()
	}
}

// Stop ends the process with SIGTERM and returns its exit error.
func (p *proc) Stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	return p.cmd.Wait()
}

// PID is the process id.
func (p *proc) PID() int { return p.cmd.Process.Pid }

// upload PUTs body as a stock file and returns the status and decoded answer.
func (p *proc) upload(tb testing.TB, name string, body []byte) (int, map[string]any) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPut, p.URL+"/stock/"+p.ClientID+"/"+name, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("x-api-key", p.APIKey)
	req.Header.Set("Content-Type", "application/csv")
	return doJSON(tb, req)
}

// get GETs a partner path with the API key.
func (p *proc) get(tb testing.TB, path string) (int, map[string]any) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, p.URL+path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("x-api-key", p.APIKey)
	return doJSON(tb, req)
}

// waitUntil polls cond until it is true, for at most limit.
func waitUntil(tb testing.TB, limit time.Duration, what string, cond func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(limit); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("not %s after %s", what, limit)
		}
	}
}

// waitUpload polls an upload until it is applied or rejected.
func (p *proc) waitUpload(tb testing.TB, id string, timeout time.Duration) map[string]any {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code, u := p.get(tb, "/stock/"+p.ClientID+"/uploads/"+id)
		if code == http.StatusOK && (u["status"] == "applied" || u["status"] == "rejected") {
			return u
		}
		if time.Now().After(deadline) {
			tb.Fatalf("upload %s not finished after %s: %d %v", id, timeout, code, u)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func doJSON(tb testing.TB, req *http.Request) (int, map[string]any) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &v); err != nil {
			tb.Fatalf("%s %s: %d, not JSON: %s", req.Method, req.URL, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, v
}
