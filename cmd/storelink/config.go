package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"storelink"

	"storelink/httpapi"
	"storelink/service"
	"storelink/webhook"
	"storelink/worker"
)

// defaultMaxConnections bounds the open connections of serve. An open
// connection costs a goroutine and its buffers, and one that sends a body
// may hold up to a file in memory (bounded per client by
// --max-uploads-in-flight); 1024 is far more than partners and operators
// use at once, and keeps a flood of slow connections from taking all memory
// or file descriptors (the database and webhook deliveries need theirs).
// At the limit, the connection that has sent least recently is closed to
// make room for a new one.
const defaultMaxConnections = 1024

// config is the configuration of serve and migrate: defaults, then
// environment, then flags, validated once.
type config struct {
	Addr               string
	Data               string
	Database           string
	AdminToken         string
	adminTokenFrom     string // the flag or variable AdminToken came from
	AdminTokenFile     string
	adminTokenFileFrom string // the flag or variable AdminTokenFile came from
	SecretKey          string
	secretKeyFrom      string // where SecretKey came from, to name it to the operator
	CapacityBase       int64
	CapacityPerStore   int64
	CapacityWindow     time.Duration
	MaxFileSize        int64
	MaxWaitingUploads  int
	WebhookTimeout     time.Duration
	WebhookConcurrency int
	WebhookRetry       []time.Duration
	WebhookAllowPriv   bool
	webhookAllowPrivOK bool // set explicitly, by flag or variable
	UploadLease        time.Duration
	UploadRetention    time.Duration
	AuthFailures       int
	TrustedProxies     httpapi.TrustedProxies
	MaxUploadsInFlight int
	MaxUploadMemory    int64
	UploadMemoryShare  int64 // 0: httpapi.DefaultUploadMemoryShare
	MaxDownloads       int
	DownloadsShare     int
	CapacityMinUpload  int64
	ValidationsPerMin  int
	WritesPerMin       int
	BodyTimeout        time.Duration
	DatabaseTimeout    time.Duration
	MaxConnections     int
	MaxConnsPerAddr    int    // 0: no cap
	MetricsAddr        string // "": no listener of its own
	PublicMetrics      bool
	Demo               bool
	DemoWebhookURL     string // the demo endpoint's URL
	MaxEndpoints       int    // webhook endpoints a client may have
	webhookRetryOK     bool   // --webhook-retry-schedule set explicitly, by flag or variable
}

// usageError marks errors in the command line or environment (exit 2).
type usageError struct{ error }

func isUsage(err error) bool {
	var u usageError
	return errors.As(err, &u) || errors.Is(err, flag.ErrHelp)
}

// sizeValue and friends let flag parse our units with env defaults.
type sizeValue struct{ p *int64 }

func (v sizeValue) String() string {
	if v.p == nil {
		return ""
	}
	return formatSize(*v.p)
}
func (v sizeValue) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}

type trustedProxiesValue struct{ p *httpapi.TrustedProxies }

func (v trustedProxiesValue) String() string {
	if v.p == nil {
		return ""
	}
	return v.p.String()
}
func (v trustedProxiesValue) Set(s string) error {
	t, err := httpapi.ParseTrustedProxies(s)
	if err != nil {
		return err
	}
	*v.p = t
	return nil
}

type scheduleValue struct{ p *[]time.Duration }

func (v scheduleValue) String() string {
	if v.p == nil {
		return ""
	}
	parts := make([]string, len(*v.p))
	for i, d := range *v.p {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}
func (v scheduleValue) Set(s string) error {
	var out []time.Duration
	for _, part := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil || d < 0 {
			return fmt.Errorf("%q is not a list of durations like 5s,5m,30m", s)
		}
		out = append(out, d)
	}
	*v.p = out
	return nil
}

// parseSize reads "20MiB", "512KiB", "1GiB", "100B" or a plain byte count.
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<50)/mult {
		return 0, fmt.Errorf("%q is not a size like 20MiB, 512KiB or 1048576", s)
	}
	return n * mult, nil
}

func formatSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// parseConfig reads the serve and migrate configuration.
func parseConfig(name string, args []string, getenv func(string) string, stderr io.Writer) (*config, error) {
	c := &config{
		Addr: "127.0.0.1:8080", Data: "./storelink-data",
		CapacityBase: 20 << 20, CapacityPerStore: 2 << 20, CapacityWindow: time.Hour,
		MaxFileSize: 10 << 20, MaxWaitingUploads: 20, WebhookTimeout: 10 * time.Second, WebhookConcurrency: worker.DefaultPerEndpoint, UploadLease: time.Minute,
		UploadRetention:    worker.DefaultUploadRetention,
		AuthFailures:       httpapi.DefaultAuthFailuresPerMinute,
		MaxUploadsInFlight: httpapi.DefaultMaxUploadsInFlight, MaxUploadMemory: httpapi.DefaultMaxUploadMemory,
		MaxDownloads: httpapi.DefaultMaxDownloads, DownloadsShare: httpapi.DefaultMaxDownloadsPerPartner,
		CapacityMinUpload: 64 << 10, ValidationsPerMin: httpapi.DefaultValidationsPerMinute, WritesPerMin: httpapi.DefaultWritesPerMinute, BodyTimeout: httpapi.DefaultBodyTimeout, DatabaseTimeout: httpapi.DefaultDatabaseTimeout, MaxConnections: defaultMaxConnections, MaxConnsPerAddr: httpapi.DefaultMaxConnectionsPerAddress,
		WebhookRetry: []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour},
	}
	fs := flag.NewFlagSet("storelink "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Addr, "addr", c.Addr, "listen address (STORELINK_ADDR)")
	fs.StringVar(&c.Data, "data", c.Data, "folder for the embedded database and the admin token (STORELINK_DATA)")
	fs.StringVar(&c.Database, "database", "", "sqlite:PATH or postgres://... (STORELINK_DATABASE_URL; default sqlite:<data>/storelink.db)")
	token := &fromValue{p: &c.AdminToken, from: &c.adminTokenFrom, source: "STORELINK_ADMIN_TOKEN"}
	fs.Var(token, "admin-token", "operator token, at least 32 characters with no white space; on the command line any user of the machine can read it (ps), so prefer --admin-token-file or the variable (STORELINK_ADMIN_TOKEN; default generated into <data>/admin-token)")
	tokenFile := &fromValue{p: &c.AdminTokenFile, from: &c.adminTokenFileFrom, source: "STORELINK_ADMIN_TOKEN_FILE"}
	fs.Var(tokenFile, "admin-token-file", "file holding the operator token, read at start (STORELINK_ADMIN_TOKEN_FILE)")
	key := secretKeyFlag(fs, c, "64 hex digits: the key that encrypts webhook secrets at rest; must be the database's (STORELINK_SECRET_KEY; default <data>/secret-key, generated for a database without a key)")
	fs.Var(sizeValue{&c.CapacityBase}, "capacity-base", "upload capacity per window before stores (STORELINK_CAPACITY_BASE)")
	fs.Var(sizeValue{&c.CapacityPerStore}, "capacity-per-store", "capacity added per registered store (STORELINK_CAPACITY_PER_STORE)")
	fs.DurationVar(&c.CapacityWindow, "capacity-window", c.CapacityWindow, "window the capacity refills over (STORELINK_CAPACITY_WINDOW)")
	fs.Var(sizeValue{&c.CapacityMinUpload}, "capacity-min-upload", "capacity every upload takes at least, whatever its size (STORELINK_CAPACITY_MIN_UPLOAD)")
	fs.IntVar(&c.ValidationsPerMin, "validations-per-minute", c.ValidationsPerMin, "validations one client may make per minute, as a bucket that refills evenly; more get 429, per process (STORELINK_VALIDATIONS_PER_MINUTE)")
	fs.IntVar(&c.WritesPerMin, "writes-per-minute", c.WritesPerMin, "writes one client may make per minute through the partner API and portal (endpoints, API keys, redeliveries, cancels), as a bucket that refills evenly; more get 429, per process (STORELINK_WRITES_PER_MINUTE)")
	fs.Var(sizeValue{&c.MaxFileSize}, "max-file-size", "largest accepted stock file (STORELINK_MAX_FILE_SIZE)")
	fs.IntVar(&c.MaxWaitingUploads, "max-waiting-uploads", c.MaxWaitingUploads, "uploads of one client that may wait to be processed; more get 429; 0 is no limit (STORELINK_MAX_WAITING_UPLOADS)")
	fs.DurationVar(&c.WebhookTimeout, "webhook-timeout", c.WebhookTimeout, "a delivery taking longer has failed (STORELINK_WEBHOOK_TIMEOUT)")
	fs.IntVar(&c.WebhookConcurrency, "webhook-concurrency", c.WebhookConcurrency, "attempts in flight to one webhook endpoint at most, per process (STORELINK_WEBHOOK_CONCURRENCY)")
	fs.Var(scheduleValue{&c.WebhookRetry}, "webhook-retry-schedule", "delays between delivery attempts (STORELINK_WEBHOOK_RETRY_SCHEDULE)")
	fs.BoolVar(&c.WebhookAllowPriv, "webhook-allow-private", false, "allow webhook URLs on loopback and private addresses (STORELINK_WEBHOOK_ALLOW_PRIVATE; on with --demo)")
	fs.DurationVar(&c.UploadLease, "upload-lease", c.UploadLease, "how long a process holds an upload it is processing; when the process dies, another takes the upload over after this (STORELINK_UPLOAD_LEASE)")
	fs.DurationVar(&c.UploadRetention, "upload-retention", c.UploadRetention, "how long an upload's file and error file are kept for download after it was received; a file still waiting to be processed is kept until it is (STORELINK_UPLOAD_RETENTION)")
	fs.IntVar(&c.AuthFailures, "auth-failures-per-minute", c.AuthFailures, "failed authentications (admin token, API key, dashboard login) one remote address may make per minute, as a bucket that refills evenly; once it is empty, every attempt from there gets 429 until it refills (STORELINK_AUTH_FAILURES_PER_MINUTE)")
	fs.Var(trustedProxiesValue{&c.TrustedProxies}, "trusted-proxies", "CIDR prefixes or addresses of the reverse proxies, comma-separated: a request from one of them is taken to come from the rightmost address of its Forwarded or X-Forwarded-For header that is not one of them, for the failed-authentication limit and the log (STORELINK_TRUSTED_PROXIES; default none)")
	fs.IntVar(&c.MaxUploadsInFlight, "max-uploads-in-flight", c.MaxUploadsInFlight, "uploads and validations one partner's clients together may have in flight at once, per process; more get 429 (STORELINK_MAX_UPLOADS_IN_FLIGHT)")
	fs.Var(sizeValue{&c.MaxUploadMemory}, "max-upload-memory", "memory the bodies of all uploads being received may take together (a validation is checked as it arrives and holds none), per process; beyond it they get 503 with Retry-After; at least --max-file-size (STORELINK_MAX_UPLOAD_MEMORY)")
	fs.Var(sizeValue{&c.UploadMemoryShare}, "max-upload-memory-per-partner", "part of --max-upload-memory the bodies of one partner's clients may take together; beyond it they get 429 with Retry-After; default max(--max-file-size, --max-upload-memory/4) (STORELINK_MAX_UPLOAD_MEMORY_PER_PARTNER)")
	fs.IntVar(&c.MaxDownloads, "max-downloads", c.MaxDownloads, "file downloads (API, dashboard and portal) sent at once, per process; more get 503 with Retry-After (STORELINK_MAX_DOWNLOADS)")
	fs.IntVar(&c.DownloadsShare, "max-downloads-per-partner", c.DownloadsShare, "file downloads of one partner's clients (or of the operator) sent at once; more get 429 with Retry-After (STORELINK_MAX_DOWNLOADS_PER_PARTNER)")
	fs.DurationVar(&c.BodyTimeout, "body-timeout", c.BodyTimeout, "time a request body has to arrive in full; later gets 408 (STORELINK_BODY_TIMEOUT)")
	fs.DurationVar(&c.DatabaseTimeout, "database-timeout", c.DatabaseTimeout, "time a request may wait for the database, its body's arrival not counted; later gets 503 with Retry-After (STORELINK_DATABASE_TIMEOUT)")
	fs.IntVar(&c.MaxConnections, "max-connections", c.MaxConnections, "open client connections at most; a new one beyond makes room by closing the connection that has sent least recently, whatever it is doing (STORELINK_MAX_CONNECTIONS)")
	fs.IntVar(&c.MaxConnsPerAddr, "max-connections-per-address", c.MaxConnsPerAddr, "open connections one remote address (IPv6: one /64) may have; more are closed as soon as they are accepted; 0 is no cap (STORELINK_MAX_CONNECTIONS_PER_ADDRESS)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", "", "address of a listener of its own that serves GET /metrics (and nothing else) without credentials, for Prometheus; keep it reachable by the scraper only (STORELINK_METRICS_ADDR; default none)")
	fs.BoolVar(&c.PublicMetrics, "public-metrics", false, "serve GET /metrics on --addr without the admin token (STORELINK_PUBLIC_METRICS; default: the token is needed there)")
	fs.BoolVar(&c.Demo, "demo", false, "on an empty database, create a demo partner and print its credentials")
	fs.IntVar(&c.MaxEndpoints, "max-endpoints-per-client", service.DefaultMaxEndpoints, "webhook endpoints a client may have; one more is refused with 409 (STORELINK_MAX_ENDPOINTS_PER_CLIENT)")
	fs.StringVar(&c.DemoWebhookURL, "demo-webhook-url", defaultDemoWebhookURL, "with --demo, the URL the demo partner's webhook endpoint is registered at: where storelink listen listens by default (STORELINK_DEMO_WEBHOOK_URL)")

	// Environment first, so that flags given on the command line win.
	env := map[string]string{
		"addr": "STORELINK_ADDR", "data": "STORELINK_DATA", "database": "STORELINK_DATABASE_URL",
		"admin-token": "STORELINK_ADMIN_TOKEN", "admin-token-file": "STORELINK_ADMIN_TOKEN_FILE",
		"secret-key": "STORELINK_SECRET_KEY", "capacity-base": "STORELINK_CAPACITY_BASE",
		"capacity-per-store": "STORELINK_CAPACITY_PER_STORE", "capacity-window": "STORELINK_CAPACITY_WINDOW",
		"max-file-size": "STORELINK_MAX_FILE_SIZE", "max-waiting-uploads": "STORELINK_MAX_WAITING_UPLOADS", "webhook-timeout": "STORELINK_WEBHOOK_TIMEOUT",
		"webhook-concurrency":    "STORELINK_WEBHOOK_CONCURRENCY",
		"webhook-retry-schedule": "STORELINK_WEBHOOK_RETRY_SCHEDULE", "webhook-allow-private": "STORELINK_WEBHOOK_ALLOW_PRIVATE",
		"upload-lease": "STORELINK_UPLOAD_LEASE", "upload-retention": "STORELINK_UPLOAD_RETENTION", "auth-failures-per-minute": "STORELINK_AUTH_FAILURES_PER_MINUTE",
		"max-uploads-in-flight": "STORELINK_MAX_UPLOADS_IN_FLIGHT",
		"body-timeout":          "STORELINK_BODY_TIMEOUT", "max-connections": "STORELINK_MAX_CONNECTIONS",
		"max-connections-per-address": "STORELINK_MAX_CONNECTIONS_PER_ADDRESS", "max-upload-memory": "STORELINK_MAX_UPLOAD_MEMORY",
		"database-timeout": "STORELINK_DATABASE_TIMEOUT", "trusted-proxies": "STORELINK_TRUSTED_PROXIES",
		"capacity-min-upload":    "STORELINK_CAPACITY_MIN_UPLOAD",
		"validations-per-minute": "STORELINK_VALIDATIONS_PER_MINUTE", "writes-per-minute": "STORELINK_WRITES_PER_MINUTE", "max-upload-memory-per-partner": "STORELINK_MAX_UPLOAD_MEMORY_PER_PARTNER",
		"max-downloads": "STORELINK_MAX_DOWNLOADS", "max-downloads-per-partner": "STORELINK_MAX_DOWNLOADS_PER_PARTNER",
		"demo-webhook-url": "STORELINK_DEMO_WEBHOOK_URL", "max-endpoints-per-client": "STORELINK_MAX_ENDPOINTS_PER_CLIENT",
		"metrics-addr": "STORELINK_METRICS_ADDR", "public-metrics": "STORELINK_PUBLIC_METRICS",
	}
	for flagName, variable := range env {
		if v := getenv(variable); v != "" {
			if err := fs.Set(flagName, v); err != nil {
				return nil, usageError{fmt.Errorf("%s=%q: %v", variable, v, err)}
			}
			c.noteExplicit(flagName)
		}
	}
	key.source, token.source, tokenFile.source = "--secret-key", "--admin-token", "--admin-token-file"
	if err := fs.Parse(args); err != nil {
		return nil, usageError{err}
	}
	fs.Visit(func(f *flag.Flag) { c.noteExplicit(f.Name) })
	if fs.NArg() > 0 {
		return nil, usageError{fmt.Errorf("unexpected arguments: %v", fs.Args())}
	}
	if c.Demo && !c.webhookAllowPrivOK {
		c.WebhookAllowPriv = true
	}
	if c.Demo && !c.webhookRetryOK {
		c.WebhookRetry = demoRetrySchedule
	}
	if c.Demo {
		if err := webhook.ValidateURL(c.DemoWebhookURL, true); err != nil {
			return nil, usageError{fmt.Errorf("--demo-webhook-url: %s", storelink.ErrorMessage(err))}
		}
	}
	if c.Database == "" {
		c.Database = "sqlite:" + filepath.Join(c.Data, "storelink.db")
	}
	switch {
	case c.CapacityWindow <= 0:
		return nil, usageError{errors.New("--capacity-window must be positive")}
	case c.MaxFileSize <= 0:
		return nil, usageError{errors.New("--max-file-size must be positive")}
	case c.CapacityBase <= 0 && c.CapacityPerStore <= 0:
		return nil, usageError{errors.New("--capacity-base or --capacity-per-store must be positive")}
	case c.MaxWaitingUploads < 0:
		return nil, usageError{errors.New("--max-waiting-uploads must be 0 (no limit) or more")}
	case c.WebhookTimeout <= 0:
		return nil, usageError{errors.New("--webhook-timeout must be positive")}
	case c.WebhookConcurrency < 1 || c.WebhookConcurrency > worker.MaxPerEndpoint:
		return nil, usageError{fmt.Errorf("--webhook-concurrency must be from 1 to %d", worker.MaxPerEndpoint)}
	case c.UploadLease <= 0:
		return nil, usageError{errors.New("--upload-lease must be positive")}
	case c.AuthFailures < 1:
		return nil, usageError{errors.New("--auth-failures-per-minute must be at least 1")}
	case c.MaxUploadsInFlight < 1:
		return nil, usageError{errors.New("--max-uploads-in-flight must be at least 1")}
	case c.UploadRetention <= 0:
		return nil, usageError{errors.New("--upload-retention must be positive")}
	case c.MaxUploadMemory < c.MaxFileSize:
		return nil, usageError{fmt.Errorf("--max-upload-memory (%s) must be at least --max-file-size (%s), or a file of the largest size could never be received",
			formatSize(c.MaxUploadMemory), formatSize(c.MaxFileSize))}
	case c.UploadMemoryShare != 0 && (c.UploadMemoryShare < c.MaxFileSize || c.UploadMemoryShare > c.MaxUploadMemory):
		return nil, usageError{fmt.Errorf("--max-upload-memory-per-partner (%s) must be from --max-file-size (%s) to --max-upload-memory (%s)",
			formatSize(c.UploadMemoryShare), formatSize(c.MaxFileSize), formatSize(c.MaxUploadMemory))}
	case c.MaxDownloads < 1:
		return nil, usageError{errors.New("--max-downloads must be at least 1")}
	case c.DownloadsShare < 1 || c.DownloadsShare > c.MaxDownloads:
		return nil, usageError{fmt.Errorf("--max-downloads-per-partner must be from 1 to --max-downloads (%d)", c.MaxDownloads)}
	case c.ValidationsPerMin < 1:
		return nil, usageError{errors.New("--validations-per-minute must be at least 1")}
	case c.WritesPerMin < 1:
		return nil, usageError{errors.New("--writes-per-minute must be at least 1")}
	case c.BodyTimeout <= 0:
		return nil, usageError{errors.New("--body-timeout must be positive")}
	case c.DatabaseTimeout <= 0:
		return nil, usageError{errors.New("--database-timeout must be positive")}
	case c.MaxConnections < 1:
		return nil, usageError{errors.New("--max-connections must be at least 1")}
	case c.MaxConnsPerAddr < 0:
		return nil, usageError{errors.New("--max-connections-per-address must be 0 (no cap) or more")}
	case c.MaxEndpoints < 1:
		return nil, usageError{errors.New("--max-endpoints-per-client must be at least 1")}
	}
	if err := checkMetricsAddr(c.MetricsAddr, c.Addr); err != nil {
		return nil, usageError{err}
	}
	if err := configAdminToken(c, stderr); err != nil {
		return nil, usageError{err}
	}
	return c, nil
}

// checkMetricsAddr refuses a --metrics-addr that is not HOST:PORT, or that
// is --addr itself (port 0 aside, which picks a free port for each).
func checkMetricsAddr(metrics, addr string) error {
	if metrics == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(metrics)
	if err != nil || port == "" {
		return fmt.Errorf("--metrics-addr (STORELINK_METRICS_ADDR) %q must be HOST:PORT, e.g. 127.0.0.1:9100", metrics)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("--metrics-addr (STORELINK_METRICS_ADDR) %q: the port must be a number from 0 to 65535", metrics)
	} else if n != 0 && metrics == addr {
		return fmt.Errorf("--metrics-addr %s is --addr too: give the metrics a listener of their own, or leave it unset", metrics)
	}
	return nil
}

// configAdminToken settles where the admin token comes from and checks it.
// A token and a token file given at the same level (both flags, or both
// variables) are refused as ambiguous; otherwise the command line wins over
// the environment, as for every flag. The file is read here, once. A token
// given on the command line is shown by ps to every user of the machine,
// so it is used but warned about.
func configAdminToken(c *config, stderr io.Writer) error {
	if c.AdminToken != "" && c.AdminTokenFile != "" {
		tokenFlag, fileFlag := strings.HasPrefix(c.adminTokenFrom, "--"), strings.HasPrefix(c.adminTokenFileFrom, "--")
		switch {
		case tokenFlag == fileFlag:
			return fmt.Errorf("%s and %s are both given: give the admin token one way", c.adminTokenFrom, c.adminTokenFileFrom)
		case tokenFlag:
			c.AdminTokenFile = ""
		default:
			c.AdminToken = ""
		}
	}
	if c.AdminTokenFile != "" {
		token, err := readAdminTokenFile(c.AdminTokenFile, c.adminTokenFileFrom)
		if err != nil {
			return err
		}
		c.AdminToken = token
		return nil
	}
	if err := checkAdminToken(c.AdminToken); err != nil {
		return err
	}
	if c.adminTokenFrom == "--admin-token" {
		fmt.Fprintln(stderr, "storelink: warning: the admin token given with --admin-token on the command line can be read by every user "+
			"of this machine (ps, /proc); give it with --admin-token-file PATH or STORELINK_ADMIN_TOKEN instead")
	}
	return nil
}

// readAdminTokenFile reads the token of --admin-token-file, without the
// white space around it (the line end an editor or echo adds), and holds it
// to the rule of --admin-token. Messages name the file, never the token.
func readAdminTokenFile(path, from string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: cannot read the admin token: %w", from, err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("%s: the admin token file %s is empty; write a token of at least %d characters with no white space "+
			"into it (e.g. `openssl rand -hex 32`)", from, path, minAdminToken)
	}
	if n, ok := adminTokenOK(token); !ok {
		return "", fmt.Errorf("%s: the admin token in %s must be at least %d characters with no white space (it has %d characters); "+
			"write such a token into it (e.g. `openssl rand -hex 32`)", from, path, minAdminToken, n)
	}
	return token, nil
}

// minAdminToken is the shortest admin token accepted: with the failed-attempt
// limit, guessing one of 32 characters is out of reach. The generated token
// is longer.
const minAdminToken = 32

// checkAdminToken refuses a configured admin token that is short or holds
// white space (which the Authorization header and the login form would not
// carry intact). The message never repeats the token.
func checkAdminToken(token string) error {
	if token == "" {
		return nil
	}
	if n, ok := adminTokenOK(token); !ok {
		return fmt.Errorf("--admin-token (STORELINK_ADMIN_TOKEN) must be at least %d characters with no white space "+
			"(the one given has %d characters); leave it unset to have one generated, or make one with `openssl rand -hex 32`",
			minAdminToken, n)
	}
	return nil
}

// adminTokenOK applies the rule for admin tokens, wherever they come from,
// and returns the token's length in characters.
func adminTokenOK(token string) (int, bool) {
	n := utf8.RuneCountInString(token)
	return n, n >= minAdminToken && strings.IndexFunc(token, unicode.IsSpace) < 0
}

// Unwrap lets errors.Is see the error a usage error wraps (flag.ErrHelp).
func (u usageError) Unwrap() error { return u.error }

// noteExplicit notes the flags whose defaults --demo changes when they were
// given, by flag or variable: those it then leaves as given.
func (c *config) noteExplicit(flagName string) {
	switch flagName {
	case "webhook-allow-private":
		c.webhookAllowPrivOK = true
	case "webhook-retry-schedule":
		c.webhookRetryOK = true
	}
}

// defaultDemoWebhookURL is where `storelink listen` receives by default.
var defaultDemoWebhookURL = "http://" + defaultListenAddr + "/webhooks"

// demoRetrySchedule is --demo's retry schedule: a delivery that failed
// because `storelink listen` was not running yet is tried again within 30 s
// for the first five minutes, so that a newcomer who starts it sees the
// event arrive within a minute; then the default's longer steps.
var demoRetrySchedule = []time.Duration{5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	30 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second,
	30 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}
