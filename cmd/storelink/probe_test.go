package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestProbe: storelink probe exits 0 on a 2xx and 1 on anything else (a
// 503, a redirect, no answer in time, nothing listening, a bad URL), saying
// what it got.
func TestProbe(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(http.StatusOK)
		case "/down":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"status":503,"detail":"The database does not answer."}`))
		case "/moved":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/hang":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	defer close(release)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"2xx", []string{srv.URL + "/ok"}, 0, "answered 200 OK"},
		{"503", []string{srv.URL + "/down"}, 1, "answered 503 Service Unavailable: {\"status\":503,\"detail\":\"The database does not answer.\"}"},
		{"redirect", []string{srv.URL + "/moved"}, 1, "answered 302 Found"},
		{"hangs", []string{"--timeout", "200ms", srv.URL + "/hang"}, 1, "no answer within 200ms"},
		{"nothing listening", []string{closed.URL + "/readyz"}, 1, "connection refused"},
		{"not a URL", []string{"127.0.0.1:8080/readyz"}, 1, "is not an http:// or https:// URL"},
		{"no URL", nil, 1, "give one URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			start := time.Now()
			code := run(context.Background(), append([]string{"probe"}, c.args...), noEnv, nil, &stdout, &stderr)
			if code != c.code {
				t.Errorf("exit %d, want %d: %s%s", code, c.code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String()+stderr.String(), c.want) {
				t.Errorf("output lacks %q: %s%s", c.want, stdout.String(), stderr.String())
			}
			if time.Since(start) > 5*time.Second {
				t.Errorf("took %s", time.Since(start))
			}
		})
	}
}
