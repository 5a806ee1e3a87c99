package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocsCommandFlags: every `storelink COMMAND … --flag` that the
// README and every guide under docs/ show names a command and flags that
// exist, as the command's -h lists them.
func TestDocsCommandFlags(t *testing.T) {
	t.Parallel()
	commands := []string{"secret-key rotate", "secret-key check", "serve", "migrate", "backup", "probe", "listen", "upload"}
	flags := map[string][]string{}
	for _, c := range commands {
		var stdout, stderr bytes.Buffer
		run(context.Background(), append(strings.Fields(c), "-h"), noEnv, nil, &stdout, &stderr)
		for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z][a-z0-9-]*)`).FindAllStringSubmatch(stderr.String()+stdout.String(), -1) {
			flags[c] = append(flags[c], m[1])
		}
		if len(flags[c]) == 0 {
			t.Fatalf("storelink %s -h lists no flag:\n%s%s", c, stdout.String(), stderr.String())
		}
	}
	// A command line in a code span or a line of a code block: up to the
	// end of either.
	cmdLine := regexp.MustCompile("storelink ((?:secret-key )?[a-z-]+)((?:[ \t]+[^`\\n|]*)?)")
	checked := 0
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(docs) < 5 {
		t.Fatalf("docs/*.md: %v %v", docs, err)
	}
	for _, file := range append(docs, "../../README.md", "../../deploy/storelink.service") {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range cmdLine.FindAllStringSubmatch(string(b), -1) {
			cmd := m[1]
			if !slices.Contains(commands, cmd) {
				continue // prose: "storelink connects …"
			}
			for _, f := range regexp.MustCompile(`(?:^|\s)--([a-z][a-z0-9-]*)`).FindAllStringSubmatch(m[2], -1) {
				checked++
				if !slices.Contains(flags[cmd], f[1]) {
					t.Errorf("%s: `storelink %s%s`: storelink %s has no flag --%s (it has %v)", file, cmd, m[2], cmd, f[1], flags[cmd])
				}
			}
		}
	}
	if checked < 10 {
		t.Errorf("only %d flags of storelink commands found in the docs: is the pattern still right?", checked)
	}
	t.Logf("%d flags checked", checked)
}

// TestConfigurationTableComplete: docs/configuration.md's table lists every
// flag of `storelink serve`, each with the variable serve reads for it, and
// no flag that serve does not have.
func TestConfigurationTableComplete(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	run(context.Background(), []string{"serve", "-h"}, noEnv, nil, &stdout, &stderr)
	help := stderr.String() + stdout.String()
	var serveFlags []string
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z][a-z0-9-]*)`).FindAllStringSubmatch(help, -1) {
		serveFlags = append(serveFlags, m[1])
	}
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `--([a-z][a-z0-9-]*)` \\| *`?([A-Z_]*)`? *\\|").FindAllStringSubmatch(string(b), -1) {
		documented[m[1]] = m[2]
	}
	if len(documented) < 10 {
		t.Fatalf("found %d rows in docs/configuration.md's table: is the pattern still right?", len(documented))
	}
	for _, f := range serveFlags {
		if f == "h" || f == "help" {
			continue
		}
		v, ok := documented[f]
		switch {
		case !ok:
			t.Errorf("storelink serve --%s is not in docs/configuration.md's table", f)
		case v != "" && !strings.Contains(help, v):
			t.Errorf("docs/configuration.md gives --%s the variable %s, which serve -h does not name", f, v)
		}
	}
	for f := range documented {
		if !slices.Contains(serveFlags, f) {
			t.Errorf("docs/configuration.md lists --%s, which storelink serve does not have", f)
		}
	}
}

// TestDocsLinks: every relative link of the README and the guides under
// docs/ names a file that exists.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	link := regexp.MustCompile(`\]\(([^)#\s]+)(?:#[^)]*)?\)`)
	checked := 0
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range append(docs, "../../README.md") {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") {
				continue
			}
			checked++
			if _, err := os.Stat(filepath.Join(filepath.Dir(file), target)); err != nil {
				t.Errorf("%s links to %s: %v", file, target, err)
			}
		}
	}
	if checked == 0 {
		t.Error("no relative link found in the docs: is the pattern still right?")
	}
	t.Logf("%d links checked", checked)
}

// TestDocsTypeScriptExample: the TypeScript example docs/typescript.md
// shows is examples/typescript/feed.ts, byte for byte (the file that
// bench/tsclient compiles and runs against a real serve), and the
// packages its npm install lines name are those, at the versions,
// examples/typescript/package.json pins.
func TestDocsTypeScriptExample(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/typescript.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../../examples/typescript/feed.ts")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)\n```ts\n(.*?)```\n").FindAllSubmatch(doc, -1)
	if len(blocks) != 1 {
		t.Fatalf("docs/typescript.md has %d ```ts blocks, want the one example", len(blocks))
	}
	if shown := blocks[0][1]; !bytes.Equal(shown, example) {
		t.Errorf("docs/typescript.md's example is not examples/typescript/feed.ts: copy the file into the block (first difference at line %d)", firstLineDiff(shown, example))
	}

	b, err := os.ReadFile("../../examples/typescript/package.json")
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Dependencies    map[string]string `json:"dependencies"`
		DevDependencies map[string]string `json:"devDependencies"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatal(err)
	}
	pinned := map[string]string{}
	for _, deps := range []map[string]string{pkg.Dependencies, pkg.DevDependencies} {
		for name, v := range deps {
			if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(v) {
				t.Errorf("examples/typescript/package.json: %s is %q, not an exact version", name, v)
			}
			pinned[name] = v
		}
	}
	named := map[string]string{}
	for _, line := range regexp.MustCompile(`(?m)^npm install .*$`).FindAll(doc, -1) {
		for _, m := range regexp.MustCompile(`\s((?:@[a-z0-9-]+/)?[a-z0-9.-]+)@(\S+)`).FindAllSubmatch(line, -1) {
			named[string(m[1])] = string(m[2])
		}
	}
	if len(named) == 0 {
		t.Fatal("docs/typescript.md names no package@version in an npm install line: is the pattern still right?")
	}
	for name, v := range pinned {
		if named[name] != v {
			t.Errorf("docs/typescript.md installs %s@%s, examples/typescript/package.json pins %s", name, named[name], v)
		}
	}
	for name := range named {
		if _, ok := pinned[name]; !ok {
			t.Errorf("docs/typescript.md installs %s, which examples/typescript/package.json does not have", name)
		}
	}
}

// firstLineDiff is the number of the first line where a and b differ.
func firstLineDiff(a, b []byte) int {
	al, bl := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range min(len(al), len(bl)) {
		if !bytes.Equal(al[i], bl[i]) {
			return i + 1
		}
	}
	return min(len(al), len(bl)) + 1
}
