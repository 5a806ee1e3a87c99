package main

import (
	"strings"
	"testing"
)

// A database URL is shown (migrate's output, serve's log, errors) without
// any password it carries: the user's, or one in its parameters, which
// pgx reads too (password, and sslpassword for the client key).
func TestRedactURLHidesPasswords(t *testing.T) {
	const secret = "s3cr3t-not-shown"
	for _, u := range []string{
		"postgres://app:" + secret + "@db.internal:5432/storelink",
		"postgres://app@db.internal:5432/storelink?password=" + secret,
		"postgres://app@db.internal:5432/storelink?sslmode=verify-full&sslkey=/k.pem&sslpassword=" + secret,
	} {
		got := redactURL(u)
		if strings.Contains(got, secret) {
			t.Errorf("redactURL(%q) = %q, which shows the password", u, got)
		}
		if !strings.Contains(got, "db.internal") {
			t.Errorf("redactURL(%q) = %q, which no longer names the host", u, got)
		}
	}
}
