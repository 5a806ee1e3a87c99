package dashboard

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"storelink"
	"storelink/webhook"
)

// The portal's endpoint forms: register, change, delete (after a page that
// asks), rotate the secret and recover failed deliveries. They call the
// services as the partner API does, after the same input checks
// (webhook.CheckNewEndpoint, CheckEndpointPatch, ParseOverlap), so that a
// URL, a key or a limit the API refuses the portal refuses in the same
// words. A refused form comes back beside its error with what was typed
// in it, except a key, which is never written into a page.
//
// A new secret is shown once, on the page that answers the form, which no
// cache keeps (ServeHTTP's Cache-Control: no-store) and which
// static/portal.js turns into a plain visit of the endpoints page, so that
// reloading it sends no form again. The forms that make a secret carry a
// digest of what the page showed (seen): a form sent again once that has
// changed, by a browser that resends it, makes no second secret.

// endpointForm is a register or change form as sent, to show it again.
type endpointForm struct {
	URL, Description string
	States           []storelink.OrderState
	Enabled          bool
	// KeyGiven tells that an api_key was typed in: it has to be typed
	// again, as no page shows it.
	KeyGiven bool
	Error    string
}

// endpointFailure is an action on one endpoint that was refused, shown in
// its card with what was chosen.
type endpointFailure struct {
	EndpointID, Action, Error string
	Since, Overlap            string
}

// shownOnce is a secret or key shown on the page that answers the form
// that made it, and on no other.
type shownOnce struct {
	Title, Value, Note string
	// Then is the page a reload of this one shows instead.
	Then string
}

type portalEndpointsData struct {
	Endpoints []storelink.EndpointDetail
	// States are what an endpoint may ask for (EndpointStates).
	States []storelink.OrderState
	// Overlaps are the rotation form's choices, Seen the digest of the
	// endpoints as shown, and Since the recover forms' default time.
	Overlaps []overlapChoice
	Seen     string
	Since    string
	Test     *portalTest
	Register endpointForm
	Failed   *endpointFailure
	Shown    *shownOnce
}

type overlapChoice struct{ Value, Label string }

// overlaps are how long the old secret may still sign after a rotation.
var overlaps = []overlapChoice{{"0s", "no overlap"}, {"1h", "1 hour"}, {"24h", "24 hours"}, {"72h", "3 days"},
	{"168h", "7 days"}, {"720h", "30 days"}}

// sinceLayout is what a datetime-local field sends, without seconds.
const sinceLayout = "2006-01-02T15:04"

// endpointsSeen is the digest of the endpoints as a page shows them: it
// changes when one is registered, changed, rotated or deleted.
func endpointsSeen(list []storelink.EndpointDetail) string {
	h := sha256.New()
	for _, e := range list {
		h.Write([]byte(e.ID + "@" + strconv.FormatInt(e.UpdatedAt.UnixMilli(), 10) + "\x00"))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// portalView is the view of a page that answers a portal form.
func (h *Handler) portalView(r *http.Request, c portalClient, path string) view {
	return view{CSRF: h.csrfFor(r, portalRealm), LoggedIn: true, Portal: true, Who: c.Label(), Path: path}
}

// portalAction is a portal form's handler that writes, with the
// signed-in client read.
func (h *Handler) portalAction(fn func(w http.ResponseWriter, r *http.Request, c portalClient)) http.HandlerFunc {
	return h.portalWrite(func(w http.ResponseWriter, r *http.Request, client string) {
		c, err := h.portalClient(r, client)
		if err != nil {
			h.renderError(w, r, err)
			return
		}
		fn(w, r, c)
	})
}

// portalWrite is a portal form's handler that writes: it takes one of the
// client's writes (PartnerWrite) once the session and the form's CSRF
// token are checked, and answers 429 with Retry-After when none is left,
// having written nothing.
func (h *Handler) portalWrite(fn func(w http.ResponseWriter, r *http.Request, client string)) http.HandlerFunc {
	return h.realmAction(portalRealm, func(w http.ResponseWriter, r *http.Request, client string) {
		if err := h.PartnerWrite(client); err != nil {
			h.renderError(w, r, err)
			return
		}
		fn(w, r, client)
	})
}

// showPortalEndpoints renders the client's endpoints with what d adds: a
// test send's result, a refused form, a secret shown once.
func (h *Handler) showPortalEndpoints(w http.ResponseWriter, r *http.Request, status int, v view, c portalClient, d portalEndpointsData) {
	var err error
	if d.Endpoints, err = h.Webhooks.EndpointDetails(r.Context(), c.ID); err != nil {
		h.renderError(w, r, err)
		return
	}
	d.States, d.Overlaps, d.Seen = storelink.EndpointStates, overlaps, endpointsSeen(d.Endpoints)
	d.Since = h.Now().Add(-24 * time.Hour).UTC().Format(sinceLayout)
	v.Title, v.Nav, v.Data = "Webhook endpoints", "endpoints", d
	h.render(w, r, status, "portal_endpoints", v)
}

// refused tells whether err is one to show beside a form (a refusal of
// what was typed or chosen) rather than on the error page (a fault, an
// internal error, an endpoint not found).
func refused(err error) bool {
	switch storelink.ErrorCode(err) {
	case storelink.EINVALID, storelink.EUNPROCESSABLE, storelink.ECONFLICT, storelink.EGONE, storelink.ETOOLARGE,
		storelink.EUNSUPPORTED, storelink.ERATELIMIT, storelink.EBACKLOG, storelink.EBUSY, storelink.EINFLIGHT, storelink.EBODYTIMEOUT:
		return true
	}
	return false
}

// formStates reads the ticked states of a form: order states and the
// upload event.
func formStates(r *http.Request) []storelink.OrderState {
	var out []storelink.OrderState
	for _, s := range r.PostForm["states"] {
		out = append(out, storelink.OrderState(s))
	}
	return out
}

// changedSince refuses a form that makes a secret when what it was sent
// from has changed since (seen): a form sent twice makes one secret.
func changedSince(seen, now string) error {
	if seen == now {
		return nil
	}
	return storelink.Errorf(storelink.ECONFLICT, "Your endpoints changed since this form was shown (perhaps it was sent twice): "+
		"nothing was done. Check the list below and send the form again if you still mean to.")
}

// handlePortalRegister registers an endpoint of the client's and shows
// its secret once.
func (h *Handler) handlePortalRegister(w http.ResponseWriter, r *http.Request, c portalClient) {
	v := h.portalView(r, c, "/portal/endpoints")
	form, e, secret, err := h.registerFromForm(r, c.ID)
	if refused(err) {
		form.Error = storelink.ErrorMessage(err)
		h.showPortalEndpoints(w, r, statusOf[storelink.ErrorCode(err)], v, c, portalEndpointsData{Register: form})
		return
	} else if err != nil {
		h.renderError(w, r, err)
		return
	}
	h.logger.Info("portal: endpoint registered", "client_id", c.ID, "endpoint_id", e.ID)
	h.showPortalEndpoints(w, r, http.StatusOK, v, c, portalEndpointsData{Shown: &shownOnce{
		Title: "Signing secret of " + redactURL(e.URL), Value: secret, Then: "/portal/endpoints",
		Note: "Your endpoint checks each delivery's signature with it (Standard Webhooks).",
	}})
}

// handlePortalRotate gives an endpoint of the client's a new secret and
// shows it once; the old one signs too until the chosen overlap ends.
func (h *Handler) handlePortalRotate(w http.ResponseWriter, r *http.Request, c portalClient) {
	id := r.PathValue("endpoint_id")
	fail := &endpointFailure{EndpointID: id, Action: "rotate", Overlap: r.PostFormValue("overlap")}
	v := h.portalView(r, c, "/portal/endpoints")
	e, secret, overlap, err := h.rotateFromForm(r, c.ID, id)
	if refused(err) {
		fail.Error = storelink.ErrorMessage(err)
		h.showPortalEndpoints(w, r, statusOf[storelink.ErrorCode(err)], v, c, portalEndpointsData{Failed: fail})
		return
	} else if err != nil {
		h.renderError(w, r, err)
		return
	}
	h.logger.Info("portal: secret rotated", "client_id", c.ID, "endpoint_id", id, "overlap", overlap)
	h.showPortalEndpoints(w, r, http.StatusOK, v, c, portalEndpointsData{Shown: rotatedSecret(e, secret, "/portal/endpoints", "deploy")})
}

// handlePortalRecover makes the failed deliveries of an endpoint of the
// client's queued since the form's time pending again, and says how many.
func (h *Handler) handlePortalRecover(w http.ResponseWriter, r *http.Request, c portalClient) {
	id := r.PathValue("endpoint_id")
	fail := &endpointFailure{EndpointID: id, Action: "recover", Since: r.PostFormValue("since")}
	since, err := parseSince(fail.Since)
	var n int
	if err == nil {
		n, err = h.Webhooks.RecoverDeliveries(r.Context(), c.ID, id, since)
	}
	if refused(err) {
		fail.Error = storelink.ErrorMessage(err)
		h.showPortalEndpoints(w, r, statusOf[storelink.ErrorCode(err)], h.portalView(r, c, "/portal/endpoints"), c,
			portalEndpointsData{Failed: fail})
		return
	} else if err != nil {
		h.renderError(w, r, err)
		return
	}
	if n > 0 {
		h.Wake()
	}
	h.logger.Info("portal: recover", "client_id", c.ID, "endpoint_id", id, "since", since, "deliveries", n)
	http.Redirect(w, r, withParams(portalRealm, "/portal/endpoints", "done", "recovered", "n", strconv.Itoa(n)), http.StatusSeeOther)
}

type portalEndpointData struct {
	storelink.EndpointDetail
	States []storelink.OrderState
	Form   endpointForm
	// URLHidden tells that the form does not show the URL, which holds a
	// password: left empty, it stays as it is.
	URLHidden bool
}

// hidesURL tells whether an endpoint's URL may not be shown as it is,
// holding a password (redactURL hides it).
func hidesURL(u string) bool { return redactURL(u) != u }

// handlePortalEditForm shows the form that changes an endpoint of the
// client's.
func (h *Handler) handlePortalEditForm(w http.ResponseWriter, r *http.Request, v view, c portalClient) {
	e, err := h.Webhooks.Endpoint(r.Context(), c.ID, r.PathValue("endpoint_id"))
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	form := endpointForm{URL: e.URL, Description: e.Description, States: e.States, Enabled: e.Enabled}
	h.showEditForm(w, r, http.StatusOK, v, e, form)
}

func (h *Handler) showEditForm(w http.ResponseWriter, r *http.Request, status int, v view, e *storelink.EndpointDetail, form endpointForm) {
	d := portalEndpointData{EndpointDetail: *e, States: storelink.EndpointStates, Form: form, URLHidden: hidesURL(e.URL)}
	if d.URLHidden && form.URL == e.URL {
		d.Form.URL = ""
	}
	v.Title, v.Nav, v.Data = "Change endpoint", "endpoints", d
	h.render(w, r, status, "portal_endpoint_edit", v)
}

// handlePortalEdit changes an endpoint of the client's: the fields of the
// form that differ from the endpoint's. An empty URL field keeps the URL,
// an empty key field the key.
func (h *Handler) handlePortalEdit(w http.ResponseWriter, r *http.Request, c portalClient) {
	ctx, id := r.Context(), r.PathValue("endpoint_id")
	cur, err := h.Webhooks.Endpoint(ctx, c.ID, id)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	form := endpointForm{URL: r.PostFormValue("url"), Description: r.PostFormValue("description"), States: formStates(r),
		Enabled: r.PostFormValue("enabled") == "yes", KeyGiven: r.PostFormValue("api_key") != ""}
	p := endpointPatch(cur, form, r.PostFormValue("api_key"), r.PostFormValue("remove_api_key") == "yes")
	err = webhook.CheckEndpointPatch(&p, h.WebhookAllowPrivate)
	if err == nil {
		_, err = h.Webhooks.UpdateEndpoint(ctx, c.ID, id, p)
	}
	if refused(err) {
		form.Error = storelink.ErrorMessage(err)
		h.showEditForm(w, r, statusOf[storelink.ErrorCode(err)], h.portalView(r, c, r.URL.Path), cur, form)
		return
	} else if err != nil {
		h.renderError(w, r, err)
		return
	}
	if p.Enabled != nil && *p.Enabled {
		h.Wake() // its parked deliveries may go now
	}
	h.logger.Info("portal: endpoint changed", "client_id", c.ID, "endpoint_id", id)
	http.Redirect(w, r, withParams(portalRealm, "/portal/endpoints", "done", "updated"), http.StatusSeeOther)
}

// endpointPatch is the change that makes cur what form says: only the
// fields that differ, so that saving a form unchanged changes nothing
// (and an endpoint disabled by the service keeps its reason). key is a
// new key, "" for none; remove stops sending one.
func endpointPatch(cur *storelink.EndpointDetail, form endpointForm, key string, remove bool) storelink.EndpointPatch {
	var p storelink.EndpointPatch
	if u := strings.TrimSpace(form.URL); u != "" && u != cur.URL {
		p.URL = &u
	}
	if states := form.States; !slices.Equal(states, cur.States) {
		if states == nil {
			states = []storelink.OrderState{}
		}
		p.States = &states
	}
	if form.Enabled != cur.Enabled {
		p.Enabled = &form.Enabled
	}
	if form.Description != cur.Description {
		p.Description = &form.Description
	}
	switch {
	case remove && cur.HasAPIKey:
		none := ""
		p.APIKey = &none
	case !remove && key != "":
		p.APIKey = &key
	}
	return p
}

type portalDeleteData struct {
	storelink.EndpointDetail
}

// handlePortalDeleteForm asks whether to delete an endpoint of the
// client's, and says what that does.
func (h *Handler) handlePortalDeleteForm(w http.ResponseWriter, r *http.Request, v view, c portalClient) {
	e, err := h.Webhooks.Endpoint(r.Context(), c.ID, r.PathValue("endpoint_id"))
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	v.Title, v.Nav, v.Data = "Delete endpoint", "endpoints", portalDeleteData{*e}
	h.render(w, r, http.StatusOK, "portal_endpoint_delete", v)
}

// handlePortalDelete deletes an endpoint of the client's, from the form
// of the page that asked.
func (h *Handler) handlePortalDelete(w http.ResponseWriter, r *http.Request, client string) {
	id := r.PathValue("endpoint_id")
	if r.PostFormValue("confirm") != "yes" {
		h.renderError(w, r, storelink.Errorf(storelink.EINVALID, "Delete an endpoint from the page that asks whether you mean to: it cannot be undone."))
		return
	}
	if err := h.Webhooks.DeleteEndpoint(r.Context(), client, id, nil); err != nil {
		h.renderError(w, r, err)
		return
	}
	h.EndpointDeleted(id)
	h.logger.Info("portal: endpoint deleted", "client_id", client, "endpoint_id", id)
	http.Redirect(w, r, withParams(portalRealm, "/portal/endpoints", "done", "removed"), http.StatusSeeOther)
}

// rotateFromForm gives endpoint id (of client clientID; "" for the
// operator's any) a new secret as the form in r asks, with the overlap it
// chose, unless the endpoint changed since the page showed it (its "seen"
// field). It returns the endpoint, the new secret and the overlap.
func (h *Handler) rotateFromForm(r *http.Request, clientID, id string) (*storelink.Endpoint, string, time.Duration, error) {
	ctx := r.Context()
	cur, err := h.Webhooks.Endpoint(ctx, clientID, id)
	if err != nil {
		return nil, "", 0, err
	}
	if err := changedSince(r.PostFormValue("seen"), seenStamp(cur.UpdatedAt)); err != nil {
		return nil, "", 0, err
	}
	overlap, err := webhook.ParseOverlap(r.PostFormValue("overlap"))
	if err != nil {
		return nil, "", 0, err
	}
	secret := webhook.NewSecret()
	e, err := h.Webhooks.RotateSecret(ctx, clientID, id, storelink.SecretRotation{Secret: secret, Overlap: overlap})
	return e, secret, overlap, err
}

// rotatedSecret is the new secret of e shown once, then back to then; the
// note says until when the old one still signs, for who deploys the new.
func rotatedSecret(e *storelink.Endpoint, secret, then, deploy string) *shownOnce {
	note := "The old secret no longer signs."
	if e.PreviousSecretUntil != nil {
		note = "Deliveries are signed with the old secret too until " + formatTime(*e.PreviousSecretUntil) +
			": " + deploy + " the new one before then."
	}
	return &shownOnce{Title: "New signing secret of " + redactURL(e.URL), Value: secret, Then: then, Note: note}
}

// registerFromForm registers an endpoint of client clientID as the form in
// r asks, unless the client's endpoints changed since the page showed them
// (its "seen" field). It returns the form as typed (to show again beside a
// refusal, without the key), the endpoint and its new secret.
func (h *Handler) registerFromForm(r *http.Request, clientID string) (endpointForm, *storelink.Endpoint, string, error) {
	ctx := r.Context()
	n := storelink.NewEndpoint{URL: r.PostFormValue("url"), APIKey: r.PostFormValue("api_key"), States: formStates(r),
		Description: r.PostFormValue("description")}
	form := endpointForm{URL: n.URL, Description: n.Description, States: n.States, KeyGiven: n.APIKey != ""}
	list, err := h.Webhooks.EndpointDetails(ctx, clientID)
	if err != nil {
		return form, nil, "", err
	}
	if err := changedSince(r.PostFormValue("seen"), endpointsSeen(list)); err != nil {
		return form, nil, "", err
	}
	if err := webhook.CheckNewEndpoint(&n, h.WebhookAllowPrivate); err != nil {
		return form, nil, "", err
	}
	secret := webhook.NewSecret()
	e, err := h.Webhooks.CreateEndpoint(ctx, clientID, n, secret)
	return form, e, secret, err
}
