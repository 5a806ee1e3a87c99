package httpapi_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The upload listing's filters and the stock listing's article number go
// through the API as the spec describes them; a filter that cannot be read
// is a 400 that names it.
func TestListingFilters(t *testing.T) {
	a := newAPI(t, apiOptions{})
	key := map[string]string{"x-api-key": a.APIKey}
	resp, b := a.upload("feed.csv", []byte(feed), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("upload = %d %s", resp.StatusCode, b)
	}
	a.waitUpload(strings.Split(strings.Split(string(b), `"upload_id":"`)[1], `"`)[0])

	uploads := "/stock/" + a.ClientID + "/uploads"
	for _, c := range []struct {
		query string
		want  string // in the answer
	}{
		{"status=applied", `"status":"applied"`},
		{"status=accepted", `"uploads":[]`},
		{"since=2000-01-01T00:00:00Z&until=2100-01-01T00:00:00.5%2B02:00", `"status":"applied"`},
		{"until=2000-01-01T00:00:00Z", `"uploads":[]`},
	} {
		resp, b := a.do("GET", uploads+"?"+c.query, nil, key)
		if resp.StatusCode != 200 || !strings.Contains(string(b), c.want) {
			t.Fatalf("uploads?%s = %d %s, want %s", c.query, resp.StatusCode, b, c.want)
		}
		conformAnswer(t, "GET", uploads+"?"+c.query, resp, b)
	}
	for _, c := range []struct{ query, says string }{
		{"status=done", "status must be one of"},
		{"since=yesterday", "since must be a time in RFC 3339"},
		{"until=2026-13-01T00:00:00Z", "until must be a time in RFC 3339"},
		{"since=2026-11-02T00:00:00Z&until=2026-11-01T00:00:00Z", "since must be before until"},
		{"before=garbage", "not a cursor"},
		{"status=applied&status=rejected", `Query parameter "status" is given 2 times`},
		{"limit=1&limit=1", `Query parameter "limit" is given 2 times`},
	} {
		resp, b := a.do("GET", uploads+"?"+c.query, nil, key)
		if p := problem(t, resp, b, http.StatusBadRequest); !strings.Contains(p.Detail, c.says) {
			t.Fatalf("uploads?%s: %q, want it to say %q", c.query, p.Detail, c.says)
		}
		conformAnswer(t, "GET", uploads+"?"+c.query, resp, b)
	}

	stock := "/stock/" + a.ClientID + "/stock?article_number=" + url.QueryEscape("SKU-123")
	resp, b = a.do("GET", stock, nil, key)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"article_number":"SKU-123"`) {
		t.Fatalf("stock by article number = %d %s", resp.StatusCode, b)
	}
	conformAnswer(t, "GET", stock, resp, b)
	resp, b = a.do("GET", "/stock/"+a.ClientID+"/stock?article_number=NONE", nil, key)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"stock":[]`) {
		t.Fatalf("stock of an unknown article number = %d %s", resp.StatusCode, b)
	}
}
