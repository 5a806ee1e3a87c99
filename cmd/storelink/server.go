package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"storelink"
	"storelink/dashboard"
	"storelink/gcmode"
	"storelink/httpapi"
	"storelink/service"
	"storelink/webhook"
	"storelink/worker"
)

// shutdownGrace is how long request bodies still arriving at a SIGTERM
// get before they are cut; shutdownTimeout how long the requests get in
// all before their connections are closed.
const (
	shutdownGrace   = 2 * time.Second
	shutdownTimeout = 30 * time.Second
)

// releaseTimeout bounds handing back the leases at the stop, so that a
// database that hangs cannot hold the stop.
const releaseTimeout = 3 * time.Second

// server is one `storelink serve` process: the database, the background
// workers and the HTTP server, wired from the configuration by Run and
// taken down in the reverse order when its context ends.
type server struct {
	c      *config
	stdout io.Writer
	logger *slog.Logger
	gc     *gcmode.Governor

	// Set by Run, in this order.
	db        *service.Services
	owner     string // this process's name on the leases it takes
	reg       *prometheus.Registry
	proc      *worker.Processor
	deliverer *worker.Deliverer
	sweeper   *worker.FileSweeper
	announcer *worker.Announcer
	keyUses   *worker.KeyUseFlusher
	api       *httpapi.Server
	http      *http.Server
	metrics   *http.Server // on --metrics-addr; nil without
}

// newServer is a server for the validated configuration c; it opens
// nothing until Run.
func newServer(c *config, getenv func(string) string, stdout, stderr io.Writer) *server {
	return &server{
		c:      c,
		stdout: stdout,
		logger: slog.New(slog.NewJSONHandler(stderr, nil)),
		gc:     gcmode.New(getenv),
	}
}

// Run serves until ctx ends, then stops cleanly: requests are answered
// (bodies still arriving after a grace are cut), the workers stop, and
// the leases this process holds are handed back.
func (s *server) Run(ctx context.Context) error {
	defer s.gc.Start()()
	db, migrated, err := openDB(ctx, s.c)
	if err != nil {
		return err
	}
	defer db.Close()
	if len(migrated.Applied) > 0 {
		s.logger.Info("migrated", "database", redactURL(s.c.Database), "applied", migrated.Applied, "version", migrated.Version)
	}
	s.db = db
	token, err := s.prepareDatabase(ctx)
	if err != nil {
		return err
	}
	s.newWorkers()
	s.api = s.newAPI(token)
	metricsLn, err := s.listenMetrics()
	if err != nil {
		return err
	}
	ln, err := s.listen()
	if err != nil {
		if metricsLn != nil {
			metricsLn.Close()
		}
		return err
	}
	stopWork := s.startWork()
	err = s.serveUntil(ctx, ln, metricsLn)
	stopWork() // an apply in progress rolls back and is resumed at the next start
	s.releaseLeases()
	return err
}

// prepareDatabase readies the open database for serving: the admin
// token, the secret key of webhook secrets, and with --demo the demo
// partner. It returns the admin token.
func (s *server) prepareDatabase(ctx context.Context) (string, error) {
	token, err := adminToken(s.c, s.stdout)
	if err != nil {
		return "", err
	}
	if s.db, err = useSecretKey(ctx, s.c, s.db, s.stdout); err != nil {
		return "", err
	}
	s.db = s.db.With(service.WithUploadRetention(s.c.UploadRetention), service.WithMaxEndpoints(s.c.MaxEndpoints),
		service.WithUploadStatusURL(httpapi.UploadStatusPath))
	if s.c.Demo {
		if err := demo(ctx, s.db, s.c.DemoWebhookURL, s.stdout); err != nil {
			return "", fmt.Errorf("demo: %w", err)
		}
	}
	return token, nil
}

// announceInterval is how often the announcer looks for the events of
// ended uploads that no wake told it of: those another process, or this
// one before a restart, left due.
const announceInterval = 10 * time.Second

// newWorkers makes the metrics registry and the background workers: the
// upload processor, the webhook deliverer, the announcer of ended uploads,
// the sweeper of expired upload files and the writer of API keys' last
// uses.
func (s *server) newWorkers() {
	c, db := s.c, s.db
	s.reg = prometheus.NewRegistry()
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	host, _ := os.Hostname()
	s.owner = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), randomHex(4))
	s.proc = worker.NewProcessor(db.Uploads, s.logger, s.owner, s.reg)
	s.proc.Lease, s.proc.Fault, s.proc.GC = c.UploadLease, db.Fault, s.gc
	s.deliverer = worker.NewDeliverer(db.Webhooks, webhook.NewClient(c.WebhookTimeout, c.WebhookAllowPriv),
		storelink.RetryPolicy{Schedule: c.WebhookRetry, Jitter: 0.2}, c.WebhookTimeout, s.logger, s.owner, s.reg)
	s.deliverer.PerEndpoint = c.WebhookConcurrency
	s.announcer = worker.NewAnnouncer(db.Orders.AnnounceUploads, s.deliverer.Wake, announceInterval, s.logger)
	s.proc.Finished = s.announcer.Wake
	s.sweeper = &worker.FileSweeper{Uploads: db.Uploads, Retention: c.UploadRetention, Interval: 5 * time.Minute, Logger: s.logger}
	s.keyUses = &worker.KeyUseFlusher{Flush: db.Partners.FlushKeyUses, Interval: worker.DefaultKeyUseInterval, Logger: s.logger}
}

// newAPI is the HTTP API with the dashboard, over the database and the
// workers.
func (s *server) newAPI(token string) *httpapi.Server {
	c, db := s.c, s.db
	capacity := storelink.CapacityPolicy{Base: c.CapacityBase, PerStore: c.CapacityPerStore, Window: c.CapacityWindow,
		MaxWaiting: c.MaxWaitingUploads, MinUpload: c.CapacityMinUpload}
	// One limiter for the API, the dashboard's login and the portal's
	// sign-in: guesses at the admin token or an API key count together
	// whichever way they come, per client address as the trusted proxies
	// tell it.
	authLimit := httpapi.NewAuthLimiter(c.AuthFailures)
	// One bound for the files in memory, and one for the test sends,
	// whether the API, the dashboard or the portal sends them; a test send
	// is bounded in time as a delivery attempt is.
	downloads := httpapi.NewDownloads(c.MaxDownloads, c.DownloadsShare, 0)
	testSends := httpapi.NewTestSends(c.WebhookTimeout)
	// One rate of writes per client, whether through the API or the
	// portal's forms.
	writes := httpapi.NewWriteLimit(c.WritesPerMin)
	// The portal's upload form is received by the API that serves the
	// portal, as the API's own uploads are; the API is made after the
	// dashboard it mounts.
	var api *httpapi.Server
	receive := func(r *http.Request, cl *storelink.Client, name string, file io.Reader) (*storelink.Upload, *http.Request, error) {
		return api.ReceiveUpload(r, cl, name, file)
	}
	api = httpapi.NewServer(httpapi.Deps{
		Admin: db.Partners, Auth: db.Partners, Uploads: db.Uploads, Stock: db.Uploads, Orders: db.Orders, Events: db.Orders, Webhooks: db.Webhooks, Ping: db.Ping,
		// On PostgreSQL the key can be rotated while this process runs; it
		// is then not ready until restarted with the new key.
		Ready: db.SecretKeys.SecretKeyCurrent,
		Fault: db.Fault, ProbeWrite: db.ProbeWrite, UploadRate: s.proc.Rate,
		AdminToken:           token,
		AuthLimit:            authLimit,
		TrustedProxies:       c.TrustedProxies,
		Downloads:            downloads,
		TestSends:            testSends,
		Capacity:             capacity,
		MaxFileSize:          c.MaxFileSize,
		MaxUploadsInFlight:   c.MaxUploadsInFlight,
		MaxUploadMemory:      c.MaxUploadMemory,
		UploadMemoryShare:    c.UploadMemoryShare,
		ValidationsPerMinute: c.ValidationsPerMin,
		Writes:               writes,
		BodyTimeout:          c.BodyTimeout,
		GC:                   s.gc,
		DatabaseTimeout:      c.DatabaseTimeout,
		WebhookAllowPrivate:  c.WebhookAllowPriv,
		Accepted:             s.proc.Wake,
		Ended:                s.announcer.Wake,
		Delivering:           s.deliverer.Wake,
		Tester:               s.deliverer,
		EndpointDeleted:      s.deliverer.DropEndpoint,
		Logger:               s.logger,
		Registry:             s.reg,
		PublicMetrics:        c.PublicMetrics,
		Dashboard: dashboard.New(dashboard.Deps{
			Admin: db.Partners, Uploads: db.Uploads, Stock: db.Uploads, Orders: db.Orders, Webhooks: db.Webhooks, Auth: db.Partners, Sessions: db.Partners, LoginLimit: authLimit,
			Tester: s.deliverer, OutsideDB: httpapi.OutsideDB, EndpointDeleted: s.deliverer.DropEndpoint, Download: downloads.Take,
			TestSend:     testSends.Take,
			PartnerWrite: writes.Take,
			AdminToken:   token, Capacity: capacity, Wake: s.deliverer.Wake, Logger: s.logger, Fault: db.Fault, ClientAddr: c.TrustedProxies.ClientAddr,
			WebhookAllowPrivate: c.WebhookAllowPriv, ReceiveUpload: receive,
		}),
	})
	return api
}

// listen opens the listener on --addr and makes the HTTP server of the
// API, and says where it listens.
func (s *server) listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", s.c.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", s.c.Addr, err)
	}
	// At --max-connections a new connection makes room by closing the one
	// that has sent least recently, whatever it is doing; one address may
	// have --max-connections-per-address open, except a trusted proxy,
	// whose connections carry many clients. httpapi.Listener watches each
	// for requests of ambiguous framing.
	connLimit := httpapi.NewConnLimit(s.c.MaxConnections)
	connLimit.PerAddress = s.c.MaxConnsPerAddr
	connLimit.Exempt = s.c.TrustedProxies.Contains
	ln = httpapi.Listener(connLimit.Listener(ln))
	s.http = httpapi.NewHTTPServer(s.api, connLimit)
	fmt.Fprintf(s.stdout, "storelink: listening on http://%s\n", ln.Addr())
	if s.c.Demo {
		fmt.Fprintf(s.stdout, "storelink: the operator's dashboard: http://%s/ (sign in with the admin token)\n", ln.Addr())
		fmt.Fprintf(s.stdout, "storelink: the partner portal: http://%s/portal/ (sign in with the client_id and api_key)\n", ln.Addr())
	}
	s.logger.Info("serving", "addr", ln.Addr().String(), "database", redactURL(s.c.Database))
	return ln, nil
}

// metricsConnections bounds the open connections of the metrics listener:
// a few scrapers use it.
const metricsConnections = 16

// listenMetrics opens the listener of --metrics-addr, when set, and makes
// its HTTP server, which serves GET /metrics only, and says where. It is
// bounded as the API's is, with room for a few scrapers.
func (s *server) listenMetrics() (net.Listener, error) {
	if s.c.MetricsAddr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", s.c.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on --metrics-addr %s: %w", s.c.MetricsAddr, err)
	}
	connLimit := httpapi.NewConnLimit(metricsConnections)
	ln = connLimit.Listener(ln)
	s.metrics = httpapi.NewHTTPServer(s.api.MetricsHandler(), connLimit)
	fmt.Fprintf(s.stdout, "storelink: metrics on http://%s/metrics\n", ln.Addr())
	s.logger.Info("serving metrics", "addr", ln.Addr().String())
	return ln, nil
}

// startWork starts the workers, and on PostgreSQL the listener for work
// other processes accept. The stop it returns ends them and waits.
func (s *server) startWork() (stop func()) {
	workCtx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.proc.Run(workCtx) })
	wg.Go(func() { _ = s.deliverer.Run(workCtx) })
	wg.Go(func() { _ = s.sweeper.Run(workCtx) })
	wg.Go(func() { _ = s.announcer.Run(workCtx) })
	wg.Go(func() { _ = s.keyUses.Run(workCtx) })
	// Work that another process accepts wakes this one at once.
	wg.Go(func() { listenForWork(workCtx, s.db, s.logger, s.proc.Wake, s.deliverer.Wake) })
	return func() {
		cancel()
		wg.Wait()
	}
}

// serveUntil serves on ln, and the metrics on metricsLn when it is not
// nil, until a server fails or ctx ends, then shuts the HTTP servers down.
func (s *server) serveUntil(ctx context.Context, ln, metricsLn net.Listener) error {
	errc := make(chan error, 2)
	go func() { errc <- s.http.Serve(ln) }()
	if metricsLn != nil {
		go func() { errc <- s.metrics.Serve(metricsLn) }()
	}
	var err error
	select {
	case err = <-errc:
		if s.metrics != nil {
			_ = s.metrics.Close()
		}
		_ = s.http.Close()
	case <-ctx.Done():
		s.shutdown()
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// shutdown stops the HTTP server: bodies still arriving are cut after
// shutdownGrace, requests get shutdownTimeout in all.
func (s *server) shutdown() {
	s.logger.Info("shutting down")
	if s.metrics != nil {
		// A scrape holds nothing worth waiting for.
		_ = s.metrics.Close()
	}
	// A body still arriving after the grace is cut (503, nothing
	// kept) so that a stalled upload cannot hold the stop; a request
	// whose body is in is answered, an upload stored.
	s.api.CutBodies(shutdownGrace)
	shutCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := s.http.Shutdown(shutCtx); err != nil {
		// What has not committed by now leaves nothing behind; what
		// has is durable. The stop is still a clean one.
		s.logger.Warn("requests still running at the end of the shutdown time; closing their connections", "error", err)
		_ = s.http.Close()
	}
}

// releaseLeases hands back the leases this process holds, once its
// workers have stopped.
func (s *server) releaseLeases() {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	// Both stores hand back only this process's own leases, which is safe
	// beside other processes on PostgreSQL too.
	if err := s.db.Uploads.ReleaseOwnLeases(ctx, s.owner); err != nil {
		// Not fatal: the lease runs out (PostgreSQL) or the next start
		// releases it (SQLite), only with the interrupted attempt counted.
		s.logger.Warn("release leases at stop", "error", err)
	}
}

// listenForWork listens for the work other processes add (on PostgreSQL, a
// LISTEN connection) until ctx ends, calling uploads or deliveries for
// each. A lost connection is made again after a pause; meanwhile the
// workers' polling finds the work, only later. Where no other process can
// add work (SQLite) it returns at once.
func listenForWork(ctx context.Context, db *service.Services, logger *slog.Logger, uploads, deliveries func()) {
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
