package main

import (
	"slices"
	"strings"
)

// ok is a request meant to succeed; bad one meant to fail with want.
func ok(op, what string, want int, a auth, path, body string) step {
	return step{op: op, what: what, valid: true, want: want, auth: a, path: path, body: body}
}

func bad(op, what string, want int, a auth, path, body string) step {
	return step{op: op, what: what, want: want, auth: a, path: path, body: body}
}

// saving keeps the answer's JSON field as the var name.
func (s step) saving(name, field string) step {
	s.save = mapWith(s.save, name, field)
	return s
}

func (s step) withHeader(k, v string) step {
	s.header = mapWith(s.header, k, v)
	return s
}

func (s step) withType(ct string) step {
	s.ctype = ct
	return s
}

func mapWith(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	out[k] = v
	return out
}

// allSteps is the walk: the hand-written steps (steps.go's handSteps) with,
// after the first valid step of each operation, the wrong requests every
// operation of its kind must answer as the spec says (variants).
func allSteps(sp *spec) []step {
	var out []step
	varied := map[string]bool{}
	for _, s := range handSteps(sp) {
		out = append(out, s)
		if !s.valid || varied[s.op] {
			continue
		}
		varied[s.op] = true
		if op, found := sp.op(s.op); found {
			out = append(out, variants(op, s)...)
		}
	}
	return out
}

// variants are the wrong forms of the valid step s of op that every
// operation answers alike: wrong, missing or another client's
// credentials; a control character in a path parameter and in a query
// parameter; for a JSON body, one that is not JSON and one over 1 MiB.
// None of them changes anything, so they may follow any valid step.
func variants(op operation, s step) []step {
	base := step{op: op.id, path: s.path, auth: s.auth, body: s.body, ctype: s.ctype, header: s.header, raw: s.raw}
	var out []step
	add := func(what string, want int, f func(*step)) {
		v := base
		v.what, v.want = what, want
		f(&v)
		out = append(out, v)
	}
	if op.security != "" {
		add("wrong credentials", 401, func(v *step) { v.auth = authWrong })
		add("no credentials", 401, func(v *step) { v.auth, v.direct = authNone, true })
	}
	if op.security == "apiKey" {
		add("a key of the partner's other client", 403, func(v *step) { v.auth = authOtherKey })
	}
	if op.pathParams() {
		add("a control character in a path parameter", 400, func(v *step) { v.path = controlInPath(op.path, v.path) })
	}
	add("a control character in a query parameter", 400, func(v *step) { v.path = controlInQuery(op, v.path) })
	if op.jsonBody {
		add("a body that is not JSON", 400, func(v *step) { v.body, v.raw, v.direct = `{"name": `, nil, true })
		add("a JSON body over 1 MiB", 413, func(v *step) {
			v.body = ""
			v.raw = func(*walker) []byte { return []byte(`{"pad":"` + strings.Repeat("x", 1<<20+1024) + `"}`) }
		})
	}
	return out
}

// controlInPath replaces, in path (the template's form with its values),
// the segment of the template's first parameter with U+0001.
func controlInPath(template, path string) string {
	p, q, _ := strings.Cut(path, "?")
	segs := strings.Split(p, "/")
	for i, t := range strings.Split(template, "/") {
		if strings.HasPrefix(t, "{") && i < len(segs) {
			segs[i] = "%01"
			break
		}
	}
	out := strings.Join(segs, "/")
	if q != "" {
		out += "?" + q
	}
	return out
}

// controlInQuery adds a query parameter holding U+0001: one the operation
// takes and path does not give yet, or "x".
func controlInQuery(op operation, path string) string {
	_, q, _ := strings.Cut(path, "?")
	name := "x"
	for _, n := range op.query {
		if !strings.Contains("&"+q, "&"+n+"=") {
			name = n
			break
		}
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + name + "=%01"
}

// onlySteps keeps the steps of the operations in only, and the valid steps
// of the others that make what those need (ids they save, set-ups).
func onlySteps(steps []step, only []string) []step {
	var out []step
	for _, s := range steps {
		if slices.Contains(only, s.op) || (s.valid && (len(s.save) > 0 || s.after != nil || s.before != nil)) {
			out = append(out, s)
		}
	}
	return out
}
