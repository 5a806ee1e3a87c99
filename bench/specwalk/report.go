package main

import (
	"fmt"
	"io"
	"time"
)

// opStats counts one operation's requests.
type opStats struct {
	requests, valid, invalid, direct int
	violations                       int
}

// finding is one thing wrong: a violation or a failed step.
type finding struct {
	op, what, line, text string
	violation            bool
}

// report is the walk's outcome.
type report struct {
	ops      map[string]*opStats
	findings []finding
	unwalked []string
	fatal    []string
	elapsed  time.Duration
	// The 405 checks (methods.go): paths sent a method they do not take,
	// and what was wrong with their answers.
	methodChecks, methodViolations int
}

func newReport() *report { return &report{ops: map[string]*opStats{}} }

func (r *report) stats(op string) *opStats {
	st := r.ops[op]
	if st == nil {
		st = &opStats{}
		r.ops[op] = st
	}
	return st
}

// count records one request sent for the step.
func (r *report) count(op operation, s step) {
	st := r.stats(op.id)
	st.requests++
	switch {
	case s.valid:
		st.valid++
	default:
		st.invalid++
	}
	if s.direct {
		st.direct++
	}
}

// violation records a disagreement of the spec and the service (or a
// valid request).
func (r *report) violation(s step, line string, a *answer, text string) {
	r.stats(s.op).violations++
	r.findings = append(r.findings, finding{op: s.op, what: s.what, line: redact(line), text: text, violation: true})
}

// fail records a step that did not do what it was meant to.
func (r *report) fail(s step, line, text string) {
	r.findings = append(r.findings, finding{op: s.op, what: s.what, line: redact(line), text: text})
}

func (r *report) failed() bool {
	return len(r.findings) > 0 || len(r.unwalked) > 0 || len(r.fatal) > 0
}

// totals sums the operations' counts.
func (r *report) totals() (t opStats) {
	for _, st := range r.ops {
		t.requests += st.requests
		t.valid += st.valid
		t.invalid += st.invalid
		t.direct += st.direct
		t.violations += st.violations
	}
	return t
}

func (r *report) print(out io.Writer) {
	for _, f := range r.findings {
		kind := "FAIL"
		if f.violation {
			kind = "VIOLATION"
		}
		fmt.Fprintf(out, "%s %s, %s\n    %s\n    %s\n", kind, f.op, f.what, f.line, f.text)
	}
	for _, u := range r.unwalked {
		fmt.Fprintf(out, "UNWALKED %s\n", u)
	}
	for _, f := range r.fatal {
		fmt.Fprintf(out, "FAIL %s\n", f)
	}
	t := r.totals()
	failedSteps := 0
	for _, f := range r.findings {
		if !f.violation {
			failedSteps++
		}
	}
	fmt.Fprintf(out, "specwalk: %d operations, %d requests (%d meant to succeed, %d wrong on purpose, %d of them straight to serve), %d violations; %d paths sent a method they do not take, %d violations; %d other failures, %d operations unwalked, in %s\n",
		len(r.ops), t.requests, t.valid, t.invalid, t.direct, t.violations, r.methodChecks, r.methodViolations,
		failedSteps+len(r.fatal), len(r.unwalked), r.elapsed.Round(100*time.Millisecond))
}
