package main

import (
	"io"
	"os"
	"path/filepath"
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

// The admin token from a file (--admin-token-file, STORELINK_ADMIN_TOKEN_FILE)
// or the environment, and the warning that a token on the command line is
// shown by ps: the token is read from the file without its line end, held
// to the rule with messages that name the file and never the token; a
// token and a file at the same level are refused, and the command line
// wins over the environment.
func TestConfigAdminTokenFile(t *testing.T) {
	dir := t.TempDir()
	good := "file-token-" + strings.Repeat("f", 32)
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	goodFile := write("good", good+"\n")
	weakFile := write("weak", "weak-file-token\n")
	emptyFile := write("empty", " \n")
	varToken := "var-token-" + strings.Repeat("v", 32)
	flagToken := "flag-token-" + strings.Repeat("g", 32)
	for _, c := range []struct {
		name   string
		args   []string
		env    map[string]string
		want   string // the token configured
		err    string // a part of the usage error
		warned bool   // stderr warns that ps shows the token
	}{
		{name: "file by flag", args: []string{"--admin-token-file", goodFile}, want: good},
		{name: "file by variable", env: map[string]string{"STORELINK_ADMIN_TOKEN_FILE": goodFile}, want: good},
		{name: "variable", env: map[string]string{"STORELINK_ADMIN_TOKEN": varToken}, want: varToken},
		{name: "flag", args: []string{"--admin-token", flagToken}, want: flagToken, warned: true},
		{name: "flag over a file variable", args: []string{"--admin-token=" + flagToken}, env: map[string]string{"STORELINK_ADMIN_TOKEN_FILE": weakFile},
			want: flagToken, warned: true},
		{name: "file flag over a token variable", args: []string{"--admin-token-file", goodFile}, env: map[string]string{"STORELINK_ADMIN_TOKEN": varToken},
			want: good},
		{name: "both flags", args: []string{"--admin-token", flagToken, "--admin-token-file", goodFile},
			err: "--admin-token and --admin-token-file are both given: give the admin token one way"},
		{name: "both variables", env: map[string]string{"STORELINK_ADMIN_TOKEN": varToken, "STORELINK_ADMIN_TOKEN_FILE": goodFile},
			err: "STORELINK_ADMIN_TOKEN and STORELINK_ADMIN_TOKEN_FILE are both given"},
		{name: "missing file", args: []string{"--admin-token-file", filepath.Join(dir, "none")},
			err: "--admin-token-file: cannot read the admin token: open " + filepath.Join(dir, "none")},
		{name: "weak file", env: map[string]string{"STORELINK_ADMIN_TOKEN_FILE": weakFile},
			err: "STORELINK_ADMIN_TOKEN_FILE: the admin token in " + weakFile + " must be at least 32 characters with no white space (it has 15 characters)"},
		{name: "empty file", args: []string{"--admin-token-file", emptyFile}, err: "the admin token file " + emptyFile + " is empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stderr strings.Builder
			cfg, err := parseConfig("serve", c.args, func(k string) string { return c.env[k] }, &stderr)
			if c.err != "" {
				if err == nil || !isUsage(err) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want a usage error with %q", err, c.err)
				}
				for _, secret := range []string{good, "weak-file-token", varToken, flagToken} {
					if strings.Contains(err.Error(), secret) {
						t.Fatalf("the message repeats a token: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.AdminToken != c.want {
				t.Errorf("AdminToken = %q, want %q", cfg.AdminToken, c.want)
			}
			warning := stderr.String()
			if got := strings.Contains(warning, "--admin-token on the command line can be read by every user of this machine (ps, /proc); "+
				"give it with --admin-token-file PATH or STORELINK_ADMIN_TOKEN instead"); got != c.warned {
				t.Errorf("warned = %v, want %v: %q", got, c.warned, warning)
			}
			if strings.Contains(warning, c.want) {
				t.Errorf("stderr shows the token: %q", warning)
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

// --trusted-proxies: none by default, set by variable or flag (the flag
// wins); an entry that is not a prefix or an address is a usage error
// naming it and the variable.
func TestConfigTrustedProxies(t *testing.T) {
	none := func(string) string { return "" }
	cfg, err := parseConfig("serve", nil, none, io.Discard)
	if err != nil || cfg.TrustedProxies.String() != "" {
		t.Fatalf("default = %q, %v; want none", cfg.TrustedProxies.String(), err)
	}
	byVar := func(k string) string {
		return map[string]string{"STORELINK_TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.7"}[k]
	}
	cfg, err = parseConfig("serve", nil, byVar, io.Discard)
	if err != nil || cfg.TrustedProxies.String() != "10.0.0.0/8,192.0.2.7/32" {
		t.Fatalf("by variable = %q, %v", cfg.TrustedProxies.String(), err)
	}
	cfg, err = parseConfig("serve", []string{"--trusted-proxies", "fd00::/8"}, byVar, io.Discard)
	if err != nil || cfg.TrustedProxies.String() != "fd00::/8" {
		t.Fatalf("flag over variable = %q, %v", cfg.TrustedProxies.String(), err)
	}
	_, err = parseConfig("serve", []string{"--trusted-proxies", "10.0.0.0/8,proxy.internal"}, none, io.Discard)
	if err == nil || !isUsage(err) || !strings.Contains(err.Error(), "proxy.internal") {
		t.Fatalf("a host name: err = %v, want a usage error naming it", err)
	}
	_, err = parseConfig("serve", nil, func(k string) string { return map[string]string{"STORELINK_TRUSTED_PROXIES": "0.0.0.0/0"}[k] }, io.Discard)
	if err == nil || !isUsage(err) || !strings.Contains(err.Error(), "STORELINK_TRUSTED_PROXIES") || !strings.Contains(err.Error(), "every address") {
		t.Fatalf("0.0.0.0/0: err = %v, want a usage error", err)
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
	if cfg.MaxUploadsInFlight != 4 || cfg.BodyTimeout != time.Minute || cfg.MaxConnections != 1024 || cfg.MaxConnsPerAddr != 128 {
		t.Fatalf("defaults: in flight %d, body timeout %s, connections %d, per address %d; want 4, 1m0s, 1024, 128",
			cfg.MaxUploadsInFlight, cfg.BodyTimeout, cfg.MaxConnections, cfg.MaxConnsPerAddr)
	}
	cfg, err = parseConfig("serve", []string{"--max-uploads-in-flight", "2", "--max-connections=10"}, env(map[string]string{
		"STORELINK_MAX_UPLOADS_IN_FLIGHT": "8", "STORELINK_BODY_TIMEOUT": "5s", "STORELINK_MAX_CONNECTIONS": "99",
		"STORELINK_MAX_CONNECTIONS_PER_ADDRESS": "0",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxUploadsInFlight != 2 || cfg.BodyTimeout != 5*time.Second || cfg.MaxConnections != 10 || cfg.MaxConnsPerAddr != 0 {
		t.Fatalf("flags and variables: in flight %d, body timeout %s, connections %d, per address %d; want 2, 5s, 10, 0",
			cfg.MaxUploadsInFlight, cfg.BodyTimeout, cfg.MaxConnections, cfg.MaxConnsPerAddr)
	}
	cfg, err = parseConfig("serve", []string{"--max-connections-per-address", "3"}, env(map[string]string{
		"STORELINK_MAX_CONNECTIONS_PER_ADDRESS": "7",
	}), io.Discard)
	if err != nil || cfg.MaxConnsPerAddr != 3 {
		t.Fatalf("--max-connections-per-address 3 over the variable's 7: %v, %v", cfg, err)
	}
	for _, bad := range [][]string{
		{"--max-uploads-in-flight", "0"}, {"--body-timeout", "0s"}, {"--body-timeout", "-1s"}, {"--max-connections", "0"},
		{"--max-connections-per-address", "-1"},
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
	if c.CapacityMinUpload != 64<<10 || c.ValidationsPerMin != 30 || c.WritesPerMin != 60 || c.MaxDownloads != 8 || c.DownloadsShare != 2 || c.UploadMemoryShare != 0 {
		t.Fatalf("defaults: %+v", c)
	}
	env := map[string]string{
		"STORELINK_CAPACITY_MIN_UPLOAD": "16KiB", "STORELINK_VALIDATIONS_PER_MINUTE": "5", "STORELINK_WRITES_PER_MINUTE": "7",
		"STORELINK_MAX_UPLOAD_MEMORY_PER_PARTNER": "32MiB", "STORELINK_MAX_DOWNLOADS": "12", "STORELINK_MAX_DOWNLOADS_PER_PARTNER": "3",
	}
	c, err = parseConfig("serve", nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.CapacityMinUpload != 16<<10 || c.ValidationsPerMin != 5 || c.WritesPerMin != 7 || c.UploadMemoryShare != 32<<20 || c.MaxDownloads != 12 || c.DownloadsShare != 3 {
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
		{[]string{"--writes-per-minute", "0"}, "--writes-per-minute"},
	} {
		_, err := parseConfig("serve", bad.args, func(string) string { return "" }, io.Discard)
		if !isUsage(err) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v, want a usage error naming %s", bad.args, err, bad.want)
		}
	}
}

// --metrics-addr and --public-metrics: off by default, set by variable or
// flag (the flag wins); an address that is not HOST:PORT, or that is
// --addr, is a usage error naming the flag.
func TestConfigMetrics(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	c, err := parseConfig("serve", nil, env(nil), io.Discard)
	if err != nil || c.MetricsAddr != "" || c.PublicMetrics {
		t.Fatalf("defaults: %q, public %v, %v; want none and not public", c.MetricsAddr, c.PublicMetrics, err)
	}
	vars := env(map[string]string{"STORELINK_METRICS_ADDR": "127.0.0.1:9100", "STORELINK_PUBLIC_METRICS": "true"})
	c, err = parseConfig("serve", nil, vars, io.Discard)
	if err != nil || c.MetricsAddr != "127.0.0.1:9100" || !c.PublicMetrics {
		t.Fatalf("by variables: %q, public %v, %v", c.MetricsAddr, c.PublicMetrics, err)
	}
	c, err = parseConfig("serve", []string{"--metrics-addr", "[::1]:9200", "--public-metrics=false"}, vars, io.Discard)
	if err != nil || c.MetricsAddr != "[::1]:9200" || c.PublicMetrics {
		t.Fatalf("flags over variables: %q, public %v, %v", c.MetricsAddr, c.PublicMetrics, err)
	}
	if _, err := parseConfig("serve", []string{"--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"}, env(nil), io.Discard); err != nil {
		t.Fatalf("both on port 0 (a free port each): %v", err)
	}
	for _, bad := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--metrics-addr", "9100"}, nil, "--metrics-addr"},
		{[]string{"--metrics-addr", "localhost:metrics"}, nil, "port must be a number"},
		{[]string{"--metrics-addr", "127.0.0.1:70000"}, nil, "port must be a number"},
		{[]string{"--addr", "127.0.0.1:8080", "--metrics-addr", "127.0.0.1:8080"}, nil, "listener of their own"},
		{nil, map[string]string{"STORELINK_METRICS_ADDR": "no-port"}, "STORELINK_METRICS_ADDR"},
		{nil, map[string]string{"STORELINK_PUBLIC_METRICS": "maybe"}, "STORELINK_PUBLIC_METRICS"},
	} {
		if _, err := parseConfig("serve", bad.args, env(bad.env), io.Discard); !isUsage(err) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v %v: %v, want a usage error naming %s", bad.args, bad.env, err, bad.want)
		}
	}
}
