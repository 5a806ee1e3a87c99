package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"storelink"
)

const (
	validFeed = "store;ean;article_number;quantity;price;retail_price;store_article_location\n" +
		`"S1";"4006381333931";"SKU-123";5;19.99;29.99;"Dept 3"` + "\n"
	// rowErrorFeed has an unknown store on line 3, bad EANs on lines 4-6,
	// a bad quantity on line 7 and an unknown column.
	rowErrorFeed = "store;ean;article_number;quantity;price;colour_code\n" +
		"S1;4006381333931;SKU-1;5;19.99;x\n" +
		"S9;4006381333931;SKU-1;5;19.99;x\n" +
		"S1;123;SKU-1;5;19.99;x\n" +
		"S1;124;SKU-1;5;19.99;x\n" +
		"S1;125;SKU-1;5;19.99;x\n" +
		"S2;4006381333931;SKU-1;-5;19.99;x\n"
	missingColumnsFeed = "store;ean\nS1;4006381333931\n"
)

// writeFile puts content into a file of the test's temp folder.
func writeFile(tb testing.TB, name, content string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

type uploadRun struct {
	code           int
	stdout, stderr string
}

// runUpload runs `storelink upload args...` in-process with env as the
// whole environment.
func runUpload(tb testing.TB, env map[string]string, args ...string) uploadRun {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, append([]string{"upload"}, args...), func(k string) string { return env[k] }, nil, &stdout, &stderr)
	r := uploadRun{code, stdout.String(), stderr.String()}
	tb.Logf("storelink upload %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	return r
}

// credentials are the flags of p's demo client.
func credentials(p *proc) []string {
	return []string{"--url", p.URL + "/stock", "--client-id", p.ClientID, "--api-key", p.APIKey}
}

func TestUploadAgainstServer(t *testing.T) {
	p := startServe(t, t.TempDir(), "--demo")
	if p.ClientID == "" || p.APIKey == "" {
		t.Fatalf("no demo credentials in:\n%s", p.stdout)
	}

	t.Run("valid file with --wait is applied: exit 0", func(t *testing.T) {
		r := runUpload(t, nil, append(credentials(p), "--wait", writeFile(t, "stock.csv", validFeed))...)
		if r.code != 0 {
			t.Fatalf("exit %d, want 0", r.code)
		}
		if !strings.HasPrefix(r.stdout, "stock.csv: applied\n") || !strings.Contains(r.stdout, "1 total, 1 applied, 0 rejected") {
			t.Errorf("report = %q, want applied with 1 row", r.stdout)
		}
		if !strings.Contains(r.stderr, "uploading stock.csv: 130 B") || !strings.Contains(r.stderr, "accepted stock.csv: upload_id=") {
			t.Errorf("stderr = %q, want the plain progress lines", r.stderr)
		}
		// stderr is not a terminal: no progress bar.
		if strings.ContainsAny(r.stderr+r.stdout, "\r\x1b") {
			t.Errorf("output holds progress-bar control characters: %q", r.stderr)
		}
	})

	t.Run("the same file again: applied, its row unchanged", func(t *testing.T) {
		r := runUpload(t, nil, append(credentials(p), "--wait", writeFile(t, "stock.csv", validFeed))...)
		if r.code != 0 || !strings.Contains(r.stdout, "1 total, 1 applied (1 unchanged), 0 rejected") {
			t.Errorf("exit %d, report = %q; want 0 and the row applied unchanged", r.code, r.stdout)
		}
	})

	t.Run("--gzip sends the file compressed; the service stores the file itself", func(t *testing.T) {
		var big strings.Builder
		big.WriteString(validFeed)
		for range 3000 { // past 64 KiB: the uploader asks before sending
			big.WriteString(`"S2";"4006381333931";"SKU-123";7;19.99;29.99;"Dept 3"` + "\n")
		}
		r := runUpload(t, nil, append(credentials(p), "--gzip", "--wait", "--json", writeFile(t, "big.csv", big.String()))...)
		if r.code != 0 {
			t.Fatalf("exit %d, want 0", r.code)
		}
		var u storelink.Upload
		if err := json.Unmarshal([]byte(r.stdout), &u); err != nil {
			t.Fatalf("stdout is not the upload's JSON: %v", err)
		}
		sum := sha256.Sum256([]byte(big.String()))
		if u.Status != storelink.UploadApplied || u.SizeBytes != int64(big.Len()) || u.SHA256 != hex.EncodeToString(sum[:]) || u.RowsApplied != 2 {
			t.Fatalf("upload = %+v, want applied, %d bytes, the file's sha256, 2 rows applied", u, big.Len())
		}
	})

	t.Run("--errors-to saves the dropped rows as they stood in the file", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "errors.csv")
		// Its valid row is not the one of the subtest below, which expects
		// its own to be applied, not unchanged.
		feed := strings.Replace(rowErrorFeed, "S1;4006381333931;SKU-1;5;19.99;x\n", "S2;4006381333931;SKU-9;5;19.99;x\n", 1)
		r := runUpload(t, nil, append(credentials(p), "--errors-to", out, writeFile(t, "rows.csv", feed))...)
		if r.code != 1 {
			t.Fatalf("exit %d, want 1 (row errors; --errors-to waits)", r.code)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 6 || lines[0] != "store;ean;article_number;quantity;price;colour_code;line;problem_type;problem_detail" ||
			!strings.HasPrefix(lines[1], "S9;4006381333931;SKU-1;5;19.99;x;3;Store does not exist;") ||
			!strings.HasPrefix(lines[5], "S2;4006381333931;SKU-1;-5;19.99;x;7;Invalid column value;") {
			t.Fatalf("error file:\n%s", b)
		}
		if !strings.Contains(r.stderr, "error file saved to "+out) {
			t.Errorf("stderr = %q, want it to say where the error file went", r.stderr)
		}
	})

	t.Run("row errors: exit 1, problems by type with lines", func(t *testing.T) {
		r := runUpload(t, nil, append(credentials(p), "--wait", writeFile(t, "rows.csv", rowErrorFeed))...)
		if r.code != 1 {
			t.Fatalf("exit %d, want 1", r.code)
		}
		for _, want := range []string{
			"rows.csv: applied with row errors\n",
			"6 total, 1 applied, 5 rejected",
			"errors:\n",
			"  Store does not exist (1 line)\n",
			"line 3 (stores S9)\n",
			"  Invalid column value (4 lines)\n",
			"lines 4-6\n",
			"line 7\n",
			"warnings:\n  Unknown columns (1 line)\n",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("report lacks %q", want)
			}
		}
	})

	t.Run("missing columns: rejected, exit 1", func(t *testing.T) {
		r := runUpload(t, nil, append(credentials(p), "--wait", writeFile(t, "cols.csv", missingColumnsFeed))...)
		if r.code != 1 {
			t.Fatalf("exit %d, want 1", r.code)
		}
		if !strings.Contains(r.stdout, "cols.csv: rejected, nothing applied") || !strings.Contains(r.stdout, "Missing mandatory columns (1 line)") || !strings.Contains(r.stdout, "line 1\n") {
			t.Errorf("report = %q", r.stdout)
		}
	})

	t.Run("--json prints the final status", func(t *testing.T) {
		r := runUpload(t, nil, append(credentials(p), "--wait", "--json", writeFile(t, "cols.csv", missingColumnsFeed))...)
		var u storelink.Upload
		if err := json.Unmarshal([]byte(r.stdout), &u); err != nil {
			t.Fatalf("stdout is not the upload JSON: %v", err)
		}
		if r.code != 1 || u.Status != storelink.UploadRejected || len(u.Errors) != 1 || u.Errors[0].Type != storelink.ProblemMissingColumns {
			t.Errorf("exit %d, upload %+v; want 1 and rejected for missing columns", r.code, u)
		}
	})

	t.Run("without --wait: the receipt as JSON, exit 0", func(t *testing.T) {
		r := runUpload(t, nil, append(credentials(p), writeFile(t, "stock.csv", validFeed))...)
		var receipt map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &receipt); err != nil {
			t.Fatalf("stdout is not JSON: %v", err)
		}
		if r.code != 0 || receipt["status"] != "accepted" || receipt["upload_id"] == "" || receipt["file_name"] != "stock.csv" {
			t.Errorf("exit %d, receipt %v", r.code, receipt)
		}
	})

	t.Run("environment, a host-only URL, --name and flags after FILE", func(t *testing.T) {
		env := map[string]string{"STORELINK_URL": p.URL, "STORELINK_CLIENT_ID": p.ClientID, "STORELINK_API_KEY": "slk_wrong"}
		file := writeFile(t, "export.txt", validFeed)
		r := runUpload(t, env, file, "--name", "stock-2.csv", "--api-key", p.APIKey, "--wait")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "stock-2.csv: applied") {
			t.Errorf("exit %d, report %q; want the flag's key to win and the upload applied", r.code, r.stdout)
		}
	})

	t.Run("wrong key: exit 2 with a clear message", func(t *testing.T) {
		args := []string{"--url", p.URL + "/stock", "--client-id", p.ClientID, "--api-key", "slk_wrong", writeFile(t, "stock.csv", validFeed)}
		r := runUpload(t, nil, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "refused the credentials (401") || !strings.Contains(r.stderr, "--api-key") {
			t.Errorf("exit %d, stderr %q; want 2 and the credentials named", r.code, r.stderr)
		}
		if r.stdout != "" {
			t.Errorf("stdout = %q, want nothing", r.stdout)
		}
	})

	t.Run("wrong path: exit 2 pointing at --url", func(t *testing.T) {
		args := []string{"--url", p.URL + "/api", "--client-id", p.ClientID, "--api-key", p.APIKey, writeFile(t, "stock.csv", validFeed)}
		if r := runUpload(t, nil, args...); r.code != 2 || !strings.Contains(r.stderr, "check --url") {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
}

func TestUploadWaitsOnCapacity(t *testing.T) {
	// 1 KiB per 4 s refills 256 B/s: after one 722-byte file the next one
	// is 420 bytes short, a wait of about 1.6 s (Retry-After: 2).
	p := startServe(t, t.TempDir(), "--demo", "--capacity-base", "1KiB", "--capacity-per-store", "0", "--capacity-window", "4s")
	feed := "store;ean;article_number;quantity;price\n" + strings.Repeat("S1;4006381333931;SKU-1;5;19.99\n", 22)
	if len(feed) < 700 || len(feed) > 1000 {
		t.Fatalf("feed is %d bytes", len(feed))
	}
	file := writeFile(t, "stock.csv", feed)
	if r := runUpload(t, nil, append(credentials(p), file)...); r.code != 0 {
		t.Fatalf("first upload: exit %d", r.code)
	}
	start := time.Now()
	r := runUpload(t, nil, append(credentials(p), "--wait", file)...)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "stock.csv: applied") {
		t.Fatalf("second upload: exit %d, report %q; want it applied after waiting", r.code, r.stdout)
	}
	if !strings.Contains(r.stderr, "capacity used up; retrying in ") {
		t.Errorf("stderr = %q, want it to say it waits", r.stderr)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("second upload took %s, want the wait of at least 1s", d)
	}

	// The bucket is nearly empty again: with no time to wait, give up.
	r = runUpload(t, nil, append(credentials(p), "--max-wait", "0", file)...)
	if r.code != 1 || !strings.Contains(r.stderr, "429") || !strings.Contains(r.stderr, "--max-wait") {
		t.Errorf("exit %d, stderr %q; want 1 and the 429 explained", r.code, r.stderr)
	}
}

func TestUploadUsage(t *testing.T) {
	file := writeFile(t, "stock.csv", validFeed)
	creds := []string{"--url", "http://127.0.0.1:1/stock", "--client-id", "c1", "--api-key", "k1"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no flags", []string{file}, "no service URL"},
		{"no client id", []string{"--url", "http://127.0.0.1:1", "--api-key", "k", file}, "no client id"},
		{"no key", []string{"--url", "http://127.0.0.1:1", "--client-id", "c", file}, "no API key"},
		{"no file", creds, "no FILE"},
		{"two files", append(creds, file, file), "one FILE at a time"},
		{"not .csv", append(creds, writeFile(t, "stock.txt", validFeed)), `"stock.txt" does not end in .csv; give --name`},
		{"bad --name", append(creds, "--name", "a/b.csv", file), "must not contain '/'"},
		{"no such file", append(creds, filepath.Join(t.TempDir(), "gone.csv")), "no such file"},
		{"a folder", append(creds, "--name", "x.csv", t.TempDir()), "not a regular file"},
		{"not a URL", []string{"--url", "ftp://host/stock", "--client-id", "c", "--api-key", "k", file}, "not an http or https URL"},
		{"unknown flag", append(creds, "--colour", file), "flag provided but not defined"},
		{"nobody listening", append(creds, file), "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runUpload(t, nil, tc.args...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", r.code, r.stderr, tc.want)
			}
		})
	}
	if r := runUpload(t, nil, "-h"); r.code != 0 || !strings.Contains(r.stderr, "Usage: storelink upload") {
		t.Errorf("-h: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestFormatLines(t *testing.T) {
	refs := func(lines ...int) []storelink.LineRef {
		var r []storelink.LineRef
		for _, l := range lines {
			r = append(r, storelink.LineRef{LineNumber: l})
		}
		return r
	}
	many := make([]int, 0, 60)
	for l := 2; l < 122; l += 2 { // 60 lines, none adjacent
		many = append(many, l)
	}
	for _, tc := range []struct {
		name  string
		refs  []storelink.LineRef
		count int
		want  string
	}{
		{"one", refs(7), 1, "line 7"},
		{"one, count unset", refs(7), 0, "line 7"},
		{"ranges", refs(4, 5, 6, 7, 8, 9, 12), 7, "lines 4-9, 12"},
		{"unsorted with repeats", refs(12, 5, 4, 4, 6), 4, "lines 4-6, 12"},
		{"two adjacent", refs(3, 4), 2, "lines 3-4"},
		{"cut by the service", refs(2, 3, 4), 1000, "lines 2-4 … and 997 more"},
		{"past 20 ranges", refs(many...), 60, "lines 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38, 40 … and 40 more"},
		{"no references", nil, 3, "3 lines"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := formatLines(tc.refs, tc.count); got != tc.want {
				t.Errorf("formatLines = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWriteReport(t *testing.T) {
	u := &storelink.Upload{
		ID: "u1", FileName: "stock.csv", SizeBytes: 10 << 20, SHA256: "ab", Status: storelink.UploadApplied,
		RowsTotal: 10, RowsApplied: 6, RowsRejected: 4,
		Errors: []storelink.Problem{
			{Type: storelink.ProblemInvalidValue, Message: `Invalid value in column "ean".`, Count: 2,
				LineNumbers: []storelink.LineRef{{LineNumber: 4}, {LineNumber: 5}}},
			{Type: storelink.ProblemUnknownStore, Message: "Store does not exist.", Count: 1,
				LineNumbers: []storelink.LineRef{{LineNumber: 9, StoreID: "S9"}}},
			{Type: storelink.ProblemInvalidValue, Message: `Invalid value in column "price".`, Count: 1,
				LineNumbers: []storelink.LineRef{{LineNumber: 11}}},
		},
		Warnings: []storelink.Problem{
			{Type: storelink.ProblemDuplicated, Message: "Duplicated.", Count: 1,
				LineNumbers: []storelink.LineRef{{LineNumber: 2, StoreID: "S1", EAN: "4006381333931"}}},
		},
	}
	var b bytes.Buffer
	writeReport(&b, u)
	want := `stock.csv: applied with row errors
  upload  u1 (10.0 MiB, sha256 ab)
  rows    10 total, 6 applied, 4 rejected
errors:
  Invalid column value (3 lines)
    Invalid value in column "ean".
      lines 4-5
    Invalid value in column "price".
      line 11
  Store does not exist (1 line)
    Store does not exist.
      line 9 (stores S9)
warnings:
  Duplicated value (1 line)
    Duplicated.
      line 2 (store/ean S1/4006381333931)
`
	if b.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", b.String(), want)
	}
}

// stuckService accepts every upload and keeps it processing for ever.
func stuckService(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPut {
			_, _ = io.WriteString(w, `{"upload_id":"u1","file_name":"stock.csv","status":"accepted"}`)
			return
		}
		_, _ = io.WriteString(w, `{"upload_id":"u1","file_name":"stock.csv","status":"processing"}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestUploadWaitEnds(t *testing.T) {
	url := stuckService(t)
	file := writeFile(t, "stock.csv", validFeed)
	args := []string{"upload", "--url", url, "--client-id", "c1", "--api-key", "k1", "--wait"}

	r := runUpload(t, nil, append(args[1:], "--wait-timeout", "300ms", file)...)
	if r.code != 2 || !strings.Contains(r.stderr, "upload u1 is still processing after --wait-timeout 300ms") {
		t.Errorf("exit %d, stderr %q; want 2 and the timeout named", r.code, r.stderr)
	}

	// Ctrl-C while waiting: exit 2, and the upload is said to be accepted.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, append(args, file), noEnv, nil, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "interrupted; upload u1 was accepted") {
		t.Errorf("interrupted: exit %d, stderr %q", code, stderr.String())
	}
}

// scriptedService answers the PUTs of an upload with the given answers in
// turn (the last one again once they run out), each a status, a problem
// type and a Retry-After; it counts the PUTs and checks each carries the
// whole file.
func scriptedService(t *testing.T, want string, answers ...[3]string) (url string, puts func() int) {
	t.Helper()
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		a := answers[min(n, len(answers)-1)]
		n++
		mu.Unlock()
		if string(b) != want {
			t.Errorf("PUT %d carried %d bytes, want the whole file of %d", n, len(b), len(want))
		}
		if a[0] == "200" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"upload_id":"u1","file_name":"stock.csv","status":"accepted"}`)
			return
		}
		if a[2] != "" {
			w.Header().Set("Retry-After", a[2])
		}
		w.Header().Set("Content-Type", "application/problem+json")
		status, _ := strconv.Atoi(a[0])
		w.WriteHeader(status)
		_, _ = fmt.Fprintf(w, `{"type":"/problems/%s","title":%q,"status":%d,"detail":"detail of %s"}`, a[1], http.StatusText(status), status, a[1])
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// The uploader sends again after a 503 with Retry-After and after a 429
// for too many waiting uploads, within --max-wait; past it a 503 ends with
// exit 2; a 507 ends at once with exit 2, saying nothing was stored.
func TestUploadRetriesFaults(t *testing.T) {
	file := writeFile(t, "stock.csv", validFeed)
	args := func(url string, more ...string) []string {
		return append([]string{"--url", url, "--client-id", "c1", "--api-key", "k1"}, append(more, file)...)
	}
	t.Run("503 and 429 too_many_waiting: sent again", func(t *testing.T) {
		url, puts := scriptedService(t, validFeed, [3]string{"503", "unavailable", "1"}, [3]string{"429", "too_many_waiting", "1"}, [3]string{"200"})
		r := runUpload(t, nil, args(url)...)
		if r.code != 0 || puts() != 3 || !strings.Contains(r.stdout, `"upload_id":"u1"`) {
			t.Fatalf("exit %d after %d PUTs, stdout %q; want 0 after 3", r.code, puts(), r.stdout)
		}
		for _, want := range []string{"service unavailable; retrying in 1 s", "too many uploads of this client wait to be processed; retrying in 1 s"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr %q, want %q", r.stderr, want)
			}
		}
	})
	t.Run("503 past --max-wait: exit 2", func(t *testing.T) {
		url, puts := scriptedService(t, validFeed, [3]string{"503", "unavailable", "1"})
		r := runUpload(t, nil, args(url, "--max-wait", "2s")...)
		if r.code != 2 || puts() != 3 || !strings.Contains(r.stderr, "detail of unavailable") || !strings.Contains(r.stderr, "exceed --max-wait 2s") {
			t.Fatalf("exit %d after %d PUTs, stderr %q; want 2 after 3 PUTs (two waits of 1 s), the 503 and --max-wait named", r.code, puts(), r.stderr)
		}
	})
	t.Run("507: exit 2 at once", func(t *testing.T) {
		url, puts := scriptedService(t, validFeed, [3]string{"507", "insufficient_storage", ""})
		r := runUpload(t, nil, args(url)...)
		if r.code != 2 || puts() != 1 || !strings.Contains(r.stderr, "no space left") || !strings.Contains(r.stderr, "nothing was stored") {
			t.Fatalf("exit %d after %d PUTs, stderr %q; want 2 after one PUT, saying there is no space and nothing was stored", r.code, puts(), r.stderr)
		}
	})
}

// On a terminal the bar stays once the last byte is read, saying that the
// service is being waited for, and ends only with the answer.
func TestUploadBarStaysUntilAnswer(t *testing.T) {
	var buf bytes.Buffer
	stderr := &lockedWriter{w: &buf}
	drawn := func() string {
		stderr.mu.Lock()
		defer stderr.mu.Unlock()
		return buf.String()
	}
	u := &uploader{cfg: &uploadConfig{Name: "stock.csv"}, stderr: stderr, tty: true}
	p := u.newProgress(int64(len(validFeed)))
	bar, ok := p.(*barProgress)
	if !ok {
		t.Fatalf("progress on a terminal is %T, want the bar", p)
	}
	if _, err := io.Copy(io.Discard, p.reader(strings.NewReader(validFeed))); err != nil {
		t.Fatal(err)
	}
	if bar.bar.IsFinished() {
		t.Fatal("the bar ended when the last byte was read, before the service answered")
	}
	for deadline := time.Now().Add(2 * time.Second); !strings.Contains(drawn(), "stock.csv: sent, waiting for the service"); {
		if time.Now().After(deadline) {
			t.Fatalf("drawn: %q, want the bar to say it waits for the service", drawn())
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.done(true)
	if !bar.bar.IsFinished() {
		t.Fatal("the bar did not end with the answer")
	}
}
