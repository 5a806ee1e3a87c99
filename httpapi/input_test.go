package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"storelink"
)

// checkJSON is readJSON of a whole body at hand.
func checkJSON(raw []byte) error {
	_, err := readJSON(bytes.NewReader(raw))
	return err
}

func TestReadJSON(t *testing.T) {
	tests := []struct {
		body string
		want string // part of the message; "" when accepted
	}{
		{body: `{"name":"Acme"}`},
		{body: `{"name":"Jürgen \ud83d\ude00 \t tab"}`},           // a pair, escaped
		{body: `{"a":{"x":1},"b":{"x":2},"c":[{"x":1},{"x":2}]}`}, // the same key in other objects
		{body: `{"name":"\\ud800"}`},                              // an escaped backslash, not an escape
		{body: `{"name":"\uFFFD"}`},                               // U+FFFD itself is a character
		{body: ``},
		{body: `{"name":`}, // a syntax error is the decoder's to report

		{body: "{\"name\":\"a\xffb\"}", want: "not valid UTF-8: byte 11 is 0xff"},
		{body: "{\"name\":\"a\xc3\"}", want: "not valid UTF-8"},
		{body: `{"name":"x","name":"y"}`, want: `The key "name" appears twice in the top-level object`},
		{body: `{"name":"x","NAME":"y"}`, want: `The keys "name" and "NAME" in the top-level object are the same key`},
		{body: `{"items":[{"ean":"1"},{"ean":"2","ean":"3"}]}`, want: `The key "ean" appears twice in the object at items[1]`},
		{body: `{"a":{"b":[[],{"c":1,"c":2}]}}`, want: `in the object at a.b[1]`},
		{body: `{"name":"a\u0000b"}`, want: `The value at name holds a NUL character`},
		{body: `{"items":[{"ean":"1"},{"marketplace_article_number":"\u0000"}]}`, want: `The value at items[1].marketplace_article_number holds a NUL`},
		{body: `{"items":[[], "\u0000"]}`, want: `The value at items[1] holds a NUL`},
		{body: `{"a\u0000":1}`, want: `A key in the top-level object holds a NUL`},
		{body: `"\u0000"`, want: `The value at the top level holds a NUL`},
		{body: `{"name":"\ud800"}`, want: `The value at name holds an escaped UTF-16 surrogate`},
		{body: `{"name":"\udc00\ud800"}`, want: `surrogate`},
		{body: `{"name":"x\ud83dy"}`, want: `surrogate`},
		{body: `{"name":"\ud83d\u0041"}`, want: `surrogate`},
		{body: strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth)},
		{body: strings.Repeat(`{"a":`, maxJSONDepth) + "1" + strings.Repeat("}", maxJSONDepth)},
		{body: strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1), want: "nested deeper than 32 levels at byte 33 "},
		{body: `{"items":[{"a":` + strings.Repeat("[", maxJSONDepth) + `]}]}`, want: "nested deeper than 32 levels at byte 45 (in items[0].a[0][0]"},
		{body: strings.Repeat("[", maxJSONDepth+1) + "\xff", want: "not valid UTF-8: byte 34 is 0xff"},
		{body: `{"items":[` + strings.Repeat(`{},`, maxJSONValues-1) + `{}]}`},
		{body: `{"items":[` + strings.Repeat(`{},`, maxJSONValues) + `{}]}`, want: "more than 1000 values in one array or object, at byte 3011 (items[1000])"},
		{body: `{` + strings.Repeat(`"a":0,`, 2) + `}`, want: `The key "a" appears twice`},
		{body: `{"x":{` + keys(maxJSONValues) + `}}`},
		{body: `{"x":{` + keys(maxJSONValues+1) + `}}`, want: "more than 1000 values in one array or object, at byte 10013 (x)"},
	}
	for _, tt := range tests {
		err := checkJSON([]byte(tt.body))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("checkJSON(%s) = %v, want nil", quoteShort(tt.body), err)
		case tt.want != "" && (storelink.ErrorCode(err) != storelink.EINVALID || !strings.Contains(storelink.ErrorMessage(err), tt.want)):
			t.Errorf("checkJSON(%s) = %v, want an EINVALID error with %q", quoteShort(tt.body), err, tt.want)
		}
	}
}

// keys is n distinct keys with their values, for an object.
func keys(n int) string {
	k := make([]string, n)
	for i := range k {
		k[i] = `"k` + strconv.Itoa(1000+i) + `":0`
	}
	return strings.Join(k, ",")
}

// TestReadJSONDeep: a megabyte of opening brackets, or of keys each opening
// an object, is refused at the first level too deep, having read and
// allocated a few KiB of it, whatever follows; a body past the size limit
// is refused as too large when it is not.
func TestReadJSONDeep(t *testing.T) {
	for _, unit := range []string{"[", `{"a":`, `[{"a":`, " [ \n"} {
		body := strings.Repeat(unit, (1<<20)/len(unit))
		r := &countingReader{r: http.MaxBytesReader(nil, io.NopCloser(strings.NewReader(body)), maxJSONBody)}
		var err error
		allocated := bytesAllocated(func() { _, err = readJSON(r) })
		if storelink.ErrorCode(err) != storelink.EINVALID || !strings.Contains(storelink.ErrorMessage(err), "nested deeper than 32 levels at byte ") {
			t.Errorf("%q × %d: %v, want EINVALID: nested deeper than 32 levels", unit, len(body)/len(unit), err)
		}
		t.Logf("%q: %d bytes read, %d allocated", unit, r.n, allocated)
		if allocated > 64<<10 || r.n > 16<<10 {
			t.Errorf("%q × %d: read %d bytes and allocated %d, want at most 16 KiB read and 64 KiB allocated",
				unit, len(body)/len(unit), r.n, allocated)
		}
	}
	_, err := readJSON(http.MaxBytesReader(nil, io.NopCloser(strings.NewReader(`{"a":"`+strings.Repeat("x", maxJSONBody)+`"}`)), maxJSONBody))
	var tooBig *http.MaxBytesError
	if !errors.As(err, &tooBig) {
		t.Errorf("a body past the size limit: %v, want the size error", err)
	}
}

// bytesAllocated is the bytes f allocates.
func bytesAllocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestCheckRequestText(t *testing.T) {
	tests := []struct {
		target string
		want   string // part of the message; "" when accepted
	}{
		{target: "/stock/c1/stock?store=S1&ean=4006381333931"},
		{target: "/orders?order_number=A%09B"}, // tab is allowed
		{target: "/orders?q=J%C3%BCrgen"},
		{target: "/stock/c1/uploads/%00", want: `Path segment 4 ("\x00") holds the control character U+0000`},
		{target: "/stock/%FF/uploads", want: `Path segment 2 ("\xff") is not valid UTF-8`},
		{target: "/orders/%C2%85", want: `control character U+0085`},
		{target: "/stock/c1/stock?store=%00", want: `Query parameter "store" holds the control character U+0000 at character 1`},
		{target: "/orders?client_id=%FF", want: `Query parameter "client_id" is not valid UTF-8`},
		{target: "/orders?before=a%0Ab", want: `Query parameter "before" holds the control character U+000A at character 2`},
		{target: "/orders?%00=1", want: `query parameter name "\x00"`},
		{target: "/orders?client_id=%zz", want: `cannot be parsed`},
		{target: "/orders?limit=1&limit=2", want: `Query parameter "limit" is given 2 times; each parameter may be given once.`},
		{target: "/orders?state=new&client_id=c1&state=new", want: `Query parameter "state" is given 2 times`},
		{target: "/dashboard/orders?after=&after=&after=", want: `Query parameter "after" is given 3 times`},
		{target: "/orders?z=1&z=2&b=1&b=2", want: `Query parameter "b" is given 2 times`},
		{target: "/portal/orders?state=new&number=A1"},
	}
	for _, tt := range tests {
		err := checkRequestText(httptest.NewRequest("GET", tt.target, nil))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v, want nil", tt.target, err)
		case tt.want != "" && (storelink.ErrorCode(err) != storelink.EINVALID || !strings.Contains(storelink.ErrorMessage(err), tt.want)):
			t.Errorf("%s: %v, want an EINVALID error with %q", tt.target, err, tt.want)
		}
	}
}

// FuzzReadJSON: readJSON never panics, and a body it accepts that is
// valid JSON is valid UTF-8 and decodes to no string holding a NUL or a
// U+FFFD that the body did not spell.
func FuzzReadJSON(f *testing.F) {
	for _, s := range []string{`{"name":"Acme"}`, `{"a":[{"b":1},{"b":"\u0000"}]}`, `{"x":1,"X":2}`, `"\ud800"`, "{\"a\":\"\xff\"}", `[[],{}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := checkJSON(data)
		if err != nil {
			if storelink.ErrorCode(err) != storelink.EINVALID {
				t.Fatalf("checkJSON(%q) = %v, want EINVALID", data, err)
			}
			return
		}
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		if !utf8.Valid(data) {
			t.Fatalf("checkJSON accepted %q, which is not UTF-8", data)
		}
		var walk func(any)
		walk = func(v any) {
			switch v := v.(type) {
			case string:
				if strings.ContainsRune(v, 0) || (strings.ContainsRune(v, utf8.RuneError) && !bytes.Contains(data, []byte("\uFFFD")) && !bytes.Contains(bytes.ToLower(data), []byte(`\ufffd`))) {
					t.Fatalf("checkJSON accepted %q, which decodes to %q", data, v)
				}
			case []any:
				for _, x := range v {
					walk(x)
				}
			case map[string]any:
				for k, x := range v {
					walk(k)
					walk(x)
				}
			}
		}
		walk(v)
	})
}

// BenchmarkReadJSON walks a body of the most small tokens a body may hold:
// its cost per byte is that of every JSON call's check.
func BenchmarkReadJSON(b *testing.B) {
	body := []byte(`[` + strings.Repeat(`[`+strings.Repeat(`0,`, maxJSONValues-1)+`0],`, (maxJSONBody-2)/(2*maxJSONValues+2)) + `[]]`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := readJSON(bytes.NewReader(body)); err != nil {
			b.Fatal(err)
		}
	}
}
