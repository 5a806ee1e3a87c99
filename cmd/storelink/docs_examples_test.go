package main

import (
	"path/filepath"
	"sort"
	"testing"
)

// docsExampleRuns says, for the documents whose examples build on others',
// what a reader has done first and how their serve runs; a document not
// named runs alone on a fresh serve --demo.
var docsExampleRuns = map[string]struct {
	// after are the documents whose examples run first, in the same shell:
	// what the document takes as done (the README's CLIENT, KEY and stock).
	after []string
	// serve are more flags of serve --demo.
	serve []string
	// before runs after those documents' examples and before the
	// document's own: what the reader has seen happen in between.
	before string
}{
	"docs/orders.md": {after: []string{"README.md"}},
	"docs/webhooks.md": {
		after: []string{"README.md", "docs/orders.md"},
		// The demo's endpoint answers 500: one retry, then its deliveries
		// have failed, as webhooks.md's failed deliveries take.
		serve: []string{"--webhook-retry-schedule", "50ms"},
		before: `for i in $(seq 300); do
  curl -sS "http://127.0.0.1:8080/admin/deliveries?client_id=$CLIENT&state=failed" -H "Authorization: Bearer $TOKEN" |
    grep -q '"delivery_id"' && break
  sleep 0.05
done 2>/dev/null >/dev/null
curl -sS "http://127.0.0.1:8080/admin/deliveries?client_id=$CLIENT&state=failed" -H "Authorization: Bearer $TOKEN" | grep -q '"delivery_id"' ||
  { echo "no failed delivery after 15 s" >&2; exit 1; }`,
	},
}

// TestDocsExamples runs the ```sh blocks of docs/*.md, each document's in
// order in one shell against a fresh serve --demo, as TestREADMEExamplesRun
// runs the README's: every curl gets a 2xx, or the status its comment
// names, and every command succeeds. The blocks not run are in
// excludedExamples, each with its reason.
func TestDocsExamples(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(docs)
	seen := map[string]bool{}
	for _, path := range append([]string{"../../README.md"}, docs...) {
		file, _ := filepath.Rel("../..", path)
		file = filepath.ToSlash(file)
		for _, b := range exampleBlocksAll(t, file) {
			seen[file+"\n"+b.firstLine()] = true
		}
	}
	for _, e := range excludedExamples {
		if !seen[e.file+"\n"+e.firstLine] {
			t.Errorf("excludedExamples names a block %s has no more: %q", e.file, e.firstLine)
		}
	}
	for _, path := range docs {
		file := "docs/" + filepath.Base(path)
		own := exampleBlocks(t, file)
		if len(own) == 0 {
			continue
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			run := docsExampleRuns[file]
			var blocks []exampleBlock
			for _, f := range run.after {
				blocks = append(blocks, exampleBlocks(t, f)...)
			}
			startExampleServe(t, run.serve...).run(t, append(blocks, own...), run.before, run.after)
		})
	}
}
