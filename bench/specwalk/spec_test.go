package main

import (
	"slices"
	"testing"
)

const smallSpec = `
openapi: 3.0.3
paths:
  /things/{id}:
    parameters:
      - name: id
        in: path
        required: true
        schema: {type: string}
    get:
      operationId: getThing
      security: [{apiKey: []}]
      parameters:
        - $ref: "#/components/parameters/Limit"
    put:
      operationId: putThing
      security: [{adminToken: []}]
      requestBody:
        content:
          application/json:
            schema: {type: object}
  /healthz:
    get:
      operationId: healthz
      security: []
components:
  parameters:
    Limit: {name: limit, in: query, schema: {type: integer}}
  schemas:
    ProblemCode: {type: string, enum: [invalid, not_found]}
    Problem:
      type: object
      properties:
        type: {type: string, enum: [/problems/invalid, /problems/gone]}
`

func TestParseSpec(t *testing.T) {
	sp, err := parseSpec([]byte(smallSpec))
	if err != nil {
		t.Fatal(err)
	}
	want := []operation{
		{id: "getThing", method: "GET", path: "/things/{id}", security: "apiKey", query: []string{"limit"}},
		{id: "putThing", method: "PUT", path: "/things/{id}", security: "adminToken", jsonBody: true},
		{id: "healthz", method: "GET", path: "/healthz"},
	}
	if len(sp.ops) != len(want) {
		t.Fatalf("ops = %+v, want %+v", sp.ops, want)
	}
	for i := range want {
		g, w := sp.ops[i], want[i]
		if g.id != w.id || g.method != w.method || g.path != w.path || g.security != w.security || g.jsonBody != w.jsonBody || !slices.Equal(g.query, w.query) {
			t.Errorf("op %d = %+v, want %+v", i, g, w)
		}
	}
	if got, want := sp.problemCodes, []string{"invalid", "not_found", "gone"}; !slices.Equal(got, want) {
		t.Errorf("problem codes = %q, want %q", got, want)
	}
}

// An operation reached only by wrong requests, or not at all, is unwalked.
func TestUnwalked(t *testing.T) {
	sp, err := parseSpec([]byte(smallSpec))
	if err != nil {
		t.Fatal(err)
	}
	r := newReport()
	r.count(sp.ops[0], step{op: "getThing", valid: true})
	r.count(sp.ops[1], step{op: "putThing"})
	got := sp.unwalked(r, nil)
	want := []string{
		"putThing (PUT /things/{id}): no request meant to succeed",
		"healthz (GET /healthz): no request",
	}
	if !slices.Equal(got, want) {
		t.Errorf("unwalked = %q, want %q", got, want)
	}
	if got := sp.unwalked(r, []string{"getThing"}); len(got) != 0 {
		t.Errorf("unwalked of -only getThing = %q, want none", got)
	}
}
