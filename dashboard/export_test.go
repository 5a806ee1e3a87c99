package dashboard

import "storelink"

// SessionCookie makes a session cookie's value of the portal (portal true)
// or of the dashboard, and its session id, as a sign-in does, without
// recording the session: a test records it as it likes.
func (h *Handler) SessionCookie(portal bool) (value, id string) {
	if portal {
		return h.newSession(portalRealm)
	}
	return h.newSession(operatorRealm)
}

// KeysSeen is the digest of the keys a keys page shows, which its create
// form sends back.
func KeysSeen(keys []storelink.APIKey) string { return keysSeen(keys) }
