// Command storelink runs the storelink service and its partner-side tools.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `storelink: connects retail partners' stores to the marketplace.

Usage:
  storelink serve [flags]     HTTP API and background workers
  storelink migrate [flags]   apply the database schema and exit
  storelink backup --to FILE [flags]
                              copy the SQLite database while serve runs
  storelink probe URL         GET URL; exit 0 on a 2xx (a container's health check)
  storelink secret-key rotate [flags]
                              seal every stored secret with a new secret key
  storelink secret-key check [flags]
                              tell whether a secret key is the database's
  storelink listen [flags]    receive and verify webhooks (partner side, for development)
  storelink upload [flags] FILE
                              send a stock file (partner side); --wait prints the report
  storelink version           the build: version, commit, Go

Run "storelink COMMAND -h" for the flags of a command.
`

// run is the whole program; main only wires the process to it so that tests
// can run the program in-process with their own arguments and environment.
func run(ctx context.Context, args []string, getenv func(string) string, stdin *os.File, stdout, stderr interface{ Write([]byte) (int, error) }) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], getenv, stdout, stderr)
	case "migrate":
		err = migrate(ctx, args[1:], getenv, stdout, stderr)
	case "backup":
		err = backup(ctx, args[1:], getenv, stdout, stderr)
	case "probe":
		err = probe(ctx, args[1:], stdout, stderr)
	case "secret-key":
		err = secretKeyCommand(ctx, args[1:], getenv, stdout, stderr)
	case "listen":
		err = listen(ctx, args[1:], getenv, stdout, stderr)
	case "upload":
		var code int
		code, err = upload(ctx, args[1:], getenv, stdout, stderr)
		if err == nil {
			return code
		}
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "version", "--version":
		fmt.Fprintln(stdout, buildVersion())
		return 0
	default:
		fmt.Fprintf(stderr, "storelink: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0 // asked for: the flags were printed
		}
		if isUsage(err) {
			fmt.Fprintf(stderr, "storelink %s: %v\n", args[0], err)
			return 2
		}
		fmt.Fprintf(stderr, "storelink %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// buildVersion describes this build in a line: the module's version (a
// tagged build's tag, or "(devel)"), the commit and its time when the build
// recorded them ("+ changes" when the tree had uncommitted ones), the Go
// version and the platform.
func buildVersion() string {
	v, commit := "(devel)", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		var rev, at, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" {
			commit = " commit " + rev[:min(12, len(rev))]
			if at != "" {
				commit += " of " + at
			}
			if modified == "true" {
				commit += " + changes"
			}
		}
	}
	return fmt.Sprintf("storelink %s%s, %s %s/%s", v, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
