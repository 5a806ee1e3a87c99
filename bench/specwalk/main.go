// Command specwalk checks that storelink and its published contract,
// httpapi/openapi.yaml, agree, with a validator nobody here wrote: Stoplight
// Prism in proxy mode. It starts a real `storelink serve` on SQLite in a
// temporary folder, starts Prism in front of it, and sends through Prism,
// for every operation the spec lists, at least one request that should
// succeed and the wrong ones a partner sends (bad JSON, a missing field, an
// unknown id, a wrong or missing key, a control character in the path or
// the query, a body over 1 MiB). It fails on any answer of the service that
// Prism finds at odds with the spec, on any request meant to be valid that
// Prism finds at odds with it, on any operation of the spec it did not walk,
// and on any answer whose status is not the one the request was meant to
// get.
//
//	go run ./bench/specwalk -prism /tmp/prism/node_modules/.bin/prism
//	go run ./bench/specwalk -prism … -v           # every request and its answer
//	go run ./bench/specwalk -prism … -only createOrder,getOrder
//
// Then it asks GET /problems/{code} of every problem type the spec names
// or the service answered with, and sends every path of the spec a method
// it does not take, checking the 405 and its Allow header (methods.go).
//
// Two Prism processes run, both with --errors, so that a violation turns
// the answer into Prism's own error: one validates requests too, and takes
// the requests meant to be valid (a request violation there is the spec
// and a good request disagreeing); the other, with --validate-request=false,
// takes the wrong requests, which it forwards so that the service's answer
// to them is checked. Prism cannot forward what it cannot read: a body that
// is not JSON (it answers 400 itself) and a request without the credentials
// the operation names (it answers 401 itself). Those go to serve directly
// and their answers are checked against the same spec with kin-openapi.
// docs/development.md says how to run it and how to read a failure.
//
// All traffic is on loopback: serve, both Prism processes and the webhook
// receiver listen on 127.0.0.1. The walk is bounded: -timeout (2 min) for
// the whole run, 30 s per request.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"storelink/bench/internal/serveproc"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is what one run does.
type config struct {
	prism   string   // the prism executable
	spec    string   // the spec, relative to the module root
	only    []string // operationIds to walk; empty is all (and unwalked ones fail)
	verbose bool
	keep    bool
	timeout time.Duration
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("specwalk", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	var only string
	fs.StringVar(&c.prism, "prism", "prism", "the Prism CLI (npm @stoplight/prism-cli), a path or a name on PATH")
	fs.StringVar(&c.spec, "spec", "httpapi/openapi.yaml", "the OpenAPI document, relative to the module root")
	fs.StringVar(&only, "only", "", "comma-separated operationIds to walk (with the set-up they need); default every operation")
	fs.BoolVar(&c.verbose, "v", false, "print every request and its answer")
	fs.BoolVar(&c.keep, "keep", false, "keep the temporary folder (serve's and Prism's logs) even when the walk passed")
	fs.DurationVar(&c.timeout, "timeout", 2*time.Minute, "the whole run's bound")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	for _, id := range strings.Split(only, ",") {
		if id = strings.TrimSpace(id); id != "" {
			c.only = append(c.only, id)
		}
	}
	prism, err := exec.LookPath(c.prism)
	if err != nil {
		fmt.Fprintf(stderr, "specwalk: no Prism CLI at %q (npm install --prefix DIR @stoplight/prism-cli, then -prism DIR/node_modules/.bin/prism): %v\n", c.prism, err)
		return 2
	}
	c.prism = prism

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "storelink-specwalk-")
	if err != nil {
		fmt.Fprintf(stderr, "specwalk: %v\n", err)
		return 2
	}
	rep, err := walkAll(ctx, c, dir, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "specwalk: %v\n", err)
		fmt.Fprintf(stderr, "specwalk: logs kept in %s\n", dir)
		return 2
	}
	rep.print(stdout)
	failed := rep.failed()
	if failed || c.keep {
		fmt.Fprintf(stdout, "specwalk: serve's and Prism's logs kept in %s\n", dir)
	} else {
		_ = os.RemoveAll(dir)
	}
	if failed {
		fmt.Fprintln(stdout, "specwalk: FAIL")
		return 1
	}
	fmt.Fprintln(stdout, "specwalk: PASS")
	return 0
}

// walkAll starts serve, the receiver and both Prism processes, walks the
// steps and stops them all.
func walkAll(ctx context.Context, c config, dir string, stdout io.Writer) (*report, error) {
	root, err := serveproc.ModuleRoot(ctx)
	if err != nil {
		return nil, err
	}
	specPath := filepath.Join(root, c.spec)
	sp, err := loadSpec(specPath)
	if err != nil {
		return nil, err
	}
	start := time.Now()

	recv, err := startReceiver()
	if err != nil {
		return nil, err
	}
	defer recv.close()
	servePort, err := serveproc.FreePort()
	if err != nil {
		return nil, err
	}
	serveURL := fmt.Sprintf("http://127.0.0.1:%d", servePort)

	// Prism reads the spec for some seconds: both start while serve builds.
	type started struct {
		p   *prismProc
		err error
	}
	strictc, lenientc := make(chan started, 1), make(chan started, 1)
	go func() {
		p, err := startPrism(ctx, c.prism, specPath, serveURL, true, filepath.Join(dir, "prism-strict.log"))
		strictc <- started{p, err}
	}()
	go func() {
		p, err := startPrism(ctx, c.prism, specPath, serveURL, false, filepath.Join(dir, "prism-lenient.log"))
		lenientc <- started{p, err}
	}()
	bin, berr := serveproc.Build(ctx, root, dir)
	var srv *serve
	if berr == nil {
		srv, berr = startServe(ctx, bin, dir, servePort)
	}
	s, l := <-strictc, <-lenientc
	for _, p := range []*prismProc{s.p, l.p} {
		if p != nil {
			defer p.Stop()
		}
	}
	if srv != nil {
		defer srv.Stop()
	}
	if err := errors.Join(berr, s.err, l.err); err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "specwalk: serve %s, Prism %s (requests validated) and %s (not), receiver %s; ready in %s\n",
		serveURL, s.p.url, l.p.url, recv.url, time.Since(start).Round(100*time.Millisecond))

	kin, err := newKinChecker(specPath)
	if err != nil {
		return nil, err
	}
	w := newWalker(sp, kin, serveURL, s.p.url, l.p.url, recv, c.verbose, stdout)
	steps := allSteps(sp)
	if len(c.only) > 0 {
		steps = onlySteps(steps, c.only)
	}
	rep := w.walk(ctx, steps)
	rep.unwalked = sp.unwalked(rep, c.only)
	rep.elapsed = time.Since(start)
	if !srv.Alive() {
		rep.fatal = append(rep.fatal, fmt.Sprintf("serve exited during the walk (%v); see %s", srv.ExitErr(), srv.Logs))
	}
	return rep, nil
}
