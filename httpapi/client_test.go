package httpapi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"storelink"
	"storelink/httpapi"
)

func TestStockBaseURL(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{in: "http://host:8080/stock", want: "http://host:8080/stock"},
		{in: "https://host/stock/", want: "https://host/stock"},
		{in: "http://host:8080", want: "http://host:8080/stock"},
		{in: "http://host/", want: "http://host/stock"},
		{in: "https://proxy/partners/stock", want: "https://proxy/partners/stock"},
		{in: "host:8080/stock", err: "not an http or https URL"},
		{in: "ftp://host/stock", err: "not an http or https URL"},
		{in: "http:///stock", err: "has no host"},
		{in: "http://host/stock?x=1", err: "takes no query"},
		{in: "http://user:pw@host/stock", err: "no query, fragment or user info"},
	} {
		got, err := httpapi.StockBaseURL(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("StockBaseURL(%q) = %q, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("StockBaseURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// answer is an error response as a server or a proxy would send it.
func answer(status int, contentType, retryAfter, body string) *http.Response {
	rec := httptest.NewRecorder()
	if contentType != "" {
		rec.Header().Set("Content-Type", contentType)
	}
	if retryAfter != "" {
		rec.Header().Set("Retry-After", retryAfter)
	}
	rec.WriteHeader(status)
	_, _ = io.WriteString(rec, body)
	return rec.Result()
}

func TestDecodeProblem(t *testing.T) {
	in10s := time.Now().Add(10 * time.Second).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		name string
		resp *http.Response
		want httpapi.APIError
		code string
	}{
		{"problem with Retry-After",
			answer(429, "application/problem+json", "7", `{"type":"/problems/rate_limited","title":"Too Many Requests","status":429,"detail":"Upload capacity used up. Retry after 7 seconds."}`),
			httpapi.APIError{StatusCode: 429, Type: "/problems/rate_limited", Title: "Too Many Requests", Detail: "Upload capacity used up. Retry after 7 seconds.", RetryAfter: 7 * time.Second},
			storelink.ERATELIMIT},
		{"problem without a title",
			answer(401, "application/problem+json", "", `{"type":"/problems/unauthorized","status":401,"detail":"A valid x-api-key header for this client is required."}`),
			httpapi.APIError{StatusCode: 401, Type: "/problems/unauthorized", Title: "Unauthorized", Detail: "A valid x-api-key header for this client is required."},
			storelink.EUNAUTHORIZED},
		{"HTML page of a proxy",
			answer(502, "text/html", "", "<html>\n<body>\t<h1>502 Bad Gateway</h1>\x07</body></html>\n"),
			httpapi.APIError{StatusCode: 502, Title: "Bad Gateway", Detail: "<html> <body> <h1>502 Bad Gateway</h1> </body></html>"},
			""},
		{"JSON that is not a problem object",
			answer(500, "application/json", "", `["x"]`),
			httpapi.APIError{StatusCode: 500, Title: "Internal Server Error", Detail: `["x"]`},
			""},
		{"Retry-After as a date",
			answer(503, "text/plain", in10s, "down for maintenance"),
			httpapi.APIError{StatusCode: 503, Title: "Service Unavailable", Detail: "down for maintenance", RetryAfter: 10 * time.Second},
			""},
		{"Retry-After not understood",
			answer(429, "", "soon", ""),
			httpapi.APIError{StatusCode: 429, Title: "Too Many Requests"},
			""},
		{"unknown status, long body",
			answer(599, "", "", strings.Repeat("a", 300)),
			httpapi.APIError{StatusCode: 599, Title: "Status 599", Detail: strings.Repeat("a", 200) + "…"},
			""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := httpapi.DecodeProblem(tc.resp)
			if d := got.RetryAfter - tc.want.RetryAfter; d < -time.Second || d > time.Second {
				t.Errorf("RetryAfter = %s, want %s", got.RetryAfter, tc.want.RetryAfter)
			}
			got.RetryAfter = tc.want.RetryAfter
			if *got != tc.want {
				t.Errorf("DecodeProblem = %+v\nwant %+v", *got, tc.want)
			}
			if got.Code() != tc.code {
				t.Errorf("Code() = %q, want %q", got.Code(), tc.code)
			}
			if retry := (tc.want.StatusCode == 429 || tc.want.StatusCode == 503) && tc.want.RetryAfter > 0; got.Retryable() != retry {
				t.Errorf("Retryable() = %v, want %v", got.Retryable(), retry)
			}
		})
	}
	e := &httpapi.APIError{StatusCode: 413, Title: "Request Entity Too Large", Detail: "The file is larger than 10 bytes."}
	if e.Error() != "413 Request Entity Too Large: The file is larger than 10 bytes." {
		t.Errorf("Error() = %q", e.Error())
	}
}

// newTestClient is a client of a's demo client, with the host-only URL.
func newTestClient(t *testing.T, a *api, key string) *httpapi.Client {
	t.Helper()
	c, err := httpapi.NewClient(a.URL, a.ClientID, key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClientUploadAndStatus(t *testing.T) {
	// 1200 bytes per hour: one small file fits, a second does not.
	a := newAPI(t, apiOptions{capacity: storelink.CapacityPolicy{Base: 1000, PerStore: 100, Window: time.Hour}})
	c := newTestClient(t, a, a.APIKey)
	ctx := context.Background()

	r, err := c.PutStock(ctx, "stock 1.csv", strings.NewReader(feed), int64(len(feed)))
	if err != nil {
		t.Fatal(err)
	}
	if r.UploadID == "" || r.FileName != "stock 1.csv" || r.SizeBytes != int64(len(feed)) || r.Status != storelink.UploadAccepted || len(r.SHA256) != 64 {
		t.Fatalf("receipt = %+v", r)
	}
	if r.CapacityLeft != 1200-int64(len(feed)) {
		t.Errorf("CapacityLeft = %d, want %d", r.CapacityLeft, 1200-len(feed))
	}
	var seen []storelink.UploadStatus
	u, err := c.WaitUpload(ctx, r.UploadID, func(u *storelink.Upload) { seen = append(seen, u.Status) })
	if err != nil {
		t.Fatal(err)
	}
	if u.Status != storelink.UploadApplied || u.RowsApplied != 1 || u.ID != r.UploadID {
		t.Fatalf("final upload = %+v", u)
	}
	for _, s := range seen {
		if s.Final() {
			t.Errorf("seen was given the final status %s", s)
		}
	}

	// Used up: 429 with the wait, decoded.
	big := feed + strings.Repeat("\n", 1100-len(feed))
	_, err = c.PutStock(ctx, "b.csv", strings.NewReader(big), int64(len(big)))
	var ae *httpapi.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 429 || ae.Code() != storelink.ERATELIMIT || !ae.Retryable() || ae.RetryAfter < time.Second || !strings.Contains(ae.Detail, "Retry after") {
		t.Fatalf("second upload: %v (%+v), want a retryable 429", err, ae)
	}

	// Larger than the whole bucket, and above the 100-continue size: 413
	// without the body being sent.
	huge := feed + strings.Repeat("\n", 100<<10)
	_, err = c.PutStock(ctx, "c.csv", strings.NewReader(huge), int64(len(huge)))
	if !errors.As(err, &ae) || ae.StatusCode != 413 || ae.Retryable() {
		t.Fatalf("huge upload: %v, want 413", err)
	}

	// An unknown upload.
	if _, err := c.Upload(ctx, "01a1fd57-0000-7000-8000-000000000000"); !errors.As(err, &ae) || ae.StatusCode != 404 {
		t.Errorf("unknown upload: %v, want 404", err)
	}
}

func TestClientLargeUpload(t *testing.T) {
	// Above the 100-continue size, an upload that fits goes through.
	a := newAPI(t, apiOptions{})
	c := newTestClient(t, a, a.APIKey)
	body := feed + strings.Repeat("\n", 1<<20)
	r, err := c.PutStock(context.Background(), "big.csv", strings.NewReader(body), int64(len(body)))
	if err != nil || r.SizeBytes != int64(len(body)) {
		t.Fatalf("PutStock = %+v, %v", r, err)
	}
}

func TestClientWrongKey(t *testing.T) {
	a := newAPI(t, apiOptions{})
	c := newTestClient(t, a, "slk_wrong")
	_, err := c.PutStock(context.Background(), "stock.csv", strings.NewReader(feed), int64(len(feed)))
	var ae *httpapi.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 401 || ae.Code() != storelink.EUNAUTHORIZED || ae.Title != "Unauthorized" || ae.Detail == "" {
		t.Fatalf("PutStock with a wrong key: %v, want a decoded 401", err)
	}
	if _, err := c.Upload(context.Background(), "x"); !errors.As(err, &ae) || ae.StatusCode != 401 {
		t.Fatalf("Upload with a wrong key: %v, want 401", err)
	}
}

func TestClientWaitUploadStops(t *testing.T) {
	// An upload that never finishes: WaitUpload ends with its context.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"upload_id":"u1","status":"processing"}`)
	}))
	t.Cleanup(srv.Close)
	c, err := httpapi.NewClient(srv.URL, "c1", "k1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	polls := 0
	_, err = c.WaitUpload(ctx, "u1", func(*storelink.Upload) { polls++ })
	if !errors.Is(err, context.DeadlineExceeded) || polls < 2 {
		t.Fatalf("WaitUpload = %v after %d polls, want the deadline after a few polls", err, polls)
	}
}
