package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The connection and memory limits that hold for the whole process
// (issue 13, review follow-up): idle keep-alive connections never keep a
// new client out, and the bodies of all clients together stay within
// --max-upload-memory. Each through a real serve process.

// getHealthz sends GET /healthz on r's connection, kept alive, and wants
// its 200 within d.
func getHealthz(tb testing.TB, r *rawConn, d time.Duration, which string) {
	tb.Helper()
	if err := r.send("GET /healthz HTTP/1.1\r\nHost: storelink\r\n\r\n"); err != nil {
		tb.Fatalf("%s: send: %v", which, err)
	}
	resp, body, err := r.answer(d)
	if err != nil {
		tb.Fatalf("%s: no answer to GET /healthz within %s: %v", which, d, err)
	}
	if resp.StatusCode != http.StatusOK || resp.Close {
		tb.Fatalf("%s: GET /healthz %d close=%v %s, want 200 kept alive", which, resp.StatusCode, resp.Close, body)
	}
}

// With --max-connections 4, one address opens three times as many
// keep-alive connections, each making one request and then idling (they
// would stay open for the 2 minutes of the idle timeout). Every new
// connection is served at once: the one that has sent least recently is
// closed to make room, the oldest idle one or an upload stalled in the
// middle of its body alike, and a new client from another address is
// answered as promptly.
func TestServeIdleConnectionsMakeRoom(t *testing.T) {
	const maxConns = 4
	p := startServe(t, t.TempDir(), "--demo", "--max-connections", strconv.Itoa(maxConns))

	// The oldest connection: an upload whose body has begun and stalled.
	active := dialRaw(t, p)
	active.head("PUT", "/stock/"+p.ClientID+"/active.csv", len(bodyTestFeed),
		map[string]string{"x-api-key": p.APIKey, "Content-Type": "application/csv"}, bodyTestFeed[:10])

	idle := make([]*rawConn, 3*maxConns)
	for i := range idle {
		idle[i] = dialRaw(t, p)
		// Without room made, the fourth would wait for the idle timeout.
		getHealthz(t, idle[i], 10*time.Second, fmt.Sprintf("keep-alive connection %d", i))
	}

	// A new client on another loopback address, one request per connection.
	u := strings.TrimPrefix(p.URL, "http://")
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext:       (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext,
	}}
	for i := range 3 {
		resp, err := client.Get("http://" + u + "/healthz")
		if err != nil {
			t.Fatalf("new client, request %d, with %d idle connections held: %v", i, len(idle), err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("new client, request %d: %d", i, resp.StatusCode)
		}
	}

	// The server closed the longest-idle connections; the newest is open,
	// and at most --max-connections are open in all.
	if !idle[0].closedWithin(5 * time.Second) {
		t.Fatal("the longest-idle keep-alive connection is still open")
	}
	open := 0
	for i := len(idle) - 1; i >= 1; i-- {
		if !idle[i].closedWithin(100 * time.Millisecond) {
			open++
		} else if i == len(idle)-1 {
			t.Fatal("the newest keep-alive connection was closed")
		}
	}
	if open > maxConns-1 {
		t.Fatalf("%d keep-alive connections open beside the upload, want at most %d", open, maxConns-1)
	}

	// The stalled upload had sent least recently of all: it was closed
	// first, though in the middle of its body.
	if !active.closedWithin(5 * time.Second) {
		t.Fatal("the upload stalled in the middle of its body is still open")
	}
}

// busyProblem checks a 503 for the upload memory: problem+json of type
// unavailable, saying the service is busy receiving other files, with a
// Retry-After.
func busyProblem(tb testing.TB, what string, code int, h http.Header, body []byte) {
	tb.Helper()
	var p struct {
		Type   string `json:"type"`
		Detail string `json:"detail"`
	}
	_ = json.Unmarshal(body, &p)
	if code != http.StatusServiceUnavailable || h.Get("Content-Type") != "application/problem+json" ||
		p.Type != "/problems/unavailable" || !strings.Contains(p.Detail, "busy receiving other files") {
		tb.Fatalf("%s: %d %s %s, want 503 problem+json unavailable saying the service is busy receiving other files",
			what, code, h.Get("Content-Type"), body)
	}
	if ra, err := strconv.Atoi(h.Get("Retry-After")); err != nil || ra < 1 {
		tb.Fatalf("%s: Retry-After %q, want whole seconds >= 1", what, h.Get("Retry-After"))
	}
}

// shareProblem checks a 429 partner_busy with Retry-After: the partner's
// bodies hold its share of the upload memory.
func shareProblem(tb testing.TB, what string, code int, h http.Header, body []byte) {
	tb.Helper()
	var p struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(body, &p)
	if code != http.StatusTooManyRequests || p.Type != "/problems/partner_busy" {
		tb.Fatalf("%s: %d %s, want 429 partner_busy", what, code, body)
	}
	if ra, err := strconv.Atoi(h.Get("Retry-After")); err != nil || ra < 1 {
		tb.Fatalf("%s: Retry-After %q, want whole seconds >= 1", what, h.Get("Retry-After"))
	}
}

// putFeed PUTs body to path with the client's key; chunked sends it
// without a Content-Length.
func putFeed(tb testing.TB, p *proc, path, apiKey, body string, chunked bool) (int, http.Header, []byte) {
	tb.Helper()
	var rd io.Reader = strings.NewReader(body)
	if chunked {
		rd = io.MultiReader(rd) // no length known: sent chunked
	}
	req, err := http.NewRequest(http.MethodPut, p.URL+path, rd)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("x-api-key", apiKey)
	req.Header.Set("Content-Type", "application/csv")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		tb.Fatalf("PUT %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// Three clients of three partners trickle uploads of 1 MiB into a serve
// whose --max-upload-memory is 3 MiB, and hold them open just short of
// their end: each partner holds its share (1 MiB), and together they hold
// the budget. Every further upload of a fourth partner, with or without a
// declared length, gets 503 with Retry-After saying the service is busy
// receiving other files (its validation, checked as it arrives and never
// held, is answered); one of a holding partner gets 429
// partner_busy, its own share; other calls are answered as usual. Once a
// held upload ends, it is accepted, and the next body is received again.
func TestServeUploadMemoryBudget(t *testing.T) {
	const size = 1 << 20
	p := startServe(t, t.TempDir(), "--demo", "--admin-token", pressureToken,
		"--max-file-size", "1MiB", "--max-upload-memory", "3MiB")
	type creds struct{ ID, APIKey string }
	clients := []creds{{p.ClientID, p.APIKey}}
	for _, name := range []string{"Second", "Third"} {
		c := newClient(t, p, name)
		clients = append(clients, creds{c.ID, c.APIKey})
	}
	fourth := newClient(t, p, "Fourth")
	header := "store;ean;article_number;quantity;price\n"
	row := "S1;4006381333931;SKU-1;5;19.99\n"
	feed := header + strings.Repeat(row, (size-len(header))/len(row))
	feed += strings.Repeat("x", size-len(feed)-1) + "\n"
	held := make([]*rawConn, len(clients))
	for i, c := range clients {
		held[i] = dialRaw(t, p)
		held[i].head("PUT", "/stock/"+c.ID+"/held.csv", size,
			map[string]string{"x-api-key": c.APIKey, "Content-Type": "application/csv"}, "")
	}
	// The bodies arrive in pieces, all of them together, up to their last byte.
	const pieces = 16
	for k := range pieces {
		for i, r := range held {
			if err := r.send(feed[k*size/pieces : min((k+1)*size/pieces, size-1)]); err != nil {
				t.Fatalf("held upload %d, piece %d: %v", i, k, err)
			}
		}
		time.Sleep(20 * time.Millisecond) // a slow sender
	}

	// Once serve has received the held bodies, an upload is refused.
	small := header + row
	var code int
	var h http.Header
	var body []byte
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, h, body = putFeed(t, p, "/stock/"+fourth.ID+"/more.csv", fourth.APIKey, small, false)
		if code != http.StatusOK || time.Now().After(deadline) {
			break
		}
	}
	busyProblem(t, "upload with the budget taken", code, h, body)
	if code, _, body := putFeed(t, p, "/stock/"+fourth.ID+"/validate", fourth.APIKey, small, false); code != http.StatusOK {
		t.Fatalf("validation with the budget taken = %d %s", code, body)
	}
	code, h, body = putFeed(t, p, "/stock/"+fourth.ID+"/chunked.csv", fourth.APIKey, small, true)
	busyProblem(t, "upload without Content-Length with the budget taken", code, h, body)
	code, h, body = putFeed(t, p, "/stock/"+clients[1].ID+"/more.csv", clients[1].APIKey, small, false)
	shareProblem(t, "upload of a partner at its share", code, h, body)
	if c, v := p.get(t, "/stock/"+p.ClientID+"/uploads"); c != http.StatusOK {
		t.Fatalf("GET uploads with the budget taken: %d %v", c, v)
	}
	// None of the held uploads was cut.
	for i, r := range held {
		if resp, b, err := r.answer(10 * time.Millisecond); err == nil {
			t.Fatalf("held upload %d answered %d before its body ended: %s", i, resp.StatusCode, b)
		}
	}

	// The first held upload ends: it is accepted, and its memory is free.
	if err := held[0].send(feed[size-1:]); err != nil {
		t.Fatal(err)
	}
	resp, b, err := held[0].answer(15 * time.Second)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("held upload after its last byte: %v %v %s, want 200", resp, err, b)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, _, body = putFeed(t, p, "/stock/"+fourth.ID+"/after.csv", fourth.APIKey, small, false)
		if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
	}
	if code != http.StatusOK {
		t.Fatalf("upload once a held one ended: %d %s", code, body)
	}
}

// Four clients each send four uploads declaring 4 MiB as fast as they
// can, and hold them short of their end (64 MiB in all), against
// --max-upload-memory 8MiB: at most two are being received, the others
// are refused with 503 (or 429 partner_busy when their partner holds its
// share), and serve's resident memory grows by far less than the 64 MiB
// sent.
func TestServeUploadMemoryBoundsRSS(t *testing.T) {
	const size, perClient = 4 << 20, 4
	p := startServe(t, t.TempDir(), "--demo", "--admin-token", pressureToken,
		"--max-file-size", "4MiB", "--max-upload-memory", "8MiB")
	keys := map[string]string{p.ClientID: p.APIKey}
	for i := range 3 {
		c := newClient(t, p, fmt.Sprintf("Partner %d", i))
		keys[c.ID] = c.APIKey
	}
	before := vmRSS(t, p.PID())
	header := "store;ean;article_number;quantity;price\n"
	chunk := strings.Repeat("S1;4006381333931;SKU-1;5;19.99\n", 8192)
	var conns []*rawConn
	for id, key := range keys {
		for i := range perClient {
			r := dialRaw(t, p)
			r.head("PUT", fmt.Sprintf("/stock/%s/flood-%d.csv", id, i), size,
				map[string]string{"x-api-key": key, "Content-Type": "application/csv"}, header)
			conns = append(conns, r)
		}
	}
	var wg sync.WaitGroup
	for _, r := range conns {
		wg.Go(func() {
			for left := size - len(header) - 1; left > 0; {
				n := min(left, len(chunk))
				if r.send(chunk[:n]) != nil {
					return // refused: the server stopped reading
				}
				left -= n
			}
		})
	}
	wg.Wait()
	// What was sent is read, which no condition shows from here: the
	// refused connections keep their bytes unread for good.
	time.Sleep(time.Second)
	rss := vmRSS(t, p.PID())
	refused, receiving := 0, 0
	for i, r := range conns {
		resp, body, err := r.answer(time.Second)
		if err != nil {
			receiving++
			continue
		}
		if resp.StatusCode == http.StatusTooManyRequests {
			shareProblem(t, fmt.Sprintf("upload %d of the flood", i), resp.StatusCode, resp.Header, body)
		} else {
			busyProblem(t, fmt.Sprintf("upload %d of the flood", i), resp.StatusCode, resp.Header, body)
		}
		refused++
	}
	t.Logf("VmRSS of serve %.1f MiB before, %.1f MiB with %d uploads of 4 MiB being received and %d refused",
		before, rss, receiving, refused)
	if receiving > 2 {
		t.Fatalf("%d uploads of 4 MiB being received at once with --max-upload-memory 8MiB", receiving)
	}
	if rss-before > 40 {
		t.Fatalf("VmRSS grew by %.1f MiB (%.1f to %.1f) while 64 MiB of bodies arrived, want under 40 MiB with --max-upload-memory 8MiB",
			rss-before, before, rss)
	}
}

// --max-upload-memory: its default, its variable, the flag over the
// variable, and a budget smaller than --max-file-size refused as a usage
// error naming both.
func TestConfigMaxUploadMemory(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	cfg, err := parseConfig("serve", nil, env(nil), io.Discard)
	if err != nil || cfg.MaxUploadMemory != 256<<20 {
		t.Fatalf("default --max-upload-memory: %v, %v; want 256MiB", cfg, err)
	}
	cfg, err = parseConfig("serve", nil, env(map[string]string{"STORELINK_MAX_UPLOAD_MEMORY": "64MiB"}), io.Discard)
	if err != nil || cfg.MaxUploadMemory != 64<<20 {
		t.Fatalf("STORELINK_MAX_UPLOAD_MEMORY=64MiB: %v, %v", cfg, err)
	}
	cfg, err = parseConfig("serve", []string{"--max-upload-memory", "1GiB"},
		env(map[string]string{"STORELINK_MAX_UPLOAD_MEMORY": "64MiB"}), io.Discard)
	if err != nil || cfg.MaxUploadMemory != 1<<30 {
		t.Fatalf("--max-upload-memory 1GiB over the variable: %v, %v", cfg, err)
	}
	for _, bad := range [][]string{
		{"--max-upload-memory", "1MiB"},
		{"--max-file-size", "512MiB"},
		{"--max-upload-memory", "lots"},
	} {
		_, err := parseConfig("serve", bad, env(nil), io.Discard)
		if err == nil || !isUsage(err) || !strings.Contains(err.Error(), strings.TrimLeft(bad[0], "-")) {
			t.Errorf("%v: err = %v, want a usage error naming %s", bad, err, bad[0])
		}
	}
}

// With --max-connections-per-address 2, a third connection from 127.0.0.1
// is closed without an answer while its two uploads go on, and a client
// on another loopback address is served.
func TestServeConnectionsPerAddress(t *testing.T) {
	p := startServe(t, t.TempDir(), "--demo", "--max-connections-per-address", "2")
	hdr := map[string]string{"x-api-key": p.APIKey, "Content-Type": "application/csv"}
	held := []*rawConn{dialRaw(t, p), dialRaw(t, p)}
	for i, r := range held {
		r.head("PUT", fmt.Sprintf("/stock/%s/held-%d.csv", p.ClientID, i), len(bodyTestFeed), hdr, bodyTestFeed[:10])
	}
	third := dialRaw(t, p) // accepted after the two, which are counted by then
	_ = third.send("GET /healthz HTTP/1.1\r\nHost: storelink\r\n\r\n")
	if resp, _, err := third.answer(10 * time.Second); err == nil {
		t.Fatalf("a third connection from one address with --max-connections-per-address 2 was answered %d", resp.StatusCode)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("a third connection from one address with --max-connections-per-address 2 is still open after 10s")
	}
	other := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext,
	}}
	resp, err := other.Get(p.URL + "/healthz")
	if err != nil {
		t.Fatalf("a client on 127.0.0.2: %v", err)
	}
	resp.Body.Close()
	for i, r := range held {
		if err := r.send(bodyTestFeed[10:]); err != nil {
			t.Fatal(err)
		}
		if resp, body, err := r.answer(10 * time.Second); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("upload %d beside the refused connection: %v %v %s", i, resp, err, body)
		}
	}
}
