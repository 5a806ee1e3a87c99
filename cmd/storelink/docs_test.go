package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocsCommandFlags: every `storelink COMMAND … --flag` that the
// operations guide and the README show names a command and flags that
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
	for _, file := range []string{"../../docs/operations.md", "../../README.md", "../../deploy/storelink.service"} {
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
