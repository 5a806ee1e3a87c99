package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// goodTimeout is the longest a well-behaved request is waited for; one that
// takes longer has failed (it is far beyond any p99 the verdict allows).
const goodTimeout = 5 * time.Second

// sample is one well-behaved request: its kind, how long it took, and why
// it failed ("" when it got the answer it should).
type sample struct {
	kind string
	dur  time.Duration
	fail string
}

// recorder collects the samples of a phase.
type recorder struct {
	mu      sync.Mutex
	samples []sample
}

func (r *recorder) add(s sample) {
	r.mu.Lock()
	r.samples = append(r.samples, s)
	r.mu.Unlock()
}

func (r *recorder) all() []sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sample(nil), r.samples...)
}

// wellBehaved is the partner that does nothing wrong: it uploads a small
// valid feed, reads its status and downloads its file, reads its stock,
// validates a feed now and then, signs in to the portal, and its operator
// reads the client with the admin token. Every request goes on a fresh
// connection and names the partner's own address in X-Forwarded-For.
type wellBehaved struct {
	base  string
	c     client
	rec   *recorder
	pause time.Duration
	seq   atomic.Int64
	hc    *http.Client
}

// run runs workers loops until stop is closed; each finishes the request it
// is making (within goodTimeout) before it returns.
func (w *wellBehaved) run(stop <-chan struct{}, workers int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { w.loop(stop) })
	}
	wg.Wait()
}

func (w *wellBehaved) loop(stop <-chan struct{}) {
	stopped := func() bool {
		select {
		case <-stop:
			return true
		case <-time.After(w.pause):
			return false
		}
	}
	for cycle := 0; ; cycle++ {
		n := w.seq.Add(1)
		var upload struct {
			ID string `json:"upload_id"`
		}
		body := w.do("upload", "PUT", fmt.Sprintf("/stock/%s/wb-%d.csv", w.c.id, n), smallFeed(int(n), 6), http.StatusOK, "text/csv")
		_ = json.Unmarshal(body, &upload)
		if stopped() {
			return
		}
		if upload.ID != "" {
			w.do("status", "GET", "/stock/"+w.c.id+"/uploads/"+upload.ID, nil, http.StatusOK, "")
			if stopped() {
				return
			}
			w.do("download", "GET", "/stock/"+w.c.id+"/uploads/"+upload.ID+"/file", nil, http.StatusOK, "")
			if stopped() {
				return
			}
		}
		w.do("stock", "GET", "/stock/"+w.c.id+"/stock?store=S1", nil, http.StatusOK, "")
		if stopped() {
			return
		}
		form := url.Values{"client_id": {w.c.id}, "api_key": {w.c.key}}.Encode()
		w.do("portal", "POST", "/portal/login", []byte(form), http.StatusSeeOther, "application/x-www-form-urlencoded")
		if stopped() {
			return
		}
		w.do("admin", "GET", "/admin/clients/"+w.c.id, nil, http.StatusOK, "")
		if stopped() {
			return
		}
		if cycle%3 == 0 {
			w.do("validate", "PUT", "/stock/"+w.c.id+"/validate", smallFeed(int(n), 6), http.StatusOK, "text/csv")
			if stopped() {
				return
			}
		}
	}
}

// do makes one request, records it, and returns its body when it got want.
func (w *wellBehaved) do(kind, method, path string, body []byte, want int, ctype string) []byte {
	ctx, cancel := context.WithTimeout(context.Background(), goodTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(ctx, method, w.base+path, rd)
	req.Header.Set("X-Forwarded-For", goodAddr)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	switch kind {
	case "admin":
		req.Header.Set("Authorization", "Bearer "+adminToken)
	case "portal":
	default:
		req.Header.Set("x-api-key", w.c.key)
	}
	start := time.Now()
	resp, err := w.hc.Do(req)
	var b []byte
	fail := ""
	if err == nil {
		b, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
	}
	switch {
	case err != nil:
		fail = failOf(err)
	case resp.StatusCode != want:
		fail = fmt.Sprint(resp.StatusCode)
	}
	w.rec.add(sample{kind: kind, dur: time.Since(start), fail: fail})
	if fail != "" {
		return nil
	}
	return b
}

// failOf names a transport error briefly.
func failOf(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case strings.Contains(err.Error(), "connection refused"):
		return "refused"
	case strings.Contains(err.Error(), "connection reset"):
		return "reset"
	case strings.Contains(err.Error(), "EOF"):
		return "eof"
	}
	return "error"
}
