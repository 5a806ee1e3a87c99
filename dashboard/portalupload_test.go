package dashboard_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"storelink"
	"storelink/httpapi"
)

// uploadBody is the upload form as a browser sends it: the CSRF token,
// then the file (none when name is "" and data nil).
func uploadBody(t *testing.T, token, name string, data []byte) (io.Reader, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if token != "" {
		must(t, mw.WriteField("csrf", token))
	}
	fw, err := mw.CreateFormFile("file", name)
	must(t, err)
	_, err = fw.Write(data)
	must(t, err)
	must(t, mw.Close())
	return &buf, mw.FormDataContentType()
}

// sendUpload posts the upload form.
func (b *browser) sendUpload(body io.Reader, contentType string) (*http.Response, string) {
	b.f.t.Helper()
	req, err := http.NewRequest("POST", b.f.URL+"/portal/uploads", body)
	must(b.f.t, err)
	req.Header.Set("Content-Type", contentType)
	return b.do(req)
}

func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(data)
	must(t, err)
	must(t, zw.Close())
	return buf.Bytes()
}

// TestPortalUpload: the uploads page's form takes a file as the API
// takes its body: a CSV or a gzip named .gz (kept as its CSV, counted in
// CSV bytes), and it leads to the upload's page, which shows its report
// once processed. It needs the session's token before the file; it
// refuses what the API refuses (too large, a name not .csv, empty, gzip
// not said so, broken gzip, no file) beside the form, keeping nothing, and
// stops reading a file past the size limit however long it goes on.
func TestPortalUpload(t *testing.T) {
	const max = 4096
	eachDatabase(t, fixtureOptions{maxFileSize: max}, func(t *testing.T, f *fixture) {
		s := f.seedData()
		ctx := context.Background()
		b := f.browser()
		b.portalLogin(s.ClientID, s.APIKey)
		page := b.page("/portal/uploads")
		wantContains(t, "the uploads page", page, `enctype="multipart/form-data"`, `name="file"`)
		token := formValue(t, page, "/portal/uploads", "csrf")
		uploads := func() int {
			list, err := f.services.Uploads.Uploads(ctx, s.ClientID, storelink.UploadFilter{Limit: 100})
			must(t, err)
			return len(list)
		}
		before := uploads()
		csv := []byte("store;ean;article_number;quantity;price\nS1;" + ean1 + ";SKU-1;8;19.99\nS2;" + ean2 + ";SKU-2;3;5.00\n")

		for name, tok := range map[string]string{"no token": "", "a wrong token": token + "x"} {
			body, ct := uploadBody(t, tok, "feed.csv", csv)
			if resp, _ := b.sendUpload(body, ct); resp.StatusCode != http.StatusForbidden {
				t.Errorf("upload with %s = %d, want 403", name, resp.StatusCode)
			}
		}
		bigGzip := gzipped(t, bytes.Repeat([]byte("S1;"+ean1+";SKU-1;8;19.99\n"), max/20))
		for _, c := range []struct {
			name, file string
			data       []byte
			status     int
			says       string
		}{
			{"a file too large", "big.csv", bytes.Repeat([]byte("x"), max+1), 413, "larger than the maximum file size of 4096 bytes"},
			{"a gzip too large once decompressed", "big.csv.gz", bigGzip, 413, "larger than the maximum file size of 4096 bytes"},
			{"a name not .csv", "feed.txt", csv, 400, "The file name must end in .csv"},
			{"an empty file", "empty.csv", nil, 400, "The file is empty; choose the CSV file to upload."},
			{"gzip named .csv", "feed.csv", gzipped(t, csv), 400, "The file is gzip-compressed but its name does not end in .gz"},
			{"broken gzip", "feed.csv.gz", csv, 400, "The file is named .gz but is not valid gzip"},
			{"no file", "", nil, 400, "Choose the CSV file to upload."},
		} {
			body, ct := uploadBody(t, token, c.file, c.data)
			resp, page := b.sendUpload(body, ct)
			if resp.StatusCode != c.status || !strings.Contains(page, `<p class="error" role="alert">`) || !strings.Contains(page, c.says) {
				t.Errorf("upload of %s = %d, want %d saying %q beside the form", c.name, resp.StatusCode, c.status, c.says)
			}
		}
		if n := uploads(); n != before {
			t.Fatalf("refused uploads kept %d uploads", n-before)
		}

		// A file that goes on and on is cut at the size limit: the answer
		// comes while it is still being sent.
		var sent atomic.Int64
		head, ct := uploadBody(t, token, "endless.csv", nil)
		headBytes, _ := io.ReadAll(head)
		boundary := ct[strings.Index(ct, "boundary=")+len("boundary="):]
		opening := headBytes[:bytes.LastIndex(headBytes, []byte("\r\n--"+boundary))]
		endless := io.MultiReader(bytes.NewReader(opening), &countingReader{n: &sent, left: 256 << 20})
		req, err := http.NewRequest("POST", f.URL+"/portal/uploads", endless)
		must(t, err)
		req.Header.Set("Content-Type", ct)
		cut, err := b.c.Do(req)
		// The client may also see the connection closed under its write.
		if err == nil {
			_ = cut.Body.Close()
			if cut.StatusCode != http.StatusRequestEntityTooLarge {
				t.Errorf("an endless file = %d, want 413", cut.StatusCode)
			}
		}
		// What the connection's buffers take in is sent, not read: a few
		// MiB at most.
		if n := sent.Load(); n >= 64<<20 {
			t.Errorf("%d bytes of an endless file were taken in before the answer, want the size limit and the buffers'", n)
		}

		// The partner's uploads in flight through the API and the portal
		// count together: with the API's uploads holding every place,
		// the form is refused as the API refuses a fifth, and nothing is
		// kept.
		pipes := holdUploads(t, f, s.ClientID, s.APIKey, httpapi.DefaultMaxUploadsInFlight)
		waitFor(t, "the portal refuses an upload while the API's hold every place", func() bool {
			body, ct := uploadBody(t, token, "probe.txt", csv) // refused by its name if a place is free
			resp, page := b.sendUpload(body, ct)
			return resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "1" &&
				strings.Contains(page, "already have 4 uploads or validations in flight")
		})
		for _, p := range pipes {
			_ = p.CloseWithError(io.ErrUnexpectedEOF)
		}
		if n := uploads(); n != before {
			t.Fatalf("%d uploads kept while every place was held", n-before)
		}

		// The places free as the server sees the held uploads end, which
		// may come after the pipes close: a 429 until then.
		var resp *http.Response
		waitFor(t, "a place free once the API's uploads ended", func() bool {
			body, ct := uploadBody(t, token, "portal-feed.csv", csv)
			resp, _ = b.sendUpload(body, ct)
			return resp.StatusCode != http.StatusTooManyRequests
		})
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/portal/uploads/") {
			t.Fatalf("upload = %d %q, want a redirect to the upload's page", resp.StatusCode, loc)
		}
		id := strings.TrimPrefix(loc, "/portal/uploads/")
		u, err := f.services.Uploads.Upload(ctx, s.ClientID, id)
		must(t, err)
		sum := sha256.Sum256(csv)
		if u.FileName != "portal-feed.csv" || u.SizeBytes != int64(len(csv)) || u.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("the upload = %q, %d bytes, sha256 %s", u.FileName, u.SizeBytes, u.SHA256)
		}
		f.processAll()
		wantContains(t, "the upload's page", b.page(loc), `data-status="applied"`, "portal-feed.csv", "<b>2</b><span>applied</span>")

		body, ct := uploadBody(t, token, "portal-feed.CSV.GZ", gzipped(t, csv))
		resp, _ = b.sendUpload(body, ct)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("gzip upload = %d", resp.StatusCode)
		}
		u, err = f.services.Uploads.Upload(ctx, s.ClientID, strings.TrimPrefix(resp.Header.Get("Location"), "/portal/uploads/"))
		must(t, err)
		if u.FileName != "portal-feed.CSV" || u.SizeBytes != int64(len(csv)) || u.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("the gzip upload = %q, %d bytes, sha256 %s; want its CSV", u.FileName, u.SizeBytes, u.SHA256)
		}
		// The other client sees neither.
		other := f.browser()
		other.portalLogin(s.OtherClientID, s.OtherAPIKey)
		if resp, _ := other.get(loc); resp.StatusCode != http.StatusNotFound {
			t.Errorf("the other client's view of the upload = %d, want 404", resp.StatusCode)
		}
	})
}

// holdUploads starts n uploads of the client through the API whose bodies
// stall after their first line, holding the partner's places of uploads
// in flight until their pipes are closed.
func holdUploads(t *testing.T, f *fixture, clientID, key string, n int) []*io.PipeWriter {
	t.Helper()
	var pipes []*io.PipeWriter
	var wg sync.WaitGroup
	for i := range n {
		pr, pw := io.Pipe()
		pipes = append(pipes, pw)
		req, err := http.NewRequest("PUT", fmt.Sprintf("%s/stock/%s/held-%d.csv", f.URL, clientID, i), pr)
		must(t, err)
		req.Header.Set("x-api-key", key)
		wg.Go(func() {
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_ = resp.Body.Close()
			}
		})
		go func() { _, _ = pw.Write([]byte("store;ean;article_number;quantity;price\n")) }()
	}
	t.Cleanup(func() {
		for _, p := range pipes {
			_ = p.CloseWithError(io.ErrUnexpectedEOF)
		}
		wg.Wait()
	})
	return pipes
}

// waitFor polls ok until it holds, for at most 15 s.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so after 15 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// countingReader gives left bytes of CSV-looking text, counting them.
type countingReader struct {
	n    *atomic.Int64
	left int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, io.EOF
	}
	const row = "S1;4006381333931;SKU;1;2.00\n"
	k := min(int64(len(p)), c.left)
	for i := range p[:k] {
		p[i] = row[i%len(row)]
	}
	c.left -= k
	c.n.Add(k)
	return int(k), nil
}
