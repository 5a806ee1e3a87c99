package dashboard

import (
	"net/http"
	"slices"

	"storelink"
)

type uploadRow struct {
	storelink.Upload
	ClientLabel string
}

type uploadsData struct {
	Clients []clientOption
	Client  string
	Status  string
	// HasErrors is the has_errors filter as given: "", "true" or "false".
	HasErrors string
	Statuses  []storelink.UploadStatus
	Uploads   []uploadRow
	// Next is the before= of the next page; paging needs one client.
	Next string
}

// uploadsPage is how many uploads the list shows at once.
const uploadsPage = 50

func (h *Handler) handleUploads(w http.ResponseWriter, r *http.Request, v view) {
	ctx, q := r.Context(), r.URL.Query()
	d := uploadsData{Client: q.Get("client"), Status: q.Get("status"), HasErrors: q.Get("has_errors"), Statuses: storelink.UploadStatuses}
	if d.Status != "" && !slices.Contains(storelink.UploadStatuses, storelink.UploadStatus(d.Status)) {
		h.renderError(w, r, storelink.Errorf(storelink.EINVALID, "status must be accepted, processing, applied, rejected or cancelled."))
		return
	}
	f, err := uploadListFilter(d.Status, d.HasErrors)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	if d.Clients, err = h.clientOptions(ctx); err != nil {
		h.renderError(w, r, err)
		return
	}
	labels := map[string]string{}
	var ids []string
	for _, c := range d.Clients {
		labels[c.ID] = c.Label
		if d.Client == "" || d.Client == c.ID {
			ids = append(ids, c.ID)
		}
	}
	if d.Client != "" && len(ids) == 0 {
		h.renderError(w, r, storelink.Errorf(storelink.ENOTFOUND, "Client %q not found.", d.Client))
		return
	}
	limit := queryLimit(r, uploadsPage, 500)
	f.Limit = limit
	if d.Client != "" {
		f.Before = q.Get("before")
	}
	var list []storelink.Upload
	if d.Client != "" {
		list, err = h.Uploads.Uploads(ctx, d.Client, f)
	} else {
		list, err = h.Uploads.AllUploads(ctx, f) // one read, whatever the number of clients
	}
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	for _, u := range list {
		d.Uploads = append(d.Uploads, uploadRow{Upload: u, ClientLabel: labels[u.ClientID]})
	}
	if d.Client != "" && len(d.Uploads) == limit {
		d.Next = d.Uploads[limit-1].ID
	}
	v.Title, v.Nav, v.Data = "Uploads", "uploads", d
	h.render(w, r, http.StatusOK, "uploads", v)
}

// uploadListFilter is the filter of an upload list page: status, already
// checked, and has_errors ("" for either). Errors: EINVALID.
func uploadListFilter(status, hasErrors string) (storelink.UploadFilter, error) {
	f := storelink.UploadFilter{Status: storelink.UploadStatus(status)}
	if hasErrors != "" {
		has, err := storelink.ParseHasErrors(hasErrors)
		if err != nil {
			return f, err
		}
		f.HasErrors = &has
	}
	return f, nil
}

// problemGroup is the problems of one type: each message with its lines.
type problemGroup struct {
	Type     string
	Lines    int
	Problems []storelink.Problem
}

func groupProblems(ps []storelink.Problem) []problemGroup {
	var out []problemGroup
	at := map[string]int{}
	for _, p := range ps {
		i, ok := at[p.Type]
		if !ok {
			i = len(out)
			at[p.Type] = i
			out = append(out, problemGroup{Type: p.Type})
		}
		out[i].Problems = append(out[i].Problems, p)
		out[i].Lines += max(p.Count, len(p.LineNumbers))
	}
	return out
}

type uploadData struct {
	*storelink.Upload
	ClientLabel string
	Errors      []problemGroup
	Warnings    []problemGroup
}

func (h *Handler) handleUpload(w http.ResponseWriter, r *http.Request, v view) {
	ctx := r.Context()
	u, err := h.Uploads.Upload(ctx, r.PathValue("client_id"), r.PathValue("upload_id"))
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	d := uploadData{Upload: u, Errors: groupProblems(u.Errors), Warnings: groupProblems(u.Warnings)}
	if d.ClientLabel, err = h.clientLabel(ctx, u.ClientID); err != nil {
		h.renderError(w, r, err)
		return
	}
	if !u.Status.Final() {
		v.Refresh = 1 // until it is applied or rejected
	}
	v.Title, v.Nav, v.Data = "Upload "+u.FileName, "uploads", d
	h.render(w, r, http.StatusOK, "upload", v)
}

// handleUploadFile gives the operator the file of an upload as received.
func (h *Handler) handleUploadFile(w http.ResponseWriter, r *http.Request, v view) {
	h.handlePortalUploadFile(w, r, v, r.PathValue("client_id"))
}

// handleErrorFile gives the operator the error file of an upload.
func (h *Handler) handleErrorFile(w http.ResponseWriter, r *http.Request, v view) {
	h.handlePortalErrorFile(w, r, v, r.PathValue("client_id"))
}
