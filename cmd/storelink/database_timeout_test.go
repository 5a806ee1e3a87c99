package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The tests of this file cover what a review of the hardening (issue 13)
// found still wrong, through real serve processes.

// TestDatabaseHangs: serve on PostgreSQL with --database-timeout 2s, the
// database reached through a proxy that becomes a black hole (connections
// accepted and held, nothing answered). A partner upload and an operator
// write answer 503 problem+json with a Retry-After within the timeout (not
// after the driver's own limits); /readyz answers 503. A partner call whose
// client gives up first is logged as a client that went away (status 499),
// not as an internal error. No upload is counted as a 500. SIGTERM then ends
// serve with exit 0 within seconds.
func TestDatabaseHangs(t *testing.T) {
	t.Parallel()
	p, proxy, _ := serveThroughProxy(t, "--database-timeout", "2s")
	if a := call(t, http.MethodPost, p.URL+"/admin/partners", pressureToken, "", []byte(`{"name":"Before"}`)); a.code != http.StatusCreated {
		t.Fatalf("operator write before the hang: %d %v", a.code, a.body)
	}

	proxy.setHole(true)
	feed := sizedFeed(200, 1)
	for what, send := range map[string]func() answer{
		"upload": func() answer { return uploadTo(t, p, p.ClientID, p.APIKey, "hang.csv", feed) },
		"operator write": func() answer {
			return call(t, http.MethodPost, p.URL+"/admin/partners", pressureToken, "", []byte(`{"name":"Hang"}`))
		},
	} {
		start := time.Now()
		a := send()
		took := time.Since(start)
		wantProblem(t, what+" with the database hanging", a, http.StatusServiceUnavailable, "/problems/unavailable")
		if n, err := strconv.Atoi(a.h.Get("Retry-After")); err != nil || n < 1 {
			t.Errorf("%s 503: Retry-After %q, want whole seconds", what, a.h.Get("Retry-After"))
		}
		if d, _ := a.body["detail"].(string); !strings.Contains(d, "did not answer within 2s") {
			t.Errorf("%s 503: detail %q does not say the database did not answer in time", what, d)
		}
		// The database timeout is 2s: well under this bound, far under
		// the minutes a request waited without it.
		if took > 8*time.Second {
			t.Errorf("%s answered after %s with a database timeout of 2s", what, took)
		}
	}
	ready := call(t, http.MethodGet, p.URL+"/readyz", "", "", nil)
	wantProblem(t, "/readyz with the database hanging", ready, http.StatusServiceUnavailable, "/problems/unavailable")

	// A client that gives up before the database timeout. (A request
	// with a body that is still unread cannot tell: net/http notices a
	// closed connection only once it reads ahead of the request.)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/stock/"+p.ClientID+"/uploads", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", p.APIKey)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the request of a client that gave up was answered %d", resp.StatusCode)
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("request of a client that gives up: %v", err)
	}
	cancel()
	gone := `"msg":"request","method":"GET","path":"/stock/` + p.ClientID + `/uploads","status":499`
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.stderr.String(), gone) {
		if time.Now().After(deadline) {
			t.Fatalf("no request log line with status 499 for the request whose client went away:\n%s", p.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	log := p.stderr.String()
	if !strings.Contains(log, `"msg":"client went away"`) {
		t.Errorf("the log does not say the client went away:\n%s", log)
	}
	for _, bad := range []string{`"msg":"internal error"`, `"status":500`} {
		if strings.Contains(log, bad) {
			t.Errorf("the log has %s with the database hanging:\n%s", bad, log)
		}
	}
	resp, err := http.Get(p.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(metrics), `storelink_upload_requests_total{code="500"}`) ||
		!strings.Contains(string(metrics), `storelink_upload_requests_total{code="503"} 1`) {
		t.Errorf("upload requests by code, want the one that waited the database timeout as 503 and none as 500:\n%s",
			grepLines(string(metrics), "storelink_upload_requests_total"))
	}

	start := time.Now()
	if err := p.Stop(); err != nil {
		t.Fatalf("SIGTERM with the database hanging: %v\n%s", err, p.stderr)
	}
	// The shutdown grace is 2s; the rest is bounded by short timeouts (the
	// deliverer's 3s, the lease release's 3s, closing the pool's 2s), which
	// add up to about 10s at worst: 20s leaves a loaded machine its slack
	// and still tells a stop that waits on the database (over a minute).
	took := time.Since(start)
	t.Logf("serve exited %s after SIGTERM", took)
	if took > 20*time.Second {
		t.Errorf("SIGTERM with the database hanging took %s to exit\n%s", took, p.stderr)
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestDatabaseTimeoutSparesSlowBody: serve with --database-timeout 1s takes
// an upload whose body arrives over more than twice that: the time a body
// takes to arrive is bounded by --body-timeout, not by the database
// timeout.
func TestDatabaseTimeoutSparesSlowBody(t *testing.T) {
	t.Parallel()
	p := startServe(t, t.TempDir(), "--demo", "--admin-token", pressureToken, "--database-timeout", "1s")
	feed := sizedFeed(400, 4)
	r, w := io.Pipe()
	go func() {
		// The last bytes go 2.4 s after the first.
		for i := 0; i < len(feed); i += 80 {
			if i > 0 {
				time.Sleep(600 * time.Millisecond)
			}
			if _, err := w.Write(feed[i:min(i+80, len(feed))]); err != nil {
				return
			}
		}
		w.Close()
	}()
	req, err := http.NewRequest(http.MethodPut, p.URL+"/stock/"+p.ClientID+"/slow.csv", r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", p.APIKey)
	req.ContentLength = int64(len(feed))
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if took := time.Since(start); resp.StatusCode != http.StatusOK || took < 2*time.Second {
		t.Fatalf("upload whose body took %s with a database timeout of 1s: %d %s", took, resp.StatusCode, body)
	}
}

// TestAdminTokenFileChecked: the admin token kept in <data>/admin-token is
// held to the rule of --admin-token. A file with a short token, one with
// white space inside, and an empty or blank one each stop serve with exit
// 2 and a message that names the file and says what to do, never repeating
// the token; nothing is served and the file is left as it was. A file with
// a good token serves with it.
func TestAdminTokenFileChecked(t *testing.T) {
	t.Parallel()
	bin := storelinkBinary(t)
	for _, c := range []struct {
		name, content, want string
	}{
		{name: "short", content: "q7Zx9\n", want: "must be at least 32 characters with no white space (it has 5 characters): delete the file to have one generated"},
		{name: "white space", content: "a token with spaces that is long enough\n", want: "must be at least 32 characters with no white space"},
		{name: "empty", content: "", want: "is empty: delete it to have a token generated, or write a token of at least 32 characters"},
		{name: "blank", content: " \n\t\n", want: "is empty: delete it to have a token generated"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			data := t.TempDir()
			file := filepath.Join(data, "admin-token")
			if err := os.WriteFile(file, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "serve", "--addr", "127.0.0.1:0", "--data", data)
			cmd.Env = append(os.Environ(), "STORELINK_ADMIN_TOKEN=")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != 2 {
				t.Fatalf("exit %d (%v), want 2\n%s\n%s", code, err, stdout.String(), stderr.String())
			}
			if !strings.Contains(stderr.String(), file) || !strings.Contains(stderr.String(), c.want) {
				t.Fatalf("stderr does not name %s and say %q:\n%s", file, c.want, stderr.String())
			}
			if tok := strings.TrimSpace(c.content); tok != "" && strings.Contains(stderr.String()+stdout.String(), tok) {
				t.Fatalf("the output repeats the token:\n%s\n%s", stdout.String(), stderr.String())
			}
			if strings.Contains(stdout.String(), "listening") {
				t.Fatalf("serve listened:\n%s", stdout.String())
			}
			if b, _ := os.ReadFile(file); string(b) != c.content {
				t.Fatalf("the file now holds %q", b)
			}
		})
	}
	t.Run("good", func(t *testing.T) {
		t.Parallel()
		data := t.TempDir()
		if err := os.WriteFile(filepath.Join(data, "admin-token"), []byte(pressureToken+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		p := startServe(t, data)
		if a := call(t, http.MethodPost, p.URL+"/admin/partners", pressureToken, "", []byte(`{"name":"File token"}`)); a.code != http.StatusCreated {
			t.Fatalf("operator call with the file's token: %d %v", a.code, a.body)
		}
	})
	// --admin-token-file: serve takes the token from the file, generates
	// none, and warns of nothing; --admin-token on the command line works
	// but warns, without the token, that ps shows it.
	t.Run("token file flag", func(t *testing.T) {
		t.Parallel()
		data, secrets := t.TempDir(), t.TempDir()
		file := filepath.Join(secrets, "token")
		if err := os.WriteFile(file, []byte(pressureToken+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		p := startServe(t, data, "--admin-token-file", file)
		if a := call(t, http.MethodPost, p.URL+"/admin/partners", pressureToken, "", []byte(`{"name":"File token"}`)); a.code != http.StatusCreated {
			t.Fatalf("operator call with the token file's token: %d %v", a.code, a.body)
		}
		if _, err := os.Stat(filepath.Join(data, "admin-token")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a token was generated into the data folder too: %v", err)
		}
		if strings.Contains(p.stderr.String(), "warning") || strings.Contains(p.stderr.String()+p.stdout.String(), pressureToken) {
			t.Errorf("serve warned or showed the token:\n%s\n%s", p.stdout, p.stderr)
		}
	})
	t.Run("token on the command line", func(t *testing.T) {
		t.Parallel()
		p := startServe(t, t.TempDir(), "--admin-token", pressureToken)
		if a := call(t, http.MethodPost, p.URL+"/admin/partners", pressureToken, "", []byte(`{"name":"Flag token"}`)); a.code != http.StatusCreated {
			t.Fatalf("operator call with the flag's token: %d %v", a.code, a.body)
		}
		if !strings.Contains(p.stderr.String(), "warning: the admin token given with --admin-token on the command line can be read by every user") ||
			strings.Contains(p.stderr.String()+p.stdout.String(), pressureToken) {
			t.Errorf("stderr does not warn of ps, or shows the token:\n%s\n%s", p.stdout, p.stderr)
		}
	})
}

// TestStaleSecretKeyPostgres: serve runs on PostgreSQL with key A when
// `storelink secret-key rotate` moves the database to key B. Its endpoint
// writes (register an endpoint, rotate a secret, set an endpoint's API key)
// answer 503 problem+json with a Retry-After, saying that the service's
// secret key is no longer the database's and that it must be restarted
// with the database's key, not 500; /readyz answers 503 with that reason.
// Nothing is logged as an internal error. A serve on key B is ready.
func TestStaleSecretKeyPostgres(t *testing.T) {
	t.Parallel()
	dbURL, _ := pgSchemaURL(t)
	keyA, keyB := newKeyHex(), newKeyHex()
	p := startServe(t, t.TempDir(), "--database", dbURL, "--secret-key", keyA, "--admin-token", pressureToken, "--demo")
	var client struct {
		Endpoints []struct {
			ID string `json:"endpoint_id"`
		} `json:"webhook_endpoints"`
	}
	a := call(t, http.MethodGet, p.URL+"/admin/clients/"+p.ClientID, pressureToken, "", nil)
	raw, _ := json.Marshal(a.body)
	if err := json.Unmarshal(raw, &client); err != nil || len(client.Endpoints) != 1 {
		t.Fatalf("demo client: %d %v", a.code, a.body)
	}
	ep := client.Endpoints[0].ID
	if r := call(t, http.MethodGet, p.URL+"/readyz", "", "", nil); r.code != http.StatusOK {
		t.Fatalf("/readyz before the rotation: %d %v", r.code, r.body)
	}

	code, out, stderr := runStorelink(t, nil, "secret-key", "rotate", "--database", dbURL, "--data", t.TempDir(),
		"--secret-key", keyA, "--new-key", keyB)
	if code != 0 {
		t.Fatalf("secret-key rotate = %d:\n%s%s", code, out, stderr)
	}
	fpA, fpB := fingerprintOf(t, keyA), fingerprintOf(t, keyB)
	says := func(what string, a answer) {
		t.Helper()
		wantProblem(t, what, a, http.StatusServiceUnavailable, "/problems/unavailable")
		if n, err := strconv.Atoi(a.h.Get("Retry-After")); err != nil || n < 1 {
			t.Errorf("%s: Retry-After %q, want whole seconds", what, a.h.Get("Retry-After"))
		}
		d, _ := a.body["detail"].(string)
		for _, want := range []string{"secret key", fpA, "no longer the database's", fpB, "restarted with the database's key"} {
			if !strings.Contains(d, want) {
				t.Errorf("%s: detail %q does not say %q", what, d, want)
			}
		}
	}
	says("register an endpoint on the old key", call(t, http.MethodPost, p.URL+"/admin/clients/"+p.ClientID+"/webhooks",
		pressureToken, "", []byte(`{"url":"http://127.0.0.1:9/late"}`)))
	says("rotate a secret on the old key", call(t, http.MethodPost, p.URL+"/admin/webhooks/"+ep+"/rotate-secret", pressureToken, "", nil))
	says("set an endpoint's API key on the old key", call(t, http.MethodPatch, p.URL+"/admin/webhooks/"+ep,
		pressureToken, "", []byte(`{"api_key":"partner-receiver-key-0123456789"}`)))
	ready := call(t, http.MethodGet, p.URL+"/readyz", "", "", nil)
	wantProblem(t, "/readyz on the old key", ready, http.StatusServiceUnavailable, "/problems/unavailable")
	if d, _ := ready.body["detail"].(string); !strings.Contains(d, "no longer the database's") || !strings.Contains(d, fpB) {
		t.Errorf("/readyz on the old key: detail %q does not give the reason", d)
	}
	if log := p.stderr.String(); strings.Contains(log, `"msg":"internal error"`) || strings.Contains(log, `"status":500`) {
		t.Errorf("the old key's refusals were internal errors:\n%s", log)
	}

	q := startServe(t, t.TempDir(), "--database", dbURL, "--secret-key", keyB, "--admin-token", pressureToken)
	if r := call(t, http.MethodGet, q.URL+"/readyz", "", "", nil); r.code != http.StatusOK {
		t.Fatalf("/readyz of a serve on the new key: %d %v", r.code, r.body)
	}
	if r := call(t, http.MethodPost, q.URL+"/admin/webhooks/"+ep+"/rotate-secret", pressureToken, "", nil); r.code != http.StatusOK {
		t.Fatalf("rotate a secret on the new key: %d %v", r.code, r.body)
	}
}

// TestSecretKeyFromVariableNamed: serve given its key by
// STORELINK_SECRET_KEY names the variable, not --secret-key, when it says
// where its key came from, and when it refuses a key that is not the
// database's; given by flag, it names the flag.
func TestSecretKeyFromVariableNamed(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	key := newKeyHex()
	p := startServeEnv(t, data, []string{"STORELINK_SECRET_KEY=" + key}, "--admin-token", pressureToken)
	if want := "secret key " + fingerprintOf(t, key) + " from STORELINK_SECRET_KEY"; !strings.Contains(p.stdout.String(), want) {
		t.Errorf("serve does not say %q:\n%s", want, p.stdout)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, p.stderr)
	}
	wrong := newKeyHex()
	code, _, stderr := runStorelink(t, []string{"STORELINK_SECRET_KEY=" + wrong}, "serve", "--addr", "127.0.0.1:0", "--data", data,
		"--admin-token", pressureToken)
	wantRefused(t, code, stderr, "STORELINK_SECRET_KEY", fingerprintOf(t, wrong))
	code, _, stderr = runStorelink(t, []string{"STORELINK_SECRET_KEY=" + key}, "serve", "--addr", "127.0.0.1:0", "--data", data,
		"--admin-token", pressureToken, "--secret-key", wrong)
	wantRefused(t, code, stderr, "--secret-key", fingerprintOf(t, wrong))
}
