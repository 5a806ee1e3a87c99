package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"storelink"
	"storelink/internal/dbtest"
	"storelink/sqlite"
	"storelink/webhook"
)

// The secret key (issue 13, finding 2): a serve given another key than the
// one the database's secrets are sealed with refuses to start (exit 2),
// saying which key and what to do; `storelink secret-key rotate` moves the
// database to a new key; an endpoint whose secret cannot be opened fails
// alone.

// runStorelink runs the storelink binary with args until it exits (at most
// 30 s) and returns its exit code and output. Serve is started on
// 127.0.0.1:0; the variables that would give it a key or a token are unset.
func runStorelink(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, storelinkBinary(t), args...)
	cmd.Env = append(os.Environ(), append([]string{"STORELINK_ADMIN_TOKEN=", "STORELINK_SECRET_KEY=", "STORELINK_DATABASE_URL="}, env...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("storelink %v still running after 30 s:\n%s%s", args, out.String(), errb.String())
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String(), errb.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}

// newKeyHex returns a fresh key as --secret-key takes it.
func newKeyHex() string {
	b := make([]byte, storelink.SealKeySize)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// fingerprintOf is the fingerprint of a key in hex.
func fingerprintOf(t *testing.T, hexKey string) string {
	t.Helper()
	key, err := hex.DecodeString(strings.TrimSpace(hexKey))
	if err != nil {
		t.Fatal(err)
	}
	s, err := storelink.NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	return s.Fingerprint()
}

func readKeyFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// wantRefused checks that serve exited 2 with a message naming the key's
// source and both fingerprints, and saying what to do.
func wantRefused(t *testing.T, code int, stderr string, says ...string) {
	t.Helper()
	if code != 2 {
		t.Fatalf("serve exited %d, want 2:\n%s", code, stderr)
	}
	for _, s := range says {
		if !strings.Contains(stderr, s) {
			t.Fatalf("serve's message does not say %q:\n%s", s, stderr)
		}
	}
}

// signedReceiver is a webhook endpoint that checks each request's signature
// with its secret and counts those that verify, by event id.
type signedReceiver struct {
	*httptest.Server
	mu   sync.Mutex
	keys [][]byte
	good map[string]int
	bad  []string
}

func newSignedReceiver(t *testing.T) *signedReceiver {
	t.Helper()
	r := &signedReceiver{good: map[string]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := webhook.Verify(r.keys, req.Header, body, time.Now(), 5*time.Minute); err != nil {
			r.bad = append(r.bad, fmt.Sprintf("%s: %v", req.Header.Get(webhook.HeaderID), err))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		r.good[req.Header.Get(webhook.HeaderID)]++
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *signedReceiver) setSecret(t *testing.T, secret string) {
	t.Helper()
	key, err := webhook.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.keys = [][]byte{key}
	r.mu.Unlock()
}

func (r *signedReceiver) counts() (good int, bad []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.good {
		n += c
	}
	return n, append([]string(nil), r.bad...)
}

// waitSigned waits until the receiver got want correctly signed events.
func (r *signedReceiver) waitSigned(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		good, bad := r.counts()
		if len(bad) > 0 {
			t.Fatalf("requests whose signature does not verify: %v", bad)
		}
		if good >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d correctly signed events arrived in 20 s, want %d", good, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// secretOrder places an order of one unit at store S1.
func secretOrder(t *testing.T, p *proc, number string) {
	t.Helper()
	crashAdmin(t, p, "POST", "/orders", map[string]any{
		"order_number": number, "client_id": p.ClientID, "store_id": "S1",
		"items": []map[string]string{{"ean": "4006381333931", "marketplace_article_number": "MP-1"}},
	}, 201, nil)
}

type secretDelivery struct {
	ID         string `json:"delivery_id"`
	EndpointID string `json:"endpoint_id"`
	State      string `json:"state"`
	Attempts   []struct {
		Number     int    `json:"number"`
		StatusCode int    `json:"status_code"`
		Error      string `json:"error"`
	} `json:"attempts"`
}

func secretDeliveries(t *testing.T, p *proc) []secretDelivery {
	t.Helper()
	var page struct {
		Deliveries []secretDelivery `json:"deliveries"`
	}
	crashAdmin(t, p, "GET", "/admin/deliveries?limit=500&client_id="+p.ClientID, nil, 200, &page)
	return page.Deliveries
}

// TestSecretKeySQLite: on SQLite, serve generates a key into the data
// folder; started again with another key, by flag or variable, it refuses
// (exit 2) and says which key and what to do. `storelink secret-key rotate`
// moves the database to a new key, written where the old one was, without
// printing it; serve starts with it, refuses the old one, and an endpoint
// registered before still gets correctly signed events. An endpoint whose
// stored secret cannot be opened then fails alone, with the reason recorded
// on its delivery, while the other endpoint's events go out; and a rotation
// refuses to go on, naming it.
func TestSecretKeySQLite(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	good, other := newSignedReceiver(t), newSignedReceiver(t)
	p := startServe(t, data, "--demo")
	keyFile := filepath.Join(data, "secret-key")
	firstKey := readKeyFile(t, keyFile)
	firstFP := fingerprintOf(t, firstKey)
	if !strings.Contains(p.stdout.String(), "secret key "+firstFP) {
		t.Fatalf("serve does not name its key's fingerprint %s:\n%s", firstFP, p.stdout)
	}
	good.setSecret(t, p.WebhookSecret)
	pointDemoEndpoint(t, p, good.URL+"/hooks")
	var second struct {
		ID     string `json:"endpoint_id"`
		Secret string `json:"secret"`
	}
	crashAdmin(t, p, "POST", "/admin/clients/"+p.ClientID+"/webhooks", map[string]any{"url": other.URL + "/other"}, 201, &second)
	other.setSecret(t, second.Secret)
	id := mustUpload(t, p, "stock.csv", []byte("store;ean;article_number;quantity;price\nS1;4006381333931;SKU-1;1000;19.99\n"))
	if u := p.waitUpload(t, id, 10*time.Second); u["status"] != "applied" {
		t.Fatalf("stock upload: %v", u)
	}
	secretOrder(t, p, "SK-1")
	good.waitSigned(t, 1)
	other.waitSigned(t, 1)
	if err := p.Stop(); err != nil {
		t.Fatalf("serve stopped with %v", err)
	}

	// Another key, by flag and by variable: refused.
	wrong := newKeyHex()
	code, _, stderr := runStorelink(t, nil, "serve", "--addr", "127.0.0.1:0", "--data", data, "--secret-key", wrong)
	wantRefused(t, code, stderr, "--secret-key", fingerprintOf(t, wrong), firstFP, "secret-key rotate")
	code, _, stderr = runStorelink(t, []string{"STORELINK_SECRET_KEY=" + wrong}, "serve", "--addr", "127.0.0.1:0", "--data", data)
	wantRefused(t, code, stderr, "STORELINK_SECRET_KEY", fingerprintOf(t, wrong), firstFP)
	if strings.Contains(stderr, wrong) || strings.Contains(stderr, firstKey) {
		t.Fatalf("serve printed a key:\n%s", stderr)
	}

	// Rotated: the new key replaces the old in the file, and is not printed.
	code, out, stderr := runStorelink(t, nil, "secret-key", "rotate", "--data", data)
	newKey := readKeyFile(t, keyFile)
	newFP := fingerprintOf(t, newKey)
	if code != 0 || newKey == firstKey || !strings.Contains(out, newFP) || !strings.Contains(out, keyFile) {
		t.Fatalf("secret-key rotate = %d, key file changed %v:\n%s%s", code, newKey != firstKey, out, stderr)
	}
	if strings.Contains(out+stderr, newKey) || strings.Contains(out+stderr, firstKey) {
		t.Fatalf("secret-key rotate printed a key:\n%s%s", out, stderr)
	}
	if old := readKeyFile(t, filepath.Join(data, "secret-key."+firstFP+".old")); old != firstKey {
		t.Fatal("the old key is not kept beside the new one")
	}
	code, _, stderr = runStorelink(t, nil, "serve", "--addr", "127.0.0.1:0", "--data", data, "--secret-key", firstKey)
	wantRefused(t, code, stderr, firstFP, newFP)

	p2 := startServe(t, data, "--webhook-allow-private")
	p2.ClientID, p2.APIKey = p.ClientID, p.APIKey
	secretOrder(t, p2, "SK-2")
	good.waitSigned(t, 2)
	other.waitSigned(t, 2)
	if err := p2.Stop(); err != nil {
		t.Fatalf("serve stopped with %v", err)
	}

	// The second endpoint's secret sealed with some other key, as a process
	// with another key would have left it.
	db, err := sqlite.Open(context.Background(), filepath.Join(data, "storelink.db"))
	if err != nil {
		t.Fatal(err)
	}
	stranger, _ := storelink.NewSealer(make([]byte, storelink.SealKeySize))
	err = dbtest.OnSQLite(db).Exec(context.Background(), `UPDATE endpoints SET secret = '`+stranger.Seal(second.Secret)+`' WHERE id = '`+second.ID+`'`)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	code, out, stderr = runStorelink(t, nil, "secret-key", "rotate", "--data", data)
	if code != 1 || !strings.Contains(stderr, second.ID) || readKeyFile(t, keyFile) != newKey {
		t.Fatalf("rotate with an unopenable secret = %d, want 1 naming endpoint %s and the key file unchanged:\n%s%s", code, second.ID, out, stderr)
	}

	p3 := startServe(t, data, "--webhook-allow-private")
	p3.ClientID, p3.APIKey = p.ClientID, p.APIKey
	secretOrder(t, p3, "SK-3")
	good.waitSigned(t, 3)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var failed *secretDelivery
		ds := secretDeliveries(t, p3)
		for i, d := range ds {
			if d.EndpointID == second.ID && d.State != "succeeded" && len(d.Attempts) > 0 {
				failed = &ds[i]
			}
		}
		if failed != nil {
			a := failed.Attempts[0]
			if len(failed.Attempts) != 1 || failed.State != "pending" || a.Number != 1 || a.StatusCode != 0 ||
				!strings.Contains(a.Error, "cannot be opened") {
				t.Fatalf("the unopenable endpoint's delivery = %+v, want pending with one attempt saying why", *failed)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no attempt recorded for endpoint %s in 20 s: %+v", second.ID, ds)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n, bad := other.counts(); n != 2 || len(bad) > 0 {
		t.Fatalf("the endpoint whose secret cannot be opened got %d correctly signed events and %v, want the 2 from before", n, bad)
	}
}

// TestSecretKeyPostgres: on one PostgreSQL database, a second serve with no
// key (which would generate its own) or with another key refuses to start
// (exit 2) and leaves no key behind; one with the same key starts. After
// `storelink secret-key rotate` while they run, the processes on the old
// key claim nothing (the event waits, no attempt counted) and seal nothing;
// a serve on the new key delivers the event, correctly signed, as its first
// attempt.
func TestSecretKeyPostgres(t *testing.T) {
	dbURL, _ := pgSchemaURL(t)
	rec := newSignedReceiver(t)
	dataA := t.TempDir()
	a := startServe(t, dataA, "--database", dbURL, "--demo")
	keyA := readKeyFile(t, filepath.Join(dataA, "secret-key"))
	fpA := fingerprintOf(t, keyA)
	rec.setSecret(t, a.WebhookSecret)
	pointDemoEndpoint(t, a, rec.URL+"/hooks")
	id := mustUpload(t, a, "stock.csv", []byte("store;ean;article_number;quantity;price\nS1;4006381333931;SKU-1;1000;19.99\n"))
	if u := a.waitUpload(t, id, 10*time.Second); u["status"] != "applied" {
		t.Fatalf("stock upload: %v", u)
	}

	fresh := t.TempDir()
	code, _, stderr := runStorelink(t, nil, "serve", "--addr", "127.0.0.1:0", "--data", fresh, "--database", dbURL)
	wantRefused(t, code, stderr, "no secret key", filepath.Join(fresh, "secret-key"), fpA)
	if _, err := os.Stat(filepath.Join(fresh, "secret-key")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused serve left a key in its data folder: %v", err)
	}
	wrong := newKeyHex()
	code, _, stderr = runStorelink(t, nil, "serve", "--addr", "127.0.0.1:0", "--data", fresh, "--database", dbURL, "--secret-key", wrong)
	wantRefused(t, code, stderr, "--secret-key", fingerprintOf(t, wrong), fpA)
	b := startServe(t, t.TempDir(), "--database", dbURL, "--secret-key", keyA, "--webhook-allow-private")
	b.ClientID, b.APIKey = a.ClientID, a.APIKey
	secretOrder(t, b, "PG-1")
	rec.waitSigned(t, 1)

	// Rotated while both run: neither claims nor seals with the old key.
	newKey := newKeyHex()
	code, out, stderr := runStorelink(t, nil, "secret-key", "rotate", "--database", dbURL, "--data", t.TempDir(), "--secret-key", keyA, "--new-key", newKey)
	if code != 0 || !strings.Contains(out, fingerprintOf(t, newKey)) || strings.Contains(out+stderr, newKey) {
		t.Fatalf("secret-key rotate = %d:\n%s%s", code, out, stderr)
	}
	secretOrder(t, a, "PG-2")
	if err := crashCall(a, "POST", "/admin/clients/"+a.ClientID+"/webhooks", map[string]any{"url": rec.URL + "/late"}, 503, nil); err != nil {
		t.Fatalf("registering an endpoint on the old key: %v", err)
	}
	time.Sleep(2 * time.Second) // both deliverers poll every second
	if n, _ := rec.counts(); n != 1 {
		t.Fatalf("%d events arrived with the old key after the rotation, want only the one from before", n)
	}
	for _, d := range secretDeliveries(t, a) {
		if d.State == "pending" && len(d.Attempts) > 0 {
			t.Fatalf("a pending delivery has attempts no process made: %+v", d)
		}
	}
	c := startServe(t, t.TempDir(), "--database", dbURL, "--secret-key", newKey, "--webhook-allow-private")
	c.ClientID, c.APIKey = a.ClientID, a.APIKey
	rec.waitSigned(t, 2)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ds := secretDeliveries(t, c)
		done := len(ds) == 2
		for _, d := range ds {
			done = done && d.State == "succeeded" && len(d.Attempts) == 1 && d.Attempts[0].Number == 1
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries %+v, want both succeeded at their first attempt", ds)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
