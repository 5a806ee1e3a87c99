package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// URLVar names the PostgreSQL database that tests may use.
const URLVar = "STORELINK_TEST_DATABASE_URL"

// BaseURL is the database at URLVar; it skips t, saying how to set it, when
// the variable is not set.
func BaseURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(URLVar)
	if u == "" {
		t.Skip(URLVar + " is not set: the PostgreSQL tests are skipped " +
			"(set it to a database they may use, e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable; .ci/run does)")
	}
	return u
}

// Schema makes an empty schema for one test in the database at URLVar
// (skipping t when it is not set) and returns the database URL that selects
// it (search_path); the schema is dropped when the test ends. A schema per
// test keeps tests that run in parallel apart at a fraction of the cost of
// a database per test.
func Schema(t testing.TB) string {
	t.Helper()
	base := BaseURL(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "storelink_test_" + hex.EncodeToString(b)
	admin := func(sql string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := AdminExec(ctx, base, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	admin("CREATE SCHEMA " + schema)
	t.Cleanup(func() { admin("DROP SCHEMA " + schema + " CASCADE") })
	if !strings.HasPrefix(base, "postgres://") && !strings.HasPrefix(base, "postgresql://") {
		return base + " search_path=" + schema // key=value form
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", URLVar, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
