package main

import (
	"strings"
	"testing"
)

// TestREADMEExamplesRun runs the README's shell examples after the first
// block (the two commands), in order in one shell, against a real serve
// --demo, as a newcomer pastes them: CLIENT and KEY set from what the demo
// printed, UPLOAD from the upload's answer, the address and `go run
// ./cmd/storelink` made this test's. Every curl must get a 2xx and every
// command must succeed.
func TestREADMEExamplesRun(t *testing.T) {
	blocks := exampleBlocks(t, "README.md")
	if len(blocks) < 3 {
		t.Fatalf("README.md has %d sh blocks to run, want the demo's examples", len(blocks))
	}
	for _, set := range []string{"CLIENT", "KEY", "UPLOAD"} {
		if !strings.Contains(blocks[0].text, "\n"+set+"=") && !strings.HasPrefix(blocks[0].text, set+"=") {
			t.Fatalf("the README's first example sets no %s from above", set)
		}
	}
	out := startExampleServe(t).run(t, blocks, "", nil)
	for _, want := range []string{`"status":"applied"`, `"result":"valid"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the README's examples printed no %s:\n%s", want, out)
		}
	}
}
