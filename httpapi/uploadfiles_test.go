package httpapi_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
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
	if _, err := a.svc.ExpireFiles(context.Background(), -time.Hour); err != nil {
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
