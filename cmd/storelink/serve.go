package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"storelink"
	"storelink/dashboard"
	"storelink/gcmode"
	"storelink/httpapi"
	"storelink/postgres"
	"storelink/service"
	"storelink/sqlite"
	"storelink/webhook"
	"storelink/worker"
)

// openDB opens the configured database, applies the migrations, and
// returns the services over it, a storelink.Database whichever the
// database. They seal no secret: useSecretKey makes them again with the
// sealer once the key is checked against the database.
func openDB(ctx context.Context, c *config) (*service.Service, error) {
	switch {
	case strings.HasPrefix(c.Database, "sqlite:"):
		path := strings.TrimPrefix(c.Database, "sqlite:")
		if path == "" {
			return nil, usageError{errors.New("--database sqlite: needs a path, e.g. sqlite:./storelink-data/storelink.db")}
		}
		db, err := sqlite.Open(ctx, path)
		if err != nil {
			return nil, err
		}
		return service.New(sqlite.NewDriver(db)), nil
	case strings.HasPrefix(c.Database, "postgres://"), strings.HasPrefix(c.Database, "postgresql://"):
		db, err := postgres.Open(ctx, c.Database)
		if err != nil {
			// The driver's errors may quote the URL; the password never.
			return nil, errors.New(strings.ReplaceAll(err.Error(), c.Database, redactURL(c.Database)))
		}
		return service.New(postgres.NewDriver(db)), nil
	}
	return nil, usageError{fmt.Errorf("--database must be sqlite:PATH or postgres://..., got %q", redactURL(c.Database))}
}

// faultOf is the database's way to tell a full disk or an unreachable
// database from other errors.
func faultOf(db storelink.Database) func(error) error { return db.Fault }

// redactURL hides a password in a database URL before it is shown, in the
// user part (postgres://user:secret@host) or as a parameter (?password=).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" || u.Host == "" {
		// Not a URL with a host (sqlite:PATH), or not parseable: hide
		// anything before an @ all the same.
		if i := strings.LastIndex(s, "@"); i > 0 {
			if j := strings.Index(s, "://"); j > 0 && j < i {
				return s[:j+3] + "…" + s[i:]
			}
		}
		return s
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

func migrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, err := parseConfig("migrate", args, getenv, stderr)
	if err != nil {
		return err
	}
	db, err := openDB(ctx, c)
	if err != nil {
		return err
	}
	defer db.Close()
	fmt.Fprintf(stdout, "storelink: database %s is up to date\n", redactURL(c.Database))
	return nil
}

// shutdownGrace is how long request bodies still arriving at a SIGTERM
// get before they are cut; shutdownTimeout how long the requests get in
// all before their connections are closed.
const (
	shutdownGrace   = 2 * time.Second
	shutdownTimeout = 30 * time.Second
)

func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, err := parseConfig("serve", args, getenv, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(stderr, nil))
	gc := gcmode.New(getenv)
	defer gc.Start()()
	db, err := openDB(ctx, c)
	if err != nil {
		return err
	}
	defer db.Close()
	token, err := adminToken(c, stdout)
	if err != nil {
		return err
	}
	if db, err = useSecretKey(ctx, c, db, stdout); err != nil {
		return err
	}
	if c.Demo {
		if err := demo(ctx, db, stdout); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	host, _ := os.Hostname()
	owner := fmt.Sprintf("%s/%d/%s", host, os.Getpid(), randomHex(4))
	proc := worker.NewProcessor(db, logger, owner, reg)
	proc.Lease, proc.Fault, proc.GC = c.UploadLease, faultOf(db), gc
	deliverer := worker.NewDeliverer(db, webhook.NewClient(c.WebhookTimeout, c.WebhookAllowPriv),
		storelink.RetryPolicy{Schedule: c.WebhookRetry, Jitter: 0.2}, c.WebhookTimeout, logger, owner, reg)
	deliverer.PerEndpoint = c.WebhookConcurrency
	capacity := storelink.CapacityPolicy{Base: c.CapacityBase, PerStore: c.CapacityPerStore, Window: c.CapacityWindow,
		MaxWaiting: c.MaxWaitingUploads}
	// One limiter for the API and the dashboard's login: guesses at the
	// admin token count together whichever way they come.
	authLimit := httpapi.NewAuthLimiter(c.AuthFailures)
	api := httpapi.NewServer(httpapi.Deps{
		Admin: db, Auth: db, Uploads: db, Stock: db, Orders: db, Events: db, Webhooks: db, Ping: db.Ping,
		// On PostgreSQL the key can be rotated while this process runs; it
		// is then not ready until restarted with the new key.
		Ready: db.SecretKeyCurrent,
		Fault: faultOf(db), ProbeWrite: db.ProbeWrite, UploadRate: proc.Rate,
		AdminToken:          token,
		AuthLimit:           authLimit,
		Capacity:            capacity,
		MaxFileSize:         c.MaxFileSize,
		MaxUploadsInFlight:  c.MaxUploadsInFlight,
		MaxUploadMemory:     c.MaxUploadMemory,
		BodyTimeout:         c.BodyTimeout,
		GC:                  gc,
		DatabaseTimeout:     c.DatabaseTimeout,
		WebhookAllowPrivate: c.WebhookAllowPriv,
		Accepted:            proc.Wake,
		Delivering:          deliverer.Wake,
		Logger:              logger,
		Registry:            reg,
		Dashboard: dashboard.New(dashboard.Deps{
			Admin: db, Uploads: db, Stock: db, Orders: db, Webhooks: db, Sessions: db, LoginLimit: authLimit,
			AdminToken: token, Capacity: capacity, Wake: deliverer.Wake, Logger: logger, Fault: faultOf(db),
		}),
	})

	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.Addr, err)
	}
	// Connections beyond --max-connections wait in the listen queue, each
	// making room by closing the longest-idle keep-alive connection when
	// there is one; those open are served as usual. httpapi.Listener
	// watches each for requests of ambiguous framing.
	connLimit := httpapi.NewConnLimit(c.MaxConnections)
	ln = httpapi.Listener(connLimit.Listener(ln))
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ConnContext: httpapi.ConnContext, ConnState: connLimit.ConnState}
	fmt.Fprintf(stdout, "storelink: listening on http://%s\n", ln.Addr())
	logger.Info("serving", "addr", ln.Addr().String(), "database", redactURL(c.Database))

	workCtx, stopWork := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = proc.Run(workCtx) })
	wg.Go(func() { _ = deliverer.Run(workCtx) })
	// Work that another process accepts wakes this one at once.
	wg.Go(func() { listenForWork(workCtx, db, logger, proc.Wake, deliverer.Wake) })
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	select {
	case err = <-errc:
	case <-ctx.Done():
		logger.Info("shutting down")
		// A body still arriving after the grace is cut (503, nothing
		// kept) so that a stalled upload cannot hold the stop; a request
		// whose body is in is answered, an upload stored.
		api.CutBodies(shutdownGrace)
		shutCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		if err = srv.Shutdown(shutCtx); err != nil {
			// What has not committed by now leaves nothing behind; what
			// has is durable. The stop is still a clean one.
			logger.Warn("requests still running at the end of the shutdown time; closing their connections", "error", err)
			_ = srv.Close()
			err = nil
		}
		cancel()
	}
	stopWork() // an apply in progress rolls back and is resumed at the next start
	wg.Wait()
	// Bounded so that a database that hangs cannot hold the stop.
	relCtx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	// Both stores hand back only this process's own leases, which is safe
	// beside other processes on PostgreSQL too.
	if rerr := db.ReleaseOwnLeases(relCtx, owner); rerr != nil {
		// Not fatal: the lease runs out (PostgreSQL) or the next start
		// releases it (SQLite), only with the interrupted attempt counted.
		logger.Warn("release leases at stop", "error", rerr)
	}
	cancel()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// adminToken returns the configured token, or the one kept in the data
// folder, generating it on first use. Only its path is printed. A token
// in the file is held to the rule of --admin-token: a file someone wrote a
// weak token into, or that was left empty, stops serve (exit 2) saying so.
func adminToken(c *config, stdout io.Writer) (string, error) {
	if c.AdminToken != "" {
		return c.AdminToken, nil
	}
	path := filepath.Join(c.Data, "admin-token")
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		token := strings.TrimSpace(string(b))
		if token == "" {
			return "", usageError{fmt.Errorf("the admin token file %s is empty: delete it to have a token generated, "+
				"or write a token of at least %d characters with no white space into it (e.g. `openssl rand -hex 32`)", path, minAdminToken)}
		}
		if n, ok := adminTokenOK(token); !ok {
			return "", usageError{fmt.Errorf("the admin token in %s must be at least %d characters with no white space "+
				"(it has %d characters): delete the file to have one generated, or write such a token into it "+
				"(e.g. `openssl rand -hex 32`)", path, minAdminToken, n)}
		}
		fmt.Fprintf(stdout, "storelink: admin token in %s\n", path)
		return token, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("read the admin token: %w", err)
	}
	token := "sla_" + randomHex(32)
	if err := writeSecretFile(c.Data, path, token); err != nil {
		return "", fmt.Errorf("write admin token: %w", err)
	}
	fmt.Fprintf(stdout, "storelink: generated an admin token in %s\n", path)
	return token, nil
}

// writeSecretFile creates path with mode 0600, never overwriting one.
func writeSecretFile(dir, path, content string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// listenForWork listens for the work other processes add (on PostgreSQL, a
// LISTEN connection) until ctx ends, calling uploads or deliveries for
// each. A lost connection is made again after a pause; meanwhile the
// workers' polling finds the work, only later. Where no other process can
// add work (SQLite) it returns at once.
func listenForWork(ctx context.Context, db storelink.Database, logger *slog.Logger, uploads, deliveries func()) {
	for ctx.Err() == nil {
		err := db.Listen(ctx, uploads, deliveries)
		if err == nil || ctx.Err() != nil {
			return
		}
		logger.Warn("listen for notifications", "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// demoWebhookURL is where `storelink listen` listens by default.
const demoWebhookURL = "http://127.0.0.1:8090/webhooks"

// demo fills an empty database with a partner, a client and three stores so
// that a new user can upload at once, and prints what they need.
func demo(ctx context.Context, db storelink.Database, stdout io.Writer) error {
	n, err := db.PartnerCount(ctx)
	if err != nil || n > 0 {
		if n > 0 {
			fmt.Fprintln(stdout, "storelink: --demo: the database already has partners; nothing created")
		}
		return err
	}
	p, err := db.CreatePartner(ctx, "Demo Partner")
	if err != nil {
		return err
	}
	cl, err := db.CreateClient(ctx, p.ID, "DE", "EUR")
	if err != nil {
		return err
	}
	for _, s := range []struct{ id, name string }{{"S1", "Demo Store Berlin"}, {"S2", "Demo Store Hamburg"}, {"S3", "Demo Store Munich"}} {
		if _, _, err := db.PutStore(ctx, cl.ID, s.id, s.name); err != nil {
			return err
		}
	}
	secret := webhook.NewSecret()
	if _, err := db.CreateEndpoint(ctx, cl.ID, storelink.NewEndpoint{URL: demoWebhookURL}, secret); err != nil {
		return err
	}
	fmt.Fprintf(stdout, `storelink: demo partner created (shown once; keep them):
  partner_id:     %s
  client_id:      %s
  api_key:        %s
  stores:         S1, S2, S3
  webhook_url:    %s
  webhook_secret: %s
storelink: receive its order events with: storelink listen --addr 127.0.0.1:8090 --secret %s
`, p.ID, cl.ID, cl.APIKey, demoWebhookURL, secret, secret)
	return nil
}
