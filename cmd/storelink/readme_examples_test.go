package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestREADMEExamplesRun runs the README's shell examples after the first
// block (the two commands), in order in one shell, against a real serve
// --demo, as a newcomer pastes them: CLIENT, KEY and UPLOAD set from what
// the demo and the upload printed, the address and `go run
// ./cmd/storelink` made this test's. Every curl must get a 2xx (a curl
// on PATH in front of the real one says which did not) and every command
// must succeed.
func TestREADMEExamplesRun(t *testing.T) {
	realCurl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl on PATH: the README's curl examples cannot run")
	}
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(b), -1)
	if len(blocks) < 4 {
		t.Fatalf("README.md has %d sh blocks, want the two commands and the demo's examples", len(blocks))
	}
	p := startServe(t, t.TempDir(), "--demo")
	work := t.TempDir()
	last := filepath.Join(work, ".last-answer")
	bin := filepath.Join(work, ".bin")
	if err := os.Mkdir(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	// The curl in front: the same arguments, the answer printed and kept
	// (UPLOAD reads the id from it), and any status but 2xx a failure.
	wrapper := `#!/bin/bash
status=$("` + realCurl + `" "$@" -o "` + last + `" -w '%{http_code}') || exit $?
cat "` + last + `"; echo
case "$status" in 2??) exit 0;; *) echo "README example answered HTTP $status: curl $*" >&2; exit 22;; esac
`
	if err := os.WriteFile(filepath.Join(bin, "curl"), []byte(wrapper), 0o700); err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	for _, block := range blocks[1:] {
		script.WriteString(block[1])
	}
	s := script.String()
	for _, r := range []struct{ pattern, with string }{
		{`(?m)^CLIENT=\S+`, "CLIENT=" + p.ClientID},
		{`(?m)^KEY=\S+`, "KEY=" + p.APIKey},
		{`(?m)^UPLOAD=\S+`, `UPLOAD=$(sed -n 's/.*"upload_id":"\([^"]*\)".*/\1/p' "` + last + `")`},
	} {
		re := regexp.MustCompile(r.pattern)
		if !re.MatchString(s) {
			t.Fatalf("the README's examples have no line %s to set", r.pattern)
		}
		s = re.ReplaceAllLiteralString(s, r.with)
	}
	s = strings.ReplaceAll(s, "http://127.0.0.1:8080", p.URL)
	s = strings.ReplaceAll(s, "go run ./cmd/storelink", storelinkBinary(t))
	cmd := exec.Command("bash", "-c", s)
	cmd.Dir = work
	// Killing bash leaves a curl it started holding the output pipe: Wait
	// closes it this long after bash ended, so that the test ends too.
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"STORELINK_URL=", "STORELINK_CLIENT_ID=", "STORELINK_API_KEY=")
	done := make(chan struct{})
	var out []byte
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the README's examples did not finish within 2 minutes:\n%s", out)
	}
	if err != nil {
		t.Fatalf("the README's examples failed (%v):\n%s\nthe script:\n%s", err, out, s)
	}
	for _, want := range []string{`"status":"applied"`, `"result":"valid"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the README's examples printed no %s:\n%s", want, out)
		}
	}
}
