package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"storelink"
)

// statusOf is the one table from domain error code to HTTP status.
var statusOf = map[string]int{
	storelink.EINVALID:       http.StatusBadRequest,
	storelink.EUNAUTHORIZED:  http.StatusUnauthorized,
	storelink.EFORBIDDEN:     http.StatusForbidden,
	storelink.EAUTHLIMIT:     http.StatusTooManyRequests,
	storelink.ENOTFOUND:      http.StatusNotFound,
	storelink.EGONE:          http.StatusGone,
	storelink.ECONFLICT:      http.StatusConflict,
	storelink.ECURSORAHEAD:   http.StatusConflict,
	storelink.ETOOLARGE:      http.StatusRequestEntityTooLarge,
	storelink.EUNSUPPORTED:   http.StatusUnsupportedMediaType,
	storelink.EPRECONDITION:  http.StatusPreconditionFailed,
	storelink.EUNPROCESSABLE: http.StatusUnprocessableEntity,
	storelink.ERATELIMIT:     http.StatusTooManyRequests,
	storelink.EBACKLOG:       http.StatusTooManyRequests,
	storelink.EBUSY:          http.StatusTooManyRequests,
	storelink.ENOSPACE:       http.StatusInsufficientStorage,
	storelink.EINTERNAL:      http.StatusInternalServerError,
	storelink.EUNAVAILABLE:   http.StatusServiceUnavailable,
	"method_not_allowed":     http.StatusMethodNotAllowed,
	storelink.EBODYTIMEOUT:   http.StatusRequestTimeout,
	storelink.EINFLIGHT:      http.StatusTooManyRequests,
}

// Problem is an RFC 9457 problem details object. It has no "instance": the
// answer to an unknown client id must be byte for byte the answer to a wrong
// key, so that it tells nothing about which client ids exist.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	// NewestCursor is the feed's newest cursor, on cursor_ahead only.
	NewestCursor string `json:"newest_cursor,omitempty"`
}

// writeError answers with the problem for err. Only internal errors are
// logged, with their full text; the caller sees a fixed message.
//
// A request whose client went away is not answered (the request log says
// StatusClientGone); one that waited the database timeout is answered 503.
//
// A database's error for a full disk or a lost connection is first made the
// error that says so (Deps.Fault); those are logged too, as warnings, with
// the database's own text, since they need an operator.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if storelink.ErrorCode(err) == storelink.EINTERNAL {
		// An error that came of the request's context ending is the
		// database timeout or a client that went away, not a fault of
		// the service.
		switch timeout, gone := ended(r); {
		case gone:
			s.logger.Info("client went away", "method", r.Method, "path", r.URL.Path, "error", err)
			return
		case timeout != nil:
			s.logger.Warn("database timeout", "method", r.Method, "path", r.URL.Path, "error", err)
			err = timeout
		}
	}
	if s.Fault != nil && storelink.ErrorCode(err) == storelink.EINTERNAL {
		if f := s.Fault(err); storelink.ErrorCode(f) != storelink.EINTERNAL {
			s.logger.Warn("database fault", "method", r.Method, "path", r.URL.Path, "code", storelink.ErrorCode(f), "error", err)
			err = f
		}
	}
	code := storelink.ErrorCode(err)
	switch code {
	case storelink.EINTERNAL:
		s.logger.Error("internal error", "method", r.Method, "path", r.URL.Path, "error", err)
	case storelink.ENOSPACE:
		s.health.full(time.Now())
	}
	var e *storelink.Error
	cursor := ""
	if asError(err, &e) {
		if e.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
		}
		cursor = e.Cursor
	}
	sendProblem(w, code, storelink.ErrorMessage(err), cursor)
}

func writeProblem(w http.ResponseWriter, r *http.Request, code, detail string) {
	sendProblem(w, code, detail, "")
}

// sendProblem answers with the problem of code; newest is its
// newest_cursor, if any.
func sendProblem(w http.ResponseWriter, code, detail, newest string) {
	status, ok := statusOf[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	b, _ := json.Marshal(Problem{ // plain fields: it cannot fail
		Type:         "/problems/" + code,
		Title:        http.StatusText(status),
		Status:       status,
		Detail:       detail,
		NewestCursor: newest,
	})
	w.Header().Set("Cache-Control", "no-store")
	writeBody(w, status, "application/problem+json", append(b, '\n'))
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshalAnswer(v)
	if err != nil {
		slog.Error("encode an answer", "error", err)
		sendProblem(w, storelink.EINTERNAL, "Internal error.", "")
		return
	}
	writeBody(w, status, "application/json", b)
}

// writeBody answers with b, whole, and says its length: an answer to HEAD,
// whose body net/http drops, then has the Content-Length of GET's, which
// net/http would otherwise give only to answers that fit its buffer (and
// GET's larger answers would be chunked).
func writeBody(w http.ResponseWriter, status int, contentType string, b []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	if _, err := w.Write(b); err != nil {
		slog.Debug("write response", "error", err) // the client went away
	}
}

// problemDocs explains each problem type at its type URI.
var problemDocs = map[string]string{
	storelink.EINVALID:       "The request is malformed: a bad path, parameter, header or body. The detail says which.",
	storelink.EUNAUTHORIZED:  "No credentials, or credentials that are not valid here. Partner calls need a valid x-api-key for the client in the path; operator calls need Authorization: Bearer ADMIN_TOKEN.",
	storelink.EFORBIDDEN:     "The API key is valid, but for another client of the same partner (its key for another country). A key of another partner is answered as no key at all (unauthorized).",
	storelink.EAUTHLIMIT:     "Too many failed authentications (wrong admin tokens, API keys, dashboard logins or portal sign-ins) came from this address, or it failed lately while many addresses guess at these credentials. No attempt from the address is taken, not even with the right credentials, until the number of seconds in Retry-After has passed. A wrong guess the limiter cannot count, its table being full of failing addresses, is answered so too.",
	storelink.ENOTFOUND:      "The thing named in the path does not exist.",
	storelink.EGONE:          "The thing named in the path existed and is no longer kept: an upload's file and error file are removed once --upload-retention has passed since the upload was received. The detail says when.",
	storelink.ECONFLICT:      "The current state does not allow this request.",
	storelink.ECURSORAHEAD:   "The after cursor given to the event feed (GET /events/{client_id}) is past the feed's newest event: this database did not give it out, or it was restored from a backup taken before that event, and the events after the backup are not in it. newest_cursor names the feed's newest cursor. The consumer reads on with after=newest_cursor, and checks the orders it learnt of from events it had read past newest_cursor, since the restored database does not have those changes. An after equal to the newest cursor is an empty page, as always.",
	storelink.ETOOLARGE:      "The body is larger than allowed: larger than the maximum file size, or than the client's whole upload capacity.",
	storelink.EUNSUPPORTED:   "The Content-Type or Content-Encoding of the body is not accepted here; the detail says which. JSON bodies are sent as application/json (parameters such as charset=utf-8 and application/...+json types are accepted; JSON is UTF-8), and the Accept header of the answer names the type. Stock files are sent as application/csv, text/csv, text/plain or application/octet-stream, plain or with Content-Encoding: gzip.",
	storelink.EPRECONDITION:  "The request's If-Match names no version the thing has now: it was changed since its ETag was read. Nothing was changed. Read it again (its answer has the ETag), check that the change still applies, and send it again with the new ETag in If-Match; or send If-Match: * to change it whatever its version.",
	storelink.EUNPROCESSABLE: "The request is well-formed but its content breaks a rule.",
	storelink.ERATELIMIT:     "The client's upload capacity is used up (every upload counts as at least --capacity-min-upload bytes), or its validations are (--validations-per-minute), or its writes through the partner API and portal (--writes-per-minute). Wait the number of seconds in Retry-After, then send the same request again.",
	storelink.EBACKLOG:       "As many of the client's uploads are waiting to be processed as it may have (serve --max-waiting-uploads). Nothing was stored and no capacity was taken. Wait the number of seconds in Retry-After, an estimate from the recent processing rate, then send the same upload again.",
	storelink.EBUSY:          "The partner (all its clients together) already holds its share of a resource the service divides among partners: memory for bodies being received (--max-upload-memory-per-partner), file downloads (--max-downloads-per-partner) or test sends. Nothing was kept; send it again after the number of seconds in Retry-After, once one of its other requests has ended. Other partners are not held up.",
	storelink.ENOSPACE:       "The server has no space left on its disk (or its database's). Nothing of the request was stored; what was stored before is intact. Try again later; /readyz answers 503 until writes succeed again.",
	storelink.EINTERNAL:      "Something failed on the service's side. It has been logged.",
	storelink.EUNAVAILABLE:   "The service cannot take the request right now, for example because its database cannot be reached or it is busy receiving other files. Try again after the number of seconds in Retry-After.",
	"method_not_allowed":     "The path exists but does not take this method; the Allow header lists those it takes.",
	storelink.EBODYTIMEOUT:   "The request body did not arrive in full within the service's body timeout (--body-timeout), or no byte of it within 10 s of the service reading it. Nothing was kept; send the request again, faster or smaller.",
	storelink.EINFLIGHT:      "The partner's clients already have as many uploads and validations in flight as allowed at once (--max-uploads-in-flight, per partner). Nothing was kept; send it again when one of them has been answered (Retry-After).",
}

func (s *Server) handleProblemDoc(w http.ResponseWriter, r *http.Request) {
	doc, ok := problemDocs[r.PathValue("code")]
	if !ok {
		writeProblem(w, r, storelink.ENOTFOUND, "No such problem type.")
		return
	}
	writeBody(w, http.StatusOK, "text/plain; charset=utf-8", []byte(doc+"\n"))
}
