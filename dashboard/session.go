package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"storelink"
)

// realm is one of the two signed-in areas: the operator's dashboard and
// the partners' portal. Each has its own cookie, scoped to its own path, and
// its own label for signatures, so that a cookie of one is never taken by
// the other; the session row says whose a session is, and each realm takes
// only its own kind.
type realm struct {
	cookie  string // the session cookie's name
	path    string // the cookie's path, the prefix of the realm's pages
	purpose string // the label of its session signatures
	login   string // its login form
	partner bool   // its sessions are partners' (of a client), not the operator's
}

var (
	operatorRealm = realm{cookie: "storelink_session", path: "/dashboard/", purpose: "session", login: "/dashboard/login"}
	portalRealm   = realm{cookie: "storelink_portal", path: "/portal/", purpose: "portal session", login: "/portal/login", partner: true}
)

// realmOf is the realm of the request's path.
func realmOf(r *http.Request) realm {
	if strings.HasPrefix(r.URL.Path, portalRealm.path) {
		return portalRealm
	}
	return operatorRealm
}

// sessionKey derives the signing key from the admin token: every process
// that shares a token (several serve processes on one PostgreSQL database)
// accepts the same sessions, and a new token ends all of them. An empty
// token gives a random key, so that no session can ever be made for it.
func sessionKey(token string) []byte {
	if token == "" {
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		return k
	}
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("storelink dashboard session v1"))
	return m.Sum(nil)
}

func shortHash(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:6])
}

// mac signs a message with the session key under a purpose label, so that a
// session signature can never pass as a CSRF token or the other way round.
func (h *Handler) mac(purpose string, msg []byte) []byte {
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write(msg)
	return m.Sum(nil)
}

var b64 = base64.RawURLEncoding

// newSession returns a cookie value of the realm: a random session id and
// the moment it was issued, signed. No credential is ever in it. It also
// returns the id, which the caller records in the session store.
func (h *Handler) newSession(rl realm) (value, id string) {
	var payload [24]byte
	_, _ = rand.Read(payload[:16])
	binary.BigEndian.PutUint64(payload[16:], uint64(h.Now().Unix()))
	return b64.EncodeToString(payload[:]) + "." + b64.EncodeToString(h.mac(rl.purpose, payload[:])), hex.EncodeToString(payload[:16])
}

// sessionHash is what the session store knows a session by: the id itself
// stays in the browser.
func sessionHash(id string) []byte {
	s := sha256.Sum256([]byte(id))
	return s[:]
}

// session checks the request's cookie of the realm and that its session
// has not been ended, and returns the session's client ("" for the
// operator's). A store that does not answer counts as no session.
func (h *Handler) session(r *http.Request, rl realm) (string, bool) {
	client, ok, _ := h.checkSession(r, rl)
	return client, ok
}

// checkSession is session with the store's error, when it had one. A
// session of the other realm's kind is no session here.
func (h *Handler) checkSession(r *http.Request, rl realm) (string, bool, error) {
	id, ok := h.cookieSession(r, rl)
	if !ok {
		return "", false, nil
	}
	client, active, err := h.Sessions.Session(r.Context(), sessionHash(id))
	if err != nil {
		switch f := h.fault(r, err); {
		case errors.Is(f, context.Canceled):
			// The client went away; renderError says so if it is called.
		case f != nil:
			h.logger.Warn("dashboard: look up session", "code", storelink.ErrorCode(f), "error", err)
		default:
			h.logger.Error("dashboard: look up session", "error", err)
		}
		return "", false, err
	}
	if !active || (client != "") != rl.partner {
		return "", false, nil
	}
	return client, true, nil
}

// sessionFault answers with the fault page when the session could not be
// looked up because of a fault: a full disk or an unreachable database is
// said plainly, rather than sending the browser to a login that cannot
// work either. Other lookup errors count as no session.
func (h *Handler) sessionFault(w http.ResponseWriter, r *http.Request, err error) bool {
	if err == nil || h.fault(r, err) == nil {
		return false
	}
	h.renderError(w, r, err)
	return true
}

// cookieSession checks the request's cookie of the realm, its signature
// and age, and returns the session id.
func (h *Handler) cookieSession(r *http.Request, rl realm) (string, bool) {
	c, err := r.Cookie(rl.cookie)
	if err != nil {
		return "", false
	}
	enc, sig, ok := strings.Cut(c.Value, ".")
	if !ok {
		return "", false
	}
	payload, err1 := b64.DecodeString(enc)
	got, err2 := b64.DecodeString(sig)
	if err1 != nil || err2 != nil || len(payload) != 24 || !hmac.Equal(got, h.mac(rl.purpose, payload)) {
		return "", false
	}
	issued := time.Unix(int64(binary.BigEndian.Uint64(payload[16:])), 0)
	now := h.Now()
	if now.Sub(issued) > h.SessionTTL || issued.Sub(now) > time.Minute {
		return "", false
	}
	return hex.EncodeToString(payload[:16]), true
}

// csrfFor is the CSRF token of the request's session in the realm: derived
// from the session id, so it needs no storage and dies with the session.
// Callers have checked that the session is active.
func (h *Handler) csrfFor(r *http.Request, rl realm) string {
	id, ok := h.cookieSession(r, rl)
	if !ok {
		return ""
	}
	return b64.EncodeToString(h.mac(rl.purpose+" csrf", []byte(id)))
}

// secure tells whether the browser reached us over TLS, directly or through
// a proxy that says so, so the cookie is only ever sent back over TLS.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func (h *Handler) setCookie(w http.ResponseWriter, r *http.Request, rl realm, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: rl.cookie, Value: value, Path: rl.path, MaxAge: maxAge,
		HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteStrictMode,
	})
}

// page guards a page: without a valid session the browser goes to the login
// form and comes back afterwards.
func (h *Handler) page(fn func(w http.ResponseWriter, r *http.Request, v view)) http.HandlerFunc {
	return h.realmPage(operatorRealm, func(w http.ResponseWriter, r *http.Request, v view, _ string) { fn(w, r, v) })
}

// realmPage guards a page of the realm and passes the session's client on.
func (h *Handler) realmPage(rl realm, fn func(w http.ResponseWriter, r *http.Request, v view, client string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		client, ok, err := h.checkSession(r, rl)
		if h.sessionFault(w, r, err) {
			return
		}
		if !ok {
			http.Redirect(w, r, rl.login+"?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		fn(w, r, view{CSRF: h.csrfFor(r, rl), LoggedIn: true, Portal: rl.partner}, client)
	}
}

// action guards a POST: a session, and the session's CSRF token in the form.
func (h *Handler) action(fn http.HandlerFunc) http.HandlerFunc {
	return h.realmAction(operatorRealm, func(w http.ResponseWriter, r *http.Request, _ string) { fn(w, r) })
}

// readForm reads the POST form of r, at most max bytes of it, between two
// of the request's phases on the database (Deps.OutsideDB), and returns
// the request to go on with. A form that cannot be read is an empty one,
// as r.PostFormValue has it.
func (h *Handler) readForm(w http.ResponseWriter, r *http.Request, max int64) *http.Request {
	r.Body = http.MaxBytesReader(w, r.Body, max)
	return h.OutsideDB(r, func(context.Context) { _ = r.ParseMultipartForm(32 << 20) })
}

// realmAction guards a POST of the realm and passes the session's client
// on.
func (h *Handler) realmAction(rl realm, fn func(w http.ResponseWriter, r *http.Request, client string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		client, ok, err := h.checkSession(r, rl)
		if h.sessionFault(w, r, err) {
			return
		}
		if !ok {
			http.Redirect(w, r, rl.login, http.StatusSeeOther)
			return
		}
		r = h.readForm(w, r, 64<<10)
		if !h.csrfOK(w, r, rl, r.PostFormValue("csrf")) {
			return
		}
		fn(w, r, client)
	}
}

// csrfOK tells whether got is the CSRF token of the request's session in
// the realm; when it is not, it has answered 403.
func (h *Handler) csrfOK(w http.ResponseWriter, r *http.Request, rl realm, got string) bool {
	want := h.csrfFor(r, rl)
	if want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		h.logger.Warn("dashboard: CSRF token missing or wrong", "path", r.URL.Path, "remote", r.RemoteAddr)
		http.Error(w, "The form is out of date or did not come from this site; reload the page and try again.", http.StatusForbidden)
		return false
	}
	return true
}

type loginData struct {
	Next  string
	Error string
}

func (h *Handler) handleLoginForm(w http.ResponseWriter, r *http.Request) {
	next := localPath(r.URL.Query().Get("next"))
	if _, ok := h.session(r, operatorRealm); ok {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	h.render(w, r, http.StatusOK, "login", view{Title: "Log in", Data: loginData{Next: next}})
}

// handleLogin checks the token in constant time: both sides are hashed
// first, so the comparison does not even depend on the length. An attempt
// that the limit refuses (for this address's failures here or at the API,
// or the admin token's under attack) is refused before the token is looked
// at; an empty token guesses nothing and is not counted.
func (h *Handler) handleLogin(w http.ResponseWriter, r *http.Request) {
	r = h.readForm(w, r, 16<<10)
	token := strings.TrimSpace(r.PostFormValue("token"))
	next := localPath(r.PostFormValue("next"))
	addr := h.ClientAddr(r)
	limited := func(after int) {
		w.Header().Set("Retry-After", strconv.Itoa(after))
		h.render(w, r, http.StatusTooManyRequests, "login", view{Title: "Log in", Data: loginData{Next: next,
			Error: fmt.Sprintf("Too many failed attempts from this address: try again in %d seconds.", after)}})
	}
	if h.LoginLimit != nil {
		if after, blocked := h.LoginLimit.Blocked(addr, ""); blocked {
			limited(after)
			return
		}
	}
	got, want := sha256.Sum256([]byte(token)), sha256.Sum256([]byte(h.AdminToken))
	if h.AdminToken == "" || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		h.logger.Warn("dashboard: login refused", "remote", addr.String())
		if h.LoginLimit != nil && token != "" {
			if after, counted := h.LoginLimit.Failed(addr, ""); !counted {
				limited(after)
				return
			}
		}
		h.render(w, r, http.StatusUnauthorized, "login", view{Title: "Log in",
			Data: loginData{Next: next, Error: "That is not the admin token."}})
		return
	}
	if h.LoginLimit != nil {
		h.LoginLimit.Succeeded(addr, "")
	}
	value, id := h.newSession(operatorRealm)
	if err := h.Sessions.CreateSession(r.Context(), storelink.NewSession{IDHash: sessionHash(id), Expires: h.Now().Add(h.SessionTTL)}); err != nil {
		h.renderError(w, r, fmt.Errorf("record session: %w", err))
		return
	}
	h.setCookie(w, r, operatorRealm, value, int(h.SessionTTL.Seconds()))
	h.logger.Info("dashboard: login", "remote", addr.String())
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// handleLogout ends the session in the store, so that its cookie, even if
// kept or copied, opens nothing any more; then it clears the cookie.
func (h *Handler) handleLogout(w http.ResponseWriter, r *http.Request) {
	h.logout(w, r, operatorRealm)
}

// logout ends the request's session of the realm and clears its cookie.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request, rl realm) {
	if id, ok := h.cookieSession(r, rl); ok {
		if err := h.Sessions.DeleteSession(r.Context(), sessionHash(id)); err != nil {
			h.renderError(w, r, fmt.Errorf("end session: %w", err))
			return
		}
	}
	h.setCookie(w, r, rl, "", -1)
	http.Redirect(w, r, rl.login, http.StatusSeeOther)
}
