package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgSchemaURL makes an empty schema in the test database and returns a URL
// that selects it, with a password (ignored under trust auth) that must
// never be printed. It skips without STORELINK_TEST_DATABASE_URL.
func pgSchemaURL(t *testing.T) (string, string) {
	t.Helper()
	base := os.Getenv("STORELINK_TEST_DATABASE_URL")
	if base == "" {
		t.Skip("STORELINK_TEST_DATABASE_URL is not set: the PostgreSQL tests are skipped")
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "storelink_cmd_" + hex.EncodeToString(b)
	admin := func(sql string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Fatalf("connect to the test database: %v", err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	admin("CREATE SCHEMA " + schema)
	t.Cleanup(func() { admin("DROP SCHEMA " + schema + " CASCADE") })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	const password = "not-to-be-printed"
	if u.User != nil {
		u.User = url.UserPassword(u.User.Username(), password)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), password
}

// TestMigratePostgres: `storelink migrate --database postgres://…` applies
// the schema, is a no-op the second time, and never prints the password.
func TestMigratePostgres(t *testing.T) {
	dbURL, password := pgSchemaURL(t)
	for range 2 {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"migrate", "--data", t.TempDir(), "--database", dbURL},
			func(string) string { return "" }, nil, &out, &errb)
		if code != 0 || !strings.Contains(out.String(), "is up to date") {
			t.Fatalf("migrate = %d\n%s%s", code, out.String(), errb.String())
		}
		if strings.Contains(out.String()+errb.String(), password) {
			t.Fatalf("migrate printed the password:\n%s%s", out.String(), errb.String())
		}
	}
}

// TestServePostgresScaleOut: two serve processes on one PostgreSQL
// database share the work: uploads accepted by either are applied at once,
// in order, whichever process applies them.
func TestServePostgresScaleOut(t *testing.T) {
	dbURL, password := pgSchemaURL(t)
	data := t.TempDir()
	a := startServe(t, data, "--database", dbURL, "--demo")
	b := startServe(t, data, "--database", dbURL)
	b.ClientID, b.APIKey = a.ClientID, a.APIKey
	var ids []string
	for i, p := range []*proc{a, b, b, a} {
		body := "store;ean;article_number;quantity;price\nS1;4006381333931;SKU-1;" + string(rune('1'+i)) + ";19.99\n"
		code, u := p.upload(t, "f.csv", []byte(body))
		if code != 200 {
			t.Fatalf("upload to process %d = %d %v", i, code, u)
		}
		ids = append(ids, u["upload_id"].(string))
	}
	for i, id := range ids {
		p := []*proc{b, a}[i%2] // read back from the other process
		if u := p.waitUpload(t, id, 10*time.Second); u["status"] != "applied" {
			t.Fatalf("upload %s = %v, want applied", id, u)
		}
	}
	code, st := a.get(t, "/stock/"+a.ClientID+"/stock?store=S1")
	if code != 200 {
		t.Fatalf("stock = %d %v", code, st)
	}
	if got := st["stock"].([]any)[0].(map[string]any)["quantity"]; got != float64(4) {
		t.Fatalf("quantity in force = %v, want 4 (the last upload's)", got)
	}
	for _, p := range []*proc{a, b} {
		if err := p.Stop(); err != nil {
			t.Fatalf("stop: %v\n%s", err, p.stderr)
		}
		if strings.Contains(p.stdout.String()+p.stderr.String(), password) {
			t.Fatal("serve printed the database password")
		}
	}
}
