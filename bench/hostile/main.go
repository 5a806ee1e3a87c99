// Command hostile is storelink's hostile-tenant test (issue 24 item 8): it
// starts a real `storelink serve`, runs the attacks of issue 24 against it
// one after the other, and measures what each does to a well-behaved
// partner working beside the attacker, and to serve's memory.
//
//	go run ./bench/hostile                      # every attack; exit 1 at the first that fails
//	go run ./bench/hostile -keep-going          # every attack measured, exit 1 at the end if one failed
//	go run ./bench/hostile -attacks json-depth,login-flood -duration 15s
//
// Each attack gets a serve of its own on a fresh SQLite data folder (with
// the defaults, --webhook-allow-private, --trusted-proxies 127.0.0.1/32 when
// serve has that flag, and any -serve-flag), so that what one attack leaves
// behind (memory the Go runtime has not given back yet, a poisonous upload
// still being processed) is not charged to the next. The well-behaved
// partner's baseline is measured first, on a serve of its own.
//
// An attack fails when serve's peak RSS goes over -max-rss (300 MiB), when a
// well-behaved request fails (a timeout, a refused or reset connection, or
// any answer but the one it should get: 429, 503, 5xx…), or when the
// well-behaved p99 during the attack is more than twice the baseline's p99
// plus 50 ms. All traffic is on loopback; every attack is bounded in time
// and in count, and closes what it opened.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"storelink/bench/internal/benchproc"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "attacker" {
		os.Exit(runAttacker(os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is what one run does.
type config struct {
	attacks    []string
	duration   time.Duration
	baseline   time.Duration
	keepGoing  bool
	maxRSS     int64
	abortRSS   int64
	slowConns  int
	workers    int
	serveFlags []string
	keep       bool
}

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, strings.Fields(v)...); return nil }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hostile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	var names string
	var maxRSS, abortRSS int
	var serveFlags listFlag
	fs.StringVar(&names, "attacks", strings.Join(attackNames(), ","), "comma-separated attacks to run, in this order")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long each attack runs")
	fs.DurationVar(&c.baseline, "baseline", 10*time.Second, "how long the well-behaved partner is measured without an attack")
	fs.BoolVar(&c.keepGoing, "keep-going", false, "run every attack even after one failed; exit 1 at the end")
	fs.IntVar(&maxRSS, "max-rss", 300, "serve's peak RSS, MiB, above which an attack fails")
	fs.IntVar(&abortRSS, "abort-rss", 2048, "serve's RSS, MiB, at which an attack is cut short to spare the machine (it fails)")
	fs.IntVar(&c.slowConns, "slow-conns", 3000, "connections of the slow-clients attack (half slow headers, half slow bodies)")
	fs.IntVar(&c.workers, "workers", 2, "well-behaved request loops running at once")
	fs.Var(&serveFlags, "serve-flag", "extra flag(s) for storelink serve, e.g. -serve-flag '--trusted-proxies 127.0.0.1/32' (repeatable)")
	fs.BoolVar(&c.keep, "keep", false, "keep the temporary folder (serve logs) even when every attack passed")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c.serveFlags, c.maxRSS, c.abortRSS = serveFlags, int64(maxRSS)<<20, int64(abortRSS)<<20
	for _, n := range strings.Split(names, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		if attackByName(n) == nil {
			fmt.Fprintf(stderr, "hostile: no attack %q; the attacks are %s\n", n, strings.Join(attackNames(), ", "))
			return 2
		}
		c.attacks = append(c.attacks, n)
	}
	if c.duration <= 0 || c.baseline <= 0 || c.workers < 1 || c.slowConns < 2 {
		fmt.Fprintln(stderr, "hostile: -duration, -baseline, -workers and -slow-conns must be positive")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "storelink-hostile-")
	if err != nil {
		fmt.Fprintf(stderr, "hostile: %v\n", err)
		return 2
	}
	h := &harness{cfg: c, dir: dir, out: stdout}
	failed, err := h.run(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "hostile: %v\n", err)
		fmt.Fprintf(stderr, "hostile: logs kept in %s\n", dir)
		return 2
	}
	if failed || c.keep {
		fmt.Fprintf(stdout, "hostile: serve logs kept in %s\n", dir)
	} else {
		_ = os.RemoveAll(dir)
	}
	if failed {
		fmt.Fprintln(stdout, "hostile: FAIL")
		return 1
	}
	fmt.Fprintln(stdout, "hostile: PASS")
	return 0
}

// harness is one run.
type harness struct {
	cfg   config
	dir   string
	out   io.Writer
	bin   string
	flags []string // serve's extra flags
}

// outcome is one row of the table.
type outcome struct {
	name   string
	peak   int64
	sum    summary
	note   string
	why    []string
	cutAt  string // why the attack was cut short, if it was
	served bool   // serve was still running at the end
	// The well-behaved uploads' receipt → processed, as serve recorded
	// them: shown, not judged (the rule is about requests).
	applyP99   time.Duration
	unfinished int
	applyErr   error
}

func (h *harness) run(ctx context.Context) (failed bool, err error) {
	root, err := benchproc.ModuleRoot(ctx, "hostile")
	if err != nil {
		return false, err
	}
	if h.bin, err = benchproc.BuildServe(ctx, root, h.dir); err != nil {
		return false, err
	}
	h.flags = slices.Clone(h.cfg.serveFlags)
	given := slices.ContainsFunc(h.flags, func(f string) bool { return strings.HasPrefix(strings.TrimLeft(f, "-"), "trusted-proxies") })
	if benchproc.ServeHasFlag(h.bin, "trusted-proxies") && !given {
		h.flags = append(h.flags, "--trusted-proxies", "127.0.0.1/32")
	}
	fmt.Fprintf(h.out, "hostile: serve flags: %s; each attack %s, baseline %s, %d well-behaved loops\n",
		strings.Join(append([]string{"--webhook-allow-private"}, h.flags...), " "), h.cfg.duration, h.cfg.baseline, h.cfg.workers)

	base, err := h.phase(ctx, "baseline", nil)
	if err != nil {
		return false, err
	}
	fmt.Fprintf(h.out, "baseline: %d requests, %d failed, p50 %s, p99 %s (%s); peak RSS %d MiB; uploads received → processed %s\n",
		base.sum.n, base.sum.failed, ms(base.sum.p50), ms(base.sum.p99), base.sum.kinds(), base.peak>>20, base.applied())
	if base.sum.failed > 0 {
		return false, fmt.Errorf("the well-behaved partner failed without any attack: %s", causes(base.sum.causes))
	}
	var rows []outcome
	for _, name := range h.cfg.attacks {
		o, err := h.judged(ctx, name, base.sum)
		if err != nil {
			return false, err
		}
		h.printOne(o, base.sum)
		if len(o.why) > 0 && o.served && o.cutAt == "" && o.peak <= h.cfg.maxRSS && o.sum.failed == 0 {
			// Only the p99 failed: on a shared two-core machine a burst of
			// the attacker's ordinary work (storing a 10 MiB file holds
			// SQLite's writer for 0.2 s) can meet two of the 60 requests a
			// kind makes. The attack runs again on a fresh serve, and
			// fails if it fails again.
			fmt.Fprintf(h.out, "%s: p99 over the limit; running it once more on a fresh serve\n", name)
			if o, err = h.judged(ctx, name, base.sum); err != nil {
				return false, err
			}
			o.name += " (again)"
			h.printOne(o, base.sum)
		}
		rows = append(rows, o)
		if len(o.why) > 0 {
			failed = true
			if !h.cfg.keepGoing {
				break
			}
		}
	}
	h.printTable(base, rows)
	return failed, nil
}

// judged runs one attack on a serve of its own and gives its verdict.
func (h *harness) judged(ctx context.Context, name string, base summary) (outcome, error) {
	o, err := h.phase(ctx, name, attackByName(name))
	if err != nil {
		return o, err
	}
	o.why = verdict(o.peak, base, o.sum, limits{maxRSS: h.cfg.maxRSS})
	if !o.served {
		o.why = append(o.why, "serve died")
	}
	if o.cutAt != "" {
		o.why = append(o.why, o.cutAt)
	}
	return o, nil
}

// phase starts a serve of its own for one attack (nil: the baseline), sets
// up the tenants, warms up, then runs the attack and the well-behaved loops
// side by side for the duration, sampling serve's memory; serve is killed
// at the end whatever happened.
func (h *harness) phase(ctx context.Context, name string, a *attack) (o outcome, err error) {
	o.name = name
	dir := filepath.Join(h.dir, name)
	sv, err := startServe(ctx, h.bin, dir, h.flags)
	if err != nil {
		return o, err
	}
	defer sv.Kill() // nothing of a run is kept, so nothing needs a clean stop
	acc, err := setupAccounts(ctx, sv.url, attackerClients)
	if err != nil {
		return o, fmt.Errorf("%s: set-up: %w", name, err)
	}
	wb := &wellBehaved{base: sv.url, c: acc.good, rec: &recorder{}, pause: 50 * time.Millisecond, hc: freshClient(goodTimeout)}
	warm := make(chan struct{})
	time.AfterFunc(time.Second, func() { close(warm) })
	wb.run(warm, h.cfg.workers)

	e := &env{base: sv.url, addr: sv.addr, acc: acc, cfg: &h.cfg, tally: newTally()}
	d := h.cfg.duration
	if a == nil {
		d = h.cfg.baseline
	} else if a.prepare != nil {
		if err := a.prepare(ctx, e); err != nil {
			return o, fmt.Errorf("%s: prepare: %w", name, err)
		}
	}
	wb.rec = &recorder{}
	measured := time.Now()
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	sctx, stopSampling := context.WithCancel(ctx)
	sampled, began := make(chan struct{}), time.Now()
	go func() {
		defer close(sampled)
		sv.sampleRSS(sctx, h.cfg.abortRSS, func() {
			o.cutAt = fmt.Sprintf("cut short after %s: serve's RSS passed %d MiB", time.Since(began).Round(100*time.Millisecond), h.cfg.abortRSS>>20)
			cancel()
		})
	}()
	// The attacker runs in a process of its own (attacker.go); its tally
	// comes back when it ends.
	attacked := make(chan string, 1)
	go func() {
		note := "nothing"
		if a != nil {
			note = attackInProcess(actx, name, e, d)
		}
		attacked <- note
	}()
	stopGood := make(chan struct{})
	go func() {
		select {
		case <-time.After(d):
		case <-actx.Done():
		}
		close(stopGood)
	}()
	wb.run(stopGood, h.cfg.workers)
	ended := time.Now()
	cancel()
	attackerNote := "not known: the attacker did not stop within 25s of its end"
	select {
	case attackerNote = <-attacked:
	case <-time.After(25 * time.Second):
		fmt.Fprintf(h.out, "%s: the attack did not stop within 25s of its end\n", name)
	}
	stopSampling()
	<-sampled
	o.peak, o.served = sv.peak(), sv.Alive()
	if o.served {
		var lags []time.Duration
		lags, o.unfinished, o.applyErr = applyLags(ctx, sv.url, acc.good, measured, ended)
		o.applyP99 = percentile(lags, 0.99)
	}
	o.sum = summarise(wb.rec.all())
	o.note = attackerNote
	return o, ctx.Err()
}

// printOne prints an attack's figures as soon as it is done.
func (h *harness) printOne(o outcome, base summary) {
	v := "PASS"
	if len(o.why) > 0 {
		v = "FAIL: " + strings.Join(o.why, "; ")
	}
	fmt.Fprintf(h.out, "%s: peak RSS %d MiB; well-behaved %d requests, %d failed; p50 %s, p99 %s (baseline %s, allowed %s)\n",
		o.name, o.peak>>20, o.sum.n, o.sum.failed, ms(o.sum.p50), ms(o.sum.p99), ms(base.p99), ms(allowedP99(base.p99)))
	fmt.Fprintf(h.out, "  p99 by kind: %s\n", o.sum.kinds())
	fmt.Fprintf(h.out, "  well-behaved uploads received → processed: %s\n", o.applied())
	fmt.Fprintf(h.out, "  attacker: %s\n", o.note)
	fmt.Fprintf(h.out, "  %s\n", v)
}

// applied prints the upload processing figure.
func (o outcome) applied() string {
	switch {
	case !o.served:
		return "not read (serve died)"
	case o.applyErr != nil:
		return "not read: " + o.applyErr.Error()
	case o.unfinished > 0:
		return fmt.Sprintf("p99 %s, %d not processed by the end", ms(o.applyP99), o.unfinished)
	}
	return "p99 " + ms(o.applyP99)
}

// appliedShort is applied for the table.
func (o outcome) appliedShort() string {
	switch {
	case !o.served || o.applyErr != nil:
		return "-"
	case o.unfinished > 0:
		return fmt.Sprintf("%s (%d left)", ms(o.applyP99), o.unfinished)
	}
	return ms(o.applyP99)
}

// printTable prints every attack's row.
func (h *harness) printTable(base outcome, rows []outcome) {
	fmt.Fprintln(h.out)
	tw := tabwriter.NewWriter(h.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "attack\tpeak RSS MiB\twell-behaved req/fail\tp50 during/base\tp99 during/base\tverdict\tupload processed p99 (not judged)")
	fmt.Fprintf(tw, "(baseline)\t%d\t%d/%d\t%s\t%s\t\t%s\n", base.peak>>20, base.sum.n, base.sum.failed, ms(base.sum.p50), ms(base.sum.p99), base.appliedShort())
	for _, o := range rows {
		v := "PASS"
		if len(o.why) > 0 {
			v = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d/%d\t%s/%s\t%s/%s\t%s\t%s\n", o.name, o.peak>>20, o.sum.n, o.sum.failed,
			ms(o.sum.p50), ms(base.sum.p50), ms(o.sum.p99), ms(base.sum.p99), v, o.appliedShort())
	}
	tw.Flush()
}
