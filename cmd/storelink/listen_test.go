package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"storelink/webhook"
)

// listenOutput is a writer the test reads while listen writes to it.
type listenOutput struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *listenOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *listenOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

type listener struct {
	URL            string
	stdout, stderr *listenOutput
	stop           func() int // cancels and returns the exit code
}

// startListen runs `storelink listen --addr 127.0.0.1:0 args...` in-process
// and waits for the address it prints.
func startListen(tb testing.TB, getenv func(string) string, args ...string) *listener {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{stdout: &listenOutput{}, stderr: &listenOutput{}}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"listen", "--addr", "127.0.0.1:0"}, args...), getenv, nil, l.stdout, l.stderr)
	}()
	var once sync.Once
	code := -1
	l.stop = func() int {
		once.Do(func() { cancel(); code = <-done })
		return code
	}
	tb.Cleanup(func() { l.stop() })
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, rest, ok := strings.Cut(l.stderr.String(), "storelink: listening on "); ok {
			l.URL = strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0])
			return l
		}
		select {
		case c := <-done:
			tb.Fatalf("listen exited with %d: %s", c, l.stderr)
		case <-time.After(10 * time.Millisecond):
		}
	}
	tb.Fatalf("listen did not start: %s", l.stderr)
	return nil
}

func noEnv(string) string { return "" }

// post sends body to the listener with the given headers.
func post(tb testing.TB, url string, h http.Header, body string) (int, string) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/hooks/x", strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// signed returns the headers of a message signed with every secret, as a
// sender during a rotation signs it; the signatures are the official
// Standard Webhooks library's.
func signed(tb testing.TB, secrets []string, id string, ts time.Time, body string) http.Header {
	tb.Helper()
	sigs := make([]string, len(secrets))
	for i, secret := range secrets {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			tb.Fatal(err)
		}
		if sigs[i], err = wh.Sign(id, ts, []byte(body)); err != nil {
			tb.Fatal(err)
		}
	}
	h := http.Header{}
	h.Set(webhook.HeaderID, id)
	h.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(webhook.HeaderSignature, strings.Join(sigs, " "))
	return h
}

const listenEvent = `{
  "event_id": "6f1c2b9a-0d3e-4f5a-8b7c-1d2e3f4a5b6c",
  "order_id": "ord_1", "state": "shipped",
  "items": [ {"item_id": "it-1", "price": 19.99} ]
}`

func TestListen(t *testing.T) {
	secret := webhook.NewSecret()
	l := startListen(t, noEnv, "--secret", secret)
	const id = "6f1c2b9a-0d3e-4f5a-8b7c-1d2e3f4a5b6c"
	h := signed(t, []string{secret}, id, time.Now(), listenEvent)

	for i := range 2 { // the second is a redelivery of the same event
		if code, body := post(t, l.URL, h.Clone(), listenEvent); code != 200 {
			t.Fatalf("delivery %d: %d %s, want 200", i+1, code, body)
		}
	}
	want := `{"event_id":"6f1c2b9a-0d3e-4f5a-8b7c-1d2e3f4a5b6c","order_id":"ord_1","state":"shipped","items":[{"item_id":"it-1","price":19.99}]}` + "\n"
	if got := l.stdout.String(); got != want {
		t.Fatalf("stdout = %q, want the event once, compacted: %q", got, want)
	}
	if !strings.HasPrefix(l.URL, "http://127.0.0.1:") || strings.Contains(l.stdout.String(), "listening") {
		t.Errorf("URL %q; stdout must hold events only", l.URL)
	}

	refused := []struct {
		name   string
		header http.Header
		body   string
		reason string
	}{
		{"wrong secret", signed(t, []string{webhook.NewSecret()}, "id-2", time.Now(), listenEvent), listenEvent, "bad signature"},
		{"altered body", signed(t, []string{secret}, "id-3", time.Now(), listenEvent), strings.Replace(listenEvent, "19.99", "0.01", 1), "bad signature"},
		{"stale timestamp", signed(t, []string{secret}, "id-4", time.Now().Add(-6*time.Minute), listenEvent), listenEvent, "timestamp"},
		{"from the future", signed(t, []string{secret}, "id-5", time.Now().Add(6*time.Minute), listenEvent), listenEvent, "timestamp"},
		{"unsigned", http.Header{}, listenEvent, "missing"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			if code, body := post(t, l.URL, tt.header, tt.body); code != 401 || !strings.Contains(body, tt.reason) {
				t.Fatalf("%d %q, want 401 with %q", code, body, tt.reason)
			}
		})
	}
	if got := l.stdout.String(); got != want {
		t.Fatalf("stdout = %q after refused deliveries, want only the first event", got)
	}
	if strings.Contains(l.stderr.String(), strings.TrimPrefix(secret, "whsec_")) {
		t.Fatal("stderr shows the secret")
	}
	if code := l.stop(); code != 0 {
		t.Fatalf("exit code %d after cancel, want 0; stderr: %s", code, l.stderr)
	}
}

// TestListenRotation: during a rotation the listener knows both secrets (from
// the environment, comma-separated) and accepts events signed with either.
func TestListenRotation(t *testing.T) {
	oldSecret, newSecret := webhook.NewSecret(), webhook.NewSecret()
	l := startListen(t, func(k string) string {
		if k == "STORELINK_WEBHOOK_SECRET" {
			return newSecret + "," + oldSecret
		}
		return ""
	})
	for i, s := range []string{oldSecret, newSecret} {
		id := "evt-" + strconv.Itoa(i)
		if code, body := post(t, l.URL, signed(t, []string{s}, id, time.Now(), `{"n":1}`), `{"n":1}`); code != 200 {
			t.Fatalf("signed with secret %d: %d %s", i, code, body)
		}
	}
	if got := strings.Count(l.stdout.String(), "\n"); got != 2 {
		t.Fatalf("%d events printed, want 2: %q", got, l.stdout)
	}
}

func TestListenUsage(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"no secret", nil},
		{"empty secret", []string{"--secret", ""}},
		{"secret not base64", []string{"--secret", "whsec_s3cr3t!!"}},
		{"unknown flag", []string{"--secret", webhook.NewSecret(), "--port", "1"}},
		{"extra argument", []string{"--secret", webhook.NewSecret(), "now"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"listen", "--addr", "127.0.0.1:0"}, tt.args...)
			if code := run(context.Background(), args, noEnv, nil, &stdout, &stderr); code != 2 {
				t.Fatalf("exit code %d, want 2; stderr: %s", code, stderr.String())
			}
			if strings.Contains(stderr.String(), "s3cr3t") {
				t.Fatalf("stderr repeats the secret: %s", stderr.String())
			}
		})
	}
}

func TestListenMethod(t *testing.T) {
	l := startListen(t, noEnv, "--secret", webhook.NewSecret())
	resp, err := http.Get(l.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d, want 405", resp.StatusCode)
	}
}

// TestListenDedupBounded: the receiver forgets the oldest ids first, so
// memory stays bounded however long it runs.
func TestListenDedupBounded(t *testing.T) {
	s := newIDSet(3)
	for _, id := range []string{"a", "b", "c", "d"} {
		s.add(id)
	}
	if s.has("a") || !s.has("b") || !s.has("d") || len(s.ids) != 3 {
		t.Fatalf("after a, b, c, d in a set of 3: %v", s.ids)
	}
}
