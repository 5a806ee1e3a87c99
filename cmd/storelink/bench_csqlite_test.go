package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"storelink"
)

// The C baseline of the stock import (issue 15): the same rows upserted into
// a bare table of the stock table's shape by the C SQLite library, through
// Python's sqlite3 module: one transaction, one INSERT … ON CONFLICT DO
// UPDATE run for every row (executemany), the pragmas sqlite.Open sets.
// Python reads the rows from a file before the clock starts, and times BEGIN
// to the end of COMMIT itself, so neither its start nor its parsing counts.
// The benchmark installs nothing: without python3 it says so and skips the
// ratios to this baseline.
const cBaselineScript = `
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
for p in ("busy_timeout=10000", "journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON"):
    db.execute("PRAGMA " + p)
db.execute(sys.stdin.readline().replace("\\n", " "))
upsert = sys.stdin.readline()
print("ready", sqlite3.sqlite_version, flush=True)
for line in sys.stdin:
    path, client, upload, now = line.split()
    rows = []
    with open(path) as f:
        for l in f:
            s, e, a, q, p, r, loc = l.rstrip("\n").split("\t")
            rows.append((client, s, e, a, int(q), int(p), int(r), loc, "", "", "", "", upload, int(now)))
    cpu, start = time.process_time(), time.perf_counter()
    db.execute("BEGIN IMMEDIATE")
    db.executemany(upsert, rows)
    db.execute("COMMIT")
    print(len(rows), time.perf_counter() - start, time.process_time() - cpu, flush=True)
`

// cBaseline is a python3 process holding the bare table open.
type cBaseline struct {
	cmd      *exec.Cmd
	in       io.WriteCloser
	out      *bufio.Scanner
	dir      string
	clientID string
	version  string // of the C library
	n        int
}

// openCBaseline starts the C baseline, or returns nil and why it cannot.
func openCBaseline(b *testing.B) (*cBaseline, string) {
	b.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		return nil, "python3 not found (Debian's python3 package has it); the C baseline is skipped"
	}
	dir := b.TempDir()
	cmd := exec.Command(python, "-c", cBaselineScript, filepath.Join(dir, "c-baseline.db"))
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Sprintf("python3 does not start (%v); the C baseline is skipped", err)
	}
	c := &cBaseline{cmd: cmd, in: in, out: bufio.NewScanner(stdout), dir: dir, clientID: storelink.NewID(time.Now())}
	b.Cleanup(func() {
		c.in.Close()
		_ = c.cmd.Wait()
	})
	// The statements go on one line each.
	fmt.Fprintln(in, strings.ReplaceAll(baselineTable, "\n", " "))
	fmt.Fprintln(in, strings.ReplaceAll(baselineSQL(1), "\n", " "))
	if !c.out.Scan() {
		return nil, fmt.Sprintf("python3's sqlite3 module does not work (%s); the C baseline is skipped", strings.TrimSpace(stderr.String()))
	}
	c.version = strings.TrimPrefix(c.out.Text(), "ready ")
	return c, ""
}

// upsert has the rows upserted and returns Python's own timing.
func (c *cBaseline) upsert(b *testing.B, rows []benchRow) importResult {
	b.Helper()
	c.n++
	path := filepath.Join(c.dir, fmt.Sprintf("rows-%d.tsv", c.n))
	var buf bytes.Buffer
	for _, r := range rows {
		fmt.Fprintf(&buf, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", r.store, r.ean, r.article, r.qty, r.price, r.retail, r.location)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		b.Fatal(err)
	}
	defer os.Remove(path)
	fmt.Fprintf(c.in, "%s %s %s %d\n", path, c.clientID, storelink.NewID(time.Now()), time.Now().UnixMilli())
	if !c.out.Scan() {
		b.Fatalf("C baseline: no answer (%v)", c.out.Err())
	}
	f := strings.Fields(c.out.Text())
	if len(f) != 3 {
		b.Fatalf("C baseline: %q", c.out.Text())
	}
	n, err1 := strconv.Atoi(f[0])
	wall, err2 := strconv.ParseFloat(f[1], 64)
	cpu, err3 := strconv.ParseFloat(f[2], 64)
	if err1 != nil || err2 != nil || err3 != nil || n != len(rows) {
		b.Fatalf("C baseline: %q for %d rows", c.out.Text(), len(rows))
	}
	return importResult{rows: n, total: time.Duration(wall * float64(time.Second)), cpu: time.Duration(cpu * float64(time.Second))}
}
