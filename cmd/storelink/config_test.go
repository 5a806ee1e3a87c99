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
