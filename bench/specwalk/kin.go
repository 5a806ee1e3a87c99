package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	legacyrouter "github.com/getkin/kin-openapi/routers/legacy"
)

// kinChecker checks the answers of the requests Prism cannot forward
// against the spec, with kin-openapi.
type kinChecker struct {
	router routers.Router
}

func newKinChecker(specPath string) (*kinChecker, error) {
	doc, err := openapi3.NewLoader().LoadFromFile(specPath)
	if err != nil {
		return nil, err
	}
	// Paths are matched on whatever address serve listens on.
	doc.Servers = nil
	router, err := legacyrouter.NewRouter(doc, openapi3.DisableExamplesValidation())
	if err != nil {
		return nil, err
	}
	return &kinChecker{router: router}, nil
}

// check returns what is at odds with the spec in the answer to r.
func (k *kinChecker) check(r *sentRequest, a *answer) []violation {
	req, err := http.NewRequest(r.method, r.url, bytes.NewReader(r.body))
	if err != nil {
		return []violation{{Location: []string{"response"}, Severity: "Error", Message: "kin-openapi: " + err.Error()}}
	}
	req.Header = r.header.Clone()
	route, params, err := k.router.FindRoute(req)
	if err != nil {
		return []violation{{Location: []string{"request"}, Severity: "Error", Message: "kin-openapi finds no operation: " + err.Error()}}
	}
	opts := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts},
		Status:                 a.status,
		Header:                 a.header,
		Body:                   io.NopCloser(bytes.NewReader(a.body)),
		Options:                opts,
	})
	if err == nil {
		return nil
	}
	var vs []violation
	var me openapi3.MultiError
	if errors.As(err, &me) {
		for _, e := range me {
			vs = append(vs, violation{Location: []string{"response"}, Severity: "Error", Message: "kin-openapi: " + oneLine(e.Error())})
		}
		return vs
	}
	return []violation{{Location: []string{"response"}, Severity: "Error", Message: "kin-openapi: " + oneLine(err.Error())}}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
