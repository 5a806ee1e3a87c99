package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"storelink"
	"storelink/feed"
)

// countOrder counts an order call's answer by action and outcome for
// /metrics.
func (s *Server) countOrder(action string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h(rw, r)
		status := rw.status
		if _, gone := ended(r); gone && !rw.wrote {
			status = StatusClientGone
		}
		outcome := "succeeded"
		switch {
		case status < 300 && rw.Header().Get(headerReplayed) == "true":
			outcome = "replayed"
		case status < 300:
		case status == http.StatusConflict:
			outcome = "conflict"
		case status < 500 && status != StatusClientGone:
			outcome = "refused"
		default:
			outcome = "failed"
		}
		s.orderCalls.WithLabelValues(action, outcome).Inc()
	}
}

// countUpload counts upload answers by status code for /metrics.
func (s *Server) countUpload(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h(rw, r)
		status := rw.status
		if _, gone := ended(r); gone && !rw.wrote {
			status = StatusClientGone
		}
		s.uploadReqs.WithLabelValues(strconv.Itoa(status)).Inc()
	}
}

type uploadAccepted struct {
	UploadID   string                 `json:"upload_id"`
	ClientID   string                 `json:"client_id"`
	FileName   string                 `json:"file_name"`
	SizeBytes  int64                  `json:"size_bytes"`
	SHA256     string                 `json:"sha256"`
	Status     storelink.UploadStatus `json:"status"`
	ReceivedAt time.Time              `json:"received_at"`
	StatusURL  string                 `json:"status_url"`
}

// handleUpload receives a stock file. The cheap checks come first, and a
// Content-Length that cannot fit is refused before the body is read; the
// 200 is written only after the upload and its bytes are committed. Its
// database phases are the checks before the body and the accepting after
// it; reading the body is none (OutsideDB), the body timeout bounds it.
func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
	ctx := r.Context()
	before, err := s.Uploads.Capacity(ctx, c.ID, s.Capacity)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	setRateLimit(w, before)
	if err := s.checkWaiting(ctx, c.ID); err != nil {
		s.writeError(w, r, err)
		return
	}
	name := r.PathValue("file")
	if err := checkFileName(name); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkBodyHeaders(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	if n := declaredCSVLength(r); n > 0 {
		if err := s.fitsUpfront(before, n); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	u, after, r, err := s.receive(r, c, name, requestCSV(r))
	if after.BytesPerWindow > 0 {
		setRateLimit(w, after)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, uploadAccepted{
		UploadID: u.ID, ClientID: u.ClientID, FileName: u.FileName, SizeBytes: u.SizeBytes, SHA256: u.SHA256,
		Status: u.Status, ReceivedAt: u.ReceivedAt, StatusURL: UploadStatusPath(c.ID, u.ID),
	})
}

// UploadStatusPath is where a client reads an upload's status: the
// accept's status_url, and an upload event's.
func UploadStatusPath(clientID, uploadID string) string {
	return "/stock/" + clientID + "/uploads/" + uploadID
}

func (s *Server) fitsUpfront(c storelink.Capacity, n int64) error {
	if n > s.MaxFileSize {
		return tooLarge(s.MaxFileSize)
	}
	return s.Capacity.Fits(c, n)
}

func tooLarge(max int64) error {
	return storelink.Errorf(storelink.ETOOLARGE, "The file is larger than the maximum file size of %d bytes.", max)
}

// setRateLimit writes the IETF RateLimit headers; t is the seconds until
// the bucket is full again.
func setRateLimit(w http.ResponseWriter, c storelink.Capacity) {
	setRateLimitItem(w.Header(), "RateLimit-Policy", "upload", fmt.Sprintf(`"upload";q=%d;qu="content-bytes";w=%d`, c.BytesPerWindow, int64(c.Window.Seconds())))
	setRateLimitItem(w.Header(), "RateLimit", "upload", fmt.Sprintf(`"upload";r=%d;t=%d`, max(c.BytesLeft, 0), int64(c.FullIn.Seconds())))
}

// checkFileName checks an upload's file name. The name is only ever data, but a name
// with a slash could only come from a client that means a path, so it is
// refused too.
func checkFileName(name string) error {
	switch {
	case len(name) > 255:
		return storelink.Errorf(storelink.EINVALID, "The file name is %d bytes long; at most 255 are allowed.", len(name))
	case !utf8.ValidString(name):
		return storelink.Errorf(storelink.EINVALID, "The file name is not valid UTF-8.")
	case strings.IndexFunc(name, func(r rune) bool { return r < 0x20 || (r >= 0x7f && r < 0xa0) }) >= 0:
		return storelink.Errorf(storelink.EINVALID, "The file name holds a control character.")
	case strings.ContainsAny(name, `/\`):
		return storelink.Errorf(storelink.EINVALID, "The file name must not contain '/' or '\\'.")
	}
	// Before the suffix, whose message would quote the name as an override
	// shows it, reversed.
	if p := storelink.InvisibleProblem(name); p != "" {
		return storelink.Errorf(storelink.EINVALID, "The file name %s.", p)
	}
	if !strings.HasSuffix(strings.ToLower(name), ".csv") {
		return storelink.Errorf(storelink.EINVALID, "The file name must end in .csv (got %q).", name)
	}
	return nil
}

type validation struct {
	Result       string              `json:"result"`
	RowsTotal    int                 `json:"rows_total"`
	RowsValid    int                 `json:"rows_valid"`
	RowsRejected int                 `json:"rows_rejected"`
	Errors       []storelink.Problem `json:"errors"`
	Warnings     []storelink.Problem `json:"warnings"`
}

// handleValidate checks a file like an upload and applies nothing. The
// body is checked as it arrives, never held: a validation costs the memory
// of one record, and a file that fails stops being read (and, gzip,
// decompressed) at its first file problem, so neither its memory nor its
// CPU grows with what the sender makes the file look like.
func (s *Server) handleValidate(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
	if err := checkBodyHeaders(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	if declaredCSVLength(r) > s.MaxFileSize {
		s.writeError(w, r, tooLarge(s.MaxFileSize))
		return
	}
	list, err := s.Admin.Stores(r.Context(), c.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	stores := make(map[string]bool, len(list))
	for _, st := range list {
		stores[st.ID] = true
	}
	var rep storelink.FeedReport
	var body *validatedBody
	r = OutsideDB(r, func(context.Context) { rep, body, err = s.checkBody(r, stores) })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v := validation{Result: "valid", RowsTotal: rep.RowsTotal, RowsValid: rep.RowsValid, RowsRejected: rep.RowsRejected,
		Errors: nonNil(rep.Errors), Warnings: nonNil(rep.Warnings)}
	if len(rep.Errors) > 0 || rep.RowsValid == 0 {
		v.Result = "invalid"
	}
	if !body.eof {
		// The check ended before the body did: answer now and close,
		// rather than have net/http wait for the rest to discard it.
		w.Header().Set("Connection", "close")
	}
	writeJSON(w, http.StatusOK, v)
}

// checkBody reads the CSV of a validation and checks it as it arrives;
// the body it read tells whether it reached the end.
func (s *Server) checkBody(r *http.Request, stores map[string]bool) (storelink.FeedReport, *validatedBody, error) {
	src := requestCSV(r)
	csv, err := src.csvReader(s.MaxFileSize)
	if err != nil {
		return storelink.FeedReport{}, nil, err
	}
	body := &validatedBody{r: bufio.NewReader(io.LimitReader(csv, s.MaxFileSize+1))}
	if err := body.start(src); err != nil {
		return storelink.FeedReport{}, nil, err
	}
	rep, err := feed.Check(body, stores, nil)
	if err == nil && body.n > s.MaxFileSize {
		err = tooLarge(s.MaxFileSize)
	}
	if err != nil {
		return storelink.FeedReport{}, nil, src.readError(err)
	}
	return rep, body, nil
}

// validatedBody is the CSV of a validation as the checker reads it,
// counted so that a file past the size limit is told apart.
type validatedBody struct {
	r   *bufio.Reader
	n   int64
	eof bool // the body was read to its end
}

// start refuses an empty body and a gzip stream sent without its
// Content-Encoding, as an upload does, from the body's first bytes.
func (b *validatedBody) start(src csvSource) error {
	head, err := b.r.Peek(len(gzipMagic))
	if len(head) == 0 {
		if err != nil && err != io.EOF {
			return src.readError(err)
		}
		return src.emptyError()
	}
	return src.notGzipped(head)
}

func (b *validatedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	b.eof = b.eof || err == io.EOF
	return n, err
}

func nonNil(p []storelink.Problem) []storelink.Problem {
	if p == nil {
		return []storelink.Problem{}
	}
	return p
}

func (s *Server) handleGetUpload(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
	u, err := s.Uploads.Upload(r.Context(), c.ID, r.PathValue("upload_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, answerUpload(u))
}

// uploadAnswer is an upload as the API answers it: with has_errors, which
// is derived from rows_rejected and not stored.
type uploadAnswer struct {
	*storelink.Upload
	HasErrors bool `json:"has_errors"`
}

func answerUpload(u *storelink.Upload) uploadAnswer {
	return uploadAnswer{Upload: u, HasErrors: u.HasErrors()}
}

// handleCancelUpload cancels an upload that waits to be processed; its
// bytes go back to the capacity, which the answer's headers report.
func (s *Server) handleCancelUpload(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
	u, err := s.Uploads.Cancel(r.Context(), c.ID, r.PathValue("upload_id"), s.Capacity)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.Ended()
	if capacity, err := s.Uploads.Capacity(r.Context(), c.ID, s.Capacity); err == nil {
		setRateLimit(w, capacity)
	}
	writeJSON(w, http.StatusOK, answerUpload(u))
}

func (s *Server) handleListUploads(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
	limit, err := queryLimit(r, 50, 500)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f, err := uploadFilter(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f.Limit = limit
	list, err := s.Uploads.Uploads(r.Context(), c.ID, f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp := struct {
		Uploads    []uploadAnswer `json:"uploads"`
		NextBefore string         `json:"next_before,omitempty"`
	}{Uploads: make([]uploadAnswer, len(list))}
	for i := range list {
		resp.Uploads[i] = answerUpload(&list[i])
	}
	if len(list) == limit {
		resp.NextBefore = list[len(list)-1].ID
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) handleListStock(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
	limit, err := queryLimit(r, 100, 1000)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	rows, next, err := s.Stock.Stock(r.Context(), c.ID, storelink.StockFilter{
		StoreID: q.Get("store"), EAN: q.Get("ean"), ArticleNumber: q.Get("article_number"), Limit: limit, After: q.Get("after"),
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Stock      []storelink.Stock `json:"stock"`
		NextCursor string            `json:"next_cursor,omitempty"`
	}{rows, next})
}

// queryLimit reads ?limit= with a default and an upper bound.
// uploadFilter reads the filters of the upload listing: status, the time
// range since (inclusive) to until (exclusive), RFC 3339 each, and
// has_errors, true or false.
func uploadFilter(r *http.Request) (storelink.UploadFilter, error) {
	q := r.URL.Query()
	f := storelink.UploadFilter{Before: q.Get("before"), Status: storelink.UploadStatus(q.Get("status"))}
	if f.Status != "" && !slices.Contains(storelink.UploadStatuses, f.Status) {
		return f, storelink.Errorf(storelink.EINVALID, "status must be one of accepted, processing, applied, rejected, cancelled (got %q).", truncate(string(f.Status)))
	}
	for _, p := range []struct {
		name string
		t    *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return f, storelink.Errorf(storelink.EINVALID, "%s must be a time in RFC 3339, such as 2026-11-21T07:54:21Z (got %q).", p.name, truncate(v))
		}
		// Times are kept to the millisecond: a finer one is rounded up,
		// which selects the same uploads on every database.
		if ms := t.Truncate(time.Millisecond); ms.Before(t) {
			t = ms.Add(time.Millisecond)
		}
		*p.t = t
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return f, storelink.Errorf(storelink.EINVALID, "since must be before until.")
	}
	if v := q.Get("has_errors"); v != "" {
		has, err := storelink.ParseHasErrors(v)
		if err != nil {
			return f, err
		}
		f.HasErrors = &has
	}
	return f, nil
}

// truncate shortens a value quoted back in an error.
func truncate(v string) string {
	if len(v) > 64 {
		return v[:64] + "…"
	}
	return v
}

func queryLimit(r *http.Request, def, max int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, storelink.Errorf(storelink.EINVALID, "limit must be a whole number from 1 to %d.", max)
	}
	return n, nil
}
