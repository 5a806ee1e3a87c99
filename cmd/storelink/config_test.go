package main

import (
	"io"
	"strings"
	"testing"

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
