package httpapi_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"storelink"
)

func gzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// capacityLeft reads the bytes left from an answer's RateLimit header.
func capacityLeft(t *testing.T, header string) int64 {
	t.Helper()
	m := regexp.MustCompile(`;r=(\d+);`).FindStringSubmatch(header)
	if m == nil {
		t.Fatalf("RateLimit = %q", header)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// A gzip feed is decompressed as it is read: the upload is the CSV (its
// size, its hash, its rows), and capacity is taken by the CSV bytes, not
// by the smaller compressed ones.
func TestUploadGzip(t *testing.T) {
	// A window of 10,000 hours refills well under a byte a second, so the
	// capacity two answers report differs by what the upload took.
	a := newAPI(t, apiOptions{capacity: storelink.CapacityPolicy{Base: 20 << 20, PerStore: 2 << 20, Window: 10000 * time.Hour}})
	var csv strings.Builder
	csv.WriteString("store;ean;article_number;quantity;price\n")
	for i := range 2000 {
		csv.WriteString("S1;" + ean13(i) + ";SKU-" + strconv.Itoa(i) + ";5;19.99\n")
	}
	body := gzipBytes(t, []byte(csv.String()))
	if len(body)*3 > csv.Len() {
		t.Fatalf("the test feed compresses to %d of %d bytes; it should shrink", len(body), csv.Len())
	}

	resp, b := a.upload("first.csv", []byte(feed), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("first upload = %d %s", resp.StatusCode, b)
	}
	before := capacityLeft(t, resp.Header.Get("RateLimit"))
	resp, b = a.upload("feed.csv", body, map[string]string{"Content-Encoding": "gzip"})
	if resp.StatusCode != 200 {
		t.Fatalf("gzip upload = %d %s", resp.StatusCode, b)
	}
	var got struct {
		UploadID  string `json:"upload_id"`
		SizeBytes int64  `json:"size_bytes"`
		SHA256    string `json:"sha256"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(csv.String()))
	if got.SizeBytes != int64(csv.Len()) || got.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("answer = %s, want size_bytes %d and the CSV's sha256", b, csv.Len())
	}
	if used := before - capacityLeft(t, resp.Header.Get("RateLimit")); used < int64(csv.Len())-16 || used > int64(csv.Len()) {
		t.Fatalf("the gzip upload took %d bytes of capacity, want the CSV's %d (compressed: %d)", used, csv.Len(), len(body))
	}
	if u := a.waitUpload(got.UploadID); u.Status != storelink.UploadApplied || u.RowsApplied != 2000 {
		t.Fatalf("upload = %+v", u)
	}

	// /validate reads gzip the same way.
	resp, b = a.do("PUT", "/stock/"+a.ClientID+"/validate", bytes.NewReader(body),
		map[string]string{"x-api-key": a.APIKey, "Content-Encoding": "GZIP"})
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"result":"valid"`)) || !bytes.Contains(b, []byte(`"rows_valid":2000`)) {
		t.Fatalf("validate gzip = %d %s", resp.StatusCode, b)
	}
}

func ean13(i int) string {
	s := "400638" + strconv.Itoa(1000000 + i)[1:]
	sum := 0
	for k, c := range s {
		d := int(c - '0')
		if k%2 == 1 {
			d *= 3
		}
		sum += d
	}
	return s + strconv.Itoa((10-sum%10)%10)
}

// What cannot be read as a gzip CSV is refused before any 200, stores
// nothing and takes no capacity: a gzip bomb past the file size limit
// (413), a body that is not gzip or is cut short (400), another encoding
// (415), and a gzip file sent without its Content-Encoding (400).
func TestUploadGzipRefusals(t *testing.T) {
	a := newAPI(t, apiOptions{maxFileSize: 64 << 10})
	bomb := gzipBytes(t, append([]byte("store;ean;article_number;quantity;price\n"), bytes.Repeat([]byte("S1;4006381333931;SKU;1;1.00\n"), 1<<20)...))
	whole := gzipBytes(t, []byte(feed))
	for _, c := range []struct {
		name     string
		body     []byte
		encoding string
		status   int
		detail   string
	}{
		{"bomb", bomb, "gzip", 413, "The file is larger than the maximum file size of 65536 bytes"},
		{"not gzip", []byte(feed), "gzip", 400, "not valid gzip"},
		{"cut short", whole[:len(whole)-12], "gzip", 400, "ends before the compressed data does"},
		{"bad checksum", append(append([]byte{}, whole[:len(whole)-8]...), 0, 0, 0, 0, 0, 0, 0, 0), "gzip", 400, "not valid gzip"},
		{"trailing garbage", append(append([]byte{}, whole...), "garbage"...), "gzip", 400, "not valid gzip"},
		{"empty body", nil, "gzip", 400, "empty"},
		{"empty file", gzipBytes(t, nil), "gzip", 400, "empty"},
		{"brotli", whole, "br", 415, `Content-Encoding "br"`},
		{"two codings", whole, "gzip, gzip", 415, "Content-Encoding"},
		{"deflate", whole, "deflate", 415, "gzip"},
		{"gzip without its header", whole, "", 400, "without Content-Encoding: gzip"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := map[string]string{}
			if c.encoding != "" {
				h["Content-Encoding"] = c.encoding
			}
			resp, b := a.upload("feed.csv", c.body, h)
			p := problem(t, resp, b, c.status)
			if !strings.Contains(p.Detail, c.detail) {
				t.Fatalf("detail = %q, want it to say %q", p.Detail, c.detail)
			}
			h["x-api-key"] = a.APIKey
			resp, b = a.do("PUT", "/stock/"+a.ClientID+"/validate", bytes.NewReader(c.body), h)
			problem(t, resp, b, c.status)
		})
	}
	resp, b := a.do("GET", "/stock/"+a.ClientID+"/uploads", nil, map[string]string{"x-api-key": a.APIKey})
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"uploads":[]`)) {
		t.Fatalf("uploads after refusals = %d %s, want none stored", resp.StatusCode, b)
	}
}

// A gzip body that stalls meets the body timeout as any other: 408, not a
// 400 about bad gzip.
func TestUploadGzipBodyTimeout(t *testing.T) {
	a := newAPI(t, apiOptions{bodyTimeout: 300 * time.Millisecond})
	h := map[string]string{"x-api-key": a.APIKey, "Content-Type": "application/csv", "Content-Encoding": "gzip"}
	whole := gzipBytes(t, []byte(feed))
	path := "/stock/" + a.ClientID + "/slow.csv"
	c, br := holdBody(t, a, "PUT", path, 10000, h, string(whole[:20]))
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a stalled gzip body: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if p := problem(t, resp, body, http.StatusRequestTimeout); p.Type != "/problems/body_timeout" {
		t.Fatalf("stalled gzip body: %+v", p)
	}
}
