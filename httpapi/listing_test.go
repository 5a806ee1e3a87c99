package httpapi_test

import (
	"encoding/json"
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
		{"has_errors=false", `"has_errors":false`},
		{"has_errors=true", `"uploads":[]`},
		{"status=applied&has_errors=false", `"status":"applied"`},
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
		{"has_errors=yes", "has_errors must be true or false"},
		{"has_errors=TRUE", "has_errors must be true or false"},
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

// An upload that applied some rows and dropped others says so: has_errors on
// its status and in the listing, which the has_errors filter selects by,
// and each dropped line shows the value that was wrong, as the file has it.
func TestUploadHasErrors(t *testing.T) {
	a := newAPI(t, apiOptions{})
	key := map[string]string{"x-api-key": a.APIKey}
	id := func(b []byte) string { return strings.Split(strings.Split(string(b), `"upload_id":"`)[1], `"`)[0] }
	resp, b := a.upload("clean.csv", []byte(feed), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("upload = %d %s", resp.StatusCode, b)
	}
	clean := a.waitUpload(id(b))
	partial := "store;ean;article_number;quantity;price\n" +
		"S1;4006381333931;SKU-1;5;19.99\n" +
		"S9;4006381333931;SKU-2;5;19.99\n" +
		"S1;5901234123457;SKU-3;<b>" + strings.Repeat("ü", 60) + ";19.99\n"
	resp, b = a.upload("partial.csv", []byte(partial), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("upload = %d %s", resp.StatusCode, b)
	}
	pid := id(b)
	a.waitUpload(pid)

	status := "/stock/" + a.ClientID + "/uploads/" + pid
	resp, b = a.do("GET", status, nil, key)
	conformAnswer(t, "GET", status, resp, b)
	var got struct {
		Status       string `json:"status"`
		RowsRejected int    `json:"rows_rejected"`
		HasErrors    *bool  `json:"has_errors"`
		Errors       []struct {
			LineNumbers []struct {
				LineNumber int    `json:"line_number"`
				Value      string `json:"value"`
			} `json:"line_numbers"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Status != "applied" || got.RowsRejected != 2 || got.HasErrors == nil || !*got.HasErrors {
		t.Fatalf("partial upload = %s, want applied with 2 rows rejected and has_errors true", b)
	}
	values := map[int]string{}
	for _, p := range got.Errors {
		for _, l := range p.LineNumbers {
			values[l.LineNumber] = l.Value
		}
	}
	if want := "<b>" + strings.Repeat("ü", 47); values[3] != "S9" || values[4] != want {
		t.Fatalf("values of the dropped lines = %v, want line 3 %q and line 4 %q", values, "S9", want)
	}

	uploads := "/stock/" + a.ClientID + "/uploads"
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"", []string{pid, clean.ID}},
		{"?has_errors=true", []string{pid}},
		{"?has_errors=false", []string{clean.ID}},
		{"?has_errors=true&limit=1&before=" + pid, nil},
	} {
		resp, b := a.do("GET", uploads+c.query, nil, key)
		conformAnswer(t, "GET", uploads+c.query, resp, b)
		var list struct {
			Uploads []struct {
				ID        string `json:"upload_id"`
				HasErrors *bool  `json:"has_errors"`
			} `json:"uploads"`
		}
		if err := json.Unmarshal(b, &list); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, u := range list.Uploads {
			if u.HasErrors == nil || *u.HasErrors != (u.ID == pid) {
				t.Fatalf("uploads%s: %s has has_errors %v", c.query, u.ID, u.HasErrors)
			}
			ids = append(ids, u.ID)
		}
		if strings.Join(ids, ",") != strings.Join(c.want, ",") {
			t.Fatalf("uploads%s = %v, want %v", c.query, ids, c.want)
		}
	}
}
