package main

import (
	"os"
	"testing"
)

// longTestsVar turns on the checks that take minutes rather than seconds
// because they build the binary again with other flags or run whole
// processes many times; .ci/run sets it, so CI always runs them, and the
// README's `go test ./...` stays quick without it.
const longTestsVar = "STORELINK_LONG_TESTS"

// longTest skips t unless longTestsVar is 1.
func longTest(t *testing.T) {
	t.Helper()
	if os.Getenv(longTestsVar) != "1" {
		t.Skipf("a check of minutes: set %s=1 to run it (.ci/run does)", longTestsVar)
	}
}
