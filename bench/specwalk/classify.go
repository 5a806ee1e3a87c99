package main

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
)

// How Prism (proxy mode, --errors) tells what it found, as its
// prism-http-server and prism-http packages do it:
//
//   - Every violation it found, of the request or of the answer, is listed in
//     the `sl-violations` header as a JSON array of {location, severity,
//     code, message}; location starts with "request" or "response". A status
//     the operation does not document is a response violation of severity
//     Warning; a body or header at odds with the schema one of Error.
//   - With --errors, a response violation of severity Error replaces the
//     service's answer with Prism's own 500, type
//     https://stoplight.io/prism/errors#VIOLATIONS, listing them under
//     `validation`.
//   - A request violation (when requests are validated) stops the request
//     before the service: Prism answers 422 UNPROCESSABLE_ENTITY listing them
//     (locations without the "request" prefix), 401 UNAUTHORIZED for missing
//     credentials (checked even when requests are not validated), or 415
//     INVALID_CONTENT_TYPE.
//   - A path or method the spec does not have is Prism's 404
//     NO_PATH_MATCHED_ERROR or 405 NO_METHOD_MATCHED_ERROR; a body Prism
//     cannot parse as JSON its HTTP server's 400 {"error": {"code":
//     "invalid_json"}}.
const (
	prismErrorPrefix  = "https://stoplight.io/prism/errors#"
	prismViolations   = "VIOLATIONS"
	prismUnprocessed  = "UNPROCESSABLE_ENTITY"
	prismUnauthorized = "UNAUTHORIZED"
	prismContentType  = "INVALID_CONTENT_TYPE"
)

// violation is one finding of Prism (or, for direct requests, kin-openapi).
type violation struct {
	Location []string `json:"location"`
	Severity string   `json:"severity"`
	Code     any      `json:"code"`
	Message  string   `json:"message"`
}

func (v violation) String() string {
	loc := strings.Join(v.Location, ".")
	if loc == "" {
		loc = "(no location)"
	}
	return fmt.Sprintf("%s: %s (%s)", loc, v.Message, v.Severity)
}

// key tells two reports of the same violation apart from different ones.
func (v violation) key() string { return strings.Join(v.Location, ".") + "\x00" + v.Message }

// sentRequest is the request as sent, for kin-openapi's check of a direct
// answer.
type sentRequest struct {
	method, url string
	header      http.Header
	body        []byte
}

// answer is what came back, and what Prism said of it.
type answer struct {
	status int
	header http.Header
	body   []byte
	req    *sentRequest
	prism  string      // Prism's own error type (after the #), or "micri:<code>"; "" for the service's answer
	resp   []violation // of the answer: the service and the spec disagree
	reqv   []violation // of the request
}

// classify reads Prism's findings from the answer.
func classify(a *answer) {
	seen := map[string]bool{}
	add := func(v violation, response bool) {
		if seen[v.key()] {
			return
		}
		seen[v.key()] = true
		if response {
			a.resp = append(a.resp, v)
		} else {
			a.reqv = append(a.reqv, v)
		}
	}
	for _, v := range headerViolations(a.header.Get("sl-violations")) {
		add(v, len(v.Location) == 0 || v.Location[0] != "request")
	}
	ct, _, _ := mime.ParseMediaType(a.header.Get("Content-Type"))
	switch ct {
	case "application/problem+json":
		var p struct {
			Type       string      `json:"type"`
			Detail     string      `json:"detail"`
			Validation []violation `json:"validation"`
		}
		if json.Unmarshal(a.body, &p) != nil || !strings.HasPrefix(p.Type, prismErrorPrefix) {
			return
		}
		a.prism = strings.TrimPrefix(p.Type, prismErrorPrefix)
		switch a.prism {
		case prismViolations:
			for _, v := range p.Validation {
				add(v, len(v.Location) == 0 || v.Location[0] != "request")
			}
		case prismUnprocessed:
			for _, v := range p.Validation {
				v.Location = append([]string{"request"}, v.Location...)
				add(v, false)
			}
		case prismUnauthorized, prismContentType:
			add(violation{Location: []string{"request"}, Severity: "Error", Message: p.Detail}, false)
		}
	case "application/json":
		// Prism's HTTP server (micri) answers a body it cannot read so.
		var m struct {
			Error *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if a.status >= 400 && json.Unmarshal(a.body, &m) == nil && m.Error != nil && m.Error.Code != "" {
			a.prism = "micri:" + m.Error.Code
		}
	}
}

// headerViolations reads an sl-violations header. Prism cuts a long one
// after "Too many violations! "; what cannot be read is one violation
// holding the header's text, of the answer (so that it fails the walk).
func headerViolations(h string) []violation {
	if h == "" {
		return nil
	}
	var vs []violation
	if err := json.Unmarshal([]byte(h), &vs); err == nil {
		return vs
	}
	return []violation{{Location: []string{"response"}, Severity: "Error", Message: "sl-violations: " + short([]byte(h), 600)}}
}
