package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"storelink/webhook"
)

// drillReceiver is a partner endpoint for the backup drill: until open is
// called it holds every request without answering (so that the deliveries
// of the serve being backed up stay pending), then it answers 204 and keeps
// the webhook-id of each request whose signature holds.
type drillReceiver struct {
	*httptest.Server
	key    []byte
	opened atomic.Bool
	hold   chan struct{}
	mu     sync.Mutex
	got    map[string]int
	bad    []string
}

func newDrillReceiver(t *testing.T, secret string) *drillReceiver {
	t.Helper()
	key, err := webhook.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	r := &drillReceiver{key: key, hold: make(chan struct{}), got: map[string]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !r.opened.Load() {
			select {
			case <-req.Context().Done():
			case <-r.hold:
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		body, _ := io.ReadAll(req.Body)
		id := req.Header.Get(webhook.HeaderID)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := webhook.Verify([][]byte{r.key}, req.Header, body, time.Now(), 5*time.Minute); err != nil {
			r.bad = append(r.bad, fmt.Sprintf("%s: %v", id, err))
		}
		r.got[id]++
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(func() { r.open(); r.Close() })
	return r
}

// open makes the receiver answer 204 from now on, and lets go of the
// requests it holds (with a 503).
func (r *drillReceiver) open() {
	if !r.opened.Swap(true) {
		close(r.hold)
	}
}

func (r *drillReceiver) received() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.got))
	for k, v := range r.got {
		out[k] = v
	}
	return out
}

// drillAck is something the serve being backed up acknowledged, and when
// its answer came.
type drillAck struct {
	kind, id, state string
	at              time.Time
}

// TestBackupDrill: a backup taken with `storelink backup` while uploads and
// orders stream into a running serve restores. The copy passes PRAGMA
// integrity_check; a new serve on it (with the secret key and admin token
// kept beside it) starts, holds every upload and order acknowledged before
// the backup began, in the state acknowledged, applies what was accepted,
// and delivers every pending event to a loopback receiver.
func TestBackupDrill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := startServe(t, filepath.Join(dir, "live"), "--demo", "--webhook-timeout", "30s", "--webhook-retry-schedule", "100ms,200ms,400ms,1s,1s,1s")
	rec := newDrillReceiver(t, p.WebhookSecret)
	pointDemoEndpoint(t, p, rec.URL+"/hooks/${eventId}")
	const ean = "4006381333931"
	stock := mustUpload(t, p, "stock.csv", []byte("store;ean;article_number;quantity;price\nS1;"+ean+";SKU-1;100000;19.99\n"))
	if u := p.waitUpload(t, stock, 10*time.Second); u["status"] != "applied" {
		t.Fatalf("stock upload: %v", u)
	}

	// Uploads and orders stream in from three callers until stop.
	var (
		mu   sync.Mutex
		acks []drillAck
		stop = make(chan struct{})
		wg   sync.WaitGroup
	)
	ack := func(a drillAck) {
		a.at = time.Now()
		mu.Lock()
		acks = append(acks, a)
		mu.Unlock()
	}
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	var ended atomic.Int32 // the streams that have ended
	wg.Go(func() {
		defer ended.Add(1)
		for i := 0; !stopped() && i < 2000; i++ {
			body := fmt.Sprintf("store;ean;article_number;quantity;price\nS2;%s;SKU-%d;%d;9.99\n", ean13(i), i, i%50)
			req, _ := http.NewRequest(http.MethodPut, p.URL+"/stock/"+p.ClientID+"/feed.csv", strings.NewReader(body))
			req.Header.Set("x-api-key", p.APIKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				id := strings.SplitN(strings.SplitN(string(b), `"upload_id":"`, 2)[1], `"`, 2)[0]
				ack(drillAck{kind: "upload", id: id})
			} else if resp.StatusCode != http.StatusTooManyRequests {
				t.Errorf("upload: %d %s", resp.StatusCode, b)
				return
			}
		}
	})
	for w := range 2 {
		wg.Go(func() {
			defer ended.Add(1)
			for i := 0; !stopped() && i < 1000; i++ {
				var o struct {
					ID string `json:"order_id"`
				}
				err := crashCall(p, "POST", "/orders", map[string]any{
					"order_number": fmt.Sprintf("DRILL-%d-%04d", w, i), "client_id": p.ClientID, "store_id": "S1",
					"items": []map[string]string{{"ean": ean, "marketplace_article_number": "MP-1"}},
				}, 201, &o)
				if err == nil {
					ack(drillAck{kind: "order", id: o.ID, state: "assigned"})
					err = crashCall(p, "POST", "/orders/"+o.ID+"/fulfil", map[string]any{}, 200, nil)
				}
				if err != nil {
					t.Error(err)
					return
				}
				ack(drillAck{kind: "order", id: o.ID, state: "fulfilled"})
			}
		})
	}

	// acked reports whether each of kinds was acknowledged after since, or
	// a stream has ended.
	acked := func(since time.Time, kinds ...string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			seen := map[string]bool{}
			for _, a := range acks {
				if a.at.After(since) {
					seen[a.kind] = true
				}
			}
			for _, k := range kinds {
				if !seen[k] {
					return ended.Load() > 0
				}
			}
			return true
		}
	}

	// The backup, as a separate process, once the streams are going.
	waitUntil(t, 10*time.Second, "an upload and an order acknowledged", acked(time.Time{}, "upload", "order"))
	backupFile := filepath.Join(dir, "backup.db")
	began := time.Now()
	out, err := exec.Command(storelinkBinary(t), "backup", "--data", p.Data, "--to", backupFile).CombinedOutput()
	done := time.Now()
	waitUntil(t, 10*time.Second, "an upload and an order acknowledged after the backup", acked(done, "upload", "order"))
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("storelink backup: %v\n%s", err, out)
	}
	if t.Failed() {
		return
	}
	t.Logf("backup took %s: %s", done.Sub(began).Round(time.Millisecond), out)
	var before, during int
	for _, a := range acks {
		switch {
		case a.at.Before(began):
			before++
		case a.at.Before(done):
			during++
		}
	}
	if before == 0 || len(acks) == before {
		t.Fatalf("%d acknowledgements before the backup began and %d after: the streams did not run across it", before, len(acks)-before)
	}
	t.Logf("%d acknowledgements before the backup began, %d while it ran, %d after", before, during, len(acks)-before-during)
	if st, err := os.Stat(backupFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the backup file: %v, mode %v; want 0600", err, st.Mode())
	}
	if !strings.Contains(string(out), "keep the secret key of fingerprint") || !strings.Contains(string(out), filepath.Join(p.Data, "secret-key")) {
		t.Errorf("backup does not remind of the secret key and where it is:\n%s", out)
	}
	if key, _ := os.ReadFile(filepath.Join(p.Data, "secret-key")); len(key) < 64 || bytes.Contains(out, bytes.TrimSpace(key)) {
		t.Errorf("backup printed the secret key, or there is none: %s", out)
	}
	integrityCheck(t, backupFile)

	// The restore: the copy and the key and token kept beside it, in a new
	// data folder; the original stops for good.
	p.Kill()
	restored := filepath.Join(dir, "restored")
	if err := os.Mkdir(restored, 0o700); err != nil {
		t.Fatal(err)
	}
	for from, to := range map[string]string{backupFile: "storelink.db", filepath.Join(p.Data, "secret-key"): "secret-key",
		filepath.Join(p.Data, "admin-token"): "admin-token"} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(restored, to), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rec.open()
	q := startServe(t, restored, "--webhook-allow-private", "--webhook-retry-schedule", "100ms,200ms,400ms,1s,1s,1s")
	q.ClientID, q.APIKey, q.PartnerID = p.ClientID, p.APIKey, p.PartnerID
	if !strings.Contains(q.stdout.String(), "secret key") || q.AdminToken != p.AdminToken {
		t.Fatalf("restored serve: %s", q.stdout)
	}
	if code := run(context.Background(), []string{"probe", q.URL + "/readyz"}, noEnv, nil, io.Discard, io.Discard); code != 0 {
		t.Errorf("storelink probe %s/readyz = %d, want 0", q.URL, code)
	}
	checkRestored(t, q, acks, began, rec)
}

// integrityCheck runs PRAGMA integrity_check on a database file.
func integrityCheck(t *testing.T, file string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+file+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var result string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&result); err != nil || result != "ok" {
		t.Fatalf("PRAGMA integrity_check of %s = %q, %v", file, result, err)
	}
}

// checkRestored checks the serve on the copy against what was acknowledged
// before the backup began, then waits for it to apply the uploads and
// deliver every event of the copy to the receiver.
func checkRestored(t *testing.T, q *proc, acks []drillAck, began time.Time, rec *drillReceiver) {
	t.Helper()
	wantOrders := map[string]string{}
	var uploads []string
	for _, a := range acks {
		if !a.at.Before(began) {
			continue
		}
		if a.kind == "upload" {
			uploads = append(uploads, a.id)
		} else if wantOrders[a.id] != "fulfilled" {
			wantOrders[a.id] = a.state
		}
	}
	for id, state := range wantOrders {
		var o struct {
			State string `json:"state"`
		}
		crashAdmin(t, q, "GET", "/orders/"+id, nil, 200, &o)
		if o.State != state && !(state == "assigned" && o.State == "fulfilled") {
			t.Errorf("order %s is %q in the restored database; %q was acknowledged before the backup", id, o.State, state)
		}
	}
	for _, id := range uploads {
		if u := q.waitUpload(t, id, 10*time.Second); u["status"] != "applied" {
			t.Errorf("upload %s acknowledged before the backup: %v", id, u)
		}
	}
	// Each order acknowledged before the backup has its assigned event, and
	// its fulfilled one when that too was acknowledged before.
	wantEvents := 0
	for _, state := range wantOrders {
		wantEvents++
		if state == "fulfilled" {
			wantEvents++
		}
	}
	events := crashEventIDs(t, q)
	if len(events) < wantEvents {
		t.Fatalf("the restored database has %d events for %d orders, want at least the %d acknowledged before the backup", len(events), len(wantOrders), wantEvents)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := rec.received()
		missing := 0
		for _, id := range events {
			if got[id] == 0 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events of the restored database not delivered after 10s", missing, len(events))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// An attempt's success is recorded a moment after its 2xx arrived.
	waitUntil(t, 10*time.Second, "every delivery recorded done once every event arrived", func() bool {
		return len(crashDeliveries(t, q, "pending")) == 0
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.bad) > 0 {
		t.Errorf("%d deliveries not signed with the endpoint's secret, e.g. %s", len(rec.bad), rec.bad[0])
	}
	t.Logf("restored: %d orders and %d uploads acknowledged before the backup found; %d events delivered", len(wantOrders), len(uploads), len(events))
}

// TestBackupRefuses: backup says what is wrong and writes nothing: a
// PostgreSQL URL (pg_dump, what to keep beside it, never the password), a
// file that exists, no database, a file that is not storelink's.
func TestBackupRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exists := filepath.Join(dir, "exists.db")
	if err := os.WriteFile(exists, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", "file:"+other)
	if err == nil {
		_, err = db.Exec(`CREATE TABLE t (x)`)
		db.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"postgres", []string{"--database", "postgres://sl:hunter2@127.0.0.1:5432/sl", "--to", filepath.Join(dir, "pg.db")}, 2,
			[]string{"pg_dump", "postgres://sl:xxxxx@127.0.0.1:5432/sl", "secret key", "STORELINK_SECRET_KEY", "admin token"}},
		{"no --to", []string{"--data", dir}, 2, []string{"--to FILE"}},
		{"exists", []string{"--database", "sqlite:" + other, "--to", exists}, 1, []string{exists + " exists"}},
		{"no database", []string{"--data", filepath.Join(dir, "none"), "--to", filepath.Join(dir, "b1.db")}, 1, []string{"no database file at"}},
		{"not storelink's", []string{"--database", "sqlite:" + other, "--to", filepath.Join(dir, "b2.db")}, 1, []string{"is not a storelink database"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append([]string{"backup"}, c.args...), noEnv, nil, &stdout, &stderr)
			if code != c.code {
				t.Errorf("exit %d, want %d: %s%s", code, c.code, stdout.String(), stderr.String())
			}
			for _, w := range c.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q: %s", w, stderr.String())
				}
			}
			if strings.Contains(stderr.String(), "hunter2") {
				t.Errorf("the password is shown: %s", stderr.String())
			}
		})
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("the refused backups left files: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(dir, "none")); err == nil {
		t.Errorf("backup created a data folder for a database that is not there")
	}
}
