package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The tests of this file cover backpressure and faults (issue 13, points 5
// and 6) through real serve processes: a client with too many uploads
// waiting gets 429 while others do not, on two processes sharing one
// PostgreSQL; a full disk answers 507, makes /readyz 503 and heals without a
// restart; a PostgreSQL that cannot be reached answers 503 with Retry-After.

// pressureToken is the operator token of this file's processes (at least
// 32 characters, no white space).
const pressureToken = "pressure-test-admin-token-0123456789abcdef"

// answer is an HTTP answer: status, headers and the decoded JSON body.
type answer struct {
	code int
	h    http.Header
	body map[string]any
}

// call sends a request and decodes the answer; token is the operator token
// or, for partner calls, the API key (sent as x-api-key).
func call(tb testing.TB, method, url, token, apiKey string, body []byte) answer {
	tb.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
		if len(body) > 0 {
			req.Header.Set("Content-Type", "application/json")
		}
	}
	if apiKey != "" {
		req.Header.Set("x-api-key", apiKey)
		req.Header.Set("Content-Type", "application/csv")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{code: resp.StatusCode, h: resp.Header}
	if len(b) > 0 && json.Unmarshal(b, &a.body) != nil {
		tb.Fatalf("%s %s: %d, not JSON: %s", method, url, resp.StatusCode, b)
	}
	return a
}

// wantProblem checks that a is a problem+json answer of the status and type.
func wantProblem(tb testing.TB, what string, a answer, status int, typ string) {
	tb.Helper()
	if a.code != status || a.h.Get("Content-Type") != "application/problem+json" || a.body["type"] != typ {
		tb.Fatalf("%s: %d %s %v, want %d problem+json of type %s", what, a.code, a.h.Get("Content-Type"), a.body, status, typ)
	}
}

// uploadTo PUTs a stock file for the client with the key.
func uploadTo(tb testing.TB, p *proc, clientID, apiKey, name string, body []byte) answer {
	tb.Helper()
	return call(tb, http.MethodPut, p.URL+"/stock/"+clientID+"/"+name, "", apiKey, body)
}

// TestBackpressureWaitingUploads: with --max-waiting-uploads 2 on two serve
// processes sharing one PostgreSQL database, a client whose two uploads wait
// gets 429 of type too_many_waiting from either process, with a Retry-After
// and a detail saying how many wait, and nothing is stored; another client's
// upload is accepted meanwhile; /metrics of both shows the uploads waiting
// and the age of the oldest; once processing goes on, the client's uploads
// are accepted again.
//
// To make "waiting" certain, the test holds an EXCLUSIVE lock on the stock
// table: the processors can claim an upload but not write its rows, while
// accepting (which never touches stock) goes on. The client's first upload
// is then stuck in processing and its later ones wait behind it.
func TestBackpressureWaitingUploads(t *testing.T) {
	t.Parallel()
	dbURL, _ := pgSchemaURL(t)
	args := []string{"--database", dbURL, "--admin-token", pressureToken, "--secret-key", pgTestKey, "--max-waiting-uploads", "2"}
	a := startServe(t, t.TempDir(), append(args, "--demo")...)
	b := startServe(t, t.TempDir(), args...)
	procs := []*proc{a, b}
	other := newClient(t, a, "Other Partner")

	ctx := context.Background()
	stall := pgConn(t, dbURL)
	if _, err := stall.Exec(ctx, `BEGIN; LOCK TABLE stock IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			if _, err := stall.Exec(ctx, `ROLLBACK`); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer release()

	feed := func(i int) []byte { return sizedFeed(200, i) }
	first := uploadTo(t, a, a.ClientID, a.APIKey, "first.csv", feed(0))
	if first.code != http.StatusOK {
		t.Fatalf("first upload: %d %v", first.code, first.body)
	}
	if !waitProcessing(t, a, first.body["upload_id"].(string)) {
		t.Fatal("the first upload was finished although the stock table is locked")
	}
	var accepted []string
	for i, p := range procs { // one waiting upload through each process
		u := uploadTo(t, p, a.ClientID, a.APIKey, fmt.Sprintf("wait-%d.csv", i), feed(i+1))
		if u.code != http.StatusOK {
			t.Fatalf("upload %d while one waits: %d %v", i+1, u.code, u.body)
		}
		accepted = append(accepted, u.body["upload_id"].(string))
	}
	for i, p := range procs {
		u := uploadTo(t, p, a.ClientID, a.APIKey, "over.csv", feed(10+i))
		wantProblem(t, fmt.Sprintf("third waiting upload through process %d", i), u, http.StatusTooManyRequests, "/problems/too_many_waiting")
		retry, err := strconv.Atoi(u.h.Get("Retry-After"))
		detail, _ := u.body["detail"].(string)
		if err != nil || retry < 1 || retry > 300 ||
			!strings.Contains(detail, "2 uploads of this client are waiting") || !strings.Contains(detail, "Retry after "+strconv.Itoa(retry)+" seconds") {
			t.Fatalf("429: Retry-After %q, detail %q; want whole seconds from 1 to 300, named in a detail that says 2 uploads wait", u.h.Get("Retry-After"), detail)
		}
		if u.h.Get("RateLimit") == "" {
			t.Errorf("429 without the RateLimit header that every upload answer carries")
		}
	}
	if u := uploadTo(t, b, other.ID, other.APIKey, "other.csv", feed(20)); u.code != http.StatusOK {
		t.Fatalf("another client's upload while the first client is refused: %d %v", u.code, u.body)
	}
	var waiting int
	if err := pgConn(t, dbURL).QueryRow(ctx, `SELECT count(*) FROM uploads WHERE client_id = $1 AND status = 'accepted'`, a.ClientID).
		Scan(&waiting); err != nil || waiting != 2 {
		t.Fatalf("the client has %d uploads accepted and waiting (%v), want 2: a refused upload stored nothing", waiting, err)
	}
	for i, p := range procs {
		n := metric(t, p, "storelink_uploads_waiting")
		age := metric(t, p, "storelink_uploads_oldest_waiting_seconds")
		if n < 2 || n > 3 || age <= 0 || age > 120 {
			t.Errorf("process %d /metrics: %v uploads waiting, oldest %vs; want 2 or 3 (the other client's may be claimed), oldest above 0", i, n, age)
		}
	}

	release()
	for _, id := range accepted {
		if u := a.waitUpload(t, id, 30*time.Second); u["status"] != "applied" {
			t.Fatalf("upload %s = %v, want applied", id, u)
		}
	}
	if u := uploadTo(t, b, a.ClientID, a.APIKey, "after.csv", feed(30)); u.code != http.StatusOK {
		t.Fatalf("upload once the waiting ones are applied: %d %v", u.code, u.body)
	}
	if n := metric(t, a, "storelink_uploads_oldest_waiting_seconds"); n < 0 {
		t.Errorf("oldest waiting = %v after processing resumed", n)
	}
}

// newClient makes a partner and its client through the operator API of p.
func newClient(tb testing.TB, p *proc, name string) (c struct{ ID, APIKey string }) {
	tb.Helper()
	pa := call(tb, http.MethodPost, p.URL+"/admin/partners", pressureToken, "", []byte(fmt.Sprintf(`{"name":%q}`, name)))
	if pa.code != http.StatusCreated {
		tb.Fatalf("create partner: %d %v", pa.code, pa.body)
	}
	cl := call(tb, http.MethodPost, p.URL+"/admin/partners/"+pa.body["partner_id"].(string)+"/clients", pressureToken, "",
		[]byte(`{"country_code":"FR","currency":"EUR"}`))
	if cl.code != http.StatusCreated {
		tb.Fatalf("create client: %d %v", cl.code, cl.body)
	}
	c.ID, c.APIKey = cl.body["client_id"].(string), cl.body["api_key"].(string)
	return c
}

// smallDisk mounts a 32 MiB tmpfs for the test and returns its folder,
// or skips the test where it cannot (not root, or mount refused).
func smallDisk(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root: the disk-full test is skipped")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=32m,mode=0700"); err != nil {
		t.Skipf("mount a tmpfs on %s: %v: the disk-full test is skipped", dir, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// TestDiskFull: serve's --data on a small tmpfs. With the disk full, an
// upload answers 507 problem+json saying nothing was stored and /readyz
// answers 503; once space is freed, without a restart, /readyz answers 200
// and the same upload is accepted and applied. The uploads accepted before
// are intact: applied, with their stock in force.
func TestDiskFull(t *testing.T) {
	dir := smallDisk(t)
	p := startServe(t, filepath.Join(dir, "data"), "--demo", "--admin-token", pressureToken)

	before := map[string]map[string]any{}
	for i := range 3 {
		id := mustUpload(t, p, fmt.Sprintf("before-%d.csv", i), bigFeed(50, 5, i).body)
		u := p.waitUpload(t, id, 30*time.Second)
		if u["status"] != "applied" {
			t.Fatalf("upload before the disk is full = %v", u)
		}
		before[id] = u
	}
	filler := filepath.Join(dir, "filler")
	// Filled once serve's log has stopped changing, a disk cannot be freed
	// by a checkpoint; the file is larger than the log keeps after one
	// (journal_size_limit, 4 MiB), so its accept must grow the log.
	waitStill(t, filepath.Join(dir, "data", "storelink.db-wal"))
	fill(t, filler)
	large := bigFeed(90000, 0, 7)
	u := uploadTo(t, p, p.ClientID, p.APIKey, "large.csv", large.body)
	wantProblem(t, "upload on a full disk", u, http.StatusInsufficientStorage, "/problems/insufficient_storage")
	if d, _ := u.body["detail"].(string); !strings.Contains(d, "no space left") || !strings.Contains(d, "nothing was stored") {
		t.Fatalf("507 detail %q, want it to say there is no space left and nothing was stored", d)
	}
	ready := call(t, http.MethodGet, p.URL+"/readyz", "", "", nil)
	wantProblem(t, "/readyz on a full disk", ready, http.StatusServiceUnavailable, "/problems/unavailable")
	if d, _ := ready.body["detail"].(string); !strings.Contains(d, "disk is full") {
		t.Fatalf("/readyz detail %q, want it to say the disk is full", d)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if r := call(t, http.MethodGet, p.URL+"/readyz", "", "", nil); r.code != http.StatusOK {
		t.Fatalf("/readyz once space is freed: %d %v", r.code, r.body)
	}
	id := mustUpload(t, p, "large.csv", large.body)
	if u := p.waitUpload(t, id, 60*time.Second); u["status"] != "applied" || u["rows_applied"] != float64(90000) {
		t.Fatalf("upload once space is freed = %v", u)
	}
	for id, was := range before {
		if u := p.waitUpload(t, id, time.Second); fmt.Sprint(u) != fmt.Sprint(was) {
			t.Fatalf("upload %s accepted before the disk was full = %v, was %v", id, u, was)
		}
	}
	checkStock(t, p, large.want) // it sets every store and EAN the earlier ones did
	if err := p.Stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, p.stderr)
	}
}

// fill writes name until the filesystem has no byte left.
func fill(tb testing.TB, name string) {
	tb.Helper()
	f, err := os.Create(name)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	// serve may free space meanwhile (its WAL cut back after a
	// checkpoint): the disk is filled again until it stays full for a
	// moment.
	for pass := 0; ; pass++ {
		wrote := 0
		for _, chunk := range []int{64 << 10, 4 << 10, 512, 1} {
			buf := make([]byte, chunk)
			for {
				n, err := f.Write(buf)
				wrote += n
				if err != nil {
					if !errors.Is(err, syscall.ENOSPC) {
						tb.Fatalf("fill %s: %v", name, err)
					}
					break
				}
			}
		}
		if pass > 0 && wrote == 0 || pass == 20 {
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// pgProxy forwards loopback TCP connections to a PostgreSQL server and can
// cut them: while cut it closes every connection, the ones open and the new
// ones, as a database that went away would. It can also be a black hole
// (setHole): connections stay open and new ones are accepted, but nothing
// is forwarded either way, as a database that hangs.
type pgProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]bool
	hole   chan struct{} // while a black hole: closed when it ends
}

func startProxy(tb testing.TB, target string) *pgProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &pgProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	tb.Cleanup(func() { ln.Close(); p.setCut(true); p.setHole(false) })
	go p.serve()
	return p
}

func (p *pgProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

// track remembers c, or closes it at once when the proxy is cut.
func (p *pgProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

func (p *pgProxy) forward(c net.Conn) {
	if !p.track(c) {
		return
	}
	p.waitHole()
	s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil || !p.track(s) {
		c.Close()
		return
	}
	go func() { p.pump(s, c); s.Close() }()
	p.pump(c, s)
	c.Close()
}

// pump copies from src to dst, holding what it read while the proxy is a
// black hole.
func (p *pgProxy) pump(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.waitHole()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// setHole makes the proxy a black hole, or ends it: what was held is
// forwarded then.
func (p *pgProxy) setHole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && p.hole == nil:
		p.hole = make(chan struct{})
	case !on && p.hole != nil:
		close(p.hole)
		p.hole = nil
	}
}

func (p *pgProxy) waitHole() {
	p.mu.Lock()
	hole := p.hole
	p.mu.Unlock()
	if hole != nil {
		<-hole
	}
}

func (p *pgProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
	}
}

// TestPostgresUnreachable: serve on PostgreSQL through a proxy that the test
// cuts. While it is cut, an upload and an operator write answer 503
// problem+json with a Retry-After, not 500, and /readyz answers 503; once it
// is back, without a restart, the same writes succeed and /readyz answers
// 200. (The PostgreSQL server itself is never touched.)
func TestPostgresUnreachable(t *testing.T) {
	t.Parallel()
	p, proxy, _ := serveThroughProxy(t)
	feed := sizedFeed(200, 1)
	// Applied before the cut: a claim whose answer the cut loses holds the
	// upload until its lease runs out (--upload-lease), which is not what
	// this test is about.
	if u := p.waitUpload(t, mustUpload(t, p, "before.csv", feed), 30*time.Second); u["status"] != "applied" {
		t.Fatalf("upload before the cut = %v", u)
	}

	proxy.setCut(true)
	up := uploadTo(t, p, p.ClientID, p.APIKey, "cut.csv", feed)
	wantProblem(t, "upload with the database cut off", up, http.StatusServiceUnavailable, "/problems/unavailable")
	partner := call(t, http.MethodPost, p.URL+"/admin/partners", pressureToken, "", []byte(`{"name":"Cut"}`))
	wantProblem(t, "operator write with the database cut off", partner, http.StatusServiceUnavailable, "/problems/unavailable")
	for what, a := range map[string]answer{"upload": up, "operator write": partner} {
		if n, err := strconv.Atoi(a.h.Get("Retry-After")); err != nil || n < 1 {
			t.Errorf("%s 503: Retry-After %q, want whole seconds", what, a.h.Get("Retry-After"))
		}
	}
	ready := call(t, http.MethodGet, p.URL+"/readyz", "", "", nil)
	wantProblem(t, "/readyz with the database cut off", ready, http.StatusServiceUnavailable, "/problems/unavailable")

	proxy.setCut(false)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := call(t, http.MethodGet, p.URL+"/readyz", "", "", nil)
		if r.code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after the database is back: %d %v", r.code, r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	id := mustUpload(t, p, "after.csv", feed)
	if u := p.waitUpload(t, id, 30*time.Second); u["status"] != "applied" {
		t.Fatalf("upload after the database is back = %v", u)
	}
	if a := call(t, http.MethodPost, p.URL+"/admin/partners", pressureToken, "", []byte(`{"name":"Back"}`)); a.code != http.StatusCreated {
		t.Fatalf("operator write after the database is back: %d %v", a.code, a.body)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, p.stderr)
	}
}
