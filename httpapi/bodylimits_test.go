package httpapi_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
)

// holdBody starts a request on a raw connection that declares length bytes
// of body and sends only first; the connection stays open until the test
// ends or the server answers.
func holdBody(t *testing.T, a *api, method, path string, length int, header map[string]string, first string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(a.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: storelink\r\nContent-Length: %d\r\n", method, path, length)
	for k, v := range header {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n" + first)
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

// conformAnswer checks an answer to method path against the spec.
func conformAnswer(t *testing.T, method, path string, resp *http.Response, body []byte) {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	route, params, err := specRouter(t).FindRoute(req)
	if err != nil {
		t.Fatalf("%s %s: no operation in the spec: %v", method, path, err)
	}
	opts := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}
	err = openapi3filter.ValidateResponse(t.Context(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts},
		Status:                 resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(body)), Options: opts,
	})
	if err != nil {
		t.Errorf("%s %s = %d: the answer does not conform to the spec: %v\n%s", method, path, resp.StatusCode, err, body)
	}
}

// With one upload in flight allowed and one held, the next upload and
// validation get 429 uploads_in_flight with Retry-After (the upload also
// with its RateLimit headers), as the spec says.
func TestUploadsInFlightConform(t *testing.T) {
	a := newAPI(t, apiOptions{maxUploadsInFlight: 1})
	csv := map[string]string{"x-api-key": a.APIKey, "Content-Type": "application/csv"}
	hold := func() (net.Conn, *bufio.Reader) {
		return holdBody(t, a, "PUT", "/stock/"+a.ClientID+"/held.csv", 10000, csv, "store;")
	}
	held, heldReader := hold()
	validate := "/stock/" + a.ClientID + "/validate"
	var resp *http.Response
	var body []byte
	var answers []string // to the held upload, which then held no slot
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, body = a.do("PUT", validate, strings.NewReader(feed), csv)
		if resp.StatusCode == http.StatusTooManyRequests || time.Now().After(deadline) {
			break
		}
		// An upload answered before its body came (a failure of the
		// moment) holds nothing: hold another.
		_ = held.SetReadDeadline(time.Now().Add(time.Millisecond))
		if line, err := heldReader.ReadString('\n'); err == nil {
			answers = append(answers, line)
			held, heldReader = hold()
		}
	}
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("validations still answered %d after 10s with an upload held; the held uploads' answers: %q", resp.StatusCode, answers)
	}
	if len(answers) > 0 {
		t.Logf("held uploads answered before their bodies came: %q", answers)
	}
	p := problem(t, resp, body, http.StatusTooManyRequests)
	if p.Type != "/problems/uploads_in_flight" || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("validation beyond the uploads in flight: %+v, Retry-After %q", p, resp.Header.Get("Retry-After"))
	}
	conformAnswer(t, "PUT", validate, resp, body)

	resp, body = a.upload("next.csv", []byte(feed), nil)
	if p := problem(t, resp, body, http.StatusTooManyRequests); p.Type != "/problems/uploads_in_flight" {
		t.Fatalf("upload beyond the uploads in flight: %+v", p)
	}
	if resp.Header.Get("RateLimit") == "" || resp.Header.Get("RateLimit-Policy") == "" {
		t.Fatalf("upload 429 without RateLimit headers: %v", resp.Header)
	}
	conformAnswer(t, "PUT", "/stock/"+a.ClientID+"/next.csv", resp, body)

	resp, body = a.do("GET", "/problems/uploads_in_flight", nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "--max-uploads-in-flight") {
		t.Fatalf("GET /problems/uploads_in_flight: %d %s", resp.StatusCode, body)
	}
}

// A body that does not arrive within the body timeout is answered 408
// body_timeout, on uploads and validations alike, as the spec says; the
// connection is closed.
func TestBodyTimeoutConform(t *testing.T) {
	a := newAPI(t, apiOptions{bodyTimeout: 300 * time.Millisecond})
	csv := map[string]string{"x-api-key": a.APIKey, "Content-Type": "application/csv"}
	for _, path := range []string{"/stock/" + a.ClientID + "/slow.csv", "/stock/" + a.ClientID + "/validate"} {
		c, br := holdBody(t, a, "PUT", path, 10000, csv, "store;")
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: no answer to a stalled body: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if p := problem(t, resp, body, http.StatusRequestTimeout); p.Type != "/problems/body_timeout" || !resp.Close {
			t.Fatalf("%s: %+v, Connection: close = %v", path, p, resp.Close)
		}
		conformAnswer(t, "PUT", path, resp, body)
	}
	resp, body := a.do("GET", "/stock/"+a.ClientID+"/uploads", nil, map[string]string{"x-api-key": a.APIKey})
	if resp.StatusCode != http.StatusOK || strings.Contains(string(body), "slow.csv") {
		t.Fatalf("uploads after a 408: %d %s", resp.StatusCode, body)
	}
}

// A body of which no byte arrives within the first-byte timeout is
// answered 408 body_timeout long before the body timeout, saying so, and
// the connection is closed; a body whose first bytes came in time may take
// longer for the rest.
func TestFirstByteTimeout(t *testing.T) {
	a := newAPI(t, apiOptions{firstByteTimeout: 300 * time.Millisecond}) // body timeout: 60 s
	csv := map[string]string{"x-api-key": a.APIKey, "Content-Type": "application/csv"}
	for _, path := range []string{"/stock/" + a.ClientID + "/silent.csv", "/stock/" + a.ClientID + "/validate"} {
		c, br := holdBody(t, a, "PUT", path, 10000, csv, "")
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: no answer within 10s to a body of which nothing came: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		p := problem(t, resp, body, http.StatusRequestTimeout)
		if p.Type != "/problems/body_timeout" || !strings.Contains(p.Detail, "No byte of the body arrived within 300ms") || !resp.Close {
			t.Fatalf("%s: %+v, Connection: close = %v", path, p, resp.Close)
		}
		conformAnswer(t, "PUT", path, resp, body)
	}

	feed := "store;ean;article_number;quantity;price\nS1;4006381333931;SKU-1;5;19.99\n"
	c, br := holdBody(t, a, "PUT", "/stock/"+a.ClientID+"/slow.csv", len(feed), csv, feed[:6])
	time.Sleep(time.Second) // the rest comes later than the first-byte timeout
	if _, err := io.WriteString(c, feed[6:]); err != nil {
		t.Fatalf("the rest of a body whose first bytes came in time: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a body whose first bytes came in time, the rest 1s later: %d %s, want 200", resp.StatusCode, body)
	}
}
