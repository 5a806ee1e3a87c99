package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"storelink/httpapi"
)

// A processed upload's file comes back as it was received (decompressed),
// and its error file lists every dropped row as it stood in the file, with
// the file's header and separator plus line, problem_type and
// problem_detail; once the files expire both answer 410 saying when.
func TestUploadFiles(t *testing.T) {
	a := newAPI(t, apiOptions{})
	key := map[string]string{"x-api-key": a.APIKey}
	file := "store,ean,article_number,quantity,price\n" +
		"S1,4006381333931,SKU-1,5,19.99\n" +
		"S9,4006381333931,SKU-2,5,19.99\n" +
		"S1,4006381333932,SKU-3,-1,19.99\n"
	resp, b := a.upload("feed.csv", gzipBytes(t, []byte(file)), map[string]string{"Content-Encoding": "gzip"})
	if resp.StatusCode != 200 {
		t.Fatalf("upload = %d %s", resp.StatusCode, b)
	}
	var accepted struct {
		UploadID string `json:"upload_id"`
	}
	if err := json.Unmarshal(b, &accepted); err != nil {
		t.Fatal(err)
	}
	a.waitUpload(accepted.UploadID)
	base := "/stock/" + a.ClientID + "/uploads/" + accepted.UploadID

	resp, b = a.do("GET", base+"/file", nil, key)
	if resp.StatusCode != 200 || string(b) != file || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") ||
		resp.Header.Get("Content-Disposition") != `attachment; filename=feed.csv` || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("file = %d %q %v", resp.StatusCode, b, resp.Header)
	}
	conformAnswer(t, "GET", base+"/file", resp, b)

	resp, b = a.do("GET", base+"/errors.csv", nil, key)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/csv; charset=utf-8" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("errors.csv = %d %q %v", resp.StatusCode, b, resp.Header)
	}
	conformAnswer(t, "GET", base+"/errors.csv", resp, b)
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatalf("errors.csv is not CSV with the file's separator: %v\n%s", err, b)
	}
	if len(recs) != 3 || strings.Join(recs[0], ",") != "store,ean,article_number,quantity,price,line,problem_type,problem_detail" ||
		strings.Join(recs[1][:6], ",") != "S9,4006381333931,SKU-2,5,19.99,3" || recs[1][6] != "Store does not exist" ||
		strings.Join(recs[2][:6], ",") != "S1,4006381333932,SKU-3,-1,19.99,4" || recs[2][6] != "Invalid column value" || recs[2][7] == "" {
		t.Fatalf("errors.csv = %q", recs)
	}

	for _, p := range []string{"/file", "/errors.csv"} {
		resp, b = a.do("GET", "/stock/"+a.ClientID+"/uploads/no-such-upload"+p, nil, key)
		problem(t, resp, b, http.StatusNotFound)
	}

	// Expire everything finished: a retention an hour in the future.
	if _, err := a.svc.Uploads.ExpireFiles(context.Background(), -time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/file", "/errors.csv"} {
		resp, b = a.do("GET", base+p, nil, key)
		if pr := problem(t, resp, b, http.StatusGone); pr.Type != "/problems/gone" || !strings.Contains(pr.Detail, "expired at 20") {
			t.Fatalf("%s after expiry: %+v", p, pr)
		}
		conformAnswer(t, "GET", base+p, resp, b)
	}
}

// holdDownload GETs a file of the client's on a connection that reads
// only the start of the answer's status line, with a receive buffer of 64 KiB, so
// that a large file stays unwritten; the connection is closed when the
// test ends. It returns once the answer has begun: the download holds its
// place.
func holdDownload(t *testing.T, c tenant, uploadID string) *bufio.Reader {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(c.a.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.(*net.TCPConn).SetReadBuffer(64 << 10)
	fmt.Fprintf(conn, "GET /stock/%s/uploads/%s/file HTTP/1.1\r\nHost: storelink\r\nx-api-key: %s\r\n\r\n", c.ClientID, uploadID, c.APIKey)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReaderSize(conn, 128)
	if line, err := br.Peek(12); err != nil || string(line) != "HTTP/1.1 200" {
		t.Fatalf("held download: %q %v", line, err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	return br
}

// The file downloads are divided per partner: with two of a partner's
// downloads held by clients that do not read, its next is a 429
// partner_busy with Retry-After, while another partner's download is sent
// in full; once the held connections close, the partner is served again.
func TestDownloadsPerPartner(t *testing.T) {
	a := newAPI(t, apiOptions{noProcessor: true})
	p, q := a.newPartner("P", 3), a.newPartner("Q", 1)[0]
	big := csvOf(8 << 20) // more than the socket buffers hold
	held := []*bufio.Reader{holdDownload(t, p[0], p[0].uploadID("big.csv", string(big))), holdDownload(t, p[1], p[1].uploadID("big.csv", string(big)))}
	small := string(csvOf(300))
	mine, theirs := p[2].uploadID("small.csv", small), q.uploadID("small.csv", small)

	resp, body := p[2].get("uploads/" + mine + "/file")
	if pr := problem(t, resp, body, http.StatusTooManyRequests); pr.Type != "/problems/partner_busy" || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("P's third download: %+v, Retry-After %q", pr, resp.Header.Get("Retry-After"))
	}
	conformAnswer(t, "GET", "/stock/"+p[2].ClientID+"/uploads/"+mine+"/file", resp, body)
	if resp, body := p[2].get("uploads/" + mine + "/errors.csv"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("P's third download of an error file = %d %s, want 429", resp.StatusCode, body)
	}
	if resp, body := q.get("uploads/" + theirs + "/file"); resp.StatusCode != http.StatusOK || string(body) != small {
		t.Fatalf("Q's download beside P's held ones = %d, %d bytes", resp.StatusCode, len(body))
	}

	for _, br := range held {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, resp.Body); err != nil || n != int64(len(big)) {
			t.Fatalf("a held download, read at last: %d bytes, %v", n, err)
		}
		resp.Body.Close()
	}
	waitFor(t, "serving P's third download", func() bool {
		resp, body = p[2].get("uploads/" + mine + "/file")
		return resp.StatusCode == http.StatusOK && string(body) == small
	})
}

// A download that its client does not read is cut at the write deadline,
// and its place goes to the next: with one place, another partner's
// download is served while the first connection is still open.
func TestDownloadWriteDeadline(t *testing.T) {
	a := newAPI(t, apiOptions{noProcessor: true, downloads: httpapi.NewDownloads(1, 1, 2*time.Second)}) // long enough for the answer to start on a loaded machine
	p, q := a.newPartner("P", 1)[0], a.newPartner("Q", 1)[0]
	big := csvOf(8 << 20)
	held := holdDownload(t, p, p.uploadID("big.csv", string(big)))
	small := string(csvOf(300))
	theirs := q.uploadID("small.csv", small)
	waitFor(t, "serving Q's download while P's is held", func() bool {
		resp, body := q.get("uploads/" + theirs + "/file")
		return resp.StatusCode == http.StatusOK && string(body) == small
	})
	// The held answer was cut short: its connection ends before the file.
	n, _ := io.Copy(io.Discard, held)
	if n >= int64(len(big)) {
		t.Fatalf("the held download got %d bytes, the whole file: it was not cut at its deadline", n)
	}
}
