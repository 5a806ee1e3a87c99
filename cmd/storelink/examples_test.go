package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// excludedExamples are the ```sh blocks of README.md and docs/*.md that the
// example tests do not run, by file and first line, with the reason. Every
// other block runs: a new one runs by default.
var excludedExamples = []struct{ file, firstLine, why string }{
	{"README.md", "go run ./cmd/storelink serve --demo     # run the service on the embedded database",
		"it starts the service, which the test starts itself, and runs the whole test suite"},
	{"docs/webhooks.md", "go run ./cmd/storelink listen --addr 127.0.0.1:8090 --secret whsec_…   # prints one verified event per line",
		"listen runs until stopped; listen_test.go runs it against a real serve"},
	{"docs/webhooks.md", "go run ./cmd/storelink listen --addr 127.0.0.1:8090 --secret whsec_… --forward-to http://127.0.0.1:3000/storelink",
		"listen runs until stopped and forwards to an application of the reader's; forward_test.go runs it"},
	{"docs/operations.md", "export STORELINK_DATABASE_URL='postgres://storelink:…@db.internal:5432/storelink?sslmode=verify-full'",
		"a production serve on 0.0.0.0 with a server's database and secrets"},
	{"docs/operations.md", "storelink backup --data /var/lib/storelink --to /backups/storelink-$(date +%F).db",
		"a server's paths; backup_test.go runs backup"},
	{"docs/operations.md", `pg_dump --format=custom --file storelink.dump "$STORELINK_DATABASE_URL"`,
		"PostgreSQL's own tool on a production database"},
	{"docs/development.md", "go test ./...      # all the tests; the PostgreSQL ones need STORELINK_TEST_DATABASE_URL",
		"the whole test suite and CI, of which this test is a part"},
	{"docs/development.md", "go run ./bench/tsclient                     # about 30 s; runs npm ci in a temporary folder first",
		"installs npm packages and takes 30 s; .ci/run runs it"},
	{"docs/development.md", "npm install --prefix /tmp/spec-tools @stoplight/prism-cli@5.14.2",
		"installs npm packages and the walk takes 45 s; .ci/run runs it"},
	{"docs/benchmarks.md", "go run ./bench/soak -setup sqlite -duration 60s     # one serve on SQLite, killed and restarted",
		"a soak of minutes, run on purpose"},
	{"docs/benchmarks.md", "go run ./bench/hostile                        # every attack, stops at the first that fails",
		"attacks that load the machine, run on purpose"},
	{"docs/typescript.md", "npm install --save-exact openapi-fetch@0.17.0",
		"installs npm packages; go run ./bench/tsclient (in .ci/run) runs these steps against a real serve"},
	{"docs/typescript.md", "npx tsc -p .",
		"needs the npm packages and the compiled example; go run ./bench/tsclient (in .ci/run) runs it against a real serve"},
}

// exampleBlock is one ```sh block of a document.
type exampleBlock struct{ file, text string }

// firstLine is the block's first line, which names it.
func (b exampleBlock) firstLine() string {
	line, _, _ := strings.Cut(b.text, "\n")
	return line
}

var shBlock = regexp.MustCompile("(?s)```sh\n(.*?)```")

// exampleBlocks reads file's ```sh blocks (file relative to the module's
// root), without the excluded ones.
func exampleBlocks(t *testing.T, file string) []exampleBlock {
	t.Helper()
	var out []exampleBlock
	for _, b := range exampleBlocksAll(t, file) {
		if excludedExample(file, b.firstLine()) == "" {
			out = append(out, b)
		}
	}
	return out
}

// exampleBlocksAll reads all of file's ```sh blocks.
func exampleBlocksAll(t *testing.T, file string) []exampleBlock {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(file)))
	if err != nil {
		t.Fatal(err)
	}
	var out []exampleBlock
	for _, m := range shBlock.FindAllStringSubmatch(string(b), -1) {
		out = append(out, exampleBlock{file, m[1]})
	}
	return out
}

// excludedExample is why the block of file beginning with firstLine is not
// run, or "".
func excludedExample(file, firstLine string) string {
	for _, e := range excludedExamples {
		if e.file == file && e.firstLine == firstLine {
			return e.why
		}
	}
	return ""
}

// exampleServe is a real `serve --demo` for documents' examples, in a fresh
// folder where they run, with its data in ./storelink-data as the docs
// have it.
type exampleServe struct {
	p   *proc
	dir string
	// partner is the loopback receiver (answering 204) that stands for
	// https://partner.example in the examples.
	partner string
}

// startExampleServe starts serve --demo with args in a fresh folder. The
// demo's webhook endpoint is a loopback receiver that answers 500, as a
// listen not yet started would fail it.
func startExampleServe(t *testing.T, args ...string) *exampleServe {
	t.Helper()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(down.Close)
	partner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(partner.Close)
	dir := t.TempDir()
	args = append([]string{"--demo", "--demo-webhook-url", down.URL + "/webhooks"}, args...)
	p := startServe(t, filepath.Join(dir, "storelink-data"), args...)
	return &exampleServe{p: p, dir: dir, partner: partner.URL}
}

// run runs blocks in order in one bash in s's folder, as a reader pastes
// them, with before (the test's own shell, when not "") between the
// blocks of the files after and the rest, and returns what they printed.
// What a reader changes is changed:
//   - the address http://127.0.0.1:8080 is s's, https://partner.example
//     s's receiver, and `go run ./cmd/storelink` the built command;
//   - a line `NAME=…   # FIELD from above` sets NAME to FIELD of the
//     answer above it (the last curl's, "FIELD": "…" in JSON; before the
//     first curl, serve's printout, FIELD: …), as a reader copies it.
//
// Every curl must get a 2xx, or, when the comment after it names statuses
// (`# 204`, `# 200, or 412`), one of those; every command must succeed.
// No example may name a host other than loopback.
func (s *exampleServe) run(t *testing.T, blocks []exampleBlock, before string, after []string) string {
	t.Helper()
	realCurl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl on PATH: the curl examples cannot run")
	}
	tools := filepath.Join(s.dir, ".tools")
	if err := os.Mkdir(tools, 0o700); err != nil {
		t.Fatal(err)
	}
	last := filepath.Join(tools, "last-answer")
	expect := filepath.Join(tools, "expected-status")
	if err := os.WriteFile(last, []byte(s.p.stdout.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	// The curl in front of the real one: the same arguments, the answer
	// printed and kept (for the lines that take a FIELD from above), and a
	// status other than the expected ones a failure that names the method
	// and address (never a header: they carry keys).
	wrapper := `#!/bin/bash
real=` + shellQuote(realCurl) + ` last=` + shellQuote(last) + ` expect=` + shellQuote(expect) + `
want=""
if [ -f "$expect" ]; then want=$(cat "$expect"); rm -f "$expect"; fi
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
"$real" "$@" -w '%{stderr}@@status %{http_code}\n' >"$out" 2>"$err"
rc=$?
status=$(sed -n 's/^@@status //p' "$err")
grep -v '^@@status ' "$err" >&2
cat "$out"
if [ -s "$out" ]; then cp "$out" "$last"; fi
echo >&2
what=""
for a in "$@"; do case "$a" in http://*|https://*) what="$what $a";; GET|HEAD|POST|PUT|PATCH|DELETE) what="$what $a";; esac; done
if [ $rc -ne 0 ]; then echo "example failed: curl$what: exit $rc" >&2; exit $rc; fi
if [ -n "$want" ]; then
  case " $want " in *" $status "*) exit 0;; esac
  echo "example answered HTTP $status, its comment says $want: curl$what" >&2; exit 22
fi
case "$status" in 2??) exit 0;; esac
echo "example answered HTTP $status: curl$what" >&2; exit 22
`
	if err := os.WriteFile(filepath.Join(tools, "curl"), []byte(wrapper), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("uuidgen"); err != nil {
		// util-linux's uuidgen, where this machine lacks it.
		if err := os.WriteFile(filepath.Join(tools, "uuidgen"), []byte("#!/bin/sh\ncat /proc/sys/kernel/random/uuid\n"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	var script strings.Builder
	script.WriteString(`set -euo pipefail
# from_above FIELD: FIELD of the answer above, "FIELD":"value" in JSON or
# FIELD: value in serve's printout, the first one.
from_above() {
  local v
  v=$(grep -o "\"$1\":\"[^\"]*\"" ` + shellQuote(last) + ` | sed -n 1p | cut -d '"' -f 4 || true)
  if [ -z "$v" ]; then v=$(sed -n "s/^ *$1: *\([^ ]*\).*/\1/p" ` + shellQuote(last) + ` | sed -n 1p); fi
  if [ -z "$v" ]; then echo "the answer above has no $1" >&2; return 1; fi
  printf '%s\n' "$v"
}
expect_status() { printf '%s\n' "$*" > ` + shellQuote(expect) + `; }
`)
	replace := strings.NewReplacer("http://127.0.0.1:8080", s.p.URL, "https://partner.example", s.partner,
		"go run ./cmd/storelink", storelinkBinary(t))
	afterDone := len(after) == 0
	n := map[string]int{}
	for _, b := range blocks {
		n[b.file]++
		if !afterDone && !contains(after, b.file) {
			afterDone = true
		}
		if afterDone && before != "" {
			script.WriteString(replace.Replace(before) + "\n")
			before = ""
		}
		fmt.Fprintf(&script, "echo %s >&2\n", shellQuote(fmt.Sprintf(">>> %s, block %d: %s", b.file, n[b.file], b.firstLine())))
		text, code, err := exampleScript(b.text, replace)
		if err != nil {
			t.Fatalf("%s, the block %q: %v", b.file, b.firstLine(), err)
		}
		for _, u := range regexp.MustCompile(`https?://[^\s"'/?#]+`).FindAllString(code, -1) {
			if !loopbackURL(u) {
				t.Fatalf("%s, the block %q names %s: examples run against loopback only", b.file, b.firstLine(), u)
			}
		}
		script.WriteString(text)
	}
	if before != "" {
		script.WriteString(replace.Replace(before) + "\n")
	}
	src := script.String()

	cmd := exec.Command("bash", "-c", src)
	cmd.Dir = s.dir
	cmd.WaitDelay = 5 * time.Second // a killed bash's children may hold its output open
	cmd.Env = append(os.Environ(), "PATH="+tools+string(os.PathListSeparator)+os.Getenv("PATH"),
		"STORELINK_URL=", "STORELINK_CLIENT_ID=", "STORELINK_API_KEY=", "STORELINK_ADMIN_TOKEN=")
	done := make(chan struct{})
	var out []byte
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the examples did not finish within 2 minutes:\n%s", out)
	}
	if err != nil {
		t.Fatalf("the examples failed (%v):\n%s\nthe script:\n%s", err, out, src)
	}
	return string(out)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// loopbackURL tells whether the scheme://host[:port] u names a loopback
// address (or localhost).
func loopbackURL(u string) bool {
	parsed, err := url.Parse(u)
	if err != nil {
		return false
	}
	host := parsed.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

var (
	// statusComment is a comment that begins with the statuses expected:
	// "204", "201, secret shown once", "200, or 412".
	statusComment = regexp.MustCompile(`^(\d{3})((?:\s*,\s*(?:or\s+)?\d{3})*)\b`)
	// fromAbove is a comment "FIELD from above …".
	fromAbove  = regexp.MustCompile(`^([a-z][a-z0-9_]*) from above\b`)
	assignment = regexp.MustCompile(`^([A-Z][A-Z0-9_]*)=\S+\s`)
	// hereDocument is the start of one: <<WORD, <<'WORD', <<-WORD.
	hereDocument = regexp.MustCompile(`<<-?['"]?(\w+)['"]?`)
)

// exampleScript is a block as the test runs it, with replace applied: a
// curl whose comment names statuses preceded by expect_status with them,
// and a line `NAME=… # FIELD from above` made NAME=$(from_above FIELD).
// code is the script without its comments.
func exampleScript(block string, replace *strings.Replacer) (script, code string, err error) {
	var out, codes strings.Builder
	for _, c := range shellCommands(block) {
		if m := fromAbove.FindStringSubmatch(c.comment); m != nil {
			a := assignment.FindStringSubmatch(c.text)
			if a == nil {
				return "", "", fmt.Errorf("%q says %q but sets no variable", c.text, m[0])
			}
			fmt.Fprintf(&out, "%s=$(from_above %s)   # %s\n", a[1], m[1], c.comment)
			continue
		}
		if m := statusComment.FindStringSubmatch(c.comment); m != nil && strings.Contains(c.code, "curl ") {
			fmt.Fprintf(&out, "expect_status %s\n", strings.Join(regexp.MustCompile(`\d{3}`).FindAllString(m[0], -1), " "))
		}
		out.WriteString(replace.Replace(c.text))
		codes.WriteString(replace.Replace(c.code))
	}
	return out.String(), codes.String(), nil
}

// shellCommand is one command of a block: its lines (a backslash at a
// line's end, an open quote or a here-document carry it on), the same
// without comments, and the comment at its end, if any, without the '#'.
type shellCommand struct{ text, code, comment string }

// shellCommands splits a block into its commands, far enough for the
// examples: quotes, backslash-newline, comments and here-documents.
func shellCommands(block string) []shellCommand {
	var (
		out     []shellCommand
		cur     strings.Builder
		code    strings.Builder
		comment string
		quote   byte
		heredoc string // the delimiter of the here-document being read
	)
	lines := strings.SplitAfter(block, "\n")
	for _, line := range lines {
		if line == "" {
			continue
		}
		cur.WriteString(line)
		body := strings.TrimRight(line, "\n")
		if heredoc != "" {
			code.WriteString(line)
			if body == heredoc {
				heredoc = ""
				out = append(out, shellCommand{cur.String(), code.String(), comment})
				cur.Reset()
				code.Reset()
				comment = ""
			}
			continue
		}
		lineCode := body
		for i := 0; i < len(body); i++ {
			ch := body[i]
			switch {
			case quote != 0:
				if ch == quote {
					quote = 0
				} else if ch == '\\' && quote == '"' {
					i++
				}
			case ch == '\'' || ch == '"':
				quote = ch
			case ch == '\\':
				i++
			case ch == '#' && (i == 0 || body[i-1] == ' ' || body[i-1] == '\t'):
				lineCode = body[:i]
				comment = strings.TrimSpace(body[i+1:])
				i = len(body)
			}
		}
		code.WriteString(lineCode + "\n")
		if quote != 0 || strings.HasSuffix(lineCode, "\\") {
			continue
		}
		if m := hereDocument.FindStringSubmatch(lineCode); m != nil {
			heredoc = m[1]
			continue
		}
		out = append(out, shellCommand{cur.String(), code.String(), comment})
		cur.Reset()
		code.Reset()
		comment = ""
	}
	if cur.Len() > 0 {
		out = append(out, shellCommand{cur.String(), code.String(), comment})
	}
	return out
}

// TestExampleScript checks how a block is made a script: the statuses a
// comment names are expected of its curl (over continued lines, not of a
// '#' inside quotes), a line `NAME=… # FIELD from above` reads FIELD, and
// a here-document stays as written.
func TestExampleScript(t *testing.T) {
	block := `curl -sS -X PATCH http://127.0.0.1:8080/a -H "If-Match: $ETAG" \
  -d '{"note":"a # b 404"}'   # 200, or 412
ID=…   # order_id from above: the new order
cat > x.json <<JSON
{"n":"# 500"}   # 500
JSON
curl -sS http://127.0.0.1:8080/b   # with its stats
`
	got, code, err := exampleScript(block, strings.NewReplacer("http://127.0.0.1:8080", "http://127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	want := `expect_status 200 412
curl -sS -X PATCH http://127.0.0.1:1/a -H "If-Match: $ETAG" \
  -d '{"note":"a # b 404"}'   # 200, or 412
ID=$(from_above order_id)   # order_id from above: the new order
cat > x.json <<JSON
{"n":"# 500"}   # 500
JSON
curl -sS http://127.0.0.1:1/b   # with its stats
`
	if got != want {
		t.Errorf("the script is\n%s\nwant\n%s", got, want)
	}
	if strings.Contains(code, "with its stats") || strings.Contains(code, "200, or 412") || !strings.Contains(code, `'{"note":"a # b 404"}'`) {
		t.Errorf("the code without comments is\n%s", code)
	}
	if _, _, err := exampleScript("curl -sS http://127.0.0.1:8080/c   # id from above\n", strings.NewReplacer()); err == nil {
		t.Error("a comment 'id from above' on a line that sets no variable is accepted")
	}
}
