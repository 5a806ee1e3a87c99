package dashboard

import (
	"net/http"
	"net/url"

	"storelink"
	"storelink/webhook"
)

// The operator's forms on a client and its endpoints: register, change,
// re-key and delete endpoints, create and revoke API keys, add and remove
// stores. They call the services as the operator API does, after the same
// input checks (webhook.CheckNewEndpoint, CheckEndpointPatch,
// ParseOverlap), so that what the API refuses the console refuses in the
// same words, beside the form and with what was typed in it (never a key).
// A secret or key is shown once on the page that answers the form, as the
// portal shows them (portalendpoints.go), and the forms that make one
// carry a digest of what the page showed, so that a form sent twice makes
// one.

// clientForms are what a client's page adds to the client after a form:
// the form refused with its error, or a secret or key shown once.
type clientForms struct {
	Register endpointForm
	Store    storeForm
	// KeyError is a refused create (KeyID "") or revoke of KeyID.
	KeyError, KeyID string
	Shown           *shownOnce
	// States are what an endpoint may ask for (EndpointStates); MaxKeys
	// the most keys a client may have.
	States  []storelink.OrderState
	MaxKeys int
	// EndpointsSeen and KeysSeen are the digests of the endpoints and keys
	// as shown, which the forms that make a secret or key send back.
	EndpointsSeen, KeysSeen string
}

// storeForm is the add-a-store form as sent, to show it again.
type storeForm struct {
	ID, Name, Error string
}

// clientView is the view of a page that answers an operator's form.
func (h *Handler) clientView(r *http.Request, path string) view {
	return view{CSRF: h.csrfFor(r, operatorRealm), LoggedIn: true, Path: path}
}

// clientPath is the path of a client's page.
func clientPath(id string) string { return "/dashboard/clients/" + url.PathEscape(id) }

// handleRegisterEndpoint registers an endpoint of the path's client and
// shows its secret once on the client's page.
func (h *Handler) handleRegisterEndpoint(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("client_id")
	v := h.clientView(r, clientPath(id))
	form, e, secret, err := h.registerFromForm(r, id)
	if refused(err) {
		form.Error = storelink.ErrorMessage(err)
		h.showClient(w, r, statusOf[storelink.ErrorCode(err)], v, clientForms{Register: form})
		return
	} else if err != nil {
		h.renderError(w, r, err)
		return
	}
	h.logger.Info("dashboard: endpoint registered", "client_id", id, "endpoint_id", e.ID)
	h.showClient(w, r, http.StatusOK, v, clientForms{Shown: &shownOnce{
		Title: "Signing secret of " + redactURL(e.URL), Value: secret, Then: clientPath(id),
		Note: "Give it to the partner: their endpoint checks each delivery's signature with it (Standard Webhooks).",
	}})
}

// handleCreateKey makes one more API key of the path's client and shows it
// once on the client's page.
func (h *Handler) handleCreateKey(w http.ResponseWriter, r *http.Request) {
	ctx, id := r.Context(), r.PathValue("client_id")
	v := h.clientView(r, clientPath(id))
	keys, err := h.Admin.APIKeys(ctx, id)
	if err == nil && r.PostFormValue("seen") != keysSeen(keys) {
		err = storelink.Errorf(storelink.ECONFLICT, "The client's keys changed since this form was shown (perhaps it was sent twice): "+
			"no key was made. Check the list and send the form again if you still mean to.")
	}
	var k *storelink.NewAPIKey
	if err == nil {
		k, err = h.Admin.CreateAPIKey(ctx, id)
	}
	if refused(err) {
		h.showClient(w, r, statusOf[storelink.ErrorCode(err)], v, clientForms{KeyError: storelink.ErrorMessage(err)})
		return
	} else if err != nil {
		h.renderError(w, r, err)
		return
	}
	h.logger.Info("dashboard: API key created", "client_id", id, "key_id", k.KeyID)
	h.showClient(w, r, http.StatusOK, v, clientForms{Shown: &shownOnce{
		Title: "New API key " + k.KeyID, Value: k.APIKey, Then: clientPath(id),
		Note: "Give it to the partner: their systems send it as the x-api-key header. Only its hash is kept: nobody can show it again.",
	}})
}

// handleRevokeKey revokes an API key of the path's client, the last one
// too (the operator API's DELETE).
func (h *Handler) handleRevokeKey(w http.ResponseWriter, r *http.Request) {
	id, keyID := r.PathValue("client_id"), r.PathValue("key_id")
	err := h.Admin.DeleteAPIKey(r.Context(), id, keyID)
	if refused(err) {
		h.showClient(w, r, statusOf[storelink.ErrorCode(err)], h.clientView(r, clientPath(id)),
			clientForms{KeyError: storelink.ErrorMessage(err), KeyID: keyID})
		return
	} else if err != nil {
		h.renderError(w, r, err)
		return
	}
	h.logger.Info("dashboard: API key revoked", "client_id", id, "key_id", keyID)
	http.Redirect(w, r, withParams(operatorRealm, clientPath(id), "done", "revoked"), http.StatusSeeOther)
}

// handlePutStore adds a store to the path's client, or renames the one of
// that id.
func (h *Handler) handlePutStore(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("client_id")
	form := storeForm{ID: r.PostFormValue("store_id"), Name: r.PostFormValue("name")}
	_, created, err := h.Admin.PutStore(r.Context(), id, form.ID, form.Name)
	if refused(err) {
		form.Error = storelink.ErrorMessage(err)
		h.showClient(w, r, statusOf[storelink.ErrorCode(err)], h.clientView(r, clientPath(id)), clientForms{Store: form})
		return
	} else if err != nil {
		h.renderError(w, r, err)
		return
	}
	done := "store-renamed"
	if created {
		done = "store-added"
	}
	h.logger.Info("dashboard: store put", "client_id", id, "store_id", form.ID, "created", created)
	http.Redirect(w, r, withParams(operatorRealm, clientPath(id), "done", done), http.StatusSeeOther)
}

type storeDeleteData struct {
	ClientID, ClientLabel string
	Store                 storelink.Store
}

// handleDeleteStoreForm asks whether to remove a store, and says what
// that does.
func (h *Handler) handleDeleteStoreForm(w http.ResponseWriter, r *http.Request, v view) {
	ctx, id, storeID := r.Context(), r.PathValue("client_id"), r.PathValue("store_id")
	stores, err := h.Admin.Stores(ctx, id)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	d := storeDeleteData{ClientID: id}
	for _, s := range stores {
		if s.ID == storeID {
			d.Store = s
		}
	}
	if d.Store.ID == "" {
		h.renderError(w, r, storelink.Errorf(storelink.ENOTFOUND, "store %q of client %q not found.", storeID, id))
		return
	}
	if d.ClientLabel, err = h.clientLabel(ctx, id); err != nil {
		h.renderError(w, r, err)
		return
	}
	v.Title, v.Nav, v.Data = "Remove store "+storeID, "overview", d
	h.render(w, r, http.StatusOK, "store_delete", v)
}

// handleDeleteStore removes a store and its stock, from the form of the
// page that asked.
func (h *Handler) handleDeleteStore(w http.ResponseWriter, r *http.Request) {
	id, storeID := r.PathValue("client_id"), r.PathValue("store_id")
	if r.PostFormValue("confirm") != "yes" {
		h.renderError(w, r, storelink.Errorf(storelink.EINVALID, "Remove a store from the page that asks whether you mean to: its stock goes with it."))
		return
	}
	if err := h.Admin.DeleteStore(r.Context(), id, storeID); err != nil {
		h.renderError(w, r, err)
		return
	}
	h.logger.Info("dashboard: store removed", "client_id", id, "store_id", storeID)
	http.Redirect(w, r, withParams(operatorRealm, clientPath(id), "done", "store-removed"), http.StatusSeeOther)
}

type endpointEditData struct {
	portalEndpointData
	ClientLabel string
}

// handleEditEndpointForm shows the form that changes an endpoint.
func (h *Handler) handleEditEndpointForm(w http.ResponseWriter, r *http.Request, v view) {
	e, err := h.Webhooks.Endpoint(r.Context(), "", r.PathValue("endpoint_id"))
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	h.showEndpointEdit(w, r, http.StatusOK, v, e, endpointForm{URL: e.URL, Description: e.Description, States: e.States, Enabled: e.Enabled})
}

func (h *Handler) showEndpointEdit(w http.ResponseWriter, r *http.Request, status int, v view, e *storelink.EndpointDetail, form endpointForm) {
	if e.DeletedAt != nil {
		h.renderError(w, r, storelink.Errorf(storelink.ECONFLICT, "Webhook endpoint %q is deleted: it cannot be changed.", e.ID))
		return
	}
	d := endpointEditData{portalEndpointData: portalEndpointData{EndpointDetail: *e, States: storelink.EndpointStates, Form: form,
		URLHidden: hidesURL(e.URL)}}
	if d.URLHidden && form.URL == e.URL {
		d.Form.URL = ""
	}
	var err error
	if d.ClientLabel, err = h.clientLabel(r.Context(), e.ClientID); err != nil {
		h.renderError(w, r, err)
		return
	}
	v.Title, v.Nav, v.Data = "Change endpoint", "overview", d
	h.render(w, r, status, "endpoint_edit", v)
}

// handleEditEndpoint changes an endpoint: the fields of the form that
// differ from the endpoint's (endpointPatch). An empty URL field keeps the
// URL, an empty key field the key.
func (h *Handler) handleEditEndpoint(w http.ResponseWriter, r *http.Request) {
	ctx, id := r.Context(), r.PathValue("endpoint_id")
	cur, err := h.Webhooks.Endpoint(ctx, "", id)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	form := endpointForm{URL: r.PostFormValue("url"), Description: r.PostFormValue("description"), States: formStates(r),
		Enabled: r.PostFormValue("enabled") == "yes", KeyGiven: r.PostFormValue("api_key") != ""}
	p := endpointPatch(cur, form, r.PostFormValue("api_key"), r.PostFormValue("remove_api_key") == "yes")
	err = webhook.CheckEndpointPatch(&p, h.WebhookAllowPrivate)
	if err == nil {
		_, err = h.Webhooks.UpdateEndpoint(ctx, "", id, p)
	}
	if refused(err) {
		form.Error = storelink.ErrorMessage(err)
		h.showEndpointEdit(w, r, statusOf[storelink.ErrorCode(err)], h.clientView(r, r.URL.Path), cur, form)
		return
	} else if err != nil {
		h.renderError(w, r, err)
		return
	}
	if p.Enabled != nil && *p.Enabled {
		h.Wake() // its parked deliveries may go now
	}
	h.logger.Info("dashboard: endpoint changed", "endpoint_id", id)
	http.Redirect(w, r, withParams(operatorRealm, "/dashboard/endpoints/"+url.PathEscape(id), "done", "updated"), http.StatusSeeOther)
}

// handleRotateSecret gives an endpoint a new secret and shows it once on
// the endpoint's page; the old one signs too until the chosen overlap
// ends.
func (h *Handler) handleRotateSecret(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("endpoint_id")
	v := h.clientView(r, "/dashboard/endpoints/"+url.PathEscape(id))
	rotate := &endpointFailure{EndpointID: id, Action: "rotate", Overlap: r.PostFormValue("overlap")}
	e, secret, overlap, err := h.rotateFromForm(r, "", id)
	if refused(err) {
		rotate.Error = storelink.ErrorMessage(err)
		h.showEndpointWith(w, r, statusOf[storelink.ErrorCode(err)], v, endpointExtra{Rotate: rotate})
		return
	} else if err != nil {
		h.renderError(w, r, err)
		return
	}
	h.logger.Info("dashboard: secret rotated", "endpoint_id", id, "overlap", overlap)
	h.showEndpointWith(w, r, http.StatusOK, v, endpointExtra{Shown: rotatedSecret(e, secret, "/dashboard/endpoints/"+url.PathEscape(id), "the partner deploys")})
}
