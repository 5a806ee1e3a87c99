package dashboard

import (
	"context"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"

	"storelink"
)

// The portal's upload form sends a stock file as multipart/form-data: its
// CSRF token first, then the file. The token is read and checked before
// any of the file; the file is then streamed into Deps.ReceiveUpload,
// which receives it as the API receives a PUT /stock/{client_id}/{file}
// (the same checks, limits, memory and answer), so the dashboard never
// holds more of it than the API would. After the upload the partner lands
// on its status page, which follows it until it is applied or rejected.

// maxCSRFField bounds the CSRF field read before the file: a token is 43
// bytes.
const maxCSRFField = 1 << 10

// uploadForm is a refused upload, shown beside the form.
type uploadForm struct {
	FileName, Error string
}

// handlePortalSend receives the upload form of the signed-in client.
func (h *Handler) handlePortalSend(w http.ResponseWriter, r *http.Request) {
	client, ok, err := h.checkSession(r, portalRealm)
	if h.sessionFault(w, r, err) {
		return
	}
	if !ok {
		http.Redirect(w, r, portalRealm.login, http.StatusSeeOther)
		return
	}
	var token string
	var file *multipart.Part
	r = h.OutsideDB(r, func(context.Context) { token, file, err = csrfThenFile(r) })
	if !h.csrfOK(w, r, portalRealm, token) {
		return
	}
	c, cerr := h.portalClient(r, client)
	if cerr != nil {
		h.renderError(w, r, cerr)
		return
	}
	name := ""
	if file != nil {
		name = file.FileName()
	}
	var u *storelink.Upload
	switch {
	case err != nil:
	case h.ReceiveUpload == nil:
		err = storelink.Errorf(storelink.EUNAVAILABLE, "This server takes no uploads from the portal; send your file with PUT /stock/{client_id}/{file}.")
	default:
		u, r, err = h.ReceiveUpload(r, &c.Client, name, file)
	}
	if refused(err) || storelink.ErrorCode(err) == storelink.EUNAVAILABLE {
		var e *storelink.Error
		if errors.As(err, &e) && e.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
		}
		h.showPortalUploads(w, r, statusOf[storelink.ErrorCode(err)], h.portalView(r, c, "/portal/uploads"), c,
			&uploadForm{FileName: name, Error: storelink.ErrorMessage(err)})
		return
	} else if err != nil {
		h.renderError(w, r, err)
		return
	}
	h.logger.Info("portal: upload", "client_id", c.ID, "upload_id", u.ID, "size_bytes", u.SizeBytes)
	http.Redirect(w, r, "/portal/uploads/"+u.ID, http.StatusSeeOther)
}

// csrfThenFile reads the upload form's first field, the CSRF token, and
// opens its second, the file, whose bytes are left to be read. A form
// that is not so is an EINVALID error, with the token when it was read.
func csrfThenFile(r *http.Request) (token string, file *multipart.Part, err error) {
	bad := storelink.Errorf(storelink.EINVALID, "Send the upload form of the uploads page: its token first, then one file.")
	mr, err := r.MultipartReader()
	if err != nil {
		return "", nil, bad
	}
	p, err := mr.NextPart()
	if err != nil || p.FormName() != "csrf" {
		return "", nil, bad
	}
	b, err := io.ReadAll(io.LimitReader(p, maxCSRFField))
	if err != nil {
		return "", nil, bad
	}
	token = string(b)
	file, err = mr.NextPart()
	if err != nil || file.FormName() != "file" {
		return token, nil, bad
	}
	if file.FileName() == "" {
		return token, nil, storelink.Errorf(storelink.EINVALID, "Choose the CSV file to upload.")
	}
	return token, file, nil
}
