package httpapi_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"storelink"
)

func TestUploadAccepted(t *testing.T) {
	a := newAPI(t, apiOptions{})
	resp, b := a.upload("Feed-DE.CSV", []byte(feed), map[string]string{"Cache-Control": "no-cache"})
	if resp.StatusCode != 200 {
		t.Fatalf("upload = %d %s", resp.StatusCode, b)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"upload_id", "client_id", "file_name", "size_bytes", "sha256", "status", "received_at", "status_url"} {
		if _, ok := got[k]; !ok {
			t.Errorf("answer lacks %q: %s", k, b)
		}
	}
	sum := sha256.Sum256([]byte(feed))
	if got["status"] != "accepted" || got["file_name"] != "Feed-DE.CSV" || got["size_bytes"] != float64(len(feed)) ||
		got["sha256"] != hex.EncodeToString(sum[:]) || got["client_id"] != a.ClientID {
		t.Fatalf("answer = %s", b)
	}
	if !regexp.MustCompile(`^"upload";q=\d+;qu="content-bytes";w=3600$`).MatchString(resp.Header.Get("RateLimit-Policy")) ||
		!regexp.MustCompile(`^"upload";r=\d+;t=\d+$`).MatchString(resp.Header.Get("RateLimit")) {
		t.Fatalf("RateLimit headers = %q / %q", resp.Header.Get("RateLimit-Policy"), resp.Header.Get("RateLimit"))
	}
	u := a.waitUpload(got["upload_id"].(string))
	if u.Status != storelink.UploadApplied || u.RowsApplied != 1 || u.StartedAt == nil || u.FinishedAt == nil {
		t.Fatalf("upload = %+v", u)
	}
	// The status URL given in the answer is the one that works.
	resp, b = a.do("GET", got["status_url"].(string), nil, map[string]string{"x-api-key": a.APIKey})
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"status":"applied"`)) {
		t.Fatalf("status_url = %d %s", resp.StatusCode, b)
	}
	resp, b = a.do("GET", "/stock/"+a.ClientID+"/stock?store=S1", nil, map[string]string{"x-api-key": a.APIKey})
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"price":19.99`)) || !bytes.Contains(b, []byte(`"quantity":5`)) {
		t.Fatalf("stock = %d %s", resp.StatusCode, b)
	}
}

func TestUploadAuthentication(t *testing.T) {
	a := newAPI(t, apiOptions{})
	// other is the partner's client for another country; foreign is a
	// client of another partner.
	var other, foreign storelink.NewClient
	a.admin("POST", "/admin/partners/"+a.PartnerID+"/clients", `{"country_code":"FR","currency":"EUR"}`, 201, &other)
	var p storelink.Partner
	a.admin("POST", "/admin/partners", `{"name":"Other"}`, 201, &p)
	a.admin("POST", "/admin/partners/"+p.ID+"/clients", `{"country_code":"FR","currency":"EUR"}`, 201, &foreign)

	put := func(client, key string) (*http.Response, []byte) {
		h := map[string]string{"Content-Type": "application/csv"}
		if key != "" {
			h["x-api-key"] = key
		}
		return a.do("PUT", "/stock/"+client+"/feed.csv", strings.NewReader(feed), h)
	}
	resp, missing := put(a.ClientID, "")
	problem(t, resp, missing, 401)
	resp, wrong := put(a.ClientID, "slk_wrong")
	problem(t, resp, wrong, 401)
	resp, unknown := put("no-such-client", a.APIKey)
	problem(t, resp, unknown, 401)
	// A key used on another partner's client, or another partner's key on
	// ours, is as good as none.
	resp, foreignClient := put(foreign.ID, a.APIKey)
	problem(t, resp, foreignClient, 401)
	resp, foreignKey := put(a.ClientID, foreign.APIKey)
	problem(t, resp, foreignKey, 401)
	for _, b := range [][]byte{wrong, unknown, foreignClient, foreignKey} {
		if !bytes.Equal(missing, b) {
			t.Fatalf("401 bodies differ, telling which part was wrong:\n%s\n%s", missing, b)
		}
	}
	resp, b := put(other.ID, a.APIKey)
	problem(t, resp, b, 403)
	// The other calls of the client follow the same rules.
	for _, path := range []string{"/uploads", "/stock", "/uploads/x"} {
		resp, b := a.do("GET", "/stock/"+other.ID+path, nil, map[string]string{"x-api-key": a.APIKey})
		problem(t, resp, b, 403)
		resp, b = a.do("GET", "/stock/"+a.ClientID+path, nil, nil)
		problem(t, resp, b, 401)
	}
	// Nothing of the refused uploads was kept.
	list, err := a.svc.Uploads.Uploads(t.Context(), a.ClientID, storelink.UploadFilter{Limit: 10})
	if err != nil || len(list) != 0 {
		t.Fatalf("uploads after refusals = %d, %v", len(list), err)
	}
}

func TestUploadKeyRotation(t *testing.T) {
	a := newAPI(t, apiOptions{})
	var k storelink.NewAPIKey
	a.admin("POST", "/admin/clients/"+a.ClientID+"/api-keys", "", 201, &k)
	old := a.APIKey
	for _, key := range []string{old, k.APIKey} {
		resp, b := a.upload("f.csv", []byte(feed), map[string]string{"x-api-key": key})
		if resp.StatusCode != 200 {
			t.Fatalf("upload with a valid key = %d %s", resp.StatusCode, b)
		}
	}
	var d storelink.ClientDetail
	a.admin("GET", "/admin/clients/"+a.ClientID, "", 200, &d)
	if len(d.APIKeys) != 2 {
		t.Fatalf("client has %d keys, want 2", len(d.APIKeys))
	}
	if bytes.Contains(a.admin("GET", "/admin/clients/"+a.ClientID, "", 200, nil), []byte(old)) {
		t.Fatal("the client detail shows an API key in clear")
	}
	for _, key := range d.APIKeys {
		if key.ID != k.KeyID {
			a.admin("DELETE", "/admin/clients/"+a.ClientID+"/api-keys/"+key.ID, "", 204, nil)
		}
	}
	resp, b := a.upload("f.csv", []byte(feed), map[string]string{"x-api-key": old})
	problem(t, resp, b, 401)
	resp, b = a.upload("f.csv", []byte(feed), map[string]string{"x-api-key": k.APIKey})
	if resp.StatusCode != 200 {
		t.Fatalf("upload with the new key = %d %s", resp.StatusCode, b)
	}
}

func TestUploadBadRequests(t *testing.T) {
	a := newAPI(t, apiOptions{maxFileSize: 1000})
	cases := []struct {
		name   string
		file   string
		body   string
		header map[string]string
		status int
		// preAuth: refused with every other path that holds a control
		// character, before routing and authentication, so without the
		// client's RateLimit headers.
		preAuth bool
	}{
		{"no .csv", "feed.txt", feed, nil, 400, false},
		{"no name but .csv", "feed.csvx", feed, nil, 400, false},
		{"encoded path", "..%2F..%2Fetc%2Fpasswd.csv", feed, nil, 400, false},
		{"backslash", "a%5Cb.csv", feed, nil, 400, false},
		{"control character", "feed%0A.csv", feed, nil, 400, true},
		{"tab", "feed%09x.csv", feed, nil, 400, false},
		{"too long", strings.Repeat("a", 252) + ".csv", feed, nil, 400, false},
		{"empty body", "feed.csv", "", nil, 400, false},
		{"json", "feed.csv", feed, map[string]string{"Content-Type": "application/json"}, 415, false},
		{"form", "feed.csv", feed, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, false},
		{"too big", "feed.csv", strings.Repeat("x", 1001), nil, 413, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, b := a.upload(c.file, []byte(c.body), c.header)
			problem(t, resp, b, c.status)
			if got := resp.Header.Get("RateLimit") != ""; got == c.preAuth {
				t.Errorf("RateLimit header present: %v, want %v", got, !c.preAuth)
			}
		})
	}
	// An invisible format character is named, with where it is; checked
	// before the suffix, so the override's reversed ".csv" is named too.
	for file, says := range map[string]string{
		"invoice%E2%80%AEvsc.csv": "The file name contains U+202E (RIGHT-TO-LEFT OVERRIDE) at character 8, an invisible format character.",
		"feed%E2%80%AE.exe":       "U+202E (RIGHT-TO-LEFT OVERRIDE) at character 5",
		"f%C3%BC%E2%80%8B.csv":    "U+200B (ZERO WIDTH SPACE) at character 3",
		"%E2%81%A7feed.csv":       "U+2067 (RIGHT-TO-LEFT ISOLATE) at character 1",
		"feed%C2%AD.csv":          "U+00AD (SOFT HYPHEN)",
	} {
		resp, b := a.upload(file, []byte(feed), nil)
		if p := problem(t, resp, b, http.StatusBadRequest); !strings.Contains(p.Detail, says) {
			t.Errorf("upload %s: %q, want it to say %q", file, p.Detail, says)
		}
	}
	// Names just inside the rules are accepted; so are the other content types.
	for _, ok := range []struct{ file, ct string }{
		{strings.Repeat("a", 251) + ".csv", "text/csv; charset=utf-8"},
		{"b.CsV", "text/plain"}, {"c.csv", "application/octet-stream"}, {"d%20e.csv", ""},
		{"F%C3%BCr%20K%C3%B6ln%20%F0%9F%93%A6.csv", ""},
	} {
		h := map[string]string{"Content-Type": ok.ct}
		if ok.ct == "" {
			h = map[string]string{"Content-Type": ""}
		}
		resp, b := a.upload(ok.file, []byte(feed), h)
		if resp.StatusCode != 200 {
			t.Fatalf("upload %q (%q) = %d %s", ok.file, ok.ct, resp.StatusCode, b)
		}
	}
	// A raw ../ path, as curl --path-as-is sends it, is refused, not redirected.
	raw := rawRequest(t, a.URL, "PUT /stock/"+a.ClientID+"/../../etc/passwd.csv HTTP/1.1\r\nHost: x\r\nx-api-key: "+a.APIKey+
		"\r\nContent-Length: 3\r\nConnection: close\r\n\r\na;b")
	if !strings.HasPrefix(raw, "HTTP/1.1 400") || !strings.Contains(raw, "application/problem+json") {
		t.Fatalf("raw ../ path answered:\n%s", raw)
	}
	list, _ := a.svc.Uploads.Uploads(t.Context(), a.ClientID, storelink.UploadFilter{Limit: 100})
	if len(list) != 5 {
		t.Fatalf("%d uploads kept, want only the 5 accepted", len(list))
	}
}

func TestUploadTooLargeStreamed(t *testing.T) {
	// Without a Content-Length, the limit is found while reading.
	a := newAPI(t, apiOptions{maxFileSize: 1000})
	pr, pw := io.Pipe()
	go func() { pw.Write([]byte(strings.Repeat("x", 5000))); pw.Close() }()
	resp, b := a.do("PUT", "/stock/"+a.ClientID+"/f.csv", pr, map[string]string{"x-api-key": a.APIKey})
	problem(t, resp, b, 413)
}

func TestUploadCapacity(t *testing.T) {
	// 1000 bytes + 2 stores × 100 = 1200 bytes per 4 s: 300 bytes refill a second.
	a := newAPI(t, apiOptions{capacity: storelink.CapacityPolicy{Base: 1000, PerStore: 100, Window: 4 * time.Second}})
	body := []byte(feed + strings.Repeat("\n", 800-len(feed))) // 800 bytes
	resp, b := a.upload("a.csv", body, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("first upload = %d %s", resp.StatusCode, b)
	}
	if got := resp.Header.Get("RateLimit-Policy"); got != `"upload";q=1200;qu="content-bytes";w=4` {
		t.Fatalf("RateLimit-Policy = %q", got)
	}
	resp, b = a.upload("b.csv", body, nil)
	problem(t, resp, b, 429)
	retry, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || retry < 1 || retry > 2 {
		t.Fatalf("Retry-After = %q, want 1 or 2 (400 missing bytes at 300/s)", resp.Header.Get("Retry-After"))
	}
	if !strings.Contains(string(b), "Retry after") || !strings.HasPrefix(resp.Header.Get("RateLimit"), `"upload";r=`) {
		t.Fatalf("429 answer = %s / %q", b, resp.Header.Get("RateLimit"))
	}
	time.Sleep(time.Duration(retry) * time.Second) // a client that waits as Retry-After says, and no longer
	resp, b = a.upload("b.csv", body, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("the same upload after Retry-After = %d %s", resp.StatusCode, b)
	}
	// Larger than the whole bucket can never fit: 413, not 429.
	big := []byte(feed + strings.Repeat("\n", 1201-len(feed)))
	resp, b = a.upload("c.csv", big, nil)
	problem(t, resp, b, 413)
	// Registering a store raises the capacity.
	a.admin("PUT", "/admin/clients/"+a.ClientID+"/stores/S3", `{"name":"Third"}`, 201, nil)
	var d storelink.ClientDetail
	a.admin("GET", "/admin/clients/"+a.ClientID, "", 200, &d)
	if d.Capacity.BytesPerWindow != 1300 {
		t.Fatalf("capacity after a third store = %+v", d.Capacity)
	}
}

func TestValidate(t *testing.T) {
	a := newAPI(t, apiOptions{capacity: storelink.CapacityPolicy{Base: 10, Window: time.Hour}})
	check := func(body, want string) map[string]any {
		t.Helper()
		resp, b := a.do("PUT", "/stock/"+a.ClientID+"/validate", strings.NewReader(body),
			map[string]string{"x-api-key": a.APIKey, "Content-Type": "text/csv"})
		var v map[string]any
		if resp.StatusCode != 200 || json.Unmarshal(b, &v) != nil || v["result"] != want {
			t.Fatalf("validate = %d %s, want result %s", resp.StatusCode, b, want)
		}
		return v
	}
	// Larger than the capacity (10 bytes): validation does not count against it.
	check(feed, "valid")
	v := check(feed+"S9;4006381333931;X;1;1.00;;\n", "invalid")
	if errs := v["errors"].([]any); len(errs) != 1 || !strings.Contains(string(mustJSON(errs)), storelink.ProblemUnknownStore) ||
		!strings.Contains(string(mustJSON(errs)), `"line_number":3`) {
		t.Fatalf("errors = %s", mustJSON(errs))
	}
	check("store;ean\n", "invalid")
	st, _, _ := a.svc.Uploads.Stock(t.Context(), a.ClientID, storelink.StockFilter{Limit: 10})
	list, _ := a.svc.Uploads.Uploads(t.Context(), a.ClientID, storelink.UploadFilter{Limit: 10})
	if len(st) != 0 || len(list) != 0 {
		t.Fatalf("validate left %d stock rows and %d uploads", len(st), len(list))
	}
}

// TestValidateRecordBound: a small gzip of one line of separators, 8 MiB
// once decompressed, is refused as a CSV File Error naming the line, both by
// /validate and by the processor for an upload.
func TestValidateRecordBound(t *testing.T) {
	a := newAPI(t, apiOptions{})
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("store;ean;article_number;quantity;price\n" + strings.Repeat(";", 8<<20) + "\n"))
	zw.Close()
	const want = "The row starting on line 2 has more than 1024 fields"
	resp, b := a.do("PUT", "/stock/"+a.ClientID+"/validate", bytes.NewReader(gz.Bytes()),
		map[string]string{"x-api-key": a.APIKey, "Content-Type": "text/csv", "Content-Encoding": "gzip"})
	var v struct {
		Result string              `json:"result"`
		Errors []storelink.Problem `json:"errors"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &v) != nil || v.Result != "invalid" || len(v.Errors) != 1 ||
		v.Errors[0].Type != storelink.ProblemFile || !strings.HasPrefix(v.Errors[0].Message, want) {
		t.Fatalf("validate = %d %s, want invalid with a CSV File Error %q", resp.StatusCode, b, want)
	}
	resp, b = a.upload("separators.csv", gz.Bytes(), map[string]string{"Content-Encoding": "gzip"})
	var up struct {
		UploadID string `json:"upload_id"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &up) != nil {
		t.Fatalf("upload = %d %s", resp.StatusCode, b)
	}
	if u := a.waitUpload(up.UploadID); u.Status != storelink.UploadRejected || len(u.Errors) != 1 ||
		u.Errors[0].Type != storelink.ProblemFile || !strings.HasPrefix(u.Errors[0].Message, want) {
		t.Fatalf("upload = %+v, want rejected with a CSV File Error %q", u, want)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// Every upload takes at least the minimum charge: a one-byte upload takes
// 64 KiB, as the RateLimit header says, and in a bucket of 1 MiB the 17th
// tiny upload (1 MiB / 64 KiB = 16 fit) gets 429 with Retry-After; a
// cancelled tiny upload gives its 64 KiB back.
func TestUploadMinimumCharge(t *testing.T) {
	const minUpload, size = 64 << 10, 1 << 20
	// Over 100 hours the bucket refills 3 bytes a second: left is what the
	// uploads took, give or take what refilled meanwhile.
	a := newAPI(t, apiOptions{noProcessor: true, capacity: storelink.CapacityPolicy{Base: size, Window: 100 * time.Hour, MinUpload: minUpload}})
	left := func(resp *http.Response) int {
		var r, full int
		if _, err := fmt.Sscanf(resp.Header.Get("RateLimit"), `"upload";r=%d;t=%d`, &r, &full); err != nil {
			t.Fatalf("RateLimit %q: %v", resp.Header.Get("RateLimit"), err)
		}
		return r
	}
	var first string
	for i := 1; i <= size/minUpload; i++ {
		resp, b := a.upload(fmt.Sprintf("tiny-%d.csv", i), []byte("x"), nil)
		if resp.StatusCode != 200 {
			t.Fatalf("tiny upload %d = %d %s", i, resp.StatusCode, b)
		}
		if got, want := left(resp), size-i*minUpload; got < want || got > want+100 {
			t.Fatalf("tiny upload %d: %d bytes left, want %d", i, got, want)
		}
		if i == 1 {
			var u struct {
				UploadID string `json:"upload_id"`
			}
			_ = json.Unmarshal(b, &u)
			first = u.UploadID
		}
	}
	resp, b := a.upload("one-more.csv", []byte("x"), nil)
	if p := problem(t, resp, b, http.StatusTooManyRequests); p.Type != "/problems/rate_limited" || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(p.Detail, "at least 65536") {
		t.Fatalf("tiny upload %d: %+v, Retry-After %q", size/minUpload+1, p, resp.Header.Get("Retry-After"))
	}
	resp, b = a.do("DELETE", "/stock/"+a.ClientID+"/uploads/"+first, nil, map[string]string{"x-api-key": a.APIKey})
	if resp.StatusCode != 200 || left(resp) < minUpload || left(resp) > minUpload+100 {
		t.Fatalf("cancel of a tiny upload = %d %s, RateLimit %q; want %d bytes back", resp.StatusCode, b, resp.Header.Get("RateLimit"), minUpload)
	}
	if resp, b := a.upload("after-cancel.csv", []byte("x"), nil); resp.StatusCode != 200 {
		t.Fatalf("tiny upload after a cancel = %d %s", resp.StatusCode, b)
	}
}

// A validation is checked as it arrives: a file problem is answered at
// once, while the rest of the body has not come (and never does), so what
// follows the problem costs serve neither memory nor CPU.
func TestValidateAnswersBeforeTheBodyEnds(t *testing.T) {
	a := newAPI(t, apiOptions{})
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		_, _ = pw.Write([]byte("store;ean;article_number;quantity;price\n" + strings.Repeat(";", 2000) + "\n"))
		// 256 KiB more, and then nothing, until the test ends.
		_, _ = pw.Write([]byte(strings.Repeat("S1;4006381333931;SKU-1;5;19.99\n", 256<<10/31)))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "PUT", a.URL+"/stock/"+a.ClientID+"/validate", pr)
	req.Header.Set("x-api-key", a.APIKey)
	req.Header.Set("Content-Type", "text/csv")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("validate with a body that does not end: %v", err)
	}
	defer resp.Body.Close()
	var v struct {
		Result string              `json:"result"`
		Errors []storelink.Problem `json:"errors"`
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || json.Unmarshal(b, &v) != nil || v.Result != "invalid" || len(v.Errors) != 1 ||
		!strings.Contains(v.Errors[0].Message, "more than 1024 fields") {
		t.Fatalf("validate = %d %s, want invalid with the fields' CSV File Error", resp.StatusCode, b)
	}
}
