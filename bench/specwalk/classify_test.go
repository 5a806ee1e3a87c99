package main

import (
	"net/http"
	"strings"
	"testing"
)

// The answers below are Prism 5.14's, as it sent them for this service's
// spec before the spec was fixed.
func TestClassify(t *testing.T) {
	cases := []struct {
		name      string
		status    int
		header    map[string]string
		body      string
		prism     string
		resp, req []string // locations and messages expected, in part
	}{
		{
			name:   "the service's answer, no finding",
			status: 201, header: map[string]string{"Content-Type": "application/json"},
			body: `{"partner_id":"01a225fb-8518-7490-8de6-551c00bcd4b6","name":"Walk"}`,
		},
		{
			name:   "a status the operation does not document: a warning in the header",
			status: 413,
			header: map[string]string{
				"Content-Type":  "application/problem+json",
				"sl-violations": `[{"location":["response"],"severity":"Warning","message":"Unable to match the returned status code with those defined in the document: 201,400,401,422,429,500,503,507"}]`,
			},
			body: `{"type":"/problems/too_large","title":"Request Entity Too Large","status":413,"detail":"The body is larger than 1048576 bytes."}`,
			resp: []string{"response: Unable to match the returned status code"},
		},
		{
			name:   "a body at odds with the schema: Prism's own 500, listed in the header and the body once",
			status: 500,
			header: map[string]string{
				"Content-Type":  "application/problem+json",
				"sl-violations": `[{"location":["response","body"],"severity":"Error","code":"type","message":"Response body must be object"}]`,
			},
			body:  `{"type":"https://stoplight.io/prism/errors#VIOLATIONS","title":"Request/Response not valid","status":500,"detail":"…","validation":[{"location":["response","body"],"severity":"Error","code":"type","message":"Response body must be object"}]}`,
			prism: prismViolations,
			resp:  []string{"response.body: Response body must be object"},
		},
		{
			name:   "a request at odds with the spec: Prism's own 422, not forwarded",
			status: 422, header: map[string]string{"Content-Type": "application/problem+json"},
			body:  `{"type":"https://stoplight.io/prism/errors#UNPROCESSABLE_ENTITY","title":"Invalid request","status":422,"detail":"…","validation":[{"location":["path","code"],"severity":"Error","code":"enum","message":"Request path parameter code must be equal to one of the allowed values"}]}`,
			prism: prismUnprocessed,
			req:   []string{"request.path.code: Request path parameter code must be equal"},
		},
		{
			name:   "missing credentials: Prism's own 401",
			status: 401, header: map[string]string{"Content-Type": "application/problem+json"},
			body:  `{"type":"https://stoplight.io/prism/errors#UNAUTHORIZED","title":"Invalid security scheme used","status":401,"detail":"Your request does not fullfil the security requirements"}`,
			prism: prismUnauthorized,
			req:   []string{"request: Your request does not fullfil"},
		},
		{
			name:   "a body Prism cannot parse",
			status: 400, header: map[string]string{"Content-Type": "application/json; charset=utf-8"},
			body:  `{"error":{"code":"invalid_json","message":"Invalid JSON"}}`,
			prism: "micri:invalid_json",
		},
		{
			name:   "a path the spec does not have",
			status: 404, header: map[string]string{"Content-Type": "application/problem+json"},
			body:  `{"type":"https://stoplight.io/prism/errors#NO_PATH_MATCHED_ERROR","title":"Route not resolved, no path matched","status":404,"detail":"…"}`,
			prism: "NO_PATH_MATCHED_ERROR",
		},
		{
			name:   "a header Prism cut short: a finding all the same",
			status: 200,
			header: map[string]string{"Content-Type": "application/json", "sl-violations": `Too many violations! [{"location":["response","body"`},
			body:   `{}`,
			resp:   []string{"response: sl-violations: Too many violations!"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range c.header {
				h.Set(k, v)
			}
			a := &answer{status: c.status, header: h, body: []byte(c.body)}
			classify(a)
			if a.prism != c.prism {
				t.Errorf("prism = %q, want %q", a.prism, c.prism)
			}
			matchViolations(t, "response", a.resp, c.resp)
			matchViolations(t, "request", a.reqv, c.req)
		})
	}
}

func matchViolations(t *testing.T, kind string, got []violation, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s violations = %v, want %d: %q", kind, got, len(want), want)
		return
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i].String(), w) {
			t.Errorf("%s violation %d = %q, want it to start with %q", kind, i, got[i].String(), w)
		}
	}
}
