package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// op is one request as its client saw it.
type op struct {
	Kind   string // what the request was for: "upload", "create", "fulfil", …
	Method string
	Path   string
	Serve  int
	Start  time.Time
	End    time.Time
	Status int    // 0: no answer
	Err    string // why there was no answer
}

// fault is a window during which a fault was in force: from just before
// it was injected until the service was back (and a grace period after).
type fault struct {
	Kind  string // "kill", "term", "pg-restart", "receiver-down", "gone"
	Serve int    // the serve it hit; -1 for all (PostgreSQL) or none (receivers)
	Start time.Time
	End   time.Time
	Note  string
}

// history is every request and fault of a run.
type history struct {
	mu     sync.Mutex
	ops    []op
	faults []fault
}

func newHistory() *history { return &history{} }

func (h *history) add(o op) {
	h.mu.Lock()
	h.ops = append(h.ops, o)
	h.mu.Unlock()
}

// addFault records a fault that is over.
func (h *history) addFault(f fault) {
	h.mu.Lock()
	h.faults = append(h.faults, f)
	h.mu.Unlock()
}

func (h *history) snapshot() ([]op, []fault) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]op(nil), h.ops...), append([]fault(nil), h.faults...)
}

// apiClient sends the soak's requests to the serves and records each.
type apiClient struct {
	hist   *history
	serves []*serve
	http   *http.Client
}

func newAPIClient(h *history, serves []*serve) *apiClient {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	tr.Proxy = nil // loopback only, never through a proxy
	return &apiClient{hist: h, serves: serves, http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// answer is a recorded request's outcome.
type answer struct {
	Status int // 0: no answer
	Body   []byte
	Header http.Header
	Err    error
	Start  time.Time
	End    time.Time
}

// ok tells whether the status is 2xx.
func (a answer) ok() bool { return a.Status >= 200 && a.Status < 300 }

// unknown tells whether the request may or may not have taken effect: no
// answer, or a 5xx.
func (a answer) unknown() bool { return a.Status == 0 || a.Status >= 500 }

func (a answer) decode(v any) error {
	if err := json.Unmarshal(a.Body, v); err != nil {
		return fmt.Errorf("decode %.200s: %w", a.Body, err)
	}
	return nil
}

func (a answer) String() string {
	if a.Status == 0 {
		return fmt.Sprintf("no answer (%v)", a.Err)
	}
	return fmt.Sprintf("%d %.300s", a.Status, bytes.TrimSpace(a.Body))
}

// pick is a random serve's index.
func (c *apiClient) pick(rng *rand.Rand) int { return rng.IntN(len(c.serves)) }

// do sends one request to serve i and records it. body is JSON-encoded
// unless it is []byte. headers come in name, value pairs.
func (c *apiClient) do(ctx context.Context, kind string, i int, method, path string, body any, headers ...string) answer {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			panic(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.serves[i].url+path, rd)
	if err != nil {
		panic(err)
	}
	if _, raw := body.([]byte); body != nil && !raw {
		req.Header.Set("Content-Type", "application/json")
	}
	for j := 0; j+1 < len(headers); j += 2 {
		req.Header.Set(headers[j], headers[j+1])
	}
	if req.Header.Get("x-api-key") == "" {
		req.Header.Set("Authorization", "Bearer "+adminToken)
	}
	a := answer{Start: time.Now()}
	resp, err := c.http.Do(req)
	if err == nil {
		a.Body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		a.Status, a.Header = resp.StatusCode, resp.Header
		if err != nil {
			a.Status = 0
		}
	}
	a.Err, a.End = err, time.Now()
	if ctx.Err() != nil && a.Status == 0 && errors.Is(err, context.Canceled) {
		// The soak itself gave up on the request (its workload ended):
		// not something the service did.
		return a
	}
	o := op{Kind: kind, Method: method, Path: path, Serve: i, Start: a.Start, End: a.End, Status: a.Status}
	if err != nil {
		o.Err = err.Error()
	}
	c.hist.add(o)
	return a
}

// admin is a request that must succeed: it is sent again (to any serve)
// until it answers 2xx or 4xx, for at most d. Used for setup, healing and
// reading back, where faults are over.
func (c *apiClient) admin(ctx context.Context, rng *rand.Rand, kind, method, path string, body any, d time.Duration, headers ...string) (answer, error) {
	var a answer
	for deadline := time.Now().Add(d); ; {
		a = c.do(ctx, kind, c.pick(rng), method, path, body, headers...)
		if !a.unknown() {
			if a.Status >= 300 {
				return a, fmt.Errorf("%s %s: %s", method, path, a)
			}
			return a, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return a, fmt.Errorf("%s %s: %s (gave up after %s)", method, path, a, d)
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// jitter is a duration between lo and hi.
func jitter(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}
