package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The tests of this file cover faults (issue 13) through real serve
// processes: an upload that was accepted is applied in the end, however
// often the database goes away while it is being applied.

// serveThroughProxy starts serve on a PostgreSQL test schema reached
// through a pgProxy the test can cut, and returns the process, the proxy
// and the schema's direct URL (for the test's own connections, which the
// proxy never cuts).
func serveThroughProxy(t *testing.T, args ...string) (*proc, *pgProxy, string) {
	t.Helper()
	dbURL, _ := pgSchemaURL(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	if h := u.Hostname(); h != "127.0.0.1" && h != "localhost" && h != "::1" {
		t.Skipf("STORELINK_TEST_DATABASE_URL is on %s, not loopback: the proxy test only dials loopback", h)
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	proxy := startProxy(t, net.JoinHostPort(u.Hostname(), port))
	u.Host = proxy.ln.Addr().String()
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	p := startServe(t, t.TempDir(), append([]string{"--database", u.String(), "--admin-token", pressureToken,
		"--secret-key", pgTestKey, "--demo"}, args...)...)
	return p, proxy, dbURL
}

// lockWaiters waits until a backend waits for the lock on the stock table
// (an apply writing its rows) and returns their process ids.
func lockWaiters(t *testing.T, conn *pgx.Conn) []int32 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var pids []int32
		err := conn.QueryRow(context.Background(),
			`SELECT coalesce(array_agg(pid), '{}') FROM pg_locks WHERE NOT granted AND relation = 'stock'::regclass`).Scan(&pids)
		if err != nil {
			t.Fatal(err)
		}
		if len(pids) > 0 {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatal("no apply waits for the stock table within 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFaultDuringApplyLosesNoUpload: serve on PostgreSQL with
// --upload-lease 1s. Two uploads are accepted while the test holds the
// stock table locked, so the first one's apply waits. Three times the
// database goes away under that apply (the proxy is cut and the waiting
// backend ended, as a restart of the database would), the last time for
// longer than four leases. Each upload is claimed at least four times, one
// more than an upload that keeps failing is allowed, yet both end applied,
// none set aside as "Processing failed"; the log names the fault as a
// warning.
func TestFaultDuringApplyLosesNoUpload(t *testing.T) {
	t.Parallel()
	p, proxy, dbURL := serveThroughProxy(t, "--upload-lease", "1s")
	ctx := context.Background()
	stall := pgConn(t, dbURL)
	if _, err := stall.Exec(ctx, `BEGIN; LOCK TABLE stock IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	watch := pgConn(t, dbURL)
	ids := []string{mustUpload(t, p, "first.csv", sizedFeed(200, 1)), mustUpload(t, p, "second.csv", sizedFeed(200, 2))}

	for i, outage := range []time.Duration{200 * time.Millisecond, 200 * time.Millisecond, 4500 * time.Millisecond} {
		pids := lockWaiters(t, watch)
		proxy.setCut(true)
		// The server notices a closed connection only when it next reads
		// from it, which a backend waiting for a lock does not do: it is
		// ended, as a restart of the database ends it.
		if _, err := watch.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) pid`, pids); err != nil {
			t.Fatal(err)
		}
		time.Sleep(outage) // the database stays away meanwhile
		proxy.setCut(false)
		t.Logf("outage %d of %s over", i+1, outage)
	}
	if _, err := stall.Exec(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if u := p.waitUpload(t, id, 40*time.Second); u["status"] != "applied" || u["rows_applied"] != float64(1) {
			t.Fatalf("upload %s after the outages = %v, want applied with its row\n%s", id, u, p.stderr)
		}
	}
	log := p.stderr.String()
	if !strings.Contains(log, `"level":"WARN","msg":"process upload: paused by a fault","code":"unavailable"`) {
		t.Errorf("the log has no warning naming the fault:\n%s", log)
	}
	if strings.Contains(log, "upload given up") {
		t.Errorf("an upload was given up:\n%s", log)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, p.stderr)
	}
}

// TestUploaderWaitsOutUnreachableDatabase: `storelink upload --wait`
// against serve on a PostgreSQL that cannot be reached gets 503 with a
// Retry-After, waits it out, sends again once the database is back, and
// ends with the upload applied (exit 0).
func TestUploaderWaitsOutUnreachableDatabase(t *testing.T) {
	t.Parallel()
	p, proxy, _ := serveThroughProxy(t)
	file := writeFile(t, "stock.csv", string(sizedFeed(200, 3)))
	proxy.setCut(true)
	done := make(chan uploadRun, 1)
	go func() { done <- runUpload(t, nil, append(credentials(p), "--wait", file)...) }()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(p.stderr.String(), `"method":"PUT","path":"/stock/`+p.ClientID+`/stock.csv","status":503`) {
		if time.Now().After(deadline) {
			t.Fatalf("no 503 for the upload within 20s:\n%s", p.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	proxy.setCut(false)
	r := <-done
	if r.code != 0 || !strings.HasPrefix(r.stdout, "stock.csv: applied") || !strings.Contains(r.stderr, "service unavailable; retrying in ") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and the upload applied after waiting", r.code, r.stdout, r.stderr)
	}
}

// TestUploaderStopsOnFullDisk: serve's --data on a small tmpfs that the
// test fills; `storelink upload` gets 507 and stops at once with exit 2,
// saying nothing was stored.
func TestUploaderStopsOnFullDisk(t *testing.T) {
	dir := smallDisk(t)
	p := startServe(t, filepath.Join(dir, "data"), "--demo", "--admin-token", pressureToken)
	file := writeFile(t, "large.csv", string(bigFeed(90000, 0, 7).body)) // more than the database's log keeps (journal_size_limit, 4 MiB)
	// serve's first writes (the demo partner) end in a checkpoint that may
	// cut the log back and free space after the disk is filled: fill it
	// once the log has stopped changing.
	waitStill(t, filepath.Join(dir, "data", "storelink.db-wal"))
	fill(t, filepath.Join(dir, "filler"))
	r := runUpload(t, nil, append(credentials(p), "--wait", file)...)
	if r.code != 2 || !strings.Contains(r.stderr, "507") || !strings.Contains(r.stderr, "nothing was stored") || strings.Contains(r.stderr, "retrying") {
		t.Fatalf("exit %d, stderr %q; want 2 at once, the 507 named and that nothing was stored", r.code, r.stderr)
	}
	// The request's log line is written just after its answer: wait for
	// it. The uploader has exited, so no later PUT can come.
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(p.stderr.String(), `"msg":"request","method":"PUT"`) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := strings.Count(p.stderr.String(), `"msg":"request","method":"PUT"`); n != 1 {
		t.Fatalf("serve logged %d PUTs, want the one:\n%s", n, p.stderr)
	}
}

// TestDashboardDatabaseUnreachable: the dashboard of serve on a PostgreSQL
// that cannot be reached answers its pages, its actions and its login with
// 503, a Retry-After and a page saying the database cannot be reached, not
// a 500 or a login form that cannot work; once the database is back, so is
// the dashboard, without a new login.
func TestDashboardDatabaseUnreachable(t *testing.T) {
	t.Parallel()
	p, proxy, _ := serveThroughProxy(t)
	newBrowser := func() *http.Client {
		jar, _ := cookiejar.New(nil)
		return &http.Client{Jar: jar, Timeout: 30 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	send := func(c *http.Client, method, path string, form url.Values) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, p.URL+path, strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		if method == http.MethodPost {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	login := url.Values{"token": {pressureToken}, "next": {"/dashboard/"}}
	b := newBrowser()
	if resp, body := send(b, http.MethodPost, "/dashboard/login", login); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d %s", resp.StatusCode, body)
	}
	resp, body := send(b, http.MethodGet, "/dashboard/", nil)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("overview: %d, CSRF token found: %v", resp.StatusCode, m != nil)
	}

	proxy.setCut(true)
	for _, r := range []struct {
		what         string
		c            *http.Client
		method, path string
		form         url.Values
	}{
		{"a page", b, http.MethodGet, "/dashboard/", nil},
		{"an action", b, http.MethodPost, "/dashboard/endpoints/e1/enabled", url.Values{"csrf": {m[1]}, "enabled": {"true"}}},
		{"a login", newBrowser(), http.MethodPost, "/dashboard/login", login},
	} {
		resp, body := send(r.c, r.method, r.path, r.form)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "5" ||
			!strings.Contains(body, "The database cannot be reached. Retry after 5 seconds.") {
			t.Errorf("%s with the database cut off: %d, Retry-After %q:\n%s\nwant 503 with Retry-After 5 saying the database cannot be reached",
				r.what, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}

	proxy.setCut(false)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, body := send(b, http.MethodGet, "/dashboard/", nil)
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("overview after the database is back: %d %s", resp.StatusCode, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitStill waits, up to 10 s, until the size and time of the file at name
// have not changed for half a second.
func waitStill(t *testing.T, name string) {
	t.Helper()
	var last os.FileInfo
	since := time.Now()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		fi, err := os.Stat(name)
		if err != nil {
			since = time.Now()
			continue
		}
		if last == nil || fi.Size() != last.Size() || !fi.ModTime().Equal(last.ModTime()) {
			last, since = fi, time.Now()
			continue
		}
		if time.Since(since) >= 500*time.Millisecond {
			return
		}
	}
}
