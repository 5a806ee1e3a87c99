package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"storelink"
)

// admin guards an operator handler with the admin token. Both sides are
// hashed first so the comparison takes the same time whatever the length.
// A wrong token counts against the client address's failed attempts and
// the admin token's (AuthLimiter); no token at all guesses nothing and does
// not. The right token is recorded, so that the address stays known to the
// limiter when failures from elsewhere fill its table.
func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	return s.adminAs("Operator calls need Authorization: Bearer ADMIN_TOKEN.", h)
}

// adminAs is admin whose 401 says detail.
func (s *Server) adminAs(detail string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		addr := s.TrustedProxies.ClientAddr(r)
		if s.refuseBlocked(w, r, addr, "") {
			return
		}
		token, ok := bearerToken(r)
		got := sha256.Sum256([]byte(token))
		if !ok || s.AdminToken == "" || subtle.ConstantTimeCompare(got[:], s.adminHash[:]) != 1 {
			if token != "" && !s.failed(w, r, addr, "") {
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="storelink-admin"`)
			writeProblem(w, r, storelink.EUNAUTHORIZED, detail)
			return
		}
		s.AuthLimit.Succeeded(addr, "")
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
// not valid counts against the client address's failed attempts and the
// path's client's; a valid key of another client of the same partner (403)
// guesses nothing and does not. A valid key is recorded as the admin
// token is.
func (s *Server) partner(h func(http.ResponseWriter, *http.Request, *storelink.Client)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		privateToKey(w)
		addr, clientID := s.TrustedProxies.ClientAddr(r), r.PathValue("client_id")
		if s.refuseBlocked(w, r, addr, clientID) {
			return
		}
		key := r.Header.Get("x-api-key")
		c, err := s.Auth.Authenticate(r.Context(), clientID, key)
		if storelink.ErrorCode(err) == storelink.EUNAUTHORIZED {
			if key != "" && !s.failed(w, r, addr, clientID) {
				return
			}
			w.Header().Set("WWW-Authenticate", `ApiKey header="x-api-key"`)
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.AuthLimit.Succeeded(addr, clientID)
		h(w, r, c)
	}
}
