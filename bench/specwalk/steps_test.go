package main

import (
	"testing"
)

// Every operation of the spec has a request meant to succeed, and every
// request names an operation of the spec, so that the walk fails at once
// (here, without Prism) when an operation is added to the spec without one.
func TestStepsCoverTheSpec(t *testing.T) {
	sp, err := loadSpec("../../httpapi/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	valid := map[string]bool{}
	for _, s := range allSteps(sp) {
		if _, ok := sp.op(s.op); !ok {
			t.Errorf("step %q names %q, which the spec does not have", s.what, s.op)
		}
		if s.valid {
			valid[s.op] = true
		}
	}
	for _, op := range sp.ops {
		if !valid[op.id] {
			t.Errorf("%s has no request meant to succeed", op)
		}
	}
}

func TestVariantPaths(t *testing.T) {
	op := operation{id: "getUpload", method: "GET", path: "/stock/{client_id}/uploads/{upload_id}", query: []string{"limit", "before"}}
	if got, want := controlInPath(op.path, "/stock/<client>/uploads/<upload>?a=1"), "/stock/%01/uploads/<upload>?a=1"; got != want {
		t.Errorf("controlInPath = %q, want %q", got, want)
	}
	if got, want := controlInQuery(op, "/stock/<client>/uploads?limit=5"), "/stock/<client>/uploads?limit=5&before=%01"; got != want {
		t.Errorf("controlInQuery = %q, want %q", got, want)
	}
	if got, want := controlInQuery(operation{path: "/healthz"}, "/healthz"), "/healthz?x=%01"; got != want {
		t.Errorf("controlInQuery = %q, want %q", got, want)
	}
}
