package dashboard

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"storelink"
)

// The partners' portal under /portal/: a partner signs in with a client id
// and one of its API keys and sees that client's uploads, stock, orders,
// deliveries, endpoints and capacity, and nothing of any other client's.
// No page names the client in its path: the session says whose the pages
// are, and every id a path names (an upload, an order, a delivery, an
// endpoint) is looked up within that client, so another client's is not
// found.

// portalRoutes lists the portal's routes. The forms that write take one of
// the client's writes (portalWrite), as the API's partner writes do; the
// upload form takes capacity instead, signing in and out neither.
func (h *Handler) portalRoutes() {
	m := h.mux
	m.HandleFunc("GET /portal/login", h.handlePortalLoginForm)
	m.HandleFunc("POST /portal/login", h.handlePortalLogin)
	m.HandleFunc("POST /portal/logout", h.realmAction(portalRealm, func(w http.ResponseWriter, r *http.Request, _ string) {
		h.logout(w, r, portalRealm)
	}))

	m.HandleFunc("GET /portal/{$}", h.portalPage(h.handlePortalHome))
	m.HandleFunc("GET /portal/uploads", h.portalPage(h.handlePortalUploads))
	m.HandleFunc("GET /portal/uploads/{upload_id}", h.portalPage(h.handlePortalUpload))
	m.HandleFunc("GET /portal/uploads/{upload_id}/file", h.realmPage(portalRealm, h.handlePortalUploadFile))
	m.HandleFunc("GET /portal/uploads/{upload_id}/errors.csv", h.realmPage(portalRealm, h.handlePortalErrorFile))
	m.HandleFunc("GET /portal/stock", h.portalPage(h.handlePortalStock))
	m.HandleFunc("GET /portal/orders", h.portalPage(h.handlePortalOrders))
	m.HandleFunc("GET /portal/orders/{order_id}", h.portalPage(h.handlePortalOrder))
	m.HandleFunc("GET /portal/deliveries", h.portalPage(h.handlePortalDeliveries))
	m.HandleFunc("GET /portal/endpoints", h.portalPage(h.handlePortalEndpoints))
	m.HandleFunc("GET /portal/endpoints/{endpoint_id}/edit", h.portalPage(h.handlePortalEditForm))
	m.HandleFunc("GET /portal/endpoints/{endpoint_id}/delete", h.portalPage(h.handlePortalDeleteForm))
	m.HandleFunc("GET /portal/api-keys", h.portalPage(h.handlePortalKeys))

	m.HandleFunc("POST /portal/uploads", h.handlePortalSend)
	m.HandleFunc("POST /portal/deliveries/{delivery_id}/redeliver", h.portalWrite(h.handlePortalRedeliver))
	m.HandleFunc("POST /portal/endpoints", h.portalAction(h.handlePortalRegister))
	m.HandleFunc("POST /portal/endpoints/{endpoint_id}/edit", h.portalAction(h.handlePortalEdit))
	m.HandleFunc("POST /portal/endpoints/{endpoint_id}/delete", h.portalWrite(h.handlePortalDelete))
	m.HandleFunc("POST /portal/endpoints/{endpoint_id}/rotate-secret", h.portalAction(h.handlePortalRotate))
	m.HandleFunc("POST /portal/endpoints/{endpoint_id}/recover", h.portalAction(h.handlePortalRecover))
	m.HandleFunc("POST /portal/endpoints/{endpoint_id}/test", h.portalWrite(h.handlePortalTest))
	m.HandleFunc("POST /portal/api-keys", h.portalAction(h.handlePortalCreateKey))
	m.HandleFunc("POST /portal/api-keys/{key_id}/revoke", h.portalAction(h.handlePortalRevokeKey))
}

// portalClient is the signed-in client as every portal page names it.
type portalClient struct {
	*storelink.ClientDetail
	PartnerName string
}

// Label names the client as the header shows it.
func (c portalClient) Label() string { return c.PartnerName + " · " + c.CountryCode }

// portalPage guards a portal page and passes on the signed-in client, read
// afresh: the header names it.
func (h *Handler) portalPage(fn func(w http.ResponseWriter, r *http.Request, v view, c portalClient)) http.HandlerFunc {
	return h.realmPage(portalRealm, func(w http.ResponseWriter, r *http.Request, v view, clientID string) {
		c, err := h.portalClient(r, clientID)
		if err != nil {
			h.renderError(w, r, err)
			return
		}
		v.Who = c.Label()
		fn(w, r, v, c)
	})
}

// portalClient reads the client with its stores and its partner's name
// (from the partner's own clients, found by the index of their partner).
func (h *Handler) portalClient(r *http.Request, clientID string) (portalClient, error) {
	ctx := r.Context()
	d, err := h.Admin.Client(ctx, clientID)
	if err != nil {
		return portalClient{}, err
	}
	c := portalClient{ClientDetail: d}
	page, err := h.Admin.ListClients(ctx, storelink.ClientFilter{PartnerID: d.PartnerID, Limit: 1000})
	if err != nil {
		return c, err
	}
	for _, l := range page.Clients {
		if l.ID == clientID {
			c.PartnerName = l.PartnerName
		}
	}
	return c, nil
}

type portalLoginData struct {
	Next     string
	ClientID string
	Error    string
}

func (h *Handler) handlePortalLoginForm(w http.ResponseWriter, r *http.Request) {
	next := realmPath(portalRealm, r.URL.Query().Get("next"))
	if _, ok := h.session(r, portalRealm); ok {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	h.render(w, r, http.StatusOK, "portal_login", view{Title: "Sign in", Portal: true, Data: portalLoginData{Next: next}})
}

// handlePortalLogin checks a client id and API key as the API does, and
// opens a session of that client. A key that is not valid counts against
// the address's and the client id's failed attempts, as it does at the
// API, and an attempt the limit refuses is refused before the key is
// looked at; a valid key of another client of the same partner (403), or
// an empty field, guesses nothing and does not count. The key is never
// shown again, nor kept.
func (h *Handler) handlePortalLogin(w http.ResponseWriter, r *http.Request) {
	r = h.readForm(w, r, 16<<10)
	clientID, key := strings.TrimSpace(r.PostFormValue("client_id")), strings.TrimSpace(r.PostFormValue("api_key"))
	d := portalLoginData{Next: realmPath(portalRealm, r.PostFormValue("next")), ClientID: clientID}
	addr := h.ClientAddr(r)
	refuse := func(status int, msg string) {
		d.Error = msg
		h.render(w, r, status, "portal_login", view{Title: "Sign in", Portal: true, Data: d})
	}
	limited := func(after int) {
		w.Header().Set("Retry-After", strconv.Itoa(after))
		refuse(http.StatusTooManyRequests, fmt.Sprintf("Too many failed attempts from this address: try again in %d seconds.", after))
	}
	if h.Auth == nil {
		refuse(http.StatusServiceUnavailable, "Partners cannot sign in on this server.")
		return
	}
	// Checked first: an empty client id would be taken for the admin
	// token's by the limit.
	if clientID == "" || key == "" {
		refuse(http.StatusUnauthorized, "Enter your client id and one of its API keys.")
		return
	}
	if h.LoginLimit != nil {
		if after, blocked := h.LoginLimit.Blocked(addr, clientID); blocked {
			limited(after)
			return
		}
	}
	c, err := h.Auth.Authenticate(r.Context(), clientID, key)
	switch storelink.ErrorCode(err) {
	case "":
		if h.LoginLimit != nil {
			h.LoginLimit.Succeeded(addr, clientID)
		}
	case storelink.EUNAUTHORIZED:
		h.logger.Warn("portal: sign-in refused", "remote", addr.String())
		if h.LoginLimit != nil {
			if after, counted := h.LoginLimit.Failed(addr, clientID); !counted {
				limited(after)
				return
			}
		}
		refuse(http.StatusUnauthorized, "That client id and API key do not go together.")
		return
	case storelink.EFORBIDDEN:
		refuse(http.StatusForbidden, "This API key is one of another client of your partner account: sign in with that client's id.")
		return
	default:
		h.renderError(w, r, err)
		return
	}
	value, id := h.newSession(portalRealm)
	if err := h.Sessions.CreateSession(r.Context(), storelink.NewSession{IDHash: sessionHash(id), ClientID: c.ID, APIKey: key,
		Expires: h.Now().Add(h.SessionTTL)}); err != nil {
		h.renderError(w, r, fmt.Errorf("record session: %w", err))
		return
	}
	h.setCookie(w, r, portalRealm, value, int(h.SessionTTL.Seconds()))
	h.logger.Info("portal: sign-in", "client_id", c.ID, "remote", addr.String())
	http.Redirect(w, r, d.Next, http.StatusSeeOther)
}

// handlePortalRedeliver sends a delivery of the client's again.
func (h *Handler) handlePortalRedeliver(w http.ResponseWriter, r *http.Request, client string) {
	id := r.PathValue("delivery_id")
	if err := h.Webhooks.RedeliverFor(r.Context(), client, id); err != nil {
		h.renderError(w, r, err)
		return
	}
	h.Wake()
	h.logger.Info("portal: redeliver", "client_id", client, "delivery_id", id)
	http.Redirect(w, r, withParams(portalRealm, r.PostFormValue("back"), "done", "redelivered"), http.StatusSeeOther)
}

// handlePortalTest sends a test event to an endpoint of the client's and
// shows what came of it on the endpoints page.
func (h *Handler) handlePortalTest(w http.ResponseWriter, r *http.Request, client string) {
	r, res, state, ok := h.testSend(w, r, client)
	if !ok {
		return
	}
	c, err := h.portalClient(r, client)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	h.showPortalEndpoints(w, r, http.StatusOK, h.portalView(r, c, "/portal/endpoints"), c,
		portalEndpointsData{Test: &portalTest{EndpointID: r.PathValue("endpoint_id"), State: state, Result: res}})
}
