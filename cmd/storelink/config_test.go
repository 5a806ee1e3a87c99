package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"storelink/worker"
)

// --webhook-concurrency: the default, the variable, the flag over the
// variable, and values out of range refused as usage errors that name the
// flag.
func TestConfigWebhookConcurrency(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want int
		err  string
	}{
		{name: "default", want: worker.DefaultPerEndpoint},
		{name: "flag", args: []string{"--webhook-concurrency", "4"}, want: 4},
		{name: "variable", env: map[string]string{"STORELINK_WEBHOOK_CONCURRENCY": "8"}, want: 8},
		{name: "flag over variable", args: []string{"--webhook-concurrency=2"}, env: map[string]string{"STORELINK_WEBHOOK_CONCURRENCY": "8"}, want: 2},
		{name: "zero", args: []string{"--webhook-concurrency", "0"}, err: "--webhook-concurrency must be from 1 to 128"},
		{name: "too many", args: []string{"--webhook-concurrency", "129"}, err: "--webhook-concurrency must be from 1 to 128"},
		{name: "not a number", env: map[string]string{"STORELINK_WEBHOOK_CONCURRENCY": "many"}, err: `STORELINK_WEBHOOK_CONCURRENCY="many"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := parseConfig("serve", c.args, env(c.env), io.Discard)
			if c.err != "" {
				if err == nil || !isUsage(err) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want a usage error with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.WebhookConcurrency != c.want {
				t.Fatalf("WebhookConcurrency = %d, want %d", cfg.WebhookConcurrency, c.want)
			}
		})
	}
}

// --admin-token and STORELINK_ADMIN_TOKEN: at least 32 characters with no
// white space, else a usage error that states the rule and never repeats
// the token; unset is fine (a token is generated).
func TestConfigAdminTokenRule(t *testing.T) {
	long := strings.Repeat("x", 32)
	for _, c := range []struct {
		name  string
		args  []string
		env   map[string]string
		token string // the refused token, which the message must not hold
		ok    bool
	}{
		{name: "unset", ok: true},
		{name: "32 characters", args: []string{"--admin-token", long}, ok: true},
		{name: "32 characters by variable", env: map[string]string{"STORELINK_ADMIN_TOKEN": long}, ok: true},
		{name: "31 characters", args: []string{"--admin-token", long[:31]}, token: long[:31]},
		{name: "short by variable", env: map[string]string{"STORELINK_ADMIN_TOKEN": "secret-admin-token"}, token: "secret-admin-token"},
		{name: "a space inside", args: []string{"--admin-token", long[:16] + " " + long[:16]}, token: long[:16] + " "},
		{name: "a tab at the end", args: []string{"--admin-token", long + "\t"}, token: long + "\t"},
		{name: "a short flag over a long variable", args: []string{"--admin-token=short-token-value"},
			env: map[string]string{"STORELINK_ADMIN_TOKEN": long}, token: "short-token-value"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseConfig("serve", c.args, func(k string) string { return c.env[k] }, io.Discard)
			if c.ok {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !isUsage(err) || !strings.Contains(err.Error(), "at least 32 characters with no white space") {
				t.Fatalf("err = %v, want a usage error stating the rule", err)
			}
			if strings.Contains(err.Error(), c.token) {
				t.Fatalf("the message repeats the token: %v", err)
			}
		})
	}
}

// --auth-failures-per-minute: 20 by default, set by flag or variable, at
// least 1.
func TestConfigAuthFailures(t *testing.T) {
	cfg, err := parseConfig("serve", nil, func(string) string { return "" }, io.Discard)
	if err != nil || cfg.AuthFailures != 20 {
		t.Fatalf("default = %v, %v; want 20", cfg, err)
	}
	cfg, err = parseConfig("serve", nil, func(k string) string {
		return map[string]string{"STORELINK_AUTH_FAILURES_PER_MINUTE": "5"}[k]
	}, io.Discard)
	if err != nil || cfg.AuthFailures != 5 {
		t.Fatalf("by variable = %v, %v; want 5", cfg, err)
	}
	_, err = parseConfig("serve", []string{"--auth-failures-per-minute", "0"}, func(string) string { return "" }, io.Discard)
	if err == nil || !isUsage(err) || !strings.Contains(err.Error(), "--auth-failures-per-minute must be at least 1") {
		t.Fatalf("0: err = %v, want a usage error", err)
	}
}

// The limits on bodies and connections: defaults, variables, flags over
// variables, and values that cannot work refused as usage errors.
func TestConfigBodyLimits(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	cfg, err := parseConfig("serve", nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxUploadsInFlight != 4 || cfg.BodyTimeout != time.Minute || cfg.MaxConnections != 1024 {
		t.Fatalf("defaults: in flight %d, body timeout %s, connections %d; want 4, 1m0s, 1024",
			cfg.MaxUploadsInFlight, cfg.BodyTimeout, cfg.MaxConnections)
	}
	cfg, err = parseConfig("serve", []string{"--max-uploads-in-flight", "2", "--max-connections=10"}, env(map[string]string{
		"STORELINK_MAX_UPLOADS_IN_FLIGHT": "8", "STORELINK_BODY_TIMEOUT": "5s", "STORELINK_MAX_CONNECTIONS": "99",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxUploadsInFlight != 2 || cfg.BodyTimeout != 5*time.Second || cfg.MaxConnections != 10 {
		t.Fatalf("flags and variables: in flight %d, body timeout %s, connections %d; want 2, 5s, 10",
			cfg.MaxUploadsInFlight, cfg.BodyTimeout, cfg.MaxConnections)
	}
	for _, bad := range [][]string{
		{"--max-uploads-in-flight", "0"}, {"--body-timeout", "0s"}, {"--body-timeout", "-1s"}, {"--max-connections", "0"},
	} {
		if _, err := parseConfig("serve", bad, env(nil), io.Discard); err == nil || !isUsage(err) || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: err = %v, want a usage error naming %s", bad, err, bad[0])
		}
	}
}

// The flags of the pools divided per partner and of the minimum charge
// have their defaults, are read from their variables, and bad values are
// refused with what is wrong.
func TestConfigPoolsAndCapacity(t *testing.T) {
	c, err := parseConfig("serve", nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.CapacityMinUpload != 64<<10 || c.ValidationsPerMin != 30 || c.MaxDownloads != 8 || c.DownloadsShare != 2 || c.UploadMemoryShare != 0 {
		t.Fatalf("defaults: %+v", c)
	}
	env := map[string]string{
		"STORELINK_CAPACITY_MIN_UPLOAD": "16KiB", "STORELINK_VALIDATIONS_PER_MINUTE": "5",
		"STORELINK_MAX_UPLOAD_MEMORY_PER_PARTNER": "32MiB", "STORELINK_MAX_DOWNLOADS": "12", "STORELINK_MAX_DOWNLOADS_PER_PARTNER": "3",
	}
	c, err = parseConfig("serve", nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.CapacityMinUpload != 16<<10 || c.ValidationsPerMin != 5 || c.UploadMemoryShare != 32<<20 || c.MaxDownloads != 12 || c.DownloadsShare != 3 {
		t.Fatalf("from the environment: %+v", c)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-upload-memory-per-partner", "1MiB"}, "--max-upload-memory-per-partner"},
		{[]string{"--max-upload-memory-per-partner", "1GiB"}, "--max-upload-memory-per-partner"},
		{[]string{"--max-downloads", "0"}, "--max-downloads must"},
		{[]string{"--max-downloads", "2", "--max-downloads-per-partner", "3"}, "--max-downloads-per-partner"},
		{[]string{"--validations-per-minute", "0"}, "--validations-per-minute"},
	} {
		_, err := parseConfig("serve", bad.args, func(string) string { return "" }, io.Discard)
		if !isUsage(err) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v, want a usage error naming %s", bad.args, err, bad.want)
		}
	}
}
