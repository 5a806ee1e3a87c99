package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
)

// A method a path does not take is answered 405 with an Allow header.
// OpenAPI 3.0 has no place for the answer to a method a path does not have
// (a response belongs to an operation), and Prism answers such a request
// itself (NO_METHOD_MATCHED_ERROR): so the walk sends one such request per
// path of the spec straight to serve, and checks that it is the 405 the
// spec's description promises (`/problems/method_not_allowed`) and that
// its Allow header lists exactly the methods the spec gives the paths that
// match it (GET with HEAD).

// allowedMethods lists the methods of every path template of the spec that
// matches the concrete path, and HEAD with GET, sorted.
func (s *spec) allowedMethods(path string) []string {
	var out []string
	for _, op := range s.ops {
		if templateMatches(op.path, path) && !slices.Contains(out, op.method) {
			out = append(out, op.method)
			if op.method == "GET" && !slices.Contains(out, "HEAD") {
				out = append(out, "HEAD")
			}
		}
	}
	slices.Sort(out)
	return out
}

// templateMatches tells whether path (no query) is an instance of the
// template: the same segments, a {param} matching any one segment.
func templateMatches(template, path string) bool {
	ts, ps := strings.Split(template, "/"), strings.Split(path, "/")
	if len(ts) != len(ps) {
		return false
	}
	for i := range ts {
		if !strings.HasPrefix(ts[i], "{") && ts[i] != ps[i] {
			return false
		}
	}
	return true
}

// concretePath fills every {param} of template with "walk".
func concretePath(template string) string {
	segs := strings.Split(template, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") {
			segs[i] = "walk"
		}
	}
	return strings.Join(segs, "/")
}

// checkMethods sends each path of the spec a method it does not take.
func (w *walker) checkMethods(ctx context.Context) {
	seen := map[string]bool{}
	for _, op := range w.spec.ops {
		if seen[op.path] {
			continue
		}
		seen[op.path] = true
		path := concretePath(op.path)
		allow := w.spec.allowedMethods(path)
		methods := []string{"PATCH", "DELETE", "PUT", "POST", "GET"}
		i := slices.IndexFunc(methods, func(m string) bool { return !slices.Contains(allow, m) })
		if i < 0 {
			continue
		}
		method := methods[i]
		line := method + " " + path
		w.rep.methodChecks++
		st, h, b, err := w.callHeader(ctx, method, path)
		if err != nil {
			w.rep.findings = append(w.rep.findings, finding{op: op.path, what: "a method the path does not take", line: line, text: err.Error()})
			continue
		}
		var p struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(b, &p)
		got := strings.Split(strings.ReplaceAll(h.Get("Allow"), " ", ""), ",")
		slices.Sort(got)
		var why []string
		if st != http.StatusMethodNotAllowed {
			why = append(why, fmt.Sprintf("status %d, not 405", st))
		}
		if p.Type != "/problems/method_not_allowed" || !strings.HasPrefix(h.Get("Content-Type"), "application/problem+json") {
			why = append(why, fmt.Sprintf("not a /problems/method_not_allowed problem: %s %s", h.Get("Content-Type"), short(b, 200)))
		}
		if !slices.Equal(got, allow) {
			why = append(why, fmt.Sprintf("Allow: %s, where the spec gives %s", h.Get("Allow"), strings.Join(allow, ", ")))
		}
		if w.verbose {
			fmt.Fprintf(w.out, "  %-26s %-44s %s → %d Allow: %s\n", op.path, "a method the path does not take", line, st, h.Get("Allow"))
		}
		for _, text := range why {
			w.rep.findings = append(w.rep.findings, finding{op: op.path, what: "a method the path does not take", line: line, text: text, violation: true})
			w.rep.methodViolations++
		}
	}
}

// callHeader sends a request without credentials to serve and returns the
// answer's status, header and body.
func (w *walker) callHeader(ctx context.Context, method, path string) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, w.serve+path, http.NoBody)
	if err != nil {
		return 0, nil, nil, err
	}
	resp, err := w.http.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header, b, err
}
