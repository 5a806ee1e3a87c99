package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"
)

const uploadUsage = `Usage: storelink upload [flags] FILE

Sends FILE as a stock feed with PUT BASE/CLIENT_ID/NAME. When
the service answers 429 (the client's upload capacity is used up, or too many
of its uploads wait to be processed) or 503 with a Retry-After (its database
cannot be reached), it waits the Retry-After and sends again, for up to
--max-wait of waiting in all. A 507 (the service's disk is full) ends it at
once: nothing was stored.

Progress and messages go to stderr: a progress bar when stderr is a terminal,
plain lines otherwise. Stdout gets the result: without --wait, the accepted
upload as one line of JSON; with --wait, the processing report, or with --json
the final upload status as one line of JSON. With --errors-to FILE, the
upload's error file (errors.csv) is saved to FILE once it is processed.

Exit status: 0 accepted (without --wait), or applied without row errors;
1 the file was refused (400, 413, 415), rejected, applied with row errors, or
still refused with 429 after --max-wait; 2 a usage, credential or transport
error, the service unavailable (503) after --max-wait, a 507, or an
interrupt.

Flags (each also read from its variable; a flag wins):
`

// uploadConfig is the configuration of `storelink upload`.
type uploadConfig struct {
	URL, ClientID, APIKey string
	Name, File            string
	Wait, JSON, Gzip      bool
	ErrorsTo              string
	MaxWait, WaitTimeout  time.Duration
}

// upload is the partner-side uploader. It returns the exit
// code: 0 applied without errors, 1 rejected or row errors; an error means a
// usage problem (run prints it and exits 2). Transport problems are printed
// here and give 2, as the contract says.
func upload(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (int, error) {
	c, err := parseUploadConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0, nil
	}
	if err != nil {
		return 2, err
	}
	// stderr is shared: the HTTP transport may still be reading the body,
	// and drawing progress, when an early answer (429) is printed.
	u := &uploader{cfg: c, stdout: stdout, stderr: &lockedWriter{w: stderr}, tty: isTerminal(stderr)}
	code, err := u.run(ctx)
	if err != nil && !isUsage(err) {
		fmt.Fprintf(u.stderr, "storelink upload: %v\n", err)
		return 2, nil
	}
	return code, err
}

func parseUploadConfig(args []string, getenv func(string) string, stderr io.Writer) (*uploadConfig, error) {
	c := &uploadConfig{MaxWait: 10 * time.Minute, WaitTimeout: 30 * time.Minute}
	fs := flag.NewFlagSet("storelink upload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), uploadUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.URL, "url", "", "the stock base URL, https://HOST/stock; a URL without a path, https://HOST, gets /stock appended (STORELINK_URL)")
	fs.StringVar(&c.ClientID, "client-id", "", "your client id (STORELINK_CLIENT_ID)")
	fs.StringVar(&c.APIKey, "api-key", "", "your API key; prefer the variable, which other users cannot see in the process list (STORELINK_API_KEY)")
	fs.StringVar(&c.Name, "name", "", "the file name to send, ending in .csv (default the base name of FILE)")
	fs.BoolVar(&c.Gzip, "gzip", false, "compress the file with gzip on the way (Content-Encoding: gzip); the service's limits and capacity count the file's own bytes")
	fs.BoolVar(&c.Wait, "wait", false, "wait until the upload is applied or rejected and print the report")
	fs.StringVar(&c.ErrorsTo, "errors-to", "", "save the upload's error file (errors.csv: every dropped row as it stood in the file, with its line and problems) to this file once it is processed; implies --wait")
	fs.BoolVar(&c.JSON, "json", false, "with --wait, print the final upload status as JSON instead of the report")
	fs.DurationVar(&c.MaxWait, "max-wait", c.MaxWait, "how long to wait in all, before sending again, after 429 and 503 answers; 0 gives up at the first")
	fs.DurationVar(&c.WaitTimeout, "wait-timeout", c.WaitTimeout, "with --wait, how long to wait for the processing")
	for name, variable := range map[string]string{"url": "STORELINK_URL", "client-id": "STORELINK_CLIENT_ID", "api-key": "STORELINK_API_KEY"} {
		if v := getenv(variable); v != "" {
			_ = fs.Set(name, v) // string flags take any value
		}
	}
	files, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil, err
	}
	if err != nil {
		return nil, usageError{err}
	}
	switch {
	case len(files) == 0:
		return nil, usageError{errors.New("no FILE given: storelink upload [flags] FILE")}
	case len(files) > 1:
		return nil, usageError{fmt.Errorf("one FILE at a time, got %d: %s", len(files), strings.Join(files, " "))}
	case c.URL == "":
		return nil, usageError{errors.New("no service URL: give --url https://HOST/stock or set STORELINK_URL")}
	case c.ClientID == "":
		return nil, usageError{errors.New("no client id: give --client-id or set STORELINK_CLIENT_ID")}
	case c.APIKey == "":
		return nil, usageError{errors.New("no API key: set STORELINK_API_KEY or give --api-key")}
	case c.MaxWait < 0:
		return nil, usageError{errors.New("--max-wait must not be negative")}
	case c.WaitTimeout <= 0:
		return nil, usageError{errors.New("--wait-timeout must be positive")}
	}
	if c.ErrorsTo != "" {
		c.Wait = true
	}
	c.File = files[0]
	if c.Name == "" {
		c.Name = filepath.Base(c.File)
	}
	if err := checkUploadName(c.Name); err != nil {
		return nil, usageError{err}
	}
	return c, nil
}

// parseInterspersed lets flags follow FILE (`storelink upload stock.csv
// --wait`), which the flag package alone does not; after "--" everything is
// a file.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// checkUploadName refuses, before anything is sent, a name the service
// would refuse.
func checkUploadName(name string) error {
	hint := "; give --name NAME.csv to send the file under another name"
	switch {
	case !strings.HasSuffix(strings.ToLower(name), ".csv"):
		return fmt.Errorf("the file name %q does not end in .csv%s", name, hint)
	case len(name) > 255:
		return fmt.Errorf("the file name is %d bytes long; at most 255 are allowed%s", len(name), hint)
	case strings.ContainsAny(name, `/\`):
		return fmt.Errorf("the file name %q must not contain '/' or '\\'", name)
	case strings.IndexFunc(name, func(r rune) bool { return r < 0x20 || (r >= 0x7f && r < 0xa0) }) >= 0:
		return fmt.Errorf("the file name %q holds a control character%s", name, hint)
	}
	return nil
}
