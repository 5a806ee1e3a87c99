package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"
)

// TestMigrateSaysWhatItDid: `storelink migrate` on a new SQLite database
// names the migrations it applied and the schema's version; run again, it
// applies none and says the database is up to date at that version.
func TestMigrateSaysWhatItDid(t *testing.T) {
	wantMigrateSays(t, "sqlite:"+filepath.Join(t.TempDir(), "storelink.db"))
}

// wantMigrateSays runs migrate twice on the empty database dbURL and checks
// what each run printed; it returns both runs' output.
func wantMigrateSays(t *testing.T, dbURL string) string {
	t.Helper()
	migrate := func() string {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"migrate", "--data", t.TempDir(), "--database", dbURL},
			func(string) string { return "" }, nil, &out, &errb)
		if code != 0 {
			t.Fatalf("migrate = %d\n%s%s", code, out.String(), errb.String())
		}
		return out.String() + errb.String()
	}
	first, second := migrate(), migrate()
	m := regexp.MustCompile(`: applied (\d+) migrations \(1–(\d+)\); the schema is at version (\d+)\n`).FindStringSubmatch(first)
	if m == nil || m[1] != m[2] || m[2] != m[3] {
		t.Fatalf("first migrate printed %q, want the migrations 1 to N it applied and version N", first)
	}
	if want := fmt.Sprintf(": up to date (schema version %s)\n", m[3]); !bytes.Contains([]byte(second), []byte(want)) {
		t.Fatalf("second migrate printed %q, want %q", second, want)
	}
	return first + second
}
