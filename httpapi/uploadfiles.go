package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"storelink"
)

// Files are answered from memory, whole: a stock file is at most
// --max-file-size and its error file at most twice that. Downloads bound
// how many are in memory at once, per process and per partner, and each
// has downloadTimeout to be written, so that clients that do not read
// cannot hold that memory.
//
// DefaultMaxDownloads places keep the worst case (every place an error
// file of the largest size) at 8 × 20 MiB by default; two per partner let
// a partner fetch a file and its error file at once, and leave six places
// to the others when three partners (or the operator) are at their share.
const (
	DefaultMaxDownloads           = 8
	DefaultMaxDownloadsPerPartner = 2
	downloadTimeout               = 2 * time.Minute
	downloadRetryAfter            = 1 // a download usually ends within a second
)

// Downloads are the places of the file downloads of a process: the API's,
// and the dashboard's and portal's, which serve the same files, so that
// one bound holds for all of them. The places are divided per partner;
// the operator's downloads have a share of their own (OperatorShare).
type Downloads struct {
	places  *pool
	timeout time.Duration
}

// NewDownloads returns total places, perPartner of them at most for one
// partner's clients (the defaults when 0), each with timeout to be written
// (downloadTimeout when 0).
func NewDownloads(total, perPartner int, timeout time.Duration) *Downloads {
	if total <= 0 {
		total = DefaultMaxDownloads
	}
	if perPartner <= 0 {
		perPartner = DefaultMaxDownloadsPerPartner
	}
	if timeout <= 0 {
		timeout = downloadTimeout
	}
	return &Downloads{places: newPool(int64(total), int64(perPartner)), timeout: timeout}
}

// Take takes one of the places for a download of partner's (OperatorShare
// for the operator) and sets the answer's write deadline; release gives
// the place back. Without a place it returns EBUSY (429) when the partner
// holds its share, EUNAVAILABLE (503) when all are taken, each with a
// Retry-After. An answer whose deadline cannot be set gets no place: it
// could hold one for ever.
func (d *Downloads) Take(w http.ResponseWriter, partner string) (release func(), err error) {
	var e *storelink.Error
	switch d.places.take(partner, 1) {
	case granted:
	case overShare:
		e = storelink.Errorf(storelink.EBUSY, "%d file downloads of yours are being sent right now, as many as one partner is sent at once; try again in a second.", d.places.share)
	default:
		e = storelink.Errorf(storelink.EUNAVAILABLE, "%d file downloads are being sent right now, as many as are sent at once; try again in a second.", d.places.total)
	}
	if e != nil {
		e.RetryAfter = downloadRetryAfter
		return func() {}, e
	}
	var once sync.Once
	release = func() { once.Do(func() { d.places.give(partner, 1) }) }
	if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d.timeout)); err != nil {
		release()
		return func() {}, fmt.Errorf("set the write deadline of a download: %w", err)
	}
	return release, nil
}

// handleUploadFile answers the file of an upload as it was received (a
// gzip upload decompressed), under its own name, while it is kept.
func (s *Server) handleUploadFile(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
	release, err := s.Downloads.Take(w, c.PartnerID)
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

// handleUploadErrorFile answers the error file of a processed upload, named
// after its file.
func (s *Server) handleUploadErrorFile(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
	release, err := s.Downloads.Take(w, c.PartnerID)
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
	name := id + "-errors.csv"
	if u, err := s.Uploads.Upload(r.Context(), c.ID, id); err == nil {
		name = u.ErrorFileName()
	}
	writeCSV(w, "text/csv; charset=utf-8", name, storelink.ChunksOf(data))
}

// writeCSV answers a CSV file as a download named name. The file is the
// partner's own bytes: nosniff keeps a browser from running it as HTML or
// script whatever it holds.
func writeCSV(w http.ResponseWriter, contentType, name string, data storelink.Chunks) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Disposition", Attachment(name))
	h.Set("Content-Length", strconv.FormatInt(data.Len(), 10))
	h.Set("Cache-Control", "private, no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = data.WriteTo(w)
}
