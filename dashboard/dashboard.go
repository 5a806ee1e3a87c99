// Package dashboard is the operator dashboard under /dashboard/ and the
// partners' portal under /portal/: server-rendered HTML pages over the
// same domain services as the HTTP API. Templates and styles are embedded,
// so the binary serves them with no build step and no internet access; the
// one script, the copy button of a secret shown once, is embedded too.
//
// Every page and action needs a session, got by logging in: with the admin
// token on the dashboard, with a client id and one of its API keys on the
// portal. A session lives in an HttpOnly, SameSite=Strict cookie that holds
// an HMAC-signed session id, never a credential, and in the database, so
// that logging out ends it everywhere; actions are POSTs that carry a
// per-session CSRF token and pass net/http's cross-origin protection. A
// portal session sees its own client's data and nothing else.
package dashboard

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"storelink"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Deps is what the dashboard needs; cmd wires it from the same database the
// API uses.
type Deps struct {
	Admin    storelink.AdminService
	Uploads  storelink.UploadService
	Stock    storelink.StockService
	Orders   storelink.OrderService
	Webhooks storelink.WebhookService
	// Auth checks the client id and API key a partner signs in to the
	// portal with; without it the portal refuses every sign-in.
	Auth storelink.Authenticator
	// Tester sends an endpoint's test event (the deliverer); without it a
	// test send says that this process sends no webhooks.
	Tester storelink.EndpointTester
	// OutsideDB runs wait between two of the request's phases on the
	// database (httpapi.OutsideDB), with the request's context without a
	// database deadline, and returns the request to go on with: reading
	// a form, bounded by the API's body timeout, and a test send, bounded
	// by the webhook timeout, are no database time. Nil runs wait with the
	// request's context and returns the request as it is.
	OutsideDB func(r *http.Request, wait func(ctx context.Context)) *http.Request
	// Download takes a place among the process's file downloads for a
	// partner, "" for the operator (httpapi.Downloads's Take), shared with
	// the API's, so that one bound holds for the files in memory and one
	// partner cannot take the others' places; EBUSY at the partner's share,
	// EUNAVAILABLE when there is none. Nil bounds nothing.
	Download func(w http.ResponseWriter, partnerID string) (release func(), err error)
	// TestSend takes a place among the process's test sends for a partner,
	// "" for the operator (httpapi.TestSends's Take), shared with the
	// API's, and bounds the send's context in time; the errors are
	// Download's. Nil bounds nothing.
	TestSend func(ctx context.Context, partnerID string) (context.Context, func(), error)
	// PartnerWrite takes one of the client's writes before a portal form
	// writes (httpapi.RateLimit's Take of the API's write limit), so that a
	// partner's writes through the API and the portal count together;
	// ERATELIMIT with RetryAfter when none is left. Nil limits nothing.
	PartnerWrite func(clientID string) error
	// EndpointDeleted is called after an endpoint was deleted, so that the
	// deliverer drops what it claimed for it and has not sent. Optional.
	EndpointDeleted func(endpointID string)
	// WebhookAllowPrivate lets the portal register endpoints on loopback
	// and private addresses, as the API's setting of the same name does.
	WebhookAllowPrivate bool
	// ReceiveUpload receives the file of the portal's upload form as the
	// API receives a PUT /stock/{client_id}/{file} (httpapi's
	// Server.ReceiveUpload): the same checks, places and errors. name is
	// the file's name as chosen, file its bytes, read from r's body. It
	// returns the request to go on with. Without it the portal takes no
	// upload.
	ReceiveUpload func(r *http.Request, c *storelink.Client, name string, file io.Reader) (*storelink.Upload, *http.Request, error)
	// AdminToken is what an operator logs in with; it also keys the session
	// signatures, so changing it ends every session.
	AdminToken string
	// Sessions keeps the sessions server-side (required): a session is
	// valid only while its row is there, so a logout holds in every process
	// sharing the database and across restarts.
	Sessions storelink.SessionStore
	// LoginLimit, when set, limits failed logins per client address and
	// credential. Serve passes the API's limiter, so that guesses at the
	// admin token or an API key through the API, the login form and the
	// portal's sign-in count together.
	LoginLimit LoginLimit
	// ClientAddr is the address of the client that sent a request, for
	// LoginLimit and the login logs; serve passes the API's
	// httpapi.TrustedProxies.ClientAddr, so that behind a reverse proxy
	// each client counts on its own. The connection's address when nil.
	ClientAddr func(*http.Request) netip.Addr
	// Capacity is the upload capacity policy, to show each client's bucket.
	Capacity storelink.CapacityPolicy
	// Wake is called after a redelivery or when an endpoint is enabled, so
	// that the deliverer looks at once rather than at its next poll.
	Wake   func()
	Logger *slog.Logger
	// Fault turns a database's error for a full disk or an unreachable
	// database into ENOSPACE or EUNAVAILABLE (the store's Fault function),
	// so that the page says so instead of "Internal error.". Nil: no error
	// is taken for a fault.
	Fault func(error) error
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// SessionTTL is how long a login lasts; 12 hours when zero.
	SessionTTL time.Duration
}

// LoginLimit limits failed authentications per client address and
// credential (a client id, or "" for the admin token); httpapi.AuthLimiter
// is one.
type LoginLimit interface {
	// Blocked tells whether an attempt from addr at the credential is
	// refused now, and for how many more seconds.
	Blocked(addr netip.Addr, clientID string) (retryAfter int, blocked bool)
	// Failed counts a failed attempt from addr at the credential; when it
	// could not be counted (counted false) the attempt is answered as
	// refused for retryAfter seconds.
	Failed(addr netip.Addr, clientID string) (retryAfter int, counted bool)
	// Succeeded records an attempt from addr that Blocked let through and
	// that brought the right credentials, so that the address is not taken
	// for a newcomer when failures from elsewhere fill the limit's table.
	Succeeded(addr netip.Addr, clientID string)
}

// Handler serves the dashboard under /dashboard/, the portal under
// /portal/, and redirects / to the dashboard.
type Handler struct {
	Deps
	logger  *slog.Logger
	pages   map[string]*template.Template
	mux     *http.ServeMux
	handler http.Handler
	key     []byte // session and CSRF signing key
	static  fs.FS
	// cssVersion and jsVersion bust caches of the embedded stylesheet and
	// script when they change.
	cssVersion, jsVersion string
}

// New returns the dashboard as one handler. It panics if the embedded
// templates do not parse, which a test catches before any release, or when
// Deps has no Sessions.
func New(d Deps) *Handler {
	if d.Sessions == nil {
		panic("dashboard: Deps.Sessions is required")
	}
	h := &Handler{Deps: d, logger: d.Logger, mux: http.NewServeMux()}
	if h.logger == nil {
		h.logger = slog.New(slog.DiscardHandler)
	}
	if h.Wake == nil {
		h.Wake = func() {}
	}
	if h.Now == nil {
		h.Now = time.Now
	}
	if h.OutsideDB == nil {
		h.OutsideDB = func(r *http.Request, wait func(context.Context)) *http.Request {
			wait(r.Context())
			return r
		}
	}
	if h.EndpointDeleted == nil {
		h.EndpointDeleted = func(string) {}
	}
	if h.ClientAddr == nil {
		h.ClientAddr = func(r *http.Request) netip.Addr {
			ap, _ := netip.ParseAddrPort(r.RemoteAddr)
			return ap.Addr().Unmap()
		}
	}
	if h.Download == nil {
		h.Download = func(http.ResponseWriter, string) (func(), error) { return func() {}, nil }
	}
	if h.TestSend == nil {
		h.TestSend = func(ctx context.Context, _ string) (context.Context, func(), error) { return ctx, func() {}, nil }
	}
	if h.PartnerWrite == nil {
		h.PartnerWrite = func(string) error { return nil }
	}
	if h.SessionTTL <= 0 {
		h.SessionTTL = 12 * time.Hour
	}
	h.key = sessionKey(d.AdminToken)
	h.static, _ = fs.Sub(staticFS, "static")
	css, _ := fs.ReadFile(h.static, "style.css")
	h.cssVersion = shortHash(css)
	js, _ := fs.ReadFile(h.static, "portal.js")
	h.jsVersion = shortHash(js)
	h.pages = parsePages()
	h.routes()
	// The cross-origin check refuses a POST that a browser says comes from
	// another site before the CSRF token is even looked at.
	h.handler = http.NewCrossOriginProtection().Handler(h.mux)
	return h
}

// routes lists every route of the dashboard.
func (h *Handler) routes() {
	m := h.mux
	m.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/dashboard/", http.StatusSeeOther)
	})
	m.HandleFunc("GET /dashboard/static/{file}", h.handleStatic)
	m.HandleFunc("GET /dashboard/login", h.handleLoginForm)
	m.HandleFunc("POST /dashboard/login", h.handleLogin)
	m.HandleFunc("POST /dashboard/logout", h.action(h.handleLogout))

	m.HandleFunc("GET /dashboard/{$}", h.page(h.handleOverview))
	m.HandleFunc("GET /dashboard/clients/{client_id}", h.page(h.handleClient))
	m.HandleFunc("GET /dashboard/uploads", h.page(h.handleUploads))
	m.HandleFunc("GET /dashboard/clients/{client_id}/uploads/{upload_id}", h.page(h.handleUpload))
	m.HandleFunc("GET /dashboard/clients/{client_id}/uploads/{upload_id}/file", h.page(h.handleUploadFile))
	m.HandleFunc("GET /dashboard/clients/{client_id}/uploads/{upload_id}/errors.csv", h.page(h.handleErrorFile))
	m.HandleFunc("GET /dashboard/stock", h.page(h.handleStock))
	m.HandleFunc("GET /dashboard/orders", h.page(h.handleOrders))
	m.HandleFunc("GET /dashboard/orders/{order_id}", h.page(h.handleOrder))
	m.HandleFunc("GET /dashboard/deliveries", h.page(h.handleDeliveries))
	m.HandleFunc("GET /dashboard/endpoints/{endpoint_id}", h.page(h.handleEndpoint))

	m.HandleFunc("POST /dashboard/deliveries/{delivery_id}/redeliver", h.action(h.handleRedeliver))
	m.HandleFunc("POST /dashboard/endpoints/{endpoint_id}/enabled", h.action(h.handleEndpointEnabled))
	m.HandleFunc("POST /dashboard/endpoints/{endpoint_id}/recover", h.action(h.handleRecover))
	m.HandleFunc("POST /dashboard/endpoints/{endpoint_id}/test", h.action(h.handleTestEndpoint))
	m.HandleFunc("POST /dashboard/endpoints/{endpoint_id}/delete", h.action(h.handleDeleteEndpoint))

	// The console: the operator's forms that set partners, clients, stores,
	// endpoints and API keys up (console.go, consolepartners.go).
	m.HandleFunc("GET /dashboard/partners", h.page(h.handlePartners))
	m.HandleFunc("POST /dashboard/partners", h.action(h.handleCreatePartner))
	m.HandleFunc("POST /dashboard/clients", h.action(h.handleCreateClient))
	m.HandleFunc("GET /dashboard/endpoints/{endpoint_id}/edit", h.page(h.handleEditEndpointForm))
	m.HandleFunc("POST /dashboard/endpoints/{endpoint_id}/edit", h.action(h.handleEditEndpoint))
	m.HandleFunc("POST /dashboard/endpoints/{endpoint_id}/rotate-secret", h.action(h.handleRotateSecret))
	m.HandleFunc("POST /dashboard/clients/{client_id}/endpoints", h.action(h.handleRegisterEndpoint))
	m.HandleFunc("POST /dashboard/clients/{client_id}/api-keys", h.action(h.handleCreateKey))
	m.HandleFunc("POST /dashboard/clients/{client_id}/api-keys/{key_id}/revoke", h.action(h.handleRevokeKey))
	m.HandleFunc("POST /dashboard/clients/{client_id}/stores", h.action(h.handlePutStore))
	m.HandleFunc("GET /dashboard/clients/{client_id}/stores/{store_id}/delete", h.page(h.handleDeleteStoreForm))
	m.HandleFunc("POST /dashboard/clients/{client_id}/stores/{store_id}/delete", h.action(h.handleDeleteStore))

	h.portalRoutes()

	notFound := func(w http.ResponseWriter, r *http.Request) {
		h.renderError(w, r, storelink.Errorf(storelink.ENOTFOUND, "There is no such page."))
	}
	m.HandleFunc("/dashboard/", notFound)
	m.HandleFunc("/portal/", notFound)
}

// ServeHTTP sets the headers every dashboard answer carries and routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	// Nothing is loaded from elsewhere, no inline script or style runs (the
	// one script is a file of ours), and no other site may frame a page or
	// receive a form. Nothing is kept in a cache: a page may show a secret
	// once.
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")
	h.handler.ServeHTTP(w, r)
}

func (h *Handler) handleStatic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	b, err := fs.ReadFile(h.static, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	switch {
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	}
	w.Header().Set("Cache-Control", "public, max-age=86400")
	_, _ = w.Write(b)
}

// view is what every page template gets: the layout's fields and the
// page's own data.
type view struct {
	Title string
	// Nav names the menu entry to mark as current.
	Nav  string
	CSRF string
	// Path is the page's own path and query, where actions come back to.
	Path  string
	Flash string
	// Refresh, when above zero, reloads the page after that many seconds
	// (an upload that is still being processed).
	Refresh    int
	CSSVersion string
	JSVersion  string
	LoggedIn   bool
	// Portal tells that the page is the partners' portal's; Who then names
	// the client signed in.
	Portal bool
	Who    string
	Data   any
}

// render writes a page. Templates are executed into a buffer first so that a
// template error becomes a clean 500, not half a page.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	t, ok := h.pages[name]
	if !ok {
		h.renderError(w, r, errors.New("no template "+name))
		return
	}
	v.CSSVersion, v.JSVersion = h.cssVersion, h.jsVersion
	if v.Path == "" {
		v.Path = r.URL.RequestURI()
	}
	if v.Flash == "" {
		v.Flash = flash(r.URL.Query())
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
		h.logger.Error("dashboard template", "template", name, "error", err)
		http.Error(w, "Internal error.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// flashes are the fixed messages an action may ask the next page to show;
// only their keys travel in the URL, so no text can be injected. A %d
// takes the number in n=.
var flashes = map[string]string{
	"redelivered":     "The delivery is pending again and will be sent at once.",
	"enabled":         "The endpoint is enabled; its waiting deliveries go out now.",
	"disabled":        "The endpoint is disabled; its deliveries wait until it is enabled.",
	"recovered":       "Failed deliveries made pending again: %d. They go out at once, in event order per order.",
	"deleted":         "The endpoint is deleted: nothing more is sent to it, its pending deliveries are cancelled, and its history stays here.",
	"removed":         "The endpoint is deleted: nothing more is sent to it and its pending deliveries are cancelled; its deliveries stay on the deliveries page.",
	"updated":         "The endpoint is changed.",
	"revoked":         "The API key is revoked: it opens nothing any more, and sessions signed in with it are ended.",
	"partner-created": "The partner is created: create its clients, one per country, below.",
	"store-added":     "The store is added: feed rows for it are applied from the next upload.",
	"store-renamed":   "The store is renamed.",
	"store-removed":   "The store is removed, and its stock with it.",
}

// flash is the message a page's done= (and n=) ask for, "" for none.
func flash(q url.Values) string {
	text := flashes[q.Get("done")]
	if strings.Contains(text, "%d") {
		n, err := strconv.Atoi(q.Get("n"))
		if err != nil || n < 0 {
			return ""
		}
		return fmt.Sprintf(text, n)
	}
	return text
}

// statusOf maps a domain error code to the page's HTTP status.
var statusOf = map[string]int{
	storelink.EINVALID:       http.StatusBadRequest,
	storelink.EUNAUTHORIZED:  http.StatusUnauthorized,
	storelink.EFORBIDDEN:     http.StatusForbidden,
	storelink.ENOTFOUND:      http.StatusNotFound,
	storelink.EGONE:          http.StatusGone,
	storelink.ECONFLICT:      http.StatusConflict,
	storelink.EUNPROCESSABLE: http.StatusUnprocessableEntity,
	storelink.EUNAVAILABLE:   http.StatusServiceUnavailable,
	storelink.ENOSPACE:       http.StatusInsufficientStorage,
	storelink.EBUSY:          http.StatusTooManyRequests,
	// An upload from the portal's form is refused as the API refuses it.
	storelink.ETOOLARGE:    http.StatusRequestEntityTooLarge,
	storelink.EUNSUPPORTED: http.StatusUnsupportedMediaType,
	storelink.ERATELIMIT:   http.StatusTooManyRequests,
	storelink.EBACKLOG:     http.StatusTooManyRequests,
	storelink.EINFLIGHT:    http.StatusTooManyRequests,
	storelink.EBODYTIMEOUT: http.StatusRequestTimeout,
}

// fault returns err as the fault it is (a full disk, an unreachable
// database, a database that did not answer within the request's time), or
// nil when it is none. The error of a request whose client went away is
// context.Canceled: no fault, and nothing to answer.
func (h *Handler) fault(r *http.Request, err error) error {
	if storelink.ErrorCode(err) != storelink.EINTERNAL {
		return nil
	}
	if timeout, gone := storelink.Ended(r.Context()); timeout != nil {
		return timeout
	} else if gone {
		return context.Canceled
	}
	if h.Fault == nil {
		return nil
	}
	if f := h.Fault(err); storelink.ErrorCode(f) != storelink.EINTERNAL {
		return f
	}
	return nil
}

// renderError shows an error page, or nothing when the client went away.
// Only internal errors and faults are logged, and their text is never
// shown: a fault is shown as what it is, with its status (507, or 503 and a
// Retry-After).
func (h *Handler) renderError(w http.ResponseWriter, r *http.Request, err error) {
	f := h.fault(r, err)
	if errors.Is(f, context.Canceled) {
		h.logger.Info("dashboard: client went away", "method", r.Method, "path", r.URL.Path, "error", err)
		return
	}
	if f != nil {
		h.logger.Warn("dashboard: database fault", "method", r.Method, "path", r.URL.Path, "code", storelink.ErrorCode(f), "error", err)
		err = f
	}
	var e *storelink.Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	code := storelink.ErrorCode(err)
	status, ok := statusOf[code]
	if !ok {
		status = http.StatusInternalServerError
		h.logger.Error("dashboard internal error", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	rl := realmOf(r)
	_, loggedIn := h.session(r, rl)
	v := view{Title: http.StatusText(status), LoggedIn: loggedIn, Portal: rl.partner, Data: storelink.ErrorMessage(err)}
	if loggedIn {
		v.CSRF = h.csrfFor(r, rl)
	}
	h.render(w, r, status, "error", v)
}

// localPath returns p when it is a dashboard path on this site, else the
// overview: the "back" field of a form and the "next" of the login page must
// not send the browser elsewhere.
func localPath(p string) string { return realmPath(operatorRealm, p) }

// realmPath returns p when it is a path of the realm on this site, else
// the realm's first page.
func realmPath(rl realm, p string) string {
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(u.Path, rl.path) ||
		strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\\r\n") || slices.ContainsFunc(strings.Split(u.Path, "/"), dotSegment) {
		return rl.path
	}
	return u.RequestURI()
}

func dotSegment(s string) bool { return s == "." || s == ".." }

// withParam returns the local path p with one query parameter set.
func withParam(p, key, value string) string { return withParams(operatorRealm, p, key, value) }

// withParams returns the realm's path p with query parameters set, given as
// pairs of key and value.
func withParams(rl realm, p string, kv ...string) string {
	u, _ := url.Parse(realmPath(rl, p))
	q := u.Query()
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	u.RawQuery = q.Encode()
	return u.RequestURI()
}

// queryLimit reads ?limit=, bounded; def when absent or not a number.
func queryLimit(r *http.Request, def, most int) int {
	n, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || n <= 0 {
		return def
	}
	return min(n, most)
}
