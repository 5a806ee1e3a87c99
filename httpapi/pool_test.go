package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"storelink"
)

// tenant is one client of a partner, with its API key.
type tenant struct {
	a         *api
	PartnerID string
	ClientID  string
	APIKey    string
}

// newPartner creates a partner with n clients (countries DE, AT, CH, …),
// each with store S1.
func (a *api) newPartner(name string, n int) []tenant {
	a.t.Helper()
	var p storelink.Partner
	a.admin("POST", "/admin/partners", fmt.Sprintf(`{"name":%q}`, name), 201, &p)
	var out []tenant
	for _, country := range []string{"DE", "AT", "CH", "FR", "NL"}[:n] {
		var c storelink.NewClient
		a.admin("POST", "/admin/partners/"+p.ID+"/clients", fmt.Sprintf(`{"country_code":%q,"currency":"EUR"}`, country), 201, &c)
		a.admin("PUT", "/admin/clients/"+c.ID+"/stores/S1", `{"name":"Store S1"}`, 201, nil)
		out = append(out, tenant{a: a, PartnerID: p.ID, ClientID: c.ID, APIKey: c.APIKey})
	}
	return out
}

// put sends a body to one of the client's stock paths ("feed.csv",
// "validate") with its key.
func (c tenant) put(path string, body io.Reader, header map[string]string) (*http.Response, []byte) {
	c.a.t.Helper()
	h := map[string]string{"x-api-key": c.APIKey, "Content-Type": "application/csv"}
	for k, v := range header {
		h[k] = v
	}
	return c.a.do("PUT", "/stock/"+c.ClientID+"/"+path, body, h)
}

// get GETs one of the client's paths under /stock/{client_id}/.
func (c tenant) get(path string) (*http.Response, []byte) {
	c.a.t.Helper()
	return c.a.do("GET", "/stock/"+c.ClientID+"/"+path, nil, map[string]string{"x-api-key": c.APIKey})
}

// uploadID uploads a file and returns its id.
func (c tenant) uploadID(name, file string) string {
	c.a.t.Helper()
	resp, b := c.put(name, strings.NewReader(file), nil)
	var u struct {
		UploadID string `json:"upload_id"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &u) != nil {
		c.a.t.Fatalf("upload %s = %d %s", name, resp.StatusCode, b)
	}
	return u.UploadID
}

// slowBody is a request body that the test sends piece by piece: the
// request runs in the background until the test finishes or closes it.
type slowBody struct {
	w    *io.PipeWriter
	done chan result
}

type result struct {
	status int
	body   []byte
	header http.Header
	err    error
}

// startSlow starts a PUT of the client's path with a body that declares
// length bytes (none when length < 0) and sends first, then nothing until
// the test writes more or finishes it.
func (c tenant) startSlow(path string, length int, first []byte) *slowBody {
	c.a.t.Helper()
	pr, pw := io.Pipe()
	req, err := http.NewRequest("PUT", c.a.URL+"/stock/"+c.ClientID+"/"+path, pr)
	if err != nil {
		c.a.t.Fatal(err)
	}
	req.Header.Set("x-api-key", c.APIKey)
	req.Header.Set("Content-Type", "application/csv")
	if length >= 0 {
		req.ContentLength = int64(length)
	}
	s := &slowBody{w: pw, done: make(chan result, 1)}
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			s.done <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		s.done <- result{status: resp.StatusCode, body: b, header: resp.Header}
	}()
	go func() { _, _ = pw.Write(first) }()
	c.a.t.Cleanup(func() { pw.CloseWithError(io.ErrUnexpectedEOF) })
	return s
}

// finish sends the rest of the body and returns the answer.
func (s *slowBody) finish(t *testing.T, rest []byte) result {
	t.Helper()
	go func() {
		_, _ = s.w.Write(rest)
		s.w.Close()
	}()
	select {
	case r := <-s.done:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no answer 20s after the body was finished")
		return result{}
	}
}

// waitFor polls cond every 20ms until it is true, for at most 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not %s after 10s", what)
		}
	}
}
