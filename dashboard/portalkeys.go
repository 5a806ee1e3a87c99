package dashboard

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	"storelink"
)

// The portal's API keys page: the client's keys (never a key itself), a
// form that makes one more, shown once as a new endpoint secret is
// (portalendpoints.go), and a button per key that revokes it. The rules
// are the partner API's: at most storelink.MaxAPIKeys keys, and the last
// one cannot be revoked.

type portalKeysData struct {
	Keys []storelink.APIKey
	Max  int
	// Seen is the digest of the keys as shown, which the create form sends
	// back: a form sent twice makes one key.
	Seen string
	// Error is a refused create (KeyID "") or revoke of KeyID.
	Error, KeyID string
	Shown        *shownOnce
}

// keysSeen is the digest of the keys as a page shows them.
func keysSeen(keys []storelink.APIKey) string {
	h := sha256.New()
	for _, k := range keys {
		h.Write([]byte(k.ID + "\x00"))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

func (h *Handler) handlePortalKeys(w http.ResponseWriter, r *http.Request, v view, c portalClient) {
	h.showPortalKeys(w, r, http.StatusOK, v, c, portalKeysData{})
}

// showPortalKeys renders the client's keys with what d adds: a refused
// form, a key shown once.
func (h *Handler) showPortalKeys(w http.ResponseWriter, r *http.Request, status int, v view, c portalClient, d portalKeysData) {
	var err error
	if d.Keys, err = h.Admin.APIKeys(r.Context(), c.ID); err != nil {
		h.renderError(w, r, err)
		return
	}
	d.Max, d.Seen = storelink.MaxAPIKeys, keysSeen(d.Keys)
	v.Title, v.Nav, v.Data = "API keys", "keys", d
	h.render(w, r, status, "portal_keys", v)
}

// handlePortalCreateKey makes one more key of the client's and shows it
// once.
func (h *Handler) handlePortalCreateKey(w http.ResponseWriter, r *http.Request, c portalClient) {
	ctx := r.Context()
	v := h.portalView(r, c, "/portal/api-keys")
	keys, err := h.Admin.APIKeys(ctx, c.ID)
	if err == nil && r.PostFormValue("seen") != keysSeen(keys) {
		err = storelink.Errorf(storelink.ECONFLICT, "Your keys changed since this form was shown (perhaps it was sent twice): "+
			"no key was made. Check the list and send the form again if you still mean to.")
	}
	var k *storelink.NewAPIKey
	if err == nil {
		k, err = h.Admin.CreateAPIKey(ctx, c.ID)
	}
	if refused(err) {
		h.showPortalKeys(w, r, statusOf[storelink.ErrorCode(err)], v, c, portalKeysData{Error: storelink.ErrorMessage(err)})
		return
	} else if err != nil {
		h.renderError(w, r, err)
		return
	}
	h.logger.Info("portal: API key created", "client_id", c.ID, "key_id", k.KeyID)
	h.showPortalKeys(w, r, http.StatusOK, v, c, portalKeysData{Shown: &shownOnce{
		Title: "New API key " + k.KeyID, Value: k.APIKey, Then: "/portal/api-keys",
		Note: "Send it as the x-api-key header, or sign in here with it. Only its hash is kept: nobody can show it to you again.",
	}})
}

// handlePortalRevokeKey revokes a key of the client's; the last one stays,
// and the page says why.
func (h *Handler) handlePortalRevokeKey(w http.ResponseWriter, r *http.Request, c portalClient) {
	id := r.PathValue("key_id")
	err := h.Admin.RevokeOwnAPIKey(r.Context(), c.ID, id)
	if refused(err) {
		h.showPortalKeys(w, r, statusOf[storelink.ErrorCode(err)], h.portalView(r, c, "/portal/api-keys"), c,
			portalKeysData{Error: storelink.ErrorMessage(err), KeyID: id})
		return
	} else if err != nil {
		h.renderError(w, r, err)
		return
	}
	h.logger.Info("portal: API key revoked", "client_id", c.ID, "key_id", id)
	http.Redirect(w, r, withParams(portalRealm, "/portal/api-keys", "done", "revoked"), http.StatusSeeOther)
}
