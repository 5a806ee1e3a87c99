package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"storelink"
	"storelink/worker"
)

// The tests of this file run `storelink serve` as a separate OS process and
// kill it (SIGKILL) or stop it (SIGTERM) at the moments that matter for
// Nothing acknowledged is lost: right after the 200 of an upload, while an upload
// is being processed, and with two uploads of one client in flight.

// feedRow is one row of a generated feed; its fields are what the stock
// listing must show for the row's store and EAN once it is applied.
type feedRow struct {
	Store, EAN, Article string
	Quantity            int
	Price, Retail       string // exact decimals as written in the file
	Location            string
}

func (r feedRow) key() string { return r.Store + "/" + r.EAN }

// ean13 returns a valid EAN-13 (GS1 check digit) made from n.
func ean13(n int) string {
	body := fmt.Sprintf("400%09d", n%1_000_000_000)
	sum := 0
	for i := range 12 {
		d := int(body[i] - '0')
		if i%2 == 1 {
			d *= 3
		}
		sum += d
	}
	return body + strconv.Itoa((10-sum%10)%10)
}

// testFeed is a generated stock file and the stock it must leave in force.
type testFeed struct {
	body []byte
	want map[string]feedRow // by store/EAN: the last row of each
}

// makeFeed writes rows as a semicolon-separated feed with the optional
// retail price and location columns.
func makeFeed(rows []feedRow) testFeed {
	var b bytes.Buffer
	b.WriteString("store;ean;article_number;quantity;price;retail_price;store_article_location\n")
	want := make(map[string]feedRow, len(rows))
	for _, r := range rows {
		fmt.Fprintf(&b, "%s;%s;%s;%d;%s;%s;%s\n", r.Store, r.EAN, r.Article, r.Quantity, r.Price, r.Retail, r.Location)
		want[r.key()] = r
	}
	return testFeed{body: b.Bytes(), want: want}
}

// bigFeed has n rows over the demo stores S1..S3; the last dups rows set
// new values for store and EAN pairs that came earlier, so that the file's
// last row of a pair must win. seed varies the values between feeds.
func bigFeed(n, dups, seed int) testFeed {
	rows := make([]feedRow, 0, n+dups)
	row := func(i, v int) feedRow {
		return feedRow{
			Store: "S" + strconv.Itoa(i%3+1), EAN: ean13(i), Article: fmt.Sprintf("SKU-%07d", i),
			Quantity: v % 1000, Price: fmt.Sprintf("%d.%02d", v%500+1, v%100),
			Retail: fmt.Sprintf("%d.%02d", v%500+600, v%97), Location: fmt.Sprintf("Aisle %d", v%40),
		}
	}
	for i := range n {
		rows = append(rows, row(i, i*7+seed))
	}
	for i := range dups {
		rows = append(rows, row(i*(n/max(dups, 1)), i*13+seed+1))
	}
	return makeFeed(rows)
}

// restart starts serve again on p's data folder, keeping the credentials
// that the first start printed.
func restart(tb testing.TB, p *proc, args ...string) *proc {
	tb.Helper()
	q := startServe(tb, p.Data, args...)
	q.ClientID, q.APIKey, q.PartnerID = p.ClientID, p.APIKey, p.PartnerID
	return q
}

// uploadThenKill PUTs body and SIGKILLs the server the moment the status
// line of the answer arrives, before anything else happens; only then is
// the answer's body read (it is already in the socket buffer). It returns
// the upload id of the 200.
func uploadThenKill(tb testing.TB, p *proc, name string, body []byte) string {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPut, p.URL+"/stock/"+p.ClientID+"/"+name, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("x-api-key", p.APIKey)
	req.Header.Set("Content-Type", "application/csv")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("upload: %v", err)
	}
	if resp.StatusCode == http.StatusOK {
		p.Kill()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	if err != nil {
		tb.Fatalf("read the 200 after the kill: %v (%q)", err, b)
	}
	var u struct {
		ID     string `json:"upload_id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(b, &u); err != nil || u.ID == "" || u.Status != "accepted" {
		tb.Fatalf("upload answer %s: %v", b, err)
	}
	return u.ID
}

// mustUpload uploads body and returns the upload id of the 200.
func mustUpload(tb testing.TB, p *proc, name string, body []byte) string {
	tb.Helper()
	code, u := p.upload(tb, name, body)
	if code != http.StatusOK {
		tb.Fatalf("upload %s: %d %v", name, code, u)
	}
	return u["upload_id"].(string)
}

// uploadStatus reads the status of one upload.
func uploadStatus(tb testing.TB, p *proc, id string) string {
	tb.Helper()
	code, u := p.get(tb, "/stock/"+p.ClientID+"/uploads/"+id)
	if code != http.StatusOK {
		tb.Fatalf("get upload %s: %d %v", id, code, u)
	}
	return u["status"].(string)
}

// waitProcessing polls the upload as fast as it can until it reads
// "processing" and reports whether it did; false means it was already
// final when first seen so.
func waitProcessing(tb testing.TB, p *proc, id string) bool {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		switch uploadStatus(tb, p, id) {
		case "processing":
			return true
		case "applied", "rejected":
			return false
		}
	}
	tb.Fatalf("upload %s was not picked up within 20s", id)
	return false
}

// uploadRecord is an upload as the listing shows it.
type uploadRecord struct {
	ID          string     `json:"upload_id"`
	Status      string     `json:"status"`
	StartedAt   *time.Time `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	RowsTotal   int        `json:"rows_total"`
	RowsApplied int        `json:"rows_applied"`
	// Errors are shown when an upload is not what a test expects.
	Errors json.RawMessage `json:"errors"`
}

// getJSON GETs a partner path into v.
func getJSON(tb testing.TB, p *proc, path string, v any) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, p.URL+path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("x-api-key", p.APIKey)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		tb.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		tb.Fatalf("GET %s: %v: %s", path, err, b)
	}
}

// allUploads lists every upload of p's client, newest first.
func allUploads(tb testing.TB, p *proc) []uploadRecord {
	tb.Helper()
	var out []uploadRecord
	before := ""
	for {
		var page struct {
			Uploads    []uploadRecord `json:"uploads"`
			NextBefore string         `json:"next_before"`
		}
		getJSON(tb, p, "/stock/"+p.ClientID+"/uploads?limit=500&before="+url.QueryEscape(before), &page)
		out = append(out, page.Uploads...)
		if page.NextBefore == "" {
			return out
		}
		before = page.NextBefore
	}
}

// stockRecord is a row of the stock listing, its numbers kept exact.
type stockRecord struct {
	Store    string       `json:"store_id"`
	EAN      string       `json:"ean"`
	Article  string       `json:"article_number"`
	Quantity int          `json:"quantity"`
	Price    json.Number  `json:"price"`
	Retail   *json.Number `json:"retail_price"`
	Location string       `json:"article_location"`
	UploadID string       `json:"upload_id"`
}

// allStock reads the whole stock in force of p's client, a page of 1000 at a
// time, following next_cursor.
func allStock(tb testing.TB, p *proc, query string) []stockRecord {
	tb.Helper()
	var out []stockRecord
	after := ""
	for {
		var page struct {
			Stock      []stockRecord `json:"stock"`
			NextCursor string        `json:"next_cursor"`
		}
		getJSON(tb, p, "/stock/"+p.ClientID+"/stock?limit=1000&after="+url.QueryEscape(after)+query, &page)
		out = append(out, page.Stock...)
		if page.NextCursor == "" {
			return out
		}
		after = page.NextCursor
	}
}

// checkStock asserts that the stock in force is exactly want: one row per
// store and EAN, no more, each with the feed's values.
func checkStock(tb testing.TB, p *proc, want map[string]feedRow) {
	tb.Helper()
	got := allStock(tb, p, "")
	if len(got) != len(want) {
		tb.Errorf("stock has %d rows, want %d", len(got), len(want))
	}
	seen := make(map[string]bool, len(got))
	bad := 0
	for _, s := range got {
		k := s.Store + "/" + s.EAN
		w, ok := want[k]
		switch {
		case seen[k]:
			tb.Errorf("stock lists %s twice", k)
		case !ok:
			tb.Errorf("stock lists %s, which no feed row set", k)
		case s.Quantity != w.Quantity || !sameMoney(s.Price.String(), w.Price) || s.Retail == nil ||
			!sameMoney(s.Retail.String(), w.Retail) || s.Article != w.Article || s.Location != w.Location:
			if bad++; bad <= 5 {
				tb.Errorf("stock %s = %+v, want %+v", k, s, w)
			}
		}
		seen[k] = true
	}
	if bad > 5 {
		tb.Errorf("... %d stock rows differ from the feed in all", bad)
	}
}

// sameMoney compares two exact decimals ("19.9" and "19.90" are the same).
func sameMoney(a, b string) bool {
	x, errA := storelink.ParseMoney(a)
	y, errB := storelink.ParseMoney(b)
	return errA == nil && errB == nil && x == y
}

// checkAppliedOnce asserts that the client's uploads are exactly the one
// with id, listed once, applied, with rows applied as given.
func checkAppliedOnce(tb testing.TB, p *proc, id string, rows int) uploadRecord {
	tb.Helper()
	list := allUploads(tb, p)
	if len(list) != 1 || list[0].ID != id {
		ids := make([]string, len(list))
		for i, u := range list {
			ids[i] = u.ID + ":" + u.Status
		}
		tb.Fatalf("uploads listed: %v, want exactly [%s]", ids, id)
	}
	u := list[0]
	if u.Status != "applied" || u.RowsApplied != rows || u.FinishedAt == nil {
		tb.Fatalf("upload %s: status %s, rows_applied %d (want applied, %d), finished_at %v, errors %.500s",
			id, u.Status, u.RowsApplied, rows, u.FinishedAt, u.Errors)
	}
	return u
}

// TestDurabilityKillAfter200 kills the server the moment an upload's 200
// arrives: the upload must survive, and be applied exactly once after the
// restart.
func TestDurabilityKillAfter200(t *testing.T) {
	t.Parallel()
	for i := range 5 {
		t.Run(fmt.Sprintf("run%d", i), func(t *testing.T) {
			p := startServe(t, t.TempDir(), "--demo")
			f := bigFeed(500+i*1000, 3, i)
			id := uploadThenKill(t, p, "kill-after-200.csv", f.body)

			q := restart(t, p)
			q.waitUpload(t, id, 30*time.Second)
			checkAppliedOnce(t, q, id, len(f.want))
			checkStock(t, q, f.want)
		})
	}
}

// catchProcessing uploads f and stops the server with stop while the upload
// reads "processing". It retries on a fresh data folder when the upload was
// already final by then, and fails when that never happens. It returns the
// restarted server, the upload id and when the server was stopped.
func catchProcessing(t *testing.T, f testFeed, stop func(*proc)) (*proc, string, time.Time) {
	t.Helper()
	for attempt := 1; attempt <= 5; attempt++ {
		p := startServe(t, t.TempDir(), "--demo")
		id := mustUpload(t, p, "big.csv", f.body)
		if !waitProcessing(t, p, id) {
			t.Logf("attempt %d: upload applied before it was seen processing; trying again", attempt)
			p.Kill()
			continue
		}
		stop(p)
		stopped := time.Now()
		return restart(t, p), id, stopped
	}
	t.Fatal("never caught the upload while it was processing in 5 attempts")
	return nil, "", time.Time{}
}

// TestDurabilityKillWhileProcessing kills the server while a large upload
// is being applied: after the restart it is applied exactly once, from the
// start, and the stock is exactly the file's.
func TestDurabilityKillWhileProcessing(t *testing.T) {
	t.Parallel()
	f := bigFeed(170_000, 200, 1)
	if len(f.body) > 10<<20 {
		t.Fatalf("feed is %d bytes, over the default --max-file-size", len(f.body))
	}
	for attempt := 1; ; attempt++ {
		q, id, killed := catchProcessing(t, f, func(p *proc) { p.Kill() })
		u := q.waitUpload(t, id, 40*time.Second)
		rec := checkAppliedOnce(t, q, id, len(f.want))
		if rec.StartedAt.Before(killed.Truncate(time.Millisecond)) {
			// The apply committed between the last "processing" read and
			// the kill: nothing was interrupted. Try again.
			if attempt == 3 {
				t.Fatalf("the kill never interrupted the apply in %d attempts (last started %s, killed %s)", attempt, rec.StartedAt, killed)
			}
			t.Logf("attempt %d: applied before the kill landed; trying again", attempt)
			continue
		}
		if u["rows_total"].(float64) != float64(170_200) {
			t.Errorf("rows_total = %v, want 170200", u["rows_total"])
		}
		checkStock(t, q, f.want)
		return
	}
}

// TestOrderLaterUploadWins sends two uploads for the same store and EAN
// back to back, without waiting between them; the later one's quantity must
// be in force every time, also when the earlier one is large and the later
// one tiny (it would finish first if order were not kept).
func TestOrderLaterUploadWins(t *testing.T) {
	t.Parallel()
	p := startServe(t, t.TempDir(), "--demo", "--capacity-base", "1GiB")
	x := ean13(999_999_001)
	one := func(qty int) []byte {
		return makeFeed([]feedRow{{Store: "S1", EAN: x, Article: "SKU-X", Quantity: qty, Price: "9.99", Retail: "19.99", Location: "L"}}).body
	}
	quantity := func() (int, string) {
		rows := allStock(t, p, "&store=S1&ean="+x)
		if len(rows) != 1 {
			t.Fatalf("stock for S1/%s: %d rows, want 1", x, len(rows))
		}
		return rows[0].Quantity, rows[0].UploadID
	}
	check := func(run string, a, b string, want int) {
		t.Helper()
		ua, ub := p.waitUpload(t, a, 30*time.Second), p.waitUpload(t, b, 30*time.Second)
		if ua["status"] != "applied" || ub["status"] != "applied" {
			t.Fatalf("%s: statuses %v, %v; want both applied", run, ua["status"], ub["status"])
		}
		if got, from := quantity(); got != want || from != b {
			t.Errorf("%s: quantity %d from upload %s, want %d from the later upload %s (earlier %s)", run, got, from, want, b, a)
		}
	}

	for i := range 20 {
		qa, qb := 5+i, 500+i*3
		a := mustUpload(t, p, "a.csv", one(qa))
		b := mustUpload(t, p, "b.csv", one(qb))
		check(fmt.Sprintf("small run %d", i), a, b, qb)
	}

	// Sent at the same time, the two are accepted in some order; the one
	// accepted later (listed first) must be the one in force.
	for i := range 10 {
		qa, qb := 100+i, 200+i
		type sent struct {
			qty int
			id  string
		}
		done := make(chan sent, 2)
		for _, q := range []int{qa, qb} {
			go func() {
				req, _ := http.NewRequest(http.MethodPut, p.URL+"/stock/"+p.ClientID+"/c.csv", bytes.NewReader(one(q)))
				req.Header.Set("x-api-key", p.APIKey)
				var u struct {
					ID string `json:"upload_id"`
				}
				if resp, err := http.DefaultClient.Do(req); err == nil {
					_ = json.NewDecoder(resp.Body).Decode(&u)
					resp.Body.Close()
				}
				done <- sent{q, u.ID}
			}()
		}
		qtyOf := map[string]int{}
		for range 2 {
			s := <-done
			if s.id == "" {
				t.Fatalf("concurrent run %d: the upload of quantity %d failed", i, s.qty)
			}
			qtyOf[s.id] = s.qty
		}
		var list struct {
			Uploads []uploadRecord `json:"uploads"`
		}
		getJSON(t, p, "/stock/"+p.ClientID+"/uploads?limit=2", &list)
		if len(list.Uploads) != 2 || qtyOf[list.Uploads[0].ID] == 0 || qtyOf[list.Uploads[1].ID] == 0 {
			t.Fatalf("concurrent run %d: newest uploads listed %v, want the two just sent", i, list.Uploads)
		}
		earlier, later := list.Uploads[1].ID, list.Uploads[0].ID
		want := qtyOf[later]
		check(fmt.Sprintf("concurrent run %d", i), earlier, later, want)
	}

	for i := range 3 {
		big := bigFeed(60_000, 0, i)
		rows := bytes.TrimSuffix(one(5+i), []byte("\n"))
		big.body = append(big.body, rows[bytes.IndexByte(rows, '\n')+1:]...)
		big.body = append(big.body, '\n')
		a := mustUpload(t, p, "big-a.csv", big.body)
		b := mustUpload(t, p, "tiny-b.csv", one(700+i))
		check(fmt.Sprintf("big run %d", i), a, b, 700+i)
	}
}

// exitCode is the exit code of a process from the error of its Wait; -1
// when a signal ended it.
func exitCode(tb testing.TB, err error) int {
	tb.Helper()
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	tb.Fatalf("wait: %v", err)
	return -1
}

// stopWithin sends SIGTERM and returns the exit code and how long the exit
// took; a process still running after limit is killed, so a stop that hangs
// fails the test instead of stalling it.
func stopWithin(tb testing.TB, p *proc, limit time.Duration) (int, time.Duration) {
	tb.Helper()
	start := time.Now()
	watchdog := time.AfterFunc(limit, func() { _ = p.cmd.Process.Signal(syscall.SIGKILL) })
	err := p.Stop()
	took := time.Since(start)
	if !watchdog.Stop() {
		tb.Fatalf("serve did not exit within %s of SIGTERM:\n%s", limit, p.stderr)
	}
	return exitCode(tb, err), took
}

// TestGracefulStop sends SIGTERM: serve exits 0, and an upload that was
// being processed is applied, before the exit or after the next start.
func TestGracefulStop(t *testing.T) {
	t.Parallel()
	t.Run("idle", func(t *testing.T) {
		p := startServe(t, t.TempDir(), "--demo")
		code, took := stopWithin(t, p, 10*time.Second)
		if code != 0 {
			t.Fatalf("exit code %d after SIGTERM, want 0:\n%s", code, p.stderr)
		}
		t.Logf("idle stop took %s", took)
	})
	t.Run("processing", func(t *testing.T) {
		f := bigFeed(170_000, 0, 2)
		var took time.Duration
		q, id, _ := catchProcessing(t, f, func(p *proc) {
			var code int
			if code, took = stopWithin(t, p, 30*time.Second); code != 0 {
				t.Fatalf("exit code %d after SIGTERM while processing, want 0:\n%s", code, p.stderr)
			}
		})
		t.Logf("stop while processing took %s", took)
		q.waitUpload(t, id, 40*time.Second)
		checkAppliedOnce(t, q, id, len(f.want))
		checkStock(t, q, f.want)
	})
}

// TestGracefulStopKeepsAttempts stops the server with SIGTERM while an
// upload is processing, as many times as worker.MaxFailures allows a file to
// make its processing fail: an orderly stop is not the file's fault, so the
// upload must still be applied, not set aside as "Processing failed".
func TestGracefulStopKeepsAttempts(t *testing.T) {
	t.Parallel()
	stopsWhileProcessing(t, bigFeed(170_000, 0, 3), worker.MaxFailures, nil, func(t *testing.T, p *proc, n int) {
		if code, _ := stopWithin(t, p, 30*time.Second); code != 0 {
			t.Fatalf("stop %d: exit code %d, want 0:\n%s", n, code, p.stderr)
		}
	})
}

// TestKillsWhileProcessingAreNotFailures kills the server (SIGKILL) while
// it applies an upload, more times than worker.MaxFailures: a process that
// dies is not the file's fault, so after the last restart the upload is
// applied, exactly once, not rejected as "Processing failed".
func TestKillsWhileProcessingAreNotFailures(t *testing.T) {
	t.Parallel()
	stopsWhileProcessing(t, bigFeed(170_000, 0, 4), worker.MaxFailures+1, nil, func(t *testing.T, p *proc, _ int) { p.Kill() })
}

// stopsWhileProcessing stops a server with stop while it applies f, stops
// times, and checks that f is then applied once; it tries again on a new
// data folder (and database, from args) when the upload was applied before
// it could be stopped that often. args gives each try's serve flags, or is
// nil for a SQLite data folder.
func stopsWhileProcessing(t *testing.T, f testFeed, stops int, args func() []string, stop func(t *testing.T, p *proc, n int)) *proc {
	t.Helper()
	for try := 1; ; try++ {
		var a []string
		if args != nil {
			a = args()
		}
		p, id, ok := stopWhileProcessing(t, f, stops, a, stop)
		if !ok {
			if try == 3 {
				t.Fatalf("the upload was applied before it could be stopped %d times, in %d tries", stops, try)
			}
			t.Logf("try %d: the upload was applied before it could be stopped %d times; trying again", try, stops)
			continue
		}
		// A bound for a machine under load: the wait ends as soon as the
		// upload is final (a 10 MiB apply on PostgreSQL took 40 s and more at
		// load 18, after the backoff of the interruptions).
		p.waitUpload(t, id, 2*time.Minute)
		checkAppliedOnce(t, p, id, len(f.want))
		checkStock(t, p, f.want)
		return p
	}
}

// stopWhileProcessing uploads f to a new server and stops it with stop
// while its processor applies the upload, stops times, starting it again
// after each stop. It reports false when the upload was final before it
// could be stopped that often.
func stopWhileProcessing(t *testing.T, f testFeed, stops int, args []string, stop func(t *testing.T, p *proc, n int)) (*proc, string, bool) {
	t.Helper()
	p := startServe(t, t.TempDir(), append([]string{"--demo"}, args...)...)
	id := mustUpload(t, p, "big.csv", f.body)
	var since time.Time // each start's new claim begins after the last stop
	for n := range stops {
		// The status stays "processing" across a stop: wait for a
		// started_at after the stop, which shows the new start's claim
		// (after a kill, once the upload's backoff has passed).
		for deadline := time.Now().Add(20 * time.Second); ; {
			code, u := p.get(t, "/stock/"+p.ClientID+"/uploads/"+id)
			if code != http.StatusOK {
				t.Fatalf("get upload: %d %v", code, u)
			}
			if u["status"] == "applied" || u["status"] == "rejected" {
				// Applied: the race was lost, nothing to judge. Rejected:
				// the caller's checks report it.
				t.Logf("after %d stops the upload is %s: %v", n, u["status"], u["errors"])
				return p, id, u["status"] == "rejected"
			}
			started, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(u["started_at"]))
			if u["status"] == "processing" && !started.Before(since) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("stop %d: upload not claimed again within 20s: %v", n, u)
			}
		}
		stop(t, p, n)
		since = time.Now().Truncate(time.Millisecond)
		p = restart(t, p, args...)
	}
	return p, id, true
}

// TestLockSecondProcess starts a second serve (and a migrate) on the data
// folder of a running one: both must refuse, saying the database is in use,
// and the first must go on serving.
func TestLockSecondProcess(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	p := startServe(t, data, "--demo")
	for _, args := range [][]string{
		{"serve", "--addr", "127.0.0.1:0", "--data", data},
		{"migrate", "--data", data},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, storelinkBinary(t), args...)
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.Discard, &stderr
		err := cmd.Run()
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("%s on a data folder in use did not exit within 20s", args[0])
		}
		if code := exitCode(t, err); code == 0 {
			t.Errorf("%s on a data folder in use: exit 0, want non-zero", args[0])
		}
		if msg := stderr.String(); !strings.Contains(msg, "in use") {
			t.Errorf("%s on a data folder in use says %q; want it to say the database is in use", args[0], msg)
		}
	}
	if code, _ := p.get(t, "/readyz"); code != http.StatusOK {
		t.Errorf("the first server answers /readyz with %d after the refused start", code)
	}
	id := mustUpload(t, p, "after-lock.csv", bigFeed(10, 0, 0).body)
	if u := p.waitUpload(t, id, 30*time.Second); u["status"] != "applied" {
		t.Errorf("upload after the refused start: %v", u["status"])
	}
}
