package httpapi

import (
	"mime"
	"net/http"
	"strconv"

	"storelink"
)

// handleUploadFile answers the file of an upload as it was received (a
// gzip upload decompressed), under its own name, while it is kept.
func (s *Server) handleUploadFile(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
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
	id := r.PathValue("upload_id")
	data, err := s.Uploads.UploadErrorFile(r.Context(), c.ID, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeCSV(w, "text/csv; charset=utf-8", id+"-errors.csv", data)
}

// writeCSV answers a CSV file as a download named name.
func writeCSV(w http.ResponseWriter, contentType, name string, data []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	h.Set("Content-Length", strconv.Itoa(len(data)))
	h.Set("Cache-Control", "private, no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}
