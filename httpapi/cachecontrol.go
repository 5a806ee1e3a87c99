package httpapi

import "net/http"

// What caches may keep (RFC 9111): nothing of an answer that shows a
// secret or an API key, and an answer to a partner's call only in the
// partner's own cache, as the answer of its key. Problems are never kept
// (sendProblem); file downloads are private and not kept (writeCSV).

// writeSecret answers v, which shows a webhook secret or an API key, the
// only time it is shown: no cache may keep it.
func writeSecret(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, v)
}

// privateToKey marks the answer to a call authenticated by x-api-key as
// one for that key's holder only: a shared cache must not keep it, and a
// private one must not give it for another key. A handler that answers a
// secret or a problem replaces the Cache-Control with no-store.
func privateToKey(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Cache-Control", "private")
	h.Add("Vary", "x-api-key")
}
