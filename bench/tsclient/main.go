// Command tsclient runs the partner guide's TypeScript example
// (examples/typescript/feed.ts, shown whole in docs/typescript.md) against a
// real `storelink serve`, as a partner would: it generates the types with
// openapi-typescript from the served /openapi.yaml, type-checks and compiles
// the example with tsc, and runs it with node. The example uploads
// examples/typescript/stock.csv through openapi-fetch, follows the upload
// until it is processed, saves its errors.csv and pages the order events
// with their cursor; a second run starts from the cursor the first printed.
// Everything the example prints is checked against what the service says
// when asked directly, and any difference fails the run.
//
//	go run ./bench/tsclient                 # installs the npm packages first (npm ci)
//	go run ./bench/tsclient -npm DIR        # DIR: where `npm ci` of the example's package files ran
//
// serve runs on SQLite in a temporary folder, on 127.0.0.1; the example
// talks to it only. The run is bounded by -timeout (2 min).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"storelink/bench/internal/benchproc"
)

// The run's operator token.
const adminToken = "sla_tsclient_0123456789abcdef0123456789abcdef0123456789abcdef"

// orders is how many orders the first run's event feed holds: more than
// the example's page of 100, so that it follows next_cursor.
const orders = 120

// The example's folder and the files the run copies from it.
const exampleDir = "examples/typescript"

var exampleFiles = []string{"package.json", "package-lock.json", "tsconfig.json", "feed.ts", "stock.csv"}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tsclient", flag.ContinueOnError)
	fs.SetOutput(stderr)
	npmDir := fs.String("npm", "", "a folder where `npm ci` of examples/typescript's package.json and package-lock.json ran; default: run it in a temporary folder")
	timeout := fs.Duration("timeout", 2*time.Minute, "the whole run's bound")
	keep := fs.Bool("keep", false, "keep the temporary folder (serve's log, the compiled example) even when the run passed")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "storelink-tsclient-")
	if err != nil {
		fmt.Fprintf(stderr, "tsclient: %v\n", err)
		return 2
	}
	start := time.Now()
	if err := check(ctx, dir, *npmDir, stdout); err != nil {
		fmt.Fprintf(stderr, "tsclient: %v\n", err)
		fmt.Fprintf(stderr, "tsclient: FAIL; serve's log and the example are kept in %s\n", dir)
		return 1
	}
	if *keep {
		fmt.Fprintf(stdout, "tsclient: serve's log and the example are kept in %s\n", dir)
	} else {
		_ = os.RemoveAll(dir)
	}
	fmt.Fprintf(stdout, "tsclient: PASS in %s\n", time.Since(start).Round(100*time.Millisecond))
	return 0
}

// check builds and starts serve while the example's packages install, then
// generates the types, compiles the example while the client's data is set
// up, runs the example twice and compares what it printed with the service.
func check(ctx context.Context, dir, npmDir string, stdout io.Writer) error {
	root, err := benchproc.ModuleRoot(ctx, "tsclient")
	if err != nil {
		return err
	}
	ts := filepath.Join(dir, "ts")
	if err := os.MkdirAll(ts, 0o700); err != nil {
		return err
	}
	for _, f := range exampleFiles {
		b, err := os.ReadFile(filepath.Join(root, exampleDir, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(ts, f), b, 0o600); err != nil {
			return err
		}
	}
	installed := make(chan error, 1)
	go func() { installed <- npmPackages(ctx, ts, npmDir) }()
	bin, err := benchproc.BuildServe(ctx, root, dir)
	if err != nil {
		return err
	}
	port, err := benchproc.FreePort()
	if err != nil {
		return err
	}
	srv, err := startServe(ctx, bin, dir, port)
	if err != nil {
		return err
	}
	defer srv.Stop(5 * time.Second)
	c := &client{url: "http://127.0.0.1:" + strconv.Itoa(port), http: &http.Client{Timeout: 30 * time.Second}}
	if err := <-installed; err != nil {
		return err
	}

	// The types from the served description, as the guide says; the
	// client's data is made while tsc runs.
	if err := tool(ctx, ts, "openapi-typescript", c.url+"/openapi.yaml", "-o", "storelink-api.d.ts"); err != nil {
		return err
	}
	compiled := make(chan error, 1)
	go func() { compiled <- tool(ctx, ts, "tsc", "-p", ".") }()
	setupErr := c.setup(ctx)
	if err := errors.Join(<-compiled, setupErr); err != nil {
		return err
	}

	// The first run: the upload, its errors and every event.
	out, err := example(ctx, ts, c, "")
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "tsclient: the example's first run printed:\n%s", indent(shortened(out)))
	cursor, err := c.compare(ctx, ts, out, "")
	if err != nil {
		return err
	}
	// The second, from the first's cursor: one new event.
	if err := c.order(ctx, orders+1); err != nil {
		return err
	}
	out, err = example(ctx, ts, c, cursor)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "tsclient: its second run, from cursor %s, printed:\n%s", cursor, indent(shortened(out)))
	if _, err := c.compare(ctx, ts, out, cursor); err != nil {
		return err
	}
	if !srv.Alive() {
		return fmt.Errorf("serve exited during the run (%v); see %s", srv.Err(), srv.Logs())
	}
	return nil
}

// npmPackages gives ts a node_modules: a link to npmDir's, or one that
// `npm ci` installs there.
func npmPackages(ctx context.Context, ts, npmDir string) error {
	if npmDir == "" {
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--silent")
		cmd.Dir = ts
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("npm ci of %s's packages: %v\n%s", exampleDir, err, out)
		}
		return nil
	}
	modules, err := filepath.Abs(filepath.Join(npmDir, "node_modules"))
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(modules, ".bin", "tsc")); err != nil {
		return fmt.Errorf("-npm %s: no node_modules/.bin/tsc there (npm ci in a folder holding %s/package.json and package-lock.json): %v", npmDir, exampleDir, err)
	}
	return os.Symlink(modules, filepath.Join(ts, "node_modules"))
}

// tool runs one of the example's npm tools in ts.
func tool(ctx context.Context, ts, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(ts, "node_modules", ".bin", name), args...)
	cmd.Dir = ts
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// example runs the compiled example in ts as the guide does, with the
// client's settings and the cursor (none: from the first event), and
// returns what it printed; it fails when the example does.
func example(ctx context.Context, ts string, c *client, cursor string) (string, error) {
	cmd := exec.CommandContext(ctx, "node", filepath.Join("dist", "feed.js"), "stock.csv")
	cmd.Dir = ts
	cmd.Env = append(os.Environ(), "STORELINK_URL="+c.url, "STORELINK_CLIENT_ID="+c.clientID,
		"STORELINK_API_KEY="+c.key, "STORELINK_CURSOR="+cursor)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("node dist/feed.js stock.csv: %v\n%s%s", err, out.String(), errOut.String())
	}
	return out.String(), nil
}

// compare checks what the example printed against the service: the
// upload it names and its report, the error file it saved, and the events
// after cursor with the cursor it ends at, which it returns.
func (c *client) compare(ctx context.Context, ts, out, cursor string) (string, error) {
	m := regexp.MustCompile(`^upload ([0-9a-f-]{36}): accepted\n`).FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("the example's first line is not `upload ID: accepted`:\n%s", out)
	}
	uploadID := m[1]
	var u struct {
		Status       string `json:"status"`
		FileName     string `json:"file_name"`
		RowsTotal    int    `json:"rows_total"`
		RowsApplied  int    `json:"rows_applied"`
		RowsRejected int    `json:"rows_rejected"`
	}
	if err := c.getJSON(ctx, "/stock/"+c.clientID+"/uploads/"+uploadID, &u); err != nil {
		return "", err
	}
	// stock.csv: two good rows, one of an unknown store and one whose
	// quantity is no whole number.
	if u.Status != "applied" || u.FileName != "stock.csv" || u.RowsTotal != 4 || u.RowsApplied != 2 || u.RowsRejected != 2 {
		return "", fmt.Errorf("upload %s is %+v, not stock.csv applied with 2 of its 4 rows", uploadID, u)
	}
	errorsCSV, err := c.get(ctx, "/stock/"+c.clientID+"/uploads/"+uploadID+"/errors.csv")
	if err != nil {
		return "", err
	}
	for _, want := range []string{";4;Store does not exist;", ";5;Invalid column value;"} {
		if !strings.Contains(string(errorsCSV), want) {
			return "", fmt.Errorf("errors.csv of upload %s lacks %q:\n%s", uploadID, want, errorsCSV)
		}
	}
	saved, err := os.ReadFile(filepath.Join(ts, "stock-errors.csv"))
	if err != nil {
		return "", fmt.Errorf("the example's error file: %v", err)
	}
	if !bytes.Equal(saved, errorsCSV) {
		return "", fmt.Errorf("the example saved stock-errors.csv as\n%s\nwhere errors.csv of upload %s is\n%s", saved, uploadID, errorsCSV)
	}

	events, next, err := c.events(ctx, cursor)
	if err != nil {
		return "", err
	}
	want := fmt.Sprintf("upload %s: accepted\napplied: 2 of 4 rows applied, 2 rejected\ndropped rows saved in stock-errors.csv\n", uploadID)
	for _, e := range events {
		want += fmt.Sprintf("event %s: order %s %s\n", e.ID, e.OrderNumber, e.State)
	}
	want += "cursor " + next + "\n"
	if out != want {
		return "", fmt.Errorf("the example's output is not what the service says: %s", firstDifference(out, want))
	}
	wantEvents := orders
	if cursor != "" {
		wantEvents = 1
	}
	if len(events) != wantEvents {
		return "", fmt.Errorf("the event feed after %q holds %d events, not the %d orders made", cursor, len(events), wantEvents)
	}
	return next, nil
}

type event struct {
	ID          string `json:"event_id"`
	OrderNumber string `json:"order_number"`
	State       string `json:"state"`
}

// events reads the client's whole event feed after cursor, and the cursor
// it ends at.
func (c *client) events(ctx context.Context, after string) ([]event, string, error) {
	var all []event
	for range 100 {
		var page struct {
			Events     []event `json:"events"`
			NextCursor string  `json:"next_cursor"`
		}
		path := "/events/" + c.clientID + "?limit=1000"
		if after != "" {
			path += "&after=" + after
		}
		if err := c.getJSON(ctx, path, &page); err != nil {
			return nil, "", err
		}
		all = append(all, page.Events...)
		if page.NextCursor != "" {
			after = page.NextCursor
		}
		if len(page.Events) == 0 {
			return all, after, nil
		}
	}
	return nil, "", errors.New("the event feed did not end within 100 pages")
}

// firstDifference names the first line where got and want differ.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d is %q, not %q (%d lines printed, %d expected)", i+1, gl, wl, len(g)-1, len(w)-1)
		}
	}
	return "none"
}

// shortened is the example's output with its event lines after the
// third counted rather than shown.
func shortened(out string) string {
	var b strings.Builder
	events := 0
	for _, line := range strings.SplitAfter(out, "\n") {
		if strings.HasPrefix(line, "event ") {
			if events++; events > 3 {
				continue
			}
		} else if events > 3 {
			fmt.Fprintf(&b, "… %d more events\n", events-3)
			events = 0
		}
		b.WriteString(line)
	}
	return b.String()
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
}

// startServe starts `storelink serve` (bin) on 127.0.0.1:port with a fresh
// SQLite database in dir/data and the run's operator token, its log in
// dir/serve.log, and waits until it listens.
func startServe(ctx context.Context, bin, dir string, port int) (*benchproc.Proc, error) {
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:"+strconv.Itoa(port), "--data", data, "--admin-token", adminToken)
	cmd.Env = benchproc.ServeEnv()
	return benchproc.Start(ctx, benchproc.Spec{Name: "serve", Cmd: cmd, Logs: filepath.Join(dir, "serve.log"), Ready: benchproc.Listening})
}
