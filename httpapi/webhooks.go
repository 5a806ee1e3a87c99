package httpapi

import (
	"net/http"
	"net/url"
	"slices"

	"storelink"
	"storelink/webhook"
)

// ofAnyClient is an operator's call on endpoints, which reach every
// client's; ofOwnClient is a partner's, which reach its client's only: an
// endpoint of another client is not found, as one that does not exist.
func ofAnyClient(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { h(w, r, "") }
}

func ofOwnClient(h func(http.ResponseWriter, *http.Request, string)) func(http.ResponseWriter, *http.Request, *storelink.Client) {
	return func(w http.ResponseWriter, r *http.Request, c *storelink.Client) { h(w, r, c.ID) }
}

func (s *Server) handleCreateEndpoint(w http.ResponseWriter, r *http.Request) {
	s.createEndpoint(w, r, r.PathValue("client_id"), "/admin/webhooks/")
}

func (s *Server) handleCreateOwnEndpoint(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
	s.createEndpoint(w, r, c.ID, "/webhooks/"+url.PathEscape(c.ID)+"/endpoints/")
}

// createEndpoint registers an endpoint of clientID's and answers its
// secret, the only time it is shown, with its address (under at) and
// ETag.
func (s *Server) createEndpoint(w http.ResponseWriter, r *http.Request, clientID, at string) {
	var n storelink.NewEndpoint
	r, err := decode(w, r, &n)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := webhook.CheckNewEndpoint(&n, s.WebhookAllowPrivate); err != nil {
		s.writeError(w, r, err)
		return
	}
	secret := webhook.NewSecret()
	e, err := s.Webhooks.CreateEndpoint(r.Context(), clientID, n, secret)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", at+url.PathEscape(e.ID))
	setETag(w, e.Version())
	writeSecret(w, http.StatusCreated, storelink.EndpointSecret{Endpoint: *e, Secret: secret})
}

// patchEndpoint changes an endpoint of clientID's (any when ""), on the
// condition of its If-Match.
func (s *Server) patchEndpoint(w http.ResponseWriter, r *http.Request, clientID string) {
	cond, err := ifMatch(r.Header)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var p storelink.EndpointPatch
	r, err = decode(w, r, &p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p.IfMatch = cond
	if err := webhook.CheckEndpointPatch(&p, s.WebhookAllowPrivate); err != nil {
		s.writeError(w, r, err)
		return
	}
	e, err := s.Webhooks.UpdateEndpoint(r.Context(), clientID, r.PathValue("endpoint_id"), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.Delivering() // an enabled endpoint's parked deliveries may go now
	setETag(w, e.Version())
	writeJSON(w, http.StatusOK, e)
}

// rotateSecret gives an endpoint of clientID's (any when "") a new secret
// and answers it, the only time it is shown.
func (s *Server) rotateSecret(w http.ResponseWriter, r *http.Request, clientID string) {
	var req struct {
		Overlap string `json:"overlap,omitempty"`
	}
	r, err := decodeOptional(w, r, &req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	overlap, err := webhook.ParseOverlap(req.Overlap)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	secret := webhook.NewSecret()
	e, err := s.Webhooks.RotateSecret(r.Context(), clientID, r.PathValue("endpoint_id"), storelink.SecretRotation{Secret: secret, Overlap: overlap})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	setETag(w, e.Version())
	writeSecret(w, http.StatusOK, storelink.EndpointSecret{Endpoint: *e, Secret: secret})
}

// deliveryFilter reads the filters of a listing of deliveries (state,
// endpoint_id, order_id, order_number, event_id, limit) and its cursor,
// named param.
func deliveryFilter(r *http.Request, param string) (storelink.DeliveryFilter, error) {
	limit, err := queryLimit(r, 50, 500)
	if err != nil {
		return storelink.DeliveryFilter{}, err
	}
	q := r.URL.Query()
	// status is the contract's name of the filter, state the older one.
	state := storelink.DeliveryState(q.Get("state"))
	if status := storelink.DeliveryState(q.Get("status")); status != "" {
		if state != "" && state != status {
			return storelink.DeliveryFilter{}, storelink.Errorf(storelink.EINVALID, "status and state name the same filter; give one of them.")
		}
		state = status
	}
	if state != "" && !slices.Contains(storelink.DeliveryStates, state) {
		return storelink.DeliveryFilter{}, storelink.Errorf(storelink.EINVALID, "status must be pending, succeeded, failed or cancelled.")
	}
	f := storelink.DeliveryFilter{State: state, EndpointID: q.Get("endpoint_id"), OrderID: q.Get("order_id"),
		OrderNumber: q.Get("order_number"), EventID: q.Get("event_id"), Limit: limit, Before: q.Get(param)}
	if err := f.CheckValues(); err != nil {
		return storelink.DeliveryFilter{}, err
	}
	return f, nil
}

func (s *Server) handleListDeliveries(w http.ResponseWriter, r *http.Request) {
	f, err := deliveryFilter(r, "before")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f.ClientID = r.URL.Query().Get("client_id")
	limit := f.Limit
	list, err := s.Webhooks.Deliveries(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp := struct {
		Deliveries []storelink.Delivery `json:"deliveries"`
		NextBefore string               `json:"next_before,omitempty"`
	}{Deliveries: list}
	if len(list) == limit {
		resp.NextBefore = list[len(list)-1].ID
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) handleRedeliver(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("delivery_id")
	if err := s.Webhooks.Redeliver(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.Delivering()
	writeJSON(w, http.StatusAccepted, map[string]string{"delivery_id": id, "state": string(storelink.DeliveryPending)})
}
