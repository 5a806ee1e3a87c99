// Package httpapi serves storelink's HTTP API: the operator API, the
// partner-facing stock import, and the operational endpoints.
package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
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
	// AuthLimit limits failed authentications per remote address; a new
	// one with the default limit when nil. Serve shares it with the
	// dashboard's login.
	AuthLimit   *AuthLimiter
	Capacity    storelink.CapacityPolicy
	MaxFileSize int64
	// MaxUploadsInFlight bounds the uploads and validations of one client
	// at once (DefaultMaxUploadsInFlight when 0).
	MaxUploadsInFlight int
	// MaxUploadMemory bounds the memory that the bodies of all uploads and
	// validations being received take together (DefaultMaxUploadMemory
	// when 0).
	MaxUploadMemory int64
	// BodyTimeout is the time a request body has to arrive in full,
	// counted from the end of its headers (DefaultBodyTimeout when 0).
	BodyTimeout time.Duration
	// DatabaseTimeout is how long a request (API or dashboard) may wait
	// for the database, not counting the time its body takes to arrive;
	// then it is answered 503 with a Retry-After
	// (DefaultDatabaseTimeout when 0).
	DatabaseTimeout time.Duration
	// Accepted is called after an upload is committed, to wake the processor.
	Accepted func()
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
	// Dashboard is the operator dashboard, served at / and under
	// /dashboard/ when set.
	Dashboard http.Handler
}

// Server is the HTTP API.
type Server struct {
	Deps
	logger     *slog.Logger
	adminHash  [32]byte
	authLimit  *AuthLimiter
	mux        *http.ServeMux
	uploadReqs *prometheus.CounterVec
	bytesIn    prometheus.Counter
	health     health
	inFlight   *inFlight
	bodies     bodies

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
	if s.Delivering == nil {
		s.Delivering = func() {}
	}
	if s.MaxUploadsInFlight <= 0 {
		s.MaxUploadsInFlight = DefaultMaxUploadsInFlight
	}
	if s.BodyTimeout <= 0 {
		s.BodyTimeout = DefaultBodyTimeout
	}
	if s.DatabaseTimeout <= 0 {
		s.DatabaseTimeout = DefaultDatabaseTimeout
	}
	s.inFlight = newInFlight(s.MaxUploadsInFlight)
	if s.MaxUploadMemory <= 0 {
		s.MaxUploadMemory = DefaultMaxUploadMemory
	}
	s.uploadMemory = &uploadMemory{max: s.MaxUploadMemory}
	s.bodies.live = make(map[*trackedBody]time.Time)
	s.adminHash = sha256.Sum256([]byte(d.AdminToken))
	if s.authLimit = d.AuthLimit; s.authLimit == nil {
		s.authLimit = NewAuthLimiter(DefaultAuthFailuresPerMinute)
	}
	s.uploadReqs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "storelink_upload_requests_total", Help: "Stock upload requests, by HTTP status code.",
	}, []string{"code"})
	s.bytesIn = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "storelink_upload_bytes_received_total", Help: "Bytes of accepted stock files.",
	})
	if d.Registry != nil {
		d.Registry.MustRegister(s.uploadReqs, s.bytesIn)
	}
	s.routes()
	return s
}

// ServeHTTP logs every request in one line and refuses paths with dot or
// empty segments before routing: the mux would otherwise redirect them to a
// cleaned path, and a stock file name must never be read as a path. The
// body is tracked (body.go): bounded in time, counted as read, and an
// error answered before it was read closes the connection at once.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	r, clock := withDBClock(r, s.DatabaseTimeout)
	r, body := s.track(w, r, start, clock)
	rw := &statusWriter{ResponseWriter: w, status: http.StatusOK, body: body}
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
		clock.stop()
		s.logger.Info("request", "method", r.Method, "path", r.URL.EscapedPath(), "status", status,
			"bytes_in", bodyBytes(body), "bytes_out", rw.bytes, "duration_ms", time.Since(start).Milliseconds(),
			"remote", r.RemoteAddr)
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
	if h, pattern := s.mux.Handler(r); pattern == "" {
		// No route: the mux would answer in plain text; keep its status
		// (404 or 405 with Allow) but answer with a problem.
		rec := &headerRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		if allow := rec.header.Get("Allow"); allow != "" {
			rw.Header().Set("Allow", allow)
			writeProblem(rw, r, "method_not_allowed", "This path does not take "+r.Method+"; it takes "+allow+".")
			return
		}
		writeProblem(rw, r, storelink.ENOTFOUND, "There is no such path in this API; see /openapi.yaml.")
		return
	}
	s.mux.ServeHTTP(rw, r)
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

// admin guards an operator handler with the admin token. Both sides are
// hashed first so the comparison takes the same time whatever the length.
// A wrong token counts against the address's failed attempts; no token at
// all guesses nothing and does not.
func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.refuseBlocked(w, r) {
			return
		}
		token, ok := bearerToken(r)
		got := sha256.Sum256([]byte(token))
		if !ok || s.AdminToken == "" || subtle.ConstantTimeCompare(got[:], s.adminHash[:]) != 1 {
			if token != "" {
				s.authLimit.Failed(r.RemoteAddr)
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="storelink-admin"`)
			writeProblem(w, r, storelink.EUNAUTHORIZED, "Operator calls need Authorization: Bearer ADMIN_TOKEN.")
			return
		}
		h(w, r)
	}
}

// bearerToken returns the credentials of an Authorization header of the
// Bearer scheme, whose name is matched in any case (RFC 7235).
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(token), true
}

// partner authenticates the x-api-key for the path's client. A key that is
// not valid counts against the address's failed attempts; a valid key of
// another client of the same partner (403) guesses nothing and does not.
func (s *Server) partner(h func(http.ResponseWriter, *http.Request, *storelink.Client)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.refuseBlocked(w, r) {
			return
		}
		key := r.Header.Get("x-api-key")
		c, err := s.Auth.Authenticate(r.Context(), r.PathValue("client_id"), key)
		if storelink.ErrorCode(err) == storelink.EUNAUTHORIZED {
			if key != "" {
				s.authLimit.Failed(r.RemoteAddr)
			}
			w.Header().Set("WWW-Authenticate", `ApiKey header="x-api-key"`)
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		h(w, r, c)
	}
}

// maxJSONBody bounds operator request bodies: an order of the most items
// allowed is well under it.
const maxJSONBody = 1 << 20

// decode reads a JSON body into v, refusing unknown fields so that a typo is
// an error rather than a silently ignored setting.
func decode(r *http.Request, v any) error {
	return decodeBody(r, v, false)
}

// decodeOptional is decode for calls whose whole body is optional.
func decodeOptional(r *http.Request, v any) error {
	return decodeBody(r, v, true)
}

// decodeBody reads the whole body first so that checkJSON sees the bytes as
// sent, before encoding/json replaces or drops anything.
func decodeBody(r *http.Request, v any, optional bool) error {
	raw, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxJSONBody))
	if err == nil {
		err = checkJSON(raw)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err == nil {
		err = dec.Decode(v)
	}
	var tooBig *http.MaxBytesError
	var domain *storelink.Error
	switch {
	case err == nil:
		if dec.More() {
			return storelink.Errorf(storelink.EINVALID, "The body holds more than one JSON value.")
		}
		return nil
	case errors.Is(err, io.EOF) && optional:
		return nil
	case errors.Is(err, io.EOF):
		return storelink.Errorf(storelink.EINVALID, "A JSON body is required.")
	case errors.As(err, &tooBig):
		return storelink.Errorf(storelink.ETOOLARGE, "The body is larger than %d bytes.", maxJSONBody)
	case errors.As(err, &domain):
		return err
	}
	return storelink.Errorf(storelink.EINVALID, "The body is not valid JSON for this call: %v.", err)
}

func asError(err error, target **storelink.Error) bool { return errors.As(err, target) }

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.Ping(ctx); err != nil {
		s.logger.Warn("not ready", "error", err)
		writeProblem(w, r, storelink.EUNAVAILABLE, "The database does not answer.")
		return
	}
	if err := s.writable(ctx); err != nil {
		s.logger.Warn("not ready", "error", err)
		writeProblem(w, r, storelink.EUNAVAILABLE, storelink.ErrorMessage(err))
		return
	}
	if s.Ready != nil {
		if err := s.Ready(ctx); err != nil {
			s.logger.Warn("not ready", "error", err)
			msg := "The database does not answer."
			if storelink.ErrorCode(err) != storelink.EINTERNAL {
				msg = storelink.ErrorMessage(err)
			}
			writeProblem(w, r, storelink.EUNAVAILABLE, msg)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) metricsHandler() http.Handler {
	if s.Registry == nil {
		return promhttp.Handler()
	}
	return promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{})
}

func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(openAPISpec)
}
