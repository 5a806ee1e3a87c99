package httpapi

import (
	"net/http"
	"net/url"

	"storelink"
)

func (s *Server) handleCreatePartner(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name string `json:"name"`
	}
	r, err := decode(w, r, &req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := s.Admin.CreatePartner(r.Context(), req.Name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, p)
}

func (s *Server) handleCreateClient(w http.ResponseWriter, r *http.Request) {
	var req struct {
		CountryCode string `json:"country_code"`
		Currency    string `json:"currency"`
	}
	r, err := decode(w, r, &req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.Admin.CreateClient(r.Context(), r.PathValue("partner_id"), req.CountryCode, req.Currency)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/admin/clients/"+url.PathEscape(c.ID))
	writeSecret(w, http.StatusCreated, c)
}

func (s *Server) handleListPartners(w http.ResponseWriter, r *http.Request) {
	limit, err := queryLimit(r, 50, 500)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	p, err := s.Admin.ListPartners(r.Context(), storelink.PartnerFilter{Q: q.Get("q"), Limit: limit, After: q.Get("after")})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) handleListClients(w http.ResponseWriter, r *http.Request) {
	limit, err := queryLimit(r, 50, 500)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	p, err := s.Admin.ListClients(r.Context(), storelink.ClientFilter{PartnerID: q.Get("partner_id"), Q: q.Get("q"), Limit: limit,
		After: q.Get("after")})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) handleGetClient(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("client_id")
	c, err := s.Admin.Client(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if c.Capacity, err = s.Uploads.Capacity(r.Context(), id, s.Capacity); err != nil {
		s.writeError(w, r, err)
		return
	}
	c.Endpoints = []storelink.Endpoint{}
	if s.Webhooks != nil {
		if c.Endpoints, err = s.Webhooks.Endpoints(r.Context(), id); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	setETag(w, c.Version())
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) handleCreateAPIKey(w http.ResponseWriter, r *http.Request) {
	k, err := s.Admin.CreateAPIKey(r.Context(), r.PathValue("client_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeSecret(w, http.StatusCreated, k)
}

func (s *Server) handleDeleteAPIKey(w http.ResponseWriter, r *http.Request) {
	if err := s.Admin.DeleteAPIKey(r.Context(), r.PathValue("client_id"), r.PathValue("key_id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleOwnAPIKeys(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
	keys, err := s.Admin.APIKeys(r.Context(), c.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		APIKeys []storelink.APIKey `json:"api_keys"`
	}{keys})
}

func (s *Server) handleCreateOwnAPIKey(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
	k, err := s.Admin.CreateAPIKey(r.Context(), c.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeSecret(w, http.StatusCreated, k)
}

func (s *Server) handleRevokeOwnAPIKey(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
	if err := s.Admin.RevokeOwnAPIKey(r.Context(), c.ID, r.PathValue("key_id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handlePutStore(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name string `json:"name"`
	}
	r, err := decode(w, r, &req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	st, created, err := s.Admin.PutStore(r.Context(), r.PathValue("client_id"), r.PathValue("store_id"), req.Name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, st)
}

func (s *Server) handleDeleteStore(w http.ResponseWriter, r *http.Request) {
	if err := s.Admin.DeleteStore(r.Context(), r.PathValue("client_id"), r.PathValue("store_id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
