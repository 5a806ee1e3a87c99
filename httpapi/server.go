// Package httpapi serves storelink's HTTP API: the operator API, the
// partner-facing stock import, and the operational endpoints.
package httpapi

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"storelink"
	"storelink/gcmode"
)

// Deps is everything the API needs; cmd wires it.
type Deps struct {
	Admin   storelink.AdminService
	Auth    storelink.Authenticator
	Uploads storelink.UploadService
	Stock   storelink.StockService
	Orders  storelink.OrderService
	Events  storelink.EventService
	// Webhooks keeps endpoints and deliveries.
	Webhooks storelink.WebhookService
	// Tester sends test events: the deliverer, so that they go through the
	// client and address guard of every delivery.
	Tester storelink.EndpointTester
	// EndpointDeleted is called after an endpoint was deleted, so that
	// the deliverer drops what it claimed for it and has not sent.
	// Optional.
	EndpointDeleted func(endpointID string)
	// WebhookAllowPrivate lets endpoints be on loopback and private
	// addresses (development); otherwise such URLs are refused.
	WebhookAllowPrivate bool
	// Ping tells whether the database answers (for /readyz).
	Ping func(ctx context.Context) error
	// Ready, when set, is a further check of /readyz once the database
	// answers: its error makes /readyz 503, with the message of a
	// storelink.Error as the reason. Optional.
	Ready func(ctx context.Context) error
	// Fault turns a database's error for a full disk or an unreachable
	// database into the storelink.Error that says so (ENOSPACE,
	// EUNAVAILABLE); other errors it returns as they are. Optional.
	Fault func(error) error
	// ProbeWrite tries a small write where the data is kept: after a write
	// found the disk full, /readyz is not ready until a probe passes.
	// Optional.
	ProbeWrite func(ctx context.Context) error
	// UploadRate is how many uploads per second were finished lately; it
	// sets the Retry-After of an upload refused for too many waiting.
	// Optional.
	UploadRate func() float64
	// AdminToken guards the operator API.
	AdminToken string
	// TrustedProxies are the proxies whose Forwarded or X-Forwarded-For
	// header gives the client address, for AuthLimit and the request log;
	// none when zero.
	TrustedProxies TrustedProxies
	// AuthLimit limits failed authentications per client address and
	// credential; a new one with the default limit when nil. Serve shares
	// it with the dashboard's login and the portal's sign-in.
	AuthLimit   *AuthLimiter
	Capacity    storelink.CapacityPolicy
	MaxFileSize int64
	// MaxUploadsInFlight bounds the uploads and validations of one
	// partner's clients at once (DefaultMaxUploadsInFlight when 0).
	MaxUploadsInFlight int
	// MaxUploadMemory bounds the memory that the bodies of all uploads
	// being received take together (DefaultMaxUploadMemory when 0).
	MaxUploadMemory int64
	// UploadMemoryShare bounds the part of MaxUploadMemory that the bodies
	// of one partner's clients take together (DefaultUploadMemoryShare
	// when 0).
	UploadMemoryShare int64
	// ValidationsPerMinute is the rate of validations one client may make
	// (DefaultValidationsPerMinute when 0).
	ValidationsPerMinute int
	// Writes limits the writes each client makes through the partner API
	// (routes.go says which); serve shares it with the portal's forms. A
	// NewWriteLimit(DefaultWritesPerMinute) when nil.
	Writes *RateLimit
	// BodyTimeout is the time a request body has to arrive in full,
	// counted from the end of its headers (DefaultBodyTimeout when 0).
	BodyTimeout time.Duration
	// FirstByteTimeout is the time the first byte of a request body has
	// to arrive, counted from the handler's first read of it
	// (DefaultFirstByteTimeout when 0).
	FirstByteTimeout time.Duration
	// DatabaseTimeout is how long a request (API or dashboard) may wait
	// for the database, in all its phases on it (dbphase.go), not counting
	// the time its body takes to arrive or a test send takes; then it is
	// answered 503 with a Retry-After (DefaultDatabaseTimeout when 0).
	DatabaseTimeout time.Duration
	// Accepted is called after an upload is committed, to wake the processor.
	Accepted func()
	// Ended is called after an upload was cancelled, to have its event
	// written (worker.Announcer's Wake).
	Ended func()
	// GC lowers the GC percent while a large stock file is in memory;
	// optional (nil leaves the setting alone).
	GC *gcmode.Governor
	// Delivering is called after events or deliveries are committed (order
	// calls, redeliver, enabling an endpoint), to wake the deliverer. The
	// two are apart so that order traffic does not wake the upload
	// processor, whose every look at the queue is a write transaction.
	Delivering func()
	Logger     *slog.Logger
	// Registry receives the API's metrics and is served at /metrics.
	Registry *prometheus.Registry
	// PublicMetrics serves GET /metrics of this handler to anyone; without
	// it /metrics needs the admin token, as the operator API does, since
	// its figures tell how busy each route and queue is. MetricsHandler
	// serves them on a listener of their own.
	PublicMetrics bool
	// Downloads bounds the file downloads in memory at once; serve shares
	// it with the dashboard's and portal's downloads. A new one with the
	// defaults when nil.
	Downloads *Downloads
	// TestSends bounds the test sends in flight; serve shares it with the
	// dashboard's and portal's test buttons. A new one bounded by
	// DefaultTestSendTimeout when nil.
	TestSends *TestSends
	// Dashboard is the operator dashboard and the partners' portal,
	// served at /, under /dashboard/ and under /portal/ when set.
	Dashboard http.Handler
}

// Server is the HTTP API.
type Server struct {
	Deps
	logger     *slog.Logger
	adminHash  [32]byte
	mux        *http.ServeMux
	uploadReqs *prometheus.CounterVec
	requests   *prometheus.CounterVec
	orderCalls *prometheus.CounterVec
	bytesIn    prometheus.Counter
	health     health
	inFlight   *inFlight
	bodies     bodies
	validate   *RateLimit

	uploadMemory *uploadMemory // the budget of MaxUploadMemory
}

// NewServer returns the API as one handler.
func NewServer(d Deps) *Server {
	s := &Server{Deps: d, logger: d.Logger, mux: http.NewServeMux()}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.Accepted == nil {
		s.Accepted = func() {}
	}
	if s.Ended == nil {
		s.Ended = func() {}
	}
	if s.Delivering == nil {
		s.Delivering = func() {}
	}
	if s.EndpointDeleted == nil {
		s.EndpointDeleted = func(string) {}
	}
	if s.MaxUploadsInFlight <= 0 {
		s.MaxUploadsInFlight = DefaultMaxUploadsInFlight
	}
	if s.BodyTimeout <= 0 {
		s.BodyTimeout = DefaultBodyTimeout
	}
	if s.FirstByteTimeout <= 0 {
		s.FirstByteTimeout = DefaultFirstByteTimeout
	}
	if s.DatabaseTimeout <= 0 {
		s.DatabaseTimeout = DefaultDatabaseTimeout
	}
	s.inFlight = newInFlight(s.MaxUploadsInFlight)
	if s.MaxUploadMemory <= 0 {
		s.MaxUploadMemory = DefaultMaxUploadMemory
	}
	if s.UploadMemoryShare <= 0 {
		s.UploadMemoryShare = DefaultUploadMemoryShare(s.MaxUploadMemory, s.MaxFileSize)
	}
	s.uploadMemory = newUploadMemory(s.MaxUploadMemory, s.UploadMemoryShare)
	if s.ValidationsPerMinute <= 0 {
		s.ValidationsPerMinute = DefaultValidationsPerMinute
	}
	s.validate = newValidateLimit(s.ValidationsPerMinute)
	if s.Writes == nil {
		s.Writes = NewWriteLimit(DefaultWritesPerMinute)
	}
	if s.Downloads == nil {
		s.Downloads = NewDownloads(0, 0, 0)
	}
	if s.TestSends == nil {
		s.TestSends = NewTestSends(0)
	}
	s.bodies.live = make(map[*trackedBody]struct{})
	s.adminHash = sha256.Sum256([]byte(d.AdminToken))
	if s.AuthLimit == nil {
		s.AuthLimit = NewAuthLimiter(DefaultAuthFailuresPerMinute)
	}
	s.uploadReqs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "storelink_upload_requests_total", Help: "Stock upload requests, by HTTP status code.",
	}, []string{"code"})
	// The route is the path pattern of routes.go and the method one of
	// HTTP's, so that the series are as few as the routes whatever the
	// requests; per-client and per-endpoint labels are left out for the
	// same reason (the dashboard's lists say which).
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "storelink_http_requests_total",
		Help: `HTTP requests answered, by route (the path pattern, e.g. "/orders/{order_id}/fulfil"; "none" for a request answered before routing or matching no route), method and status code.`,
	}, []string{"route", "method", "code"})
	s.orderCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "storelink_order_calls_total",
		Help: "Order calls (create, cancel, fulfil, return, warehouse_create, warehouse_return) by outcome: succeeded, replayed (an idempotency key's answer again), conflict (409: the order's state does not allow it, or no store has the stock), refused (another 4xx), failed (5xx).",
	}, []string{"action", "outcome"})
	s.bytesIn = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "storelink_upload_bytes_received_total", Help: "Bytes of accepted stock files.",
	})
	if d.Registry != nil {
		d.Registry.MustRegister(s.uploadReqs, s.requests, s.orderCalls, s.bytesIn)
	}
	s.routes()
	return s
}

// ServeHTTP logs every request in one line and refuses paths with dot or
// empty segments before routing: the mux would otherwise redirect them to a
// cleaned path, and a stock file name must never be read as a path. The
// body is tracked (body.go): bounded in time, counted as read, and an
// error answered before it was read closes the connection at once. The
// request's context is its first phase on the database (dbphase.go).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	r, db := startDB(r, s.DatabaseTimeout)
	r, body := s.track(w, r, start)
	rw := &statusWriter{ResponseWriter: w, status: http.StatusOK, body: body}
	route, method := "none", knownMethod(r.Method)
	defer func() {
		s.untrack(body, rw.closing)
		if v := recover(); v != nil {
			s.logger.Error("panic", "method", r.Method, "path", r.URL.EscapedPath(), "panic", v)
			if !rw.wrote {
				writeProblem(rw, r, storelink.EINTERNAL, "Internal error.")
			}
		}
		status := rw.status
		if _, gone := ended(r); gone && !rw.wrote {
			status = StatusClientGone
		}
		db.stop()
		s.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
		s.logger.Info("request", "method", r.Method, "path", r.URL.EscapedPath(), "status", status,
			"bytes_in", bodyBytes(body), "bytes_out", rw.bytes, "duration_ms", time.Since(start).Milliseconds(),
			"remote", s.remote(r))
	}()
	if ambiguousFraming(r) {
		rw.closing = true
		rw.Header().Set("Connection", "close")
		writeProblem(rw, r, storelink.EINVALID, "The request has both Content-Length and Transfer-Encoding (or Transfer-Encoding on HTTP/1.0); its length is ambiguous, so it is refused and the connection closed.")
		return
	}
	if badPath(r.URL.EscapedPath()) {
		writeProblem(rw, r, storelink.EINVALID, "The path must not contain '.', '..' or empty segments.")
		return
	}
	if err := checkRequestText(r); err != nil {
		s.writeError(rw, r, err)
		return
	}
	h, pattern := s.mux.Handler(r)
	if pattern == "" {
		answerNoRoute(rw, r, h, "There is no such path in this API; see /openapi.yaml.")
		return
	}
	route = pattern
	if m, path, ok := strings.Cut(pattern, " "); ok {
		route, method = path, m
	}
	s.mux.ServeHTTP(rw, r)
}

// knownMethod is the request's method as a metric label: one of HTTP's,
// or "other", so that made-up methods make no series of their own.
func knownMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// headerRecorder catches what the mux's own not-found and not-allowed
// handlers write, so that they can be answered as problems.
type headerRecorder struct {
	header http.Header
	status int
}

func (h *headerRecorder) Header() http.Header         { return h.header }
func (h *headerRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (h *headerRecorder) WriteHeader(code int)        { h.status = code }

func badPath(p string) bool {
	for _, seg := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return strings.Contains(p, "//")
}

type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	wrote  bool
	// body, when set, is the request's body: an error answered while it
	// is not read to its end closes the connection (closing), rather than
	// have net/http read the rest first, which a slow sender can make
	// last as long as the body timeout.
	body    *trackedBody
	closing bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
		if code >= 400 && bodyUnread(w.body) {
			w.closing = true
			w.Header().Set("Connection", "close")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func asError(err error, target **storelink.Error) bool { return errors.As(err, target) }

// MaxMetricsScrapes is how many scrapes of GET /metrics one listener
// gathers at once: each runs the database gauges' queries on the pool the
// partners' requests share.
const MaxMetricsScrapes = 2

// metricsHandler serves the metrics, at most MaxMetricsScrapes at once;
// one more is answered 503 with Retry-After at once. Each call makes a
// handler with a bound of its own: one per listener.
func (s *Server) metricsHandler() http.Handler {
	h := promhttp.Handler()
	if s.Registry != nil {
		h = promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{})
	}
	scrapes := make(chan struct{}, MaxMetricsScrapes)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case scrapes <- struct{}{}:
			defer func() { <-scrapes }()
			h.ServeHTTP(w, r)
		default:
			e := storelink.Errorf(storelink.EUNAVAILABLE, "%d scrapes of GET /metrics are being gathered on this listener, "+
				"the most it gathers at once; scrape again after the Retry-After's seconds.", MaxMetricsScrapes)
			e.RetryAfter = 1
			s.writeError(w, r, e)
		}
	})
}

// metricsRoute is GET /metrics of the API: behind the admin token unless
// PublicMetrics.
func (s *Server) metricsRoute() http.Handler {
	h := s.metricsHandler()
	if s.PublicMetrics {
		return h
	}
	return s.adminAs(metricsUnauthorized, h.ServeHTTP)
}

const metricsUnauthorized = "GET /metrics needs Authorization: Bearer ADMIN_TOKEN here; a scraper without the token " +
	"reads the listener of serve's --metrics-addr, or serve is run with --public-metrics."

// MetricsHandler serves GET /metrics, and nothing else, to anyone: for a
// listener of its own (serve's --metrics-addr) that only the scraper can
// reach. Another path is 404, another method 405; each request is logged
// and counted as the API's are.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.metricsHandler())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		route, method := "none", knownMethod(r.Method)
		defer func() {
			s.requests.WithLabelValues(route, method, strconv.Itoa(rw.status)).Inc()
			s.logger.Info("request", "listener", "metrics", "method", r.Method, "path", r.URL.EscapedPath(), "status", rw.status,
				"bytes_out", rw.bytes, "duration_ms", time.Since(start).Milliseconds(), "remote", r.RemoteAddr)
		}()
		h, pattern := mux.Handler(r)
		if pattern == "" {
			answerNoRoute(rw, r, h, "This listener serves GET /metrics only.")
			return
		}
		route = "/metrics"
		h.ServeHTTP(rw, r)
	})
}

func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	writeBody(w, http.StatusOK, "application/yaml", openAPISpec)
}

// remote is the client's address for the request log: the connection's,
// port and all, unless a trusted proxy forwarded the request for another.
func (s *Server) remote(r *http.Request) string {
	if a := s.TrustedProxies.ClientAddr(r); a.IsValid() && a != peerAddr(r.RemoteAddr) {
		return a.String()
	}
	return r.RemoteAddr
}

// answerNoRoute answers a request no route of a mux takes, whose handler
// the mux gave as h: the mux would answer in plain text, so its status
// (404, or 405 with Allow) is kept but the answer is a problem; notFound
// is the 404's detail.
func answerNoRoute(rw http.ResponseWriter, r *http.Request, h http.Handler, notFound string) {
	rec := &headerRecorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	if allow := rec.header.Get("Allow"); allow != "" {
		rw.Header().Set("Allow", allow)
		writeProblem(rw, r, "method_not_allowed", "This path does not take "+r.Method+"; it takes "+allow+".")
		return
	}
	writeProblem(rw, r, storelink.ENOTFOUND, notFound)
}
