package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// operation is what the walk needs to know of one operation of the spec.
type operation struct {
	id       string // operationId
	method   string // upper case
	path     string // the template, /stock/{client_id}/{file}
	security string // "adminToken", "apiKey" or "" (none)
	jsonBody bool   // takes an application/json request body
	query    []string
}

func (o operation) String() string { return o.id + " (" + o.method + " " + o.path + ")" }

// pathParams tells whether the path has parameters.
func (o operation) pathParams() bool { return strings.Contains(o.path, "{") }

// spec is the walk's reading of the OpenAPI document.
type spec struct {
	ops []operation // in the document's order
	// problemCodes are the codes the document names: the values of the
	// ProblemCode schema and the codes of the Problem schema's type.
	problemCodes []string
}

// The parts of the document the walk reads.
type specDoc struct {
	Paths      yaml.Node `yaml:"paths"`
	Components struct {
		Schemas struct {
			ProblemCode struct {
				Enum []string `yaml:"enum"`
			} `yaml:"ProblemCode"`
			Problem struct {
				Properties struct {
					Type struct {
						Enum []string `yaml:"enum"`
					} `yaml:"type"`
				} `yaml:"properties"`
			} `yaml:"Problem"`
		} `yaml:"schemas"`
		Parameters    map[string]specParam `yaml:"parameters"`
		RequestBodies map[string]specBody  `yaml:"requestBodies"`
	} `yaml:"components"`
}

type specParam struct {
	Ref  string `yaml:"$ref"`
	Name string `yaml:"name"`
	In   string `yaml:"in"`
}

type specBody struct {
	Ref     string               `yaml:"$ref"`
	Content map[string]yaml.Node `yaml:"content"`
}

type specOp struct {
	OperationID string                `yaml:"operationId"`
	Security    []map[string][]string `yaml:"security"`
	Parameters  []specParam           `yaml:"parameters"`
	RequestBody *specBody             `yaml:"requestBody"`
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// loadSpec reads the operations of the document at path, in its order.
func loadSpec(path string) (*spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseSpec(b)
}

func parseSpec(b []byte) (*spec, error) {
	var doc specDoc
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("parse the spec: %w", err)
	}
	if doc.Paths.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("the spec has no paths")
	}
	s := &spec{problemCodes: slices.Clone(doc.Components.Schemas.ProblemCode.Enum)}
	for _, t := range doc.Components.Schemas.Problem.Properties.Type.Enum {
		if code, found := strings.CutPrefix(t, "/problems/"); found && !slices.Contains(s.problemCodes, code) {
			s.problemCodes = append(s.problemCodes, code)
		}
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(doc.Paths.Content); i += 2 {
		path, item := doc.Paths.Content[i].Value, doc.Paths.Content[i+1]
		for j := 0; j+1 < len(item.Content); j += 2 {
			method := item.Content[j].Value
			if !slices.Contains(httpMethods, method) {
				continue
			}
			var so specOp
			if err := item.Content[j+1].Decode(&so); err != nil {
				return nil, fmt.Errorf("%s %s: %w", strings.ToUpper(method), path, err)
			}
			if so.OperationID == "" || seen[so.OperationID] {
				return nil, fmt.Errorf("%s %s: an operationId is missing or given twice (%q)", strings.ToUpper(method), path, so.OperationID)
			}
			seen[so.OperationID] = true
			op := operation{id: so.OperationID, method: strings.ToUpper(method), path: path}
			for _, req := range so.Security {
				for name := range req {
					op.security = name
				}
			}
			for _, p := range so.Parameters {
				if p.Ref != "" {
					p = doc.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
				}
				if p.In == "query" {
					op.query = append(op.query, p.Name)
				}
			}
			if rb := so.RequestBody; rb != nil {
				if rb.Ref != "" {
					c := doc.Components.RequestBodies[strings.TrimPrefix(rb.Ref, "#/components/requestBodies/")]
					rb = &c
				}
				_, op.jsonBody = rb.Content["application/json"]
			}
			s.ops = append(s.ops, op)
		}
	}
	if len(s.ops) == 0 {
		return nil, fmt.Errorf("the spec has no operations")
	}
	return s, nil
}

// op returns the operation named id.
func (s *spec) op(id string) (operation, bool) {
	for _, o := range s.ops {
		if o.id == id {
			return o, true
		}
	}
	return operation{}, false
}

// unwalked lists the operations of the spec (of only, when given) that no
// request of the report reached, neither a valid one nor an invalid one.
func (s *spec) unwalked(r *report, only []string) []string {
	var out []string
	for _, o := range s.ops {
		if len(only) > 0 && !slices.Contains(only, o.id) {
			continue
		}
		st := r.ops[o.id]
		switch {
		case st == nil || st.requests == 0:
			out = append(out, o.String()+": no request")
		case st.valid == 0:
			out = append(out, o.String()+": no request meant to succeed")
		}
	}
	return out
}
