// Command soak is storelink's chaos soak: a mixed workload against real
// `storelink serve` processes while faults are injected, then a check of the
// history the clients saw against what the README and the guides under docs/
// promise.
//
//	go run ./bench/soak -setup sqlite -duration 60s
//	go run ./bench/soak -setup postgres -duration 10m
//
// The workload: stock uploads from several clients (small and large files,
// some with bad rows, some rejected whole), orders created and taken through
// every transition (cancel with and without reassignment, fulfil with
// cancelled items, returns to a store or the marketplace, warehouse orders
// and their returns), and webhook receivers on loopback that are sometimes
// slow, failing, answering 429, 503 or 410, or refusing connections; one
// receiver takes the first client's upload events (stock_upload.finished)
// and is down until the heal, which recovers its failed deliveries. The
// faults: SIGKILL of a serve (restarted a moment later), SIGTERM, the
// PostgreSQL cluster restarted (a private one the soak starts itself with
// initdb and pg_ctl on a free loopback port), a receiver down for a while,
// a receiver answering 410 (its endpoint is then disabled, and enabled again
// by the soak). After the workload the faults are healed, the service is
// given a bounded time to drain, and the checker reads back what the
// service says and compares it with the history. It prints one line per
// invariant and the totals, and exits 1 when an invariant is broken.
//
// All traffic is on loopback; every loop is bounded in time.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"storelink/bench/internal/benchproc"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is what one soak run does.
type config struct {
	setup    string // "sqlite" or "postgres"
	duration time.Duration
	drain    time.Duration
	seed     uint64
	clients  int
	workers  int
	keep     bool
	pgBin    string
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	fs.StringVar(&c.setup, "setup", "sqlite", "sqlite: one serve on SQLite; postgres: three serves on one private PostgreSQL cluster")
	fs.DurationVar(&c.duration, "duration", 60*time.Second, "how long the workload and the faults run")
	fs.DurationVar(&c.drain, "drain", 3*time.Minute, "longest wait, after the workload, for uploads and deliveries to finish")
	fs.Uint64Var(&c.seed, "seed", 0, "random seed (0: from the clock); printed, so a run can be repeated in its choices")
	fs.IntVar(&c.clients, "clients", 4, "client accounts (each with stores, two uploaders and three webhook endpoints; the first also one for its upload events)")
	fs.IntVar(&c.workers, "order-workers", 6, "goroutines taking orders through their transitions")
	fs.BoolVar(&c.keep, "keep", false, "keep the temporary folder (logs, databases) even when every invariant held")
	fs.StringVar(&c.pgBin, "pg-bin", "", "folder of initdb and pg_ctl (default: the newest /usr/lib/postgresql/*/bin, else $PATH)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if c.setup != "sqlite" && c.setup != "postgres" {
		fmt.Fprintf(stderr, "soak: -setup must be sqlite or postgres, got %q\n", c.setup)
		return 2
	}
	if c.duration <= 0 || c.clients < 1 || c.workers < 1 {
		fmt.Fprintln(stderr, "soak: -duration, -clients and -order-workers must be positive")
		return 2
	}
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dir, err := os.MkdirTemp("", "storelink-soak-")
	if err != nil {
		fmt.Fprintf(stderr, "soak: %v\n", err)
		return 2
	}
	// The folder may hold a PostgreSQL cluster run as another user.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintf(stderr, "soak: %v\n", err)
		return 2
	}
	s := &soak{cfg: c, dir: dir, out: stdout, log: stderr, rng: rand.New(rand.NewPCG(c.seed, c.seed^0x9e3779b97f4a7c15))}
	s.hist = newHistory()
	fmt.Fprintf(stdout, "soak: setup=%s duration=%s seed=%d folder=%s\n", c.setup, c.duration, c.seed, dir)
	ok, err := s.run(ctx)
	s.shutdown()
	if err != nil {
		fmt.Fprintf(stderr, "soak: %v\n", err)
		fmt.Fprintf(stderr, "soak: logs kept in %s\n", dir)
		return 2
	}
	if !ok || c.keep {
		fmt.Fprintf(stdout, "soak: logs and databases kept in %s\n", dir)
	} else {
		_ = os.RemoveAll(dir)
	}
	if !ok {
		fmt.Fprintln(stdout, "soak: FAIL")
		return 1
	}
	fmt.Fprintln(stdout, "soak: PASS")
	return 0
}

// soak is one run: the processes, the clients' model and the history.
type soak struct {
	cfg  config
	dir  string
	out  io.Writer
	log  io.Writer
	rng  *rand.Rand // the orchestrator's; each goroutine has its own
	hist *history

	bin    string
	pg     *pgCluster
	serves []*serve
	api    *apiClient

	clients   []*clientModel
	receivers []*receiver
	orders    *orderBook
	// recovered counts the deliveries the late receivers' recover calls
	// made pending again.
	recovered atomic.Int64

	started, workloadEnd, drained time.Time
}

// run sets up, runs the workload with the faults, heals, drains and checks.
// The error is for a soak that could not run; a broken invariant is ok=false.
func (s *soak) run(ctx context.Context) (ok bool, err error) {
	root, err := benchproc.ModuleRoot(ctx, "soak")
	if err != nil {
		return false, err
	}
	if s.bin, err = benchproc.BuildServe(ctx, root, s.dir); err != nil {
		return false, err
	}
	var dbURL string
	if s.cfg.setup == "postgres" {
		s.pg, err = startPG(ctx, s.cfg.pgBin, filepath.Join(s.dir, "pg"))
		if err != nil {
			return false, err
		}
		dbURL = s.pg.url()
	}
	n := 1
	if s.cfg.setup == "postgres" {
		n = 3
	}
	for i := range n {
		sv, err := newServe(i, s.bin, s.dir, dbURL)
		if err != nil {
			return false, err
		}
		s.serves = append(s.serves, sv)
		// Processes on PostgreSQL start one after the other: the first
		// migrates, the others find the schema.
		if err := sv.start(ctx); err != nil {
			return false, err
		}
	}
	s.api = newAPIClient(s.hist, s.serves)
	if err := s.setupAccounts(ctx); err != nil {
		return false, err
	}
	fmt.Fprintf(s.out, "soak: %d serve(s), %d clients, %d receivers; workload for %s\n", len(s.serves), len(s.clients), len(s.receivers), s.cfg.duration)

	s.started = time.Now()
	wctx, cancel := context.WithTimeout(ctx, s.cfg.duration)
	defer cancel()
	s.runWorkload(wctx)
	s.workloadEnd = time.Now()
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	fmt.Fprintf(s.out, "soak: workload done after %s; healing and draining (at most %s)\n", s.workloadEnd.Sub(s.started).Round(time.Second), s.cfg.drain)
	if err := s.heal(ctx); err != nil {
		return false, err
	}
	drainErr := s.drain(ctx)
	s.drained = time.Now()
	res, err := s.check(ctx, drainErr)
	if err != nil {
		return false, err
	}
	s.writeFaults()
	return res.print(s.out), nil
}

// shutdown stops what the soak started, each process by its own id.
func (s *soak) shutdown() {
	for _, r := range s.receivers {
		r.close()
	}
	for _, sv := range s.serves {
		sv.stopForGood()
	}
	if s.pg != nil {
		s.pg.stopForGood()
	}
}

// writeFaults lists the faults, with their windows, in faults.txt of the
// run's folder, for reading beside the serves' logs.
func (s *soak) writeFaults() {
	_, faults := s.hist.snapshot()
	var b strings.Builder
	for _, f := range faults {
		fmt.Fprintf(&b, "%s %s serve=%d until %s %s\n", f.Start.UTC().Format("15:04:05.000"), f.Kind, f.Serve, f.End.UTC().Format("15:04:05.000"), f.Note)
	}
	_ = os.WriteFile(filepath.Join(s.dir, "faults.txt"), []byte(b.String()), 0o600)
}
