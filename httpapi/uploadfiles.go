package httpapi

import (
	"mime"
	"net/http"
	"strconv"
	"time"

	"storelink"
)

// Files are answered from memory, whole: a stock file is at most
// --max-file-size and its error file at most twice that. maxDownloads
// bounds how many are in memory at once, per process, and each has
// downloadTimeout to be written, so that clients that do not read cannot
// hold that memory.
const (
	maxDownloads    = 4
	downloadTimeout = 2 * time.Minute
)

// Downloads are the places of the file downloads of a process: the API's,
// and the dashboard's and portal's, which serve the same files, so that
// one bound holds for all of them.
type Downloads struct{ places chan struct{} }

// NewDownloads returns maxDownloads places.
func NewDownloads() *Downloads { return &Downloads{places: make(chan struct{}, maxDownloads)} }

// Take takes one of the places and sets the answer's write deadline, or
// returns EUNAVAILABLE with a Retry-After when there is none; release
// gives the place back.
func (d *Downloads) Take(w http.ResponseWriter) (release func(), err error) {
	select {
	case d.places <- struct{}{}:
	default:
		e := storelink.Errorf(storelink.EUNAVAILABLE, "%d file downloads are being sent right now, as many as are sent at once; try again in a second.", maxDownloads)
		e.RetryAfter = 1
		return func() {}, e
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(downloadTimeout))
	return func() { <-d.places }, nil
}

// download takes one of the places of the file downloads, or answers 503
// with Retry-After when there is none; release gives it back.
func (s *Server) download(w http.ResponseWriter) (release func(), err error) {
	return s.Downloads.Take(w)
}

// handleUploadFile answers the file of an upload as it was received (a
// gzip upload decompressed), under its own name, while it is kept.
func (s *Server) handleUploadFile(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
	release, err := s.download(w)
	defer release()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("upload_id")
	data, err := s.Uploads.UploadFile(r.Context(), c.ID, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	name := id + ".csv"
	if u, err := s.Uploads.Upload(r.Context(), c.ID, id); err == nil {
		name = u.FileName
	}
	writeCSV(w, "text/csv", name, data)
}

// handleUploadErrorFile answers the error file of a processed upload.
func (s *Server) handleUploadErrorFile(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
	release, err := s.download(w)
	defer release()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("upload_id")
	data, err := s.Uploads.UploadErrorFile(r.Context(), c.ID, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeCSV(w, "text/csv; charset=utf-8", id+"-errors.csv", data)
}

// writeCSV answers a CSV file as a download named name. The file is the
// partner's own bytes: nosniff keeps a browser from running it as HTML or
// script whatever it holds.
func writeCSV(w http.ResponseWriter, contentType, name string, data []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	h.Set("Content-Length", strconv.Itoa(len(data)))
	h.Set("Cache-Control", "private, no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}
