package main

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// attackerClients is how many clients the attacker partner has: enough
// that per-client limits alone (4 uploads in flight, 20 waiting) add up to
// more than any shared pool.
const attackerClients = 8

// attack is one bullet of issue 24, run against a serve for a bounded time.
type attack struct {
	name, what string
	// prepare, when set, does the attacker's groundwork before the
	// measured window (uploading the files it will download, say).
	prepare func(ctx context.Context, e *env) error
	// run attacks until ctx ends, then closes everything it opened and
	// returns.
	run func(ctx context.Context, e *env)
}

// attacks are run in this order.
var attacks = []*attack{
	{name: "csv-validate", what: "10 KB gzip of one line of ';' (about 10 MiB) to PUT /stock/{client}/validate, 3 at once", run: csvValidate},
	{name: "csv-upload", what: "the same file as an upload, once per attacker client", run: csvUpload},
	{name: "csv-errors", what: "10 MiB of rows that each fail the check, gzipped, once per attacker client", run: csvErrors},
	{name: "json-depth", what: "1 MiB of '[' to POST /webhooks/{client}/endpoints/{id}/test, 20 at once", run: jsonDepth},
	{name: "slow-clients", what: "connections without credentials sending headers or a body slowly (-slow-conns)", run: slowClients},
	{name: "big-headers", what: "1,000 connections each sending 1 MB of headers and no end", run: bigHeaders},
	{name: "login-proxy", what: "wrong keys, tokens and sign-ins from behind the proxy (127.0.0.1, X-Forwarded-For)", run: loginProxy},
	{name: "login-flood", what: "wrong admin tokens and keys from 12,000 source addresses (127.1.x.y), 4 each", run: loginFlood},
	{name: "pool-hog", prepare: poolHogPrepare, what: "slow validations holding the upload memory, slow readers holding every download", run: poolHog},
	{name: "tiny-uploads", what: "2,000 one-byte uploads as fast as they go", run: tinyUploads},
}

func attackNames() []string {
	var ns []string
	for _, a := range attacks {
		ns = append(ns, a.name)
	}
	return ns
}

func attackByName(n string) *attack {
	for _, a := range attacks {
		if a.name == n {
			return a
		}
	}
	return nil
}

// env is what an attack works with.
type env struct {
	base, addr string
	acc        *accounts
	cfg        *config
	tally      *tally
	files      []attackFile // pool-hog's uploads, to download
}

// attackFile is an upload of the attacker that it downloads.
type attackFile struct {
	c  client
	id string
}

// tally counts the attacker's outcomes by kind: a status, or what became
// of a connection.
type tally struct {
	mu sync.Mutex
	m  map[string]int
}

func newTally() *tally { return &tally{m: map[string]int{}} }

func (t *tally) add(what string) {
	t.mu.Lock()
	t.m[what]++
	t.mu.Unlock()
}

func (t *tally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.m) == 0 {
		return "nothing"
	}
	keys := slices.Sorted(maps.Keys(t.m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, t.m[k])
	}
	return strings.Join(parts, ", ")
}

// answer records what a request of the attacker came to; one cut by the
// end of the attack (ctx) is counted as such.
func (t *tally) answer(ctx context.Context, prefix string, resp *http.Response, err error) {
	if ctx.Err() != nil && err != nil {
		t.add(prefix + " cut by the attack's end")
		return
	}
	if err != nil {
		t.add(prefix + " " + failOf(err))
		return
	}
	t.add(fmt.Sprintf("%s %d", prefix, resp.StatusCode))
}

// pace sleeps d or until ctx ends, telling whether ctx is still live.
func pace(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// conns tracks an attack's raw connections so that all of them are closed
// at its end, whatever goroutine holds them.
type conns struct {
	mu sync.Mutex
	m  map[net.Conn]struct{}
}

func newConns() *conns { return &conns{m: map[net.Conn]struct{}{}} }

func (c *conns) add(nc net.Conn) {
	c.mu.Lock()
	c.m[nc] = struct{}{}
	c.mu.Unlock()
}

func (c *conns) drop(nc net.Conn) {
	c.mu.Lock()
	delete(c.m, nc)
	c.mu.Unlock()
	nc.Close()
}

func (c *conns) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for nc := range c.m {
		nc.Close()
	}
	clear(c.m)
}

// attackerHTTP is the attacker's client: keep-alive connections, bounded
// per request.
func attackerHTTP(timeout time.Duration, maxConns int) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{MaxIdleConnsPerHost: maxConns, MaxConnsPerHost: maxConns, DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
