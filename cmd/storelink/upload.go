package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"storelink"
	"storelink/httpapi"
)

const uploadUsage = `Usage: storelink upload [flags] FILE

Sends FILE as a stock feed with PUT BASE/CLIENT_ID/NAME (CONTRACT 3.6). When
the service answers 429 (the client's upload capacity is used up, or too many
of its uploads wait to be processed) or 503 with a Retry-After (its database
cannot be reached), it waits the Retry-After and sends again, for up to
--max-wait of waiting in all. A 507 (the service's disk is full) ends it at
once: nothing was stored.

Progress and messages go to stderr: a progress bar when stderr is a terminal,
plain lines otherwise. Stdout gets the result: without --wait, the accepted
upload as one line of JSON; with --wait, the processing report, or with --json
the final upload status as one line of JSON.

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
	Wait, JSON            bool
	MaxWait, WaitTimeout  time.Duration
}

// upload is the partner-side uploader (CONTRACT 3.6). It returns the exit
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
	fs.BoolVar(&c.Wait, "wait", false, "wait until the upload is applied or rejected and print the report")
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
// would refuse (CONTRACT 3.1).
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

// uploader is one run of `storelink upload`.
type uploader struct {
	cfg    *uploadConfig
	client *httpapi.Client
	stdout io.Writer
	stderr io.Writer
	tty    bool // stderr is a terminal: draw a progress bar
}

func (u *uploader) run(ctx context.Context) (int, error) {
	client, err := httpapi.NewClient(u.cfg.URL, u.cfg.ClientID, u.cfg.APIKey)
	if err != nil {
		return 2, usageError{fmt.Errorf("--url: %v", err)}
	}
	u.client = client
	f, err := os.Open(u.cfg.File)
	if err != nil {
		return 2, usageError{err}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 2, usageError{err}
	}
	if !st.Mode().IsRegular() {
		return 2, usageError{fmt.Errorf("%s is not a regular file", u.cfg.File)}
	}

	fmt.Fprintf(u.stderr, "uploading %s: %s to %s\n", u.cfg.Name, formatBytes(st.Size()), u.client.UploadURL(u.cfg.Name))
	r, code, err := u.send(ctx, f, st.Size())
	if r == nil {
		return code, err
	}
	left := ""
	if r.CapacityLeft >= 0 {
		left = "; capacity left " + formatBytes(r.CapacityLeft)
	}
	fmt.Fprintf(u.stderr, "accepted %s: upload_id=%s sha256=%s%s\n", r.FileName, r.UploadID, r.SHA256, left)
	if !u.cfg.Wait {
		return 0, writeJSONLine(u.stdout, r)
	}
	return u.wait(ctx, r)
}

// send PUTs the file, waiting and sending again while the answer is 429
// (or 503 with a Retry-After), within --max-wait in all. It returns the
// receipt, or an exit code with the reason already printed, or an error.
func (u *uploader) send(ctx context.Context, f *os.File, size int64) (*httpapi.UploadReceipt, int, error) {
	var waited time.Duration
	for {
		p := u.newProgress(size)
		h := sha256.New()
		r, err := u.client.PutStock(ctx, u.cfg.Name, p.reader(io.TeeReader(io.NewSectionReader(f, 0, size), h)), size)
		p.done(err == nil)
		if err == nil {
			// The service hashed what it stored; a difference means the
			// file changed while it was sent, or was altered on the way.
			if sum := hex.EncodeToString(h.Sum(nil)); r.SHA256 != "" && r.SHA256 != sum {
				return nil, 2, fmt.Errorf("upload %s was stored with sha256 %s, but the bytes sent have %s; send the file again", r.UploadID, r.SHA256, sum)
			}
			return r, 0, nil
		}
		if ctx.Err() != nil {
			return nil, 2, errors.New("interrupted before the service answered")
		}
		var ae *httpapi.APIError
		if !errors.As(err, &ae) {
			return nil, 2, fmt.Errorf("sending %s: %w", u.cfg.Name, err)
		}
		switch {
		case ae.Retryable():
			d := ae.RetryAfter
			if waited+d > u.cfg.MaxWait {
				fmt.Fprintf(u.stderr, "storelink upload: not sent: %v\nstorelink upload: the service asks to wait %s more, which would exceed --max-wait %s; try again later\n",
					ae, d, u.cfg.MaxWait)
				if ae.StatusCode == http.StatusServiceUnavailable {
					return nil, 2, nil
				}
				return nil, 1, nil
			}
			what := "capacity used up"
			switch {
			case ae.StatusCode == http.StatusServiceUnavailable:
				what = "service unavailable"
			case ae.Code() == storelink.EBACKLOG:
				what = "too many uploads of this client wait to be processed"
			}
			fmt.Fprintf(u.stderr, "%s; retrying in %d s\n", what, int64(d.Round(time.Second)/time.Second))
			if err := sleep(ctx, d); err != nil {
				return nil, 2, errors.New("interrupted while waiting to send again; nothing was sent")
			}
			waited += d
		case ae.StatusCode == http.StatusInsufficientStorage:
			fmt.Fprintf(u.stderr, "storelink upload: not sent: %v\nstorelink upload: the service has no space left to store files; nothing was stored. Try again later; if it lasts, tell the marketplace\n", ae)
			return nil, 2, nil
		case ae.StatusCode == http.StatusUnauthorized:
			return nil, 2, usageError{fmt.Errorf("the service refused the credentials (%v); check --client-id and --api-key (STORELINK_CLIENT_ID, STORELINK_API_KEY)", ae)}
		case ae.StatusCode == http.StatusForbidden:
			return nil, 2, usageError{fmt.Errorf("the API key is valid but not for client %s (%v); use the key of this client", u.cfg.ClientID, ae)}
		case ae.StatusCode == http.StatusNotFound || ae.StatusCode == http.StatusMethodNotAllowed:
			return nil, 2, usageError{fmt.Errorf("no stock upload at %s (%v); check --url: it is the stock base URL, like https://HOST/stock", u.client.UploadURL(u.cfg.Name), ae)}
		case ae.StatusCode == http.StatusBadRequest || ae.StatusCode == http.StatusRequestEntityTooLarge || ae.StatusCode == http.StatusUnsupportedMediaType:
			fmt.Fprintf(u.stderr, "storelink upload: refused: %s was not accepted: %v\n", u.cfg.Name, ae)
			return nil, 1, nil
		default:
			return nil, 2, fmt.Errorf("sending %s: %w", u.cfg.Name, ae)
		}
	}
}

// wait polls until the upload is final and prints its report.
func (u *uploader) wait(ctx context.Context, r *httpapi.UploadReceipt) (int, error) {
	fmt.Fprintf(u.stderr, "waiting for processing of upload %s\n", r.UploadID)
	wctx, cancel := context.WithTimeout(ctx, u.cfg.WaitTimeout)
	defer cancel()
	last := storelink.UploadAccepted
	final, err := u.client.WaitUpload(wctx, r.UploadID, func(up *storelink.Upload) {
		if up.Status != last {
			last = up.Status
			fmt.Fprintf(u.stderr, "upload %s is %s\n", up.ID, up.Status)
		}
	})
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return 2, fmt.Errorf("interrupted; upload %s was accepted and is processed anyway; its status: %s", r.UploadID, u.client.UploadStatusURL(r.UploadID))
	case wctx.Err() != nil:
		return 2, fmt.Errorf("upload %s is still %s after --wait-timeout %s; its status: %s", r.UploadID, last, u.cfg.WaitTimeout, u.client.UploadStatusURL(r.UploadID))
	default:
		return 2, fmt.Errorf("reading the status of upload %s: %w", r.UploadID, err)
	}
	code := 0
	if final.Status != storelink.UploadApplied || len(final.Errors) > 0 {
		code = 1
	}
	if u.cfg.JSON {
		return code, writeJSONLine(u.stdout, final)
	}
	writeReport(u.stdout, final)
	return code, nil
}

func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// progress shows how much of the file has been sent: a bar on a terminal,
// a plain line every few seconds otherwise (a log has no use for a bar).
type progress interface {
	reader(io.Reader) io.Reader
	done(ok bool)
}

func (u *uploader) newProgress(size int64) progress {
	if u.tty && size > 0 {
		return &barProgress{bar: progressbar.NewOptions64(size,
			progressbar.OptionSetWriter(u.stderr),
			progressbar.OptionSetDescription(u.cfg.Name),
			progressbar.OptionShowBytes(true),
			progressbar.OptionShowTotalBytes(true),
			progressbar.OptionShowCount(),
			progressbar.OptionUseIECUnits(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)}
	}
	return &lineProgress{w: u.stderr, total: size, every: 5 * time.Second, last: time.Now()}
}

type barProgress struct{ bar *progressbar.ProgressBar }

func (p *barProgress) reader(r io.Reader) io.Reader {
	pr := progressbar.NewReader(r, p.bar)
	return &pr
}

func (p *barProgress) done(ok bool) {
	if ok {
		_ = p.bar.Finish() // clears the bar
		return
	}
	_ = p.bar.Exit() // no more drawing, even if the body is still being read
	_ = p.bar.Clear()
}

type lineProgress struct {
	w          io.Writer
	total      int64
	every      time.Duration
	mu         sync.Mutex
	sent       int64
	last       time.Time
	terminated bool
}

func (p *lineProgress) reader(r io.Reader) io.Reader { return readerFunc(p.read(r)) }

func (p *lineProgress) read(r io.Reader) func([]byte) (int, error) {
	return func(b []byte) (int, error) {
		n, err := r.Read(b)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.sent += int64(n)
		if !p.terminated && p.sent < p.total && time.Since(p.last) >= p.every {
			p.last = time.Now()
			fmt.Fprintf(p.w, "sent %s of %s (%d%%)\n", formatBytes(p.sent), formatBytes(p.total), p.sent*100/p.total)
		}
		return n, err
	}
}

func (p *lineProgress) done(bool) {
	p.mu.Lock()
	p.terminated = true
	p.mu.Unlock()
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(b []byte) (int, error) { return f(b) }

func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// formatBytes is a size for people: 512 B, 1.5 KiB, 10.0 MiB.
func formatBytes(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, unit := float64(n)/1024, "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}

// writeReport prints the processing report of a finished upload: the
// outcome, the row counts, then the errors and warnings grouped by type,
// each message with its lines collapsed into ranges.
func writeReport(w io.Writer, up *storelink.Upload) {
	outcome := string(up.Status)
	switch {
	case up.Status == storelink.UploadRejected:
		outcome = "rejected, nothing applied"
	case len(up.Errors) > 0:
		outcome = "applied with row errors"
	case len(up.Warnings) > 0:
		outcome = "applied with warnings"
	}
	fmt.Fprintf(w, "%s: %s\n", up.FileName, outcome)
	fmt.Fprintf(w, "  upload  %s (%s, sha256 %s)\n", up.ID, formatBytes(up.SizeBytes), up.SHA256)
	fmt.Fprintf(w, "  rows    %d total, %d applied, %d rejected\n", up.RowsTotal, up.RowsApplied, up.RowsRejected)
	writeProblems(w, "errors", up.Errors)
	writeProblems(w, "warnings", up.Warnings)
}

func writeProblems(w io.Writer, heading string, problems []storelink.Problem) {
	if len(problems) == 0 {
		return
	}
	fmt.Fprintf(w, "%s:\n", heading)
	var types []string
	byType := map[string][]storelink.Problem{}
	for _, p := range problems {
		if _, ok := byType[p.Type]; !ok {
			types = append(types, p.Type)
		}
		byType[p.Type] = append(byType[p.Type], p)
	}
	for _, t := range types {
		n := 0
		for _, p := range byType[t] {
			n += problemCount(p)
		}
		fmt.Fprintf(w, "  %s (%s)\n", t, plural(n, "line"))
		for _, p := range byType[t] {
			fmt.Fprintf(w, "    %s\n", p.Message)
			if len(p.LineNumbers) > 0 || p.Count > 0 {
				fmt.Fprintf(w, "      %s%s\n", formatLines(p.LineNumbers, p.Count), problemValues(p))
			}
			if p.Details != "" {
				fmt.Fprintf(w, "      %s\n", p.Details)
			}
		}
	}
}

func problemCount(p storelink.Problem) int { return max(p.Count, len(p.LineNumbers)) }

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// problemValues names the values behind a problem where they help the
// partner fix it: the unknown stores, the duplicated store and EAN pairs.
func problemValues(p storelink.Problem) string {
	var label string
	var key func(storelink.LineRef) string
	switch p.Type {
	case storelink.ProblemUnknownStore:
		label, key = "stores", func(r storelink.LineRef) string { return r.StoreID }
	case storelink.ProblemDuplicated:
		label, key = "store/ean", func(r storelink.LineRef) string { return r.StoreID + "/" + r.EAN }
	default:
		return ""
	}
	var vals []string
	for _, r := range p.LineNumbers {
		if v := key(r); v != "" && v != "/" && !slices.Contains(vals, v) {
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return ""
	}
	const show = 5
	more := ""
	if len(vals) > show {
		vals, more = vals[:show], fmt.Sprintf(" … and %d more", len(vals)-show)
	}
	return " (" + label + " " + strings.Join(vals, ", ") + more + ")"
}

// maxRanges is how many ranges of line numbers a report shows per message.
const maxRanges = 20

// formatLines collapses line numbers into ranges: "lines 4-9, 12, 15".
// count is the number of lines with the problem, which exceeds the
// references when the service cut the list; past maxRanges ranges, or past
// the references, the rest is counted: "… and 37 more".
func formatLines(refs []storelink.LineRef, count int) string {
	lines := make([]int, 0, len(refs))
	for _, r := range refs {
		lines = append(lines, r.LineNumber)
	}
	slices.Sort(lines)
	lines = slices.Compact(lines)
	count = max(count, len(lines))

	var parts []string
	shown := 0
	for i := 0; i < len(lines) && len(parts) < maxRanges; {
		j := i
		for j+1 < len(lines) && lines[j+1] == lines[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", lines[i], lines[j]))
		} else {
			parts = append(parts, strconv.Itoa(lines[i]))
		}
		shown += j - i + 1
		i = j + 1
	}
	word := "lines "
	if count == 1 && shown == 1 {
		word = "line "
	}
	s := word + strings.Join(parts, ", ")
	if more := count - shown; more > 0 {
		if shown == 0 {
			return plural(more, "line")
		}
		s += fmt.Sprintf(" … and %d more", more)
	}
	return s
}
