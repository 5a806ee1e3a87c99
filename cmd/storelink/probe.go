package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// defaultProbeTimeout bounds one probe: a container engine or a supervisor
// runs it every few seconds and must get an answer well within its own
// interval, and /readyz answers within 2 s even when the database hangs.
const defaultProbeTimeout = 3 * time.Second

// probe runs `storelink probe [--timeout D] URL`: one GET, success on a 2xx.
// It lets a container image without curl or a shell check the service
// (the Dockerfile's HEALTHCHECK). It follows no redirect, so that a 3xx is
// reported as the answer it is, and reads at most a little of the body.
// Every failure, a wrong command line included, exits 1: container engines
// reserve exit code 2 of a health check.
func probe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("storelink probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", defaultProbeTimeout, "time the answer has to come in full")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage:\n  storelink probe [--timeout 3s] URL\n      GET URL; exit 0 on a 2xx answer, 1 otherwise (e.g. http://127.0.0.1:8080/readyz)\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return usageError{err}
		}
		return err
	}
	if fs.NArg() != 1 {
		return (errors.New("give one URL, e.g. storelink probe http://127.0.0.1:8080/readyz"))
	}
	if *timeout <= 0 {
		return errors.New("--timeout must be positive")
	}
	target := fs.Arg(0)
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http:// or https:// URL with a host", target)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("%s: %v", u.Redacted(), err)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("GET %s: no answer within %s", u.Redacted(), *timeout)
		}
		return fmt.Errorf("GET %s: %v", u.Redacted(), errors.Unwrap(err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("GET %s answered %s: %s", u.Redacted(), resp.Status, oneLine(body))
	}
	fmt.Fprintf(stdout, "storelink probe: GET %s answered %s\n", u.Redacted(), resp.Status)
	return nil
}

// oneLine is the start of an answer's body on one line, for a message.
func oneLine(b []byte) string {
	out := make([]rune, 0, len(b))
	for _, r := range string(b) {
		if r < 0x20 || r == 0x7f {
			r = ' '
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return "(no body)"
	}
	return string(out)
}
