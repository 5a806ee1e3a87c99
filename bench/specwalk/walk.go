package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
)

// auth is the credentials a step sends.
type auth int

const (
	authNone     auth = iota
	authAdmin         // the operator token
	authKey           // an API key of the walk's client
	authOtherKey      // a valid key of the partner's other client (403)
	authWrong         // a wrong token or key, of the kind the operation takes
)

// step is one request of the walk.
type step struct {
	op    string // operationId
	what  string // what the request is, for the report
	valid bool   // meant to succeed: sent through the Prism that validates requests
	// direct: Prism cannot forward it (a body that is not JSON, missing
	// credentials), so it goes to serve and kin-openapi checks the answer.
	direct bool
	want   int    // the status it is meant to get
	path   string // with <var> placeholders, and the query
	auth   auth
	header map[string]string
	body   string // with <var> placeholders; sent as application/json unless ctype says otherwise
	ctype  string
	raw    func(w *walker) []byte // the body's bytes, when built at run time
	// save keeps top-level string fields of the answer as vars:
	// var name → JSON field.
	save  map[string]string
	after func(w *walker, a *answer) error
	// again tells, from the answer, that the request met a state it was
	// not meant for (a race the walk cannot exclude) and is to be made
	// once more after before; at most 3 times.
	again  func(a *answer) bool
	before func(ctx context.Context, w *walker) error
}

// walker sends the steps and keeps what they made.
type walker struct {
	spec    *spec
	kin     *kinChecker
	serve   string // base URLs
	strict  string
	lenient string
	recv    *receiver
	vars    map[string]string
	http    *http.Client
	verbose bool
	out     io.Writer
	rep     *report
	// codes are the problem codes of the service's answers (true once
	// GET /problems/{code} of it was walked).
	codes map[string]bool
}

func newWalker(sp *spec, kin *kinChecker, serveURL, strict, lenient string, recv *receiver, verbose bool, out io.Writer) *walker {
	return &walker{
		spec: sp, kin: kin, serve: serveURL, strict: strict, lenient: lenient, recv: recv,
		vars:    map[string]string{"receiver": recv.url},
		verbose: verbose, out: out,
		http: &http.Client{
			Timeout:       30 * time.Second,
			Transport:     &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		rep:   newReport(),
		codes: map[string]bool{},
	}
}

// expand replaces the <var> placeholders of s with the vars.
func (w *walker) expand(s string) string {
	if !strings.Contains(s, "<") {
		return s
	}
	pairs := make([]string, 0, 2*len(w.vars))
	for k, v := range w.vars {
		pairs = append(pairs, "<"+k+">", v)
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

// walk sends every step in order; a step whose set-up fails is reported
// and the walk goes on.
func (w *walker) walk(ctx context.Context, steps []step) *report {
	for _, s := range steps {
		if ctx.Err() != nil {
			w.rep.fatal = append(w.rep.fatal, fmt.Sprintf("the walk ran out of time (-timeout) before %s: %s", s.op, s.what))
			break
		}
		w.one(ctx, s)
	}
	// Every type the service answered with is explained: GET
	// /problems/{code} of those the steps did not ask for.
	for _, code := range slices.Sorted(maps.Keys(w.codes)) {
		if !w.codes[code] && ctx.Err() == nil {
			w.one(ctx, ok("problemType", "the explanation of "+code+", a type the service answered with", 200, authNone, "/problems/"+code, ""))
		}
	}
	if ctx.Err() == nil {
		w.checkMethods(ctx)
	}
	return w.rep
}

func (w *walker) one(ctx context.Context, s step) {
	op, ok := w.spec.op(s.op)
	if !ok {
		w.rep.fail(s, "", fmt.Sprintf("the walk has a request for %q, which the spec does not have", s.op))
		return
	}
	var a *answer
	var line string
	var took time.Duration
	for try := 1; ; try++ {
		if s.before != nil {
			if err := s.before(ctx, w); err != nil {
				w.rep.fail(s, "", "set-up: "+err.Error())
				return
			}
		}
		req, l, err := w.request(ctx, op, s)
		if err != nil {
			w.rep.fail(s, l, "build the request: "+err.Error())
			return
		}
		line = l
		began := time.Now()
		a, err = w.send(req, s.direct)
		took = time.Since(began)
		if err != nil {
			w.rep.count(op, s)
			w.rep.fail(s, line, err.Error())
			return
		}
		if s.again == nil || !s.again(a) || try == 3 {
			break
		}
	}
	w.rep.count(op, s)
	w.noteCode(op, a)
	if s.direct {
		a.resp = append(a.resp, w.kin.check(a.req, a)...)
	}
	w.judge(s, line, a)
	if w.verbose {
		fmt.Fprintf(w.out, "  %-26s %-44s %s → %d in %s %s\n", s.op, s.what, redact(short([]byte(line), 120)), a.status, took.Round(time.Millisecond), redact(short(a.body, 100)))
	}
	if a.status != s.want {
		return
	}
	if len(s.save) > 0 {
		var m map[string]any
		if err := json.Unmarshal(a.body, &m); err != nil {
			w.rep.fail(s, line, "read the answer: "+err.Error())
			return
		}
		for k, field := range s.save {
			v, ok := m[field].(string)
			if !ok {
				w.rep.fail(s, line, fmt.Sprintf("the answer has no string %q", field))
				continue
			}
			w.vars[k] = v
		}
	}
	if s.after != nil {
		if err := s.after(w, a); err != nil {
			w.rep.fail(s, line, err.Error())
		}
	}
}

// noteCode keeps the problem code of the service's answer a, and marks
// the code explained when a is the answer to GET /problems/{code}.
func (w *walker) noteCode(op operation, a *answer) {
	if op.id == "problemType" && a.status == http.StatusOK {
		w.codes[path.Base(a.req.url)] = true
		return
	}
	if a.prism != "" || !strings.HasPrefix(a.header.Get("Content-Type"), "application/problem+json") {
		return
	}
	var p struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(a.body, &p) == nil {
		if code, found := strings.CutPrefix(p.Type, "/problems/"); found && !w.codes[code] {
			w.codes[code] = false
		}
	}
}

// request builds the step's request, to Prism or (direct) to serve, and
// the line that names it in the report.
func (w *walker) request(ctx context.Context, op operation, s step) (*http.Request, string, error) {
	base := w.strict
	switch {
	case s.direct:
		base = w.serve
	case !s.valid:
		base = w.lenient
	}
	path := w.expand(s.path)
	line := op.method + " " + path
	var body []byte
	switch {
	case s.raw != nil:
		body = s.raw(w)
	case s.body != "":
		body = []byte(w.expand(s.body))
	}
	if len(body) > 0 {
		line += " " + short(body, 80)
	}
	req, err := http.NewRequestWithContext(ctx, op.method, base+path, bytes.NewReader(body))
	if err != nil {
		return nil, line, err
	}
	if len(body) == 0 {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	if len(body) > 0 {
		ct := s.ctype
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	for k, v := range s.header {
		req.Header.Set(k, w.expand(v))
	}
	tokenOp := op.security == "adminToken"
	switch s.auth {
	case authAdmin:
		req.Header.Set("Authorization", "Bearer "+adminToken)
	case authKey:
		req.Header.Set("x-api-key", w.vars["key"])
	case authOtherKey:
		req.Header.Set("x-api-key", w.vars["otherkey"])
	case authWrong:
		if tokenOp {
			req.Header.Set("Authorization", "Bearer sla_wrong_0123456789abcdef0123456789abcdef")
		} else {
			req.Header.Set("x-api-key", "slk_"+strings.Repeat("0", 64))
		}
	}
	return req, line, nil
}

// send makes the request and reads and classifies its answer.
func (w *walker) send(req *http.Request, direct bool) (*answer, error) {
	var reqBody []byte
	if req.GetBody != nil {
		if rc, err := req.GetBody(); err == nil {
			reqBody, _ = io.ReadAll(rc)
		}
	}
	resp, err := w.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("no answer: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("read the answer: %v", err)
	}
	a := &answer{status: resp.StatusCode, header: resp.Header, body: body}
	a.req = &sentRequest{method: req.Method, url: req.URL.String(), header: req.Header, body: reqBody}
	if !direct {
		classify(a)
	}
	return a, nil
}

// judge records what is wrong with a step's answer.
func (w *walker) judge(s step, line string, a *answer) {
	for _, v := range a.resp {
		w.rep.violation(s, line, a, "response violation: "+v.String())
	}
	if s.valid {
		for _, v := range a.reqv {
			w.rep.violation(s, line, a, "request violation of a request meant to be valid: "+v.String())
		}
	}
	if a.prism != "" && a.prism != prismViolations && !(len(a.reqv) > 0 && s.valid) {
		w.rep.fail(s, line, fmt.Sprintf("Prism answered %d itself (%s): %s", a.status, a.prism, redact(short(a.body, 400))))
		return
	}
	if a.prism == "" && a.status != s.want {
		w.rep.fail(s, line, fmt.Sprintf("answered %d, the walk meant %d: %s", a.status, s.want, redact(short(a.body, 400))))
	}
}

// short is b cut to n bytes, on one line.
func short(b []byte, n int) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// secretPattern matches the secrets an answer can hold: API keys, webhook
// secrets and the operator token.
var secretPattern = regexp.MustCompile(`(slk_|whsec_|sla_)[A-Za-z0-9+/=_]{8,}`)

// redact hides the secrets of s before it is printed.
func redact(s string) string {
	return secretPattern.ReplaceAllString(s, "${1}…")
}
