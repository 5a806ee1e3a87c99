package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// attackerNice is the CPU priority the attacker process runs at, under
// the SCHED_IDLE policy when chrt is there (attackerCommand). In
// production the attacker's CPU is its own machine's; here it shares two
// cores with serve and the well-behaved partner, so it gets them last,
// which keeps the figures about serve rather than about this machine's
// scheduler. Nice 10 alone was not last enough: big-headers' attacker
// spends about two CPU-seconds in the kernel copying its 1 GB into socket
// buffers, work a remote attacker does on its own machine, and on a slow
// CI machine that held the well-behaved partner's p99 at 73 ms.
const attackerNice = "10"

// attackerCommand is the command line that runs this executable (self)
// as the attacker: under chrt --idle (SCHED_IDLE: CPU only when no other
// process wants it) at attackerNice, or at attackerNice alone where chrt
// is missing.
func attackerCommand(self string) []string {
	cmd := []string{"nice", "-n", attackerNice, self, "attacker"}
	if _, err := exec.LookPath("chrt"); err == nil {
		cmd = append([]string{"chrt", "--idle", "0"}, cmd...)
	}
	return cmd
}

// attackSpec is what an attacker process needs of its parent: where serve
// is, the accounts, the files prepared, and for how long to attack.
type attackSpec struct {
	Name      string       `json:"name"`
	Base      string       `json:"base"`
	Addr      string       `json:"addr"`
	Good      specClient   `json:"good"`
	Attacker  []specClient `json:"attacker"`
	Files     []specFile   `json:"files"`
	SlowConns int          `json:"slow_conns"`
	Duration  string       `json:"duration"`
}

type specClient struct{ ID, Key string }

type specFile struct {
	Client specClient
	ID     string
}

func specOf(name string, e *env, d time.Duration) attackSpec {
	s := attackSpec{Name: name, Base: e.base, Addr: e.addr, Good: specClient{e.acc.good.id, e.acc.good.key},
		SlowConns: e.cfg.slowConns, Duration: d.String()}
	for _, c := range e.acc.attacker {
		s.Attacker = append(s.Attacker, specClient{c.id, c.key})
	}
	for _, f := range e.files {
		s.Files = append(s.Files, specFile{specClient{f.c.id, f.c.key}, f.id})
	}
	return s
}

func (s attackSpec) env() *env {
	acc := &accounts{good: client{s.Good.ID, s.Good.Key}}
	for _, c := range s.Attacker {
		acc.attacker = append(acc.attacker, client{c.ID, c.Key})
	}
	e := &env{base: s.Base, addr: s.Addr, acc: acc, cfg: &config{slowConns: s.SlowConns}, tally: newTally()}
	for _, f := range s.Files {
		e.files = append(e.files, attackFile{client{f.Client.ID, f.Client.Key}, f.ID})
	}
	return e
}

// runAttacker is `hostile attacker`: it reads an attackSpec on stdin, runs
// that attack for its duration (or until SIGTERM), and prints the tally of
// what the attacker got on stdout.
func runAttacker(stdin io.Reader, stdout, stderr io.Writer) int {
	var s attackSpec
	if err := json.NewDecoder(stdin).Decode(&s); err != nil {
		fmt.Fprintf(stderr, "hostile attacker: spec: %v\n", err)
		return 2
	}
	a := attackByName(s.Name)
	d, err := time.ParseDuration(s.Duration)
	if a == nil || err != nil {
		fmt.Fprintf(stderr, "hostile attacker: no attack %q or bad duration %q\n", s.Name, s.Duration)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	e := s.env()
	a.run(ctx, e)
	fmt.Fprintln(stdout, e.tally.String())
	return 0
}

// attackInProcess runs attack a against e's serve in an attacker process
// of its own at a lower CPU priority, until d has passed or ctx ends
// (then the process gets SIGTERM, and SIGKILL 20 s later); it returns the
// attacker's tally.
func attackInProcess(ctx context.Context, name string, e *env, d time.Duration) string {
	self, err := os.Executable()
	if err != nil {
		return "attacker not started: " + err.Error()
	}
	spec, _ := json.Marshal(specOf(name, e, d))
	argv := attackerCommand(self)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(spec)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 20 * time.Second
	if err := cmd.Run(); err != nil && ctx.Err() == nil {
		return fmt.Sprintf("attacker failed: %v: %s", err, strings.TrimSpace(errb.String()))
	}
	if s := strings.TrimSpace(out.String()); s != "" {
		return s
	}
	return "attacker cut short: " + strings.TrimSpace(errb.String())
}
