package dashboard

import (
	"net/http"

	"storelink"
)

// The console's partners page: the partners a page at a time, searched
// as the operator API's list is, a form that creates a partner and one
// that creates a client of a partner, whose first API key is shown once on
// the page that answers it.

// partnersPage is how many partners the page lists at a time.
const partnersPage = 50

type partnersData struct {
	Q, After string
	Page     *storelink.PartnerPage
	// Partner is the partner the client form has chosen.
	Partner    string
	NewPartner partnerForm
	NewClient  clientForm
	Shown      *shownOnce
	// ShownClient is the client just created, whose key Shown is.
	ShownClient string
}

// partnerForm and clientForm are the create forms as sent, to show them
// again with their error.
type partnerForm struct{ Name, Error string }

type clientForm struct{ PartnerID, CountryCode, Currency, Error string }

func (h *Handler) handlePartners(w http.ResponseWriter, r *http.Request, v view) {
	q := r.URL.Query()
	h.showPartners(w, r, http.StatusOK, v, partnersData{Q: q.Get("q"), After: q.Get("after"), Partner: q.Get("partner")})
}

// showPartners renders a page of partners with what d adds: a refused
// form with what was typed, a key shown once.
func (h *Handler) showPartners(w http.ResponseWriter, r *http.Request, status int, v view, d partnersData) {
	var err error
	d.Page, err = h.Admin.ListPartners(r.Context(), storelink.PartnerFilter{Q: d.Q, Limit: partnersPage, After: d.After})
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	if d.NewClient.PartnerID != "" {
		d.Partner = d.NewClient.PartnerID
	}
	v.Title, v.Nav, v.Data = "Partners", "partners", d
	h.render(w, r, status, "partners", v)
}

// handleCreatePartner creates a partner and shows it chosen in the client
// form.
func (h *Handler) handleCreatePartner(w http.ResponseWriter, r *http.Request) {
	form := partnerForm{Name: r.PostFormValue("name")}
	p, err := h.Admin.CreatePartner(r.Context(), form.Name)
	if refused(err) {
		form.Error = storelink.ErrorMessage(err)
		h.showPartners(w, r, statusOf[storelink.ErrorCode(err)], h.clientView(r, "/dashboard/partners"), partnersData{NewPartner: form})
		return
	} else if err != nil {
		h.renderError(w, r, err)
		return
	}
	h.logger.Info("dashboard: partner created", "partner_id", p.ID)
	http.Redirect(w, r, withParams(operatorRealm, "/dashboard/partners", "q", p.ID, "partner", p.ID, "done", "partner-created"), http.StatusSeeOther)
}

// handleCreateClient creates a client of the form's partner and shows its
// first API key once.
func (h *Handler) handleCreateClient(w http.ResponseWriter, r *http.Request) {
	form := clientForm{PartnerID: r.PostFormValue("partner_id"), CountryCode: r.PostFormValue("country_code"), Currency: r.PostFormValue("currency")}
	v := h.clientView(r, "/dashboard/partners")
	d := partnersData{Q: r.PostFormValue("q"), After: r.PostFormValue("after")}
	c, err := h.Admin.CreateClient(r.Context(), form.PartnerID, form.CountryCode, form.Currency)
	if refused(err) || storelink.ErrorCode(err) == storelink.ENOTFOUND {
		form.Error = storelink.ErrorMessage(err)
		d.NewClient = form
		h.showPartners(w, r, statusOf[storelink.ErrorCode(err)], v, d)
		return
	} else if err != nil {
		h.renderError(w, r, err)
		return
	}
	h.logger.Info("dashboard: client created", "partner_id", c.PartnerID, "client_id", c.ID)
	d.Shown = &shownOnce{Title: "API key of the new client " + c.CountryCode, Value: c.APIKey, Then: clientPath(c.ID),
		Note: "Give it to the partner with the client id " + c.ID + ": their systems send it as the x-api-key header. " +
			"Only its hash is kept: nobody can show it again."}
	d.ShownClient, d.Partner = c.ID, c.PartnerID
	h.showPartners(w, r, http.StatusOK, v, d)
}
