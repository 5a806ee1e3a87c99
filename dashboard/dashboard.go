// Package dashboard is the operator dashboard: server-rendered HTML pages
// over the same domain services as the HTTP API. Templates, styles and the
// one small script are embedded, so the binary serves it with no build step
// and no internet access.
//
// Every page and action needs a session, got by logging in with the admin
// token. The session lives in an HttpOnly, SameSite=Strict cookie that holds
// an HMAC-signed session id, never the token, and in the database, so that
// logging out ends it everywhere; actions are POSTs that carry a
// per-session CSRF token and pass net/http's cross-origin protection.
package dashboard

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
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
	// AdminToken is what an operator logs in with; it also keys the session
	// signatures, so changing it ends every session.
	AdminToken string
	// Sessions keeps the sessions server-side (required): a session is
	// valid only while its row is there, so a logout holds in every process
	// sharing the database and across restarts.
	Sessions storelink.SessionStore
	// LoginLimit, when set, limits failed logins per remote address. Serve
	// passes the API's limiter, so that guesses at the admin token through
	// the API and through the login form count together.
	LoginLimit LoginLimit
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

// LoginLimit limits failed authentications per remote address;
// httpapi.AuthLimiter is one.
type LoginLimit interface {
	// Blocked tells whether attempts from the address are refused now, and
	// for how many more seconds.
	Blocked(remoteAddr string) (retryAfter int, blocked bool)
	// Failed counts a failed attempt from the address.
	Failed(remoteAddr string)
}

// Handler serves the dashboard under /dashboard/ and redirects / to it.
type Handler struct {
	Deps
	logger  *slog.Logger
	pages   map[string]*template.Template
	mux     *http.ServeMux
	handler http.Handler
	key     []byte // session and CSRF signing key
	static  fs.FS
	// cssVersion busts caches of the embedded stylesheet when it changes.
	cssVersion string
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
	if h.SessionTTL <= 0 {
		h.SessionTTL = 12 * time.Hour
	}
	h.key = sessionKey(d.AdminToken)
	h.static, _ = fs.Sub(staticFS, "static")
	css, _ := fs.ReadFile(h.static, "style.css")
	h.cssVersion = shortHash(css)
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
	m.HandleFunc("GET /dashboard/stock", h.page(h.handleStock))
	m.HandleFunc("GET /dashboard/orders", h.page(h.handleOrders))
	m.HandleFunc("GET /dashboard/orders/{order_id}", h.page(h.handleOrder))
	m.HandleFunc("GET /dashboard/deliveries", h.page(h.handleDeliveries))

	m.HandleFunc("POST /dashboard/deliveries/{delivery_id}/redeliver", h.action(h.handleRedeliver))
	m.HandleFunc("POST /dashboard/endpoints/{endpoint_id}/enabled", h.action(h.handleEndpointEnabled))

	m.HandleFunc("/dashboard/", func(w http.ResponseWriter, r *http.Request) {
		h.renderError(w, r, storelink.Errorf(storelink.ENOTFOUND, "There is no such page."))
	})
}

// ServeHTTP sets the headers every dashboard answer carries and routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	// Nothing is loaded from elsewhere, no inline script or style runs, and
	// no other site may frame a page or receive a form.
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' data:; "+
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
	if strings.HasSuffix(name, ".css") {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
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
	LoggedIn   bool
	Data       any
}

// render writes a page. Templates are executed into a buffer first so that a
// template error becomes a clean 500, not half a page.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	t, ok := h.pages[name]
	if !ok {
		h.renderError(w, r, errors.New("no template "+name))
		return
	}
	v.CSSVersion = h.cssVersion
	if v.Path == "" {
		v.Path = r.URL.RequestURI()
	}
	if v.Flash == "" {
		v.Flash = flashes[r.URL.Query().Get("done")]
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
// only their keys travel in the URL, so no text can be injected.
var flashes = map[string]string{
	"redelivered": "The delivery is pending again and will be sent at once.",
	"enabled":     "The endpoint is enabled; its waiting deliveries go out now.",
	"disabled":    "The endpoint is disabled; its deliveries wait until it is enabled.",
}

// statusOf maps a domain error code to the page's HTTP status.
var statusOf = map[string]int{
	storelink.EINVALID:       http.StatusBadRequest,
	storelink.EFORBIDDEN:     http.StatusForbidden,
	storelink.ENOTFOUND:      http.StatusNotFound,
	storelink.ECONFLICT:      http.StatusConflict,
	storelink.EUNPROCESSABLE: http.StatusUnprocessableEntity,
	storelink.EUNAVAILABLE:   http.StatusServiceUnavailable,
	storelink.ENOSPACE:       http.StatusInsufficientStorage,
}

// fault returns err as the fault it is (a full disk, an unreachable
// database, a database that did not answer within the request's time), or
// nil when it is none. The error of a request whose client went away is
// context.Canceled: no fault, and nothing to answer.
func (h *Handler) fault(r *http.Request, err error) error {
	if storelink.ErrorCode(err) != storelink.EINTERNAL {
		return nil
	}
	if timeout, gone := storelink.RequestEnded(r.Context()); timeout != nil {
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
	_, loggedIn := h.session(r)
	v := view{Title: http.StatusText(status), LoggedIn: loggedIn, Data: storelink.ErrorMessage(err)}
	if loggedIn {
		v.CSRF = h.csrfFor(r)
	}
	h.render(w, r, status, "error", v)
}

// localPath returns p when it is a dashboard path on this site, else the
// overview: the "back" field of a form and the "next" of the login page must
// not send the browser elsewhere.
func localPath(p string) string {
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(u.Path, "/dashboard/") ||
		strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\\r\n") || slices.ContainsFunc(strings.Split(u.Path, "/"), dotSegment) {
		return "/dashboard/"
	}
	return u.RequestURI()
}

func dotSegment(s string) bool { return s == "." || s == ".." }

// withParam returns the local path p with one query parameter set.
func withParam(p, key, value string) string {
	u, _ := url.Parse(localPath(p))
	q := u.Query()
	q.Set(key, value)
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
