package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Request bodies, connections and shutdown (issue 13: 1, 3, 7 and part of
// 9), each through a real serve process and raw TCP connections, so that
// the test controls exactly which bytes arrive and when.

const bodyTestFeed = "store;ean;article_number;quantity;price\nS1;4006381333931;SKU-1;5;19.99\n"

// rawConn is one client connection that writes bytes by hand.
type rawConn struct {
	tb testing.TB
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(tb testing.TB, p *proc) *rawConn {
	tb.Helper()
	u, err := url.Parse(p.URL)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		tb.Fatalf("dial %s: %v", u.Host, err)
	}
	tb.Cleanup(func() { c.Close() })
	return &rawConn{tb: tb, c: c, br: bufio.NewReader(c)}
}

// send writes s; an error is returned, not fatal, since the server may
// have closed the connection on purpose.
func (r *rawConn) send(s string) error {
	_ = r.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := io.WriteString(r.c, s)
	return err
}

// head writes the request line and headers of a request with a body of
// length bytes, and the first bytes of that body.
func (r *rawConn) head(method, path string, length int, header map[string]string, first string) {
	r.tb.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: storelink\r\nContent-Length: %d\r\n", method, path, length)
	for k, v := range header {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n" + first)
	if err := r.send(b.String()); err != nil {
		r.tb.Fatalf("send %s %s: %v", method, path, err)
	}
}

// answer reads one response within d; it returns nil when none came.
func (r *rawConn) answer(d time.Duration) (*http.Response, []byte, error) {
	_ = r.c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(r.br, nil)
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b, err
}

// closedWithin tells whether the server closes the connection within d
// (end of stream or reset), reading and dropping anything else.
func (r *rawConn) closedWithin(d time.Duration) bool {
	_ = r.c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, r.br)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true
}

// problemType is the "type" of a problem+json answer.
func problemType(tb testing.TB, resp *http.Response, body []byte) string {
	tb.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		tb.Fatalf("%d answer with Content-Type %q, want application/problem+json: %s", resp.StatusCode, ct, body)
	}
	var p struct {
		Type   string `json:"type"`
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal(body, &p); err != nil || p.Detail == "" {
		tb.Fatalf("problem %s: %v", body, err)
	}
	return p.Type
}

// vmRSS is the resident memory of a process in MiB, from /proc/PID/status.
func vmRSS(tb testing.TB, pid int) float64 {
	tb.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Skipf("no /proc to measure memory: %v", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				tb.Fatalf("VmRSS %q: %v", v, err)
			}
			return float64(kb) / 1024
		}
	}
	tb.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// 200 connections, uploads and validations each declaring the largest
// file (10 MiB) and sending a byte now and then, are held open mid-body;
// serve's memory must follow the bytes that arrived, not the lengths
// declared. The in-flight limit is raised above 200 so that it is not what
// keeps the memory down: one client's key reaches all of them.
func TestServeMemoryFollowsBytesReceived(t *testing.T) {
	const conns = 200
	p := startServe(t, t.TempDir(), "--demo", "--max-uploads-in-flight", "1000", "--max-connections-per-address", "0", "--validations-per-minute", "1000")
	declared := 10 << 20
	hdr := map[string]string{"x-api-key": p.APIKey, "Content-Type": "application/csv"}
	raws := make([]*rawConn, conns)
	for i := range raws {
		path := fmt.Sprintf("/stock/%s/big-%d.csv", p.ClientID, i)
		if i%2 == 1 {
			path = "/stock/" + p.ClientID + "/validate"
		}
		raws[i] = dialRaw(t, p)
		raws[i].head("PUT", path, declared, hdr, "store;ean;article_number;quantity;price\n")
	}
	// A few rounds of one byte on each connection, as a slow client sends.
	for round := 0; round < 4; round++ {
		time.Sleep(500 * time.Millisecond)
		for i, r := range raws {
			if err := r.send("S"); err != nil {
				t.Fatalf("connection %d: the server stopped taking its body: %v", i, err)
			}
		}
	}
	rss := vmRSS(t, p.PID())
	t.Logf("VmRSS of serve with %d bodies of %d MiB declared, each a few bytes in: %.1f MiB", conns, declared>>20, rss)
	if rss >= 150 {
		t.Fatalf("VmRSS %.1f MiB with %d bodies held open, want under 150 MiB", rss, conns)
	}
	// Every connection is still held mid-body: none has been answered.
	for i, r := range raws {
		if resp, _, err := r.answer(10 * time.Millisecond); err == nil {
			t.Fatalf("connection %d answered %d before its body arrived", i, resp.StatusCode)
		}
	}
	// And the service still answers.
	code, _ := p.get(t, "/stock/"+p.ClientID+"/uploads")
	if code != http.StatusOK {
		t.Fatalf("GET uploads while bodies are held: %d", code)
	}
}

// A client with --max-uploads-in-flight (default 4) bodies in flight gets
// 429 with Retry-After for the next upload or validation, as a problem
// that says why; once one of them ends, the next is taken. Another client
// is not held back.
func TestServeUploadsInFlightLimit(t *testing.T) {
	p := startServe(t, t.TempDir(), "--demo")
	hdr := map[string]string{"x-api-key": p.APIKey, "Content-Type": "application/csv"}
	held := make([]*rawConn, 4)
	hold := func(i int) {
		held[i] = dialRaw(t, p)
		path := fmt.Sprintf("/stock/%s/held-%d.csv", p.ClientID, i)
		if i == 3 {
			path = "/stock/" + p.ClientID + "/validate"
		}
		held[i].head("PUT", path, 100000, hdr, "store;")
	}
	for i := range held {
		hold(i)
	}
	validate := func() (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("PUT", p.URL+"/stock/"+p.ClientID+"/validate", strings.NewReader(bodyTestFeed))
		req.Header.Set("x-api-key", p.APIKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	// The held requests take their slots as soon as serve has read their
	// headers; until then a validation may still get one.
	var resp *http.Response
	var body []byte
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, body = validate()
		if resp.StatusCode == http.StatusTooManyRequests || time.Now().After(deadline) {
			break
		}
		// A validation that came first took the slot of a held request
		// whose headers serve had not read yet, which was then refused:
		// hold it again.
		for i, h := range held {
			if _, _, err := h.answer(time.Millisecond); err == nil {
				hold(i)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if resp.StatusCode != http.StatusTooManyRequests {
		for i, h := range held { // what became of the held requests
			if r, b, err := h.answer(100 * time.Millisecond); err == nil {
				t.Logf("held request %d was answered: %d %s", i, r.StatusCode, b)
			}
		}
		t.Fatalf("validation with 4 bodies in flight: %d %s, want 429\n%s", resp.StatusCode, body, p.stderr)
	}
	if got := problemType(t, resp, body); got != "/problems/uploads_in_flight" {
		t.Fatalf("429 type %q, want /problems/uploads_in_flight: %s", got, body)
	}
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Fatalf("429 Retry-After %q, want whole seconds >= 1", resp.Header.Get("Retry-After"))
	}
	code, u := p.upload(t, "fifth.csv", []byte(bodyTestFeed))
	if code != http.StatusTooManyRequests || u["type"] != "/problems/uploads_in_flight" {
		t.Fatalf("upload with 4 bodies in flight: %d %v, want 429 uploads_in_flight", code, u)
	}

	// One held upload ends (its client goes away): its slot is free again.
	held[0].c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		code, u = p.upload(t, "fifth.csv", []byte(bodyTestFeed))
		if code != http.StatusTooManyRequests || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code != http.StatusOK {
		t.Fatalf("upload after a slot was freed: %d %v", code, u)
	}
	// The slots are counted per client: another client's validation goes
	// through while this one's are taken.
	other := otherClient(t, p)
	req, _ := http.NewRequest("PUT", p.URL+"/stock/"+other.id+"/validate", strings.NewReader(bodyTestFeed))
	req.Header.Set("x-api-key", other.key)
	if code, v := doJSON(t, req); code != http.StatusOK {
		t.Fatalf("another client's validation: %d %v", code, v)
	}
}

// inFlightFull tells whether a validation of p's client is refused for its
// uploads in flight (429 uploads_in_flight), and so whether the one upload
// --max-uploads-in-flight 1 lets it have is taken.
func inFlightFull(tb testing.TB, p *proc) bool {
	tb.Helper()
	req, _ := http.NewRequest("PUT", p.URL+"/stock/"+p.ClientID+"/validate", strings.NewReader(bodyTestFeed))
	req.Header.Set("x-api-key", p.APIKey)
	code, v := doJSON(tb, req)
	return code == http.StatusTooManyRequests && v["type"] == "/problems/"+codeInFlight
}

// stallUpload opens an upload of p's client whose body stops after its
// first bytes, and returns it once it holds the partner's one upload in
// flight (--max-uploads-in-flight 1). The probe that finds the slot taken
// (inFlightFull) is an upload in flight itself: when it reaches serve
// first, the stalled upload is the one refused (it is answered 429), and
// it is opened again.
func stallUpload(t *testing.T, p *proc) *rawConn {
	t.Helper()
	for range 10 {
		stalled := dialRaw(t, p)
		stalled.head("PUT", "/stock/"+p.ClientID+"/stalled.csv", 100000,
			map[string]string{"x-api-key": p.APIKey, "Content-Type": "application/csv"}, "store;ean;")
		for deadline := time.Now().Add(10 * time.Second); ; {
			full := inFlightFull(t, p)
			wait := 50 * time.Millisecond
			if full {
				wait = 500 * time.Millisecond
			}
			resp, body, err := stalled.answer(wait)
			if err == nil {
				if resp.StatusCode != http.StatusTooManyRequests || problemType(t, resp, body) != "/problems/"+codeInFlight {
					t.Fatalf("the upload to stall was answered %d %s before its body was sent", resp.StatusCode, body)
				}
				break // a probe took the slot first
			}
			if full {
				return stalled // no answer, and the slot is taken: it holds it
			}
			if time.Now().After(deadline) {
				t.Fatal("the upload to stall neither took the client's upload in flight nor was refused within 10s")
			}
		}
	}
	t.Fatal("the upload to stall was refused 10 times: the probes took the slot first")
	return nil
}

// codeInFlight is the problem type of the 429 of a partner's uploads in
// flight (httpapi).
const codeInFlight = "uploads_in_flight"

type clientCreds struct{ id, key string }

// otherClient makes a second partner with a client through the admin API.
func otherClient(tb testing.TB, p *proc) clientCreds {
	tb.Helper()
	admin := func(path, body string) map[string]any {
		req, _ := http.NewRequest("POST", p.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+p.AdminToken)
		req.Header.Set("Content-Type", "application/json")
		code, v := doJSON(tb, req)
		if code != http.StatusCreated {
			tb.Fatalf("POST %s: %d %v", path, code, v)
		}
		return v
	}
	partner := admin("/admin/partners", `{"name":"Other"}`)
	c := admin("/admin/partners/"+partner["partner_id"].(string)+"/clients", `{"country_code":"FR","currency":"EUR"}`)
	return clientCreds{c["client_id"].(string), c["api_key"].(string)}
}

// Many unauthenticated requests that declare a body and send it a byte at
// a time all get their 401 at once, without the body being waited for,
// and their connections are closed rather than drained. They are 2000
// from one address: the connection limits are raised above that, for this
// is about their bodies (at the limit a new connection closes the one that
// sent least recently: TestServeMaxConnections).
func TestServeUnauthenticatedSlowBodies(t *testing.T) {
	const conns = 2000
	// The wrong keys all come from 127.0.0.1: the failed-authentication
	// limit and the cap per address are raised so that every one of them
	// gets its 401.
	p := startServe(t, t.TempDir(), "--demo", "--auth-failures-per-minute", "100000",
		"--max-connections", "4096", "--max-connections-per-address", "0")
	start := time.Now()
	raws := make([]*rawConn, conns)
	for i := range raws {
		raws[i] = dialRaw(t, p)
		if i%3 == 2 { // a partner call with a wrong key
			raws[i].head("PUT", "/stock/"+p.ClientID+"/slow.csv", 200000, map[string]string{"x-api-key": "not-a-key"}, "s")
			continue
		}
		raws[i].head("POST", "/admin/partners", 200000, map[string]string{"Content-Type": "application/json"}, "{")
	}
	var wg sync.WaitGroup
	errs := make(chan string, conns)
	for i, r := range raws {
		wg.Go(func() {
			resp, body, err := r.answer(20 * time.Second)
			if err != nil {
				errs <- fmt.Sprintf("connection %d: no answer: %v", i, err)
				return
			}
			if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
				errs <- fmt.Sprintf("connection %d: %d close=%v %s, want 401 with Connection: close", i, resp.StatusCode, resp.Close, body)
				return
			}
			_ = r.send("x") // the slow sender goes on
			if !r.closedWithin(5 * time.Second) {
				errs <- fmt.Sprintf("connection %d: still open 5s after the 401", i)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	t.Logf("%d slow unauthenticated bodies answered and closed in %s", conns, time.Since(start))
}

// A body that does not arrive in full within --body-timeout is answered
// 408 as a problem; nothing is kept, and the request log records the bytes
// that arrived, not the declared length.
func TestServeBodyTimeout(t *testing.T) {
	p := startServe(t, t.TempDir(), "--demo", "--body-timeout", "2s")
	r := dialRaw(t, p)
	r.head("PUT", "/stock/"+p.ClientID+"/slow.csv", 5000,
		map[string]string{"x-api-key": p.APIKey, "Content-Type": "application/csv"}, "store;ean;")
	start := time.Now()
	sent := len("store;ean;")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // a byte every 200 ms: never idle, never finished in time
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
				if r.send("x") != nil {
					return
				}
				sent++
			}
		}
	}()
	resp, body, err := r.answer(15 * time.Second)
	close(stop)
	<-done
	if err != nil {
		t.Fatalf("no answer to a body past --body-timeout: %v", err)
	}
	took := time.Since(start)
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("body past --body-timeout: %d %s, want 408", resp.StatusCode, body)
	}
	if got := problemType(t, resp, body); got != "/problems/body_timeout" {
		t.Fatalf("408 type %q: %s", got, body)
	}
	if took < 1500*time.Millisecond {
		t.Fatalf("408 after %s, before the 2s body timeout", took)
	}
	if !resp.Close || !r.closedWithin(5*time.Second) {
		t.Fatalf("connection not closed after the 408 (Connection: close = %v)", resp.Close)
	}
	var list struct {
		Uploads []any `json:"uploads"`
	}
	getJSON(t, p, "/stock/"+p.ClientID+"/uploads", &list)
	if len(list.Uploads) != 0 {
		t.Fatalf("an upload was kept after a 408: %v", list.Uploads)
	}
	// The request log line of the 408 counts the bytes read (at most
	// those sent), not the 5000 declared.
	var logged *float64
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		var l struct {
			Msg     string   `json:"msg"`
			Status  int      `json:"status"`
			BytesIn *float64 `json:"bytes_in"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "request" && l.Status == http.StatusRequestTimeout {
			logged = l.BytesIn
		}
	}
	if logged == nil || *logged < float64(len("store;ean;")) || *logged > float64(sent) {
		t.Fatalf("request log bytes_in = %v, want the bytes that arrived (%d to %d), not the declared 5000:\n%s",
			logged, len("store;ean;"), sent, p.stderr)
	}
}

// With --max-connections 3 and three uploads in the middle of their body,
// two sending a byte now and then and one stalled, a fourth connection is
// served at once: the stalled upload, which has sent least recently, is
// closed to make room, and the two that keep sending end as usual.
// (Idle keep-alive connections: TestServeIdleConnectionsMakeRoom.)
func TestServeMaxConnections(t *testing.T) {
	p := startServe(t, t.TempDir(), "--demo", "--max-connections", "3")
	hdr := map[string]string{"x-api-key": p.APIKey, "Content-Type": "application/csv"}
	open := []*rawConn{dialRaw(t, p), dialRaw(t, p), dialRaw(t, p)}
	for i, r := range open { // each an upload whose body has only begun
		r.head("PUT", fmt.Sprintf("/stock/%s/open-%d.csv", p.ClientID, i), len(bodyTestFeed), hdr, bodyTestFeed[:10])
	}
	// open[0] stalls; the others send a byte every 100 ms.
	for k := 10; k < 15; k++ {
		time.Sleep(100 * time.Millisecond)
		for _, r := range open[1:] {
			if err := r.send(bodyTestFeed[k : k+1]); err != nil {
				t.Fatal(err)
			}
		}
	}
	fourth := dialRaw(t, p)
	if err := fourth.send("GET /healthz HTTP/1.1\r\nHost: storelink\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if resp, body, err := fourth.answer(10 * time.Second); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("a fourth connection with --max-connections 3 in the middle of requests: %v %v %s, want 200 at once", resp, err, body)
	}
	if !open[0].closedWithin(5 * time.Second) {
		t.Fatal("the stalled upload, which sent least recently, is still open")
	}
	for i, r := range open[1:] {
		if err := r.send(bodyTestFeed[15:]); err != nil {
			t.Fatalf("upload %d, still sending, was closed: %v", i+1, err)
		}
		if resp, body, err := r.answer(10 * time.Second); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("upload %d, still sending: %v %v %s", i+1, resp, err, body)
		}
	}
}

// SIGTERM while an upload's body is stalled: serve cuts it (503), exits 0
// within a few seconds, and an upload accepted before is kept and applied.
func TestServeStopWithStalledUpload(t *testing.T) {
	p := startServe(t, t.TempDir(), "--demo", "--max-uploads-in-flight", "1")
	id := mustUpload(t, p, "before.csv", []byte(bodyTestFeed))
	stalled := stallUpload(t, p)
	code, took := stopWithin(t, p, 20*time.Second)
	if code != 0 {
		t.Fatalf("exit code %d after SIGTERM with a stalled upload, want 0:\n%s", code, p.stderr)
	}
	if took > 8*time.Second {
		t.Fatalf("SIGTERM with a stalled upload took %s to exit", took)
	}
	t.Logf("stop with a stalled upload took %s", took)
	resp, body, err := stalled.answer(time.Second)
	if err != nil {
		t.Fatalf("the stalled upload got no answer: %v", err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || problemType(t, resp, body) != "/problems/unavailable" {
		t.Fatalf("the stalled upload was answered %d %s, want 503", resp.StatusCode, body)
	}
	q := restart(t, p)
	u := q.waitUpload(t, id, 30*time.Second)
	if u["status"] != "applied" {
		t.Fatalf("the upload accepted before the stop: %v", u)
	}
	var list struct {
		Uploads []map[string]any `json:"uploads"`
	}
	getJSON(t, q, "/stock/"+q.ClientID+"/uploads", &list)
	if len(list.Uploads) != 1 {
		t.Fatalf("uploads after the restart: %v, want only the one accepted before the stop", list.Uploads)
	}
}

// A request with both Content-Length and Transfer-Encoding is refused 400
// as a problem and its connection closed, also when it is not the first on
// its connection; a body that merely contains such header lines, and
// chunked requests, are served as usual.
func TestServeRefusesContentLengthWithTransferEncoding(t *testing.T) {
	p := startServe(t, t.TempDir(), "--demo")
	hdrs := "Host: storelink\r\nx-api-key: " + p.APIKey + "\r\nContent-Type: text/csv\r\n"
	fake := "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
	r := dialRaw(t, p)
	steps := []struct {
		name, req string
		status    int
	}{
		{"a body with header lines in it", fmt.Sprintf("PUT /stock/%s/validate HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n%s", p.ClientID, hdrs, len(fake), fake), 200},
		{"a chunked body", "PUT /stock/" + p.ClientID + "/validate HTTP/1.1\r\n" + hdrs + "Transfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n%x;ext=1\r\n%s\r\n0\r\n\r\n", len(fake), fake, len(bodyTestFeed), bodyTestFeed), 200},
		{"a plain GET", "GET /healthz HTTP/1.1\r\nHost: storelink\r\n\r\n", 200},
		{"both lengths", "PUT /stock/" + p.ClientID + "/validate HTTP/1.1\r\n" + hdrs + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(bodyTestFeed), bodyTestFeed), 400},
	}
	for _, s := range steps {
		if err := r.send(s.req); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		resp, body, err := r.answer(10 * time.Second)
		if err != nil {
			t.Fatalf("%s: no answer: %v", s.name, err)
		}
		if resp.StatusCode != s.status {
			t.Fatalf("%s: %d %s, want %d", s.name, resp.StatusCode, body, s.status)
		}
		if s.status == 400 {
			if got := problemType(t, resp, body); got != "/problems/invalid" || !resp.Close {
				t.Fatalf("%s: type %q close=%v: %s", s.name, got, resp.Close, body)
			}
			if !r.closedWithin(5 * time.Second) {
				t.Fatalf("%s: connection still open after the 400", s.name)
			}
		}
	}
	// The same as the first request on a fresh connection, with a GET.
	r = dialRaw(t, p)
	if err := r.send("GET /healthz HTTP/1.1\r\nHost: storelink\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, body, err := r.answer(10 * time.Second)
	if err != nil || resp.StatusCode != 400 || !resp.Close || !r.closedWithin(5*time.Second) {
		t.Fatalf("GET with both lengths: %v %v %s, want 400 and the connection closed", resp, err, body)
	}
}
