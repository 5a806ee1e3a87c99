package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"storelink"
)

// The operator's and the partner's calls on endpoints and their
// deliveries beyond registering and changing them: an endpoint with its
// stats, deletion, recovery of failed deliveries, test sends, and the
// partner's own view of its endpoints and deliveries.

func (s *Server) handleGetEndpoint(w http.ResponseWriter, r *http.Request) {
	s.getEndpoint(w, r, "")
}

func (s *Server) handlePartnerEndpoint(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
	s.getEndpoint(w, r, c.ID)
}

// getEndpoint answers an endpoint of clientID's (any when "") with its
// stats, and its ETag.
func (s *Server) getEndpoint(w http.ResponseWriter, r *http.Request, clientID string) {
	e, err := s.Webhooks.Endpoint(r.Context(), clientID, r.PathValue("endpoint_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	setETag(w, e.Version())
	writeJSON(w, http.StatusOK, e)
}

// deleteEndpoint deletes an endpoint of clientID's (any when ""), on the
// condition of its If-Match.
func (s *Server) deleteEndpoint(w http.ResponseWriter, r *http.Request, clientID string) {
	cond, err := ifMatch(r.Header)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("endpoint_id")
	if err := s.Webhooks.DeleteEndpoint(r.Context(), clientID, id, cond); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.EndpointDeleted(id) // what the deliverer claimed for it is not sent
	w.WriteHeader(http.StatusNoContent)
}

// recoverDeliveries makes the failed deliveries of an endpoint of
// clientID's (any when "") since a time pending again.
func (s *Server) recoverDeliveries(w http.ResponseWriter, r *http.Request, clientID string) {
	var req struct {
		Since *string `json:"since"`
	}
	r, err := decode(w, r, &req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Since == nil {
		s.writeError(w, r, storelink.Errorf(storelink.EUNPROCESSABLE, "since is required: an RFC 3339 time such as 2026-11-21T00:00:00Z."))
		return
	}
	since, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(*req.Since))
	if err != nil {
		s.writeError(w, r, storelink.Errorf(storelink.EUNPROCESSABLE, "since: %s is not an RFC 3339 time such as 2026-11-21T00:00:00Z.",
			quoteShort(*req.Since)))
		return
	}
	n, err := s.Webhooks.RecoverDeliveries(r.Context(), clientID, r.PathValue("endpoint_id"), since)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if n > 0 {
		s.Delivering()
	}
	writeJSON(w, http.StatusAccepted, map[string]int{"deliveries": n})
}

func (s *Server) handleTestEndpoint(w http.ResponseWriter, r *http.Request) {
	s.testEndpoint(w, r, "", OperatorShare)
}

func (s *Server) handlePartnerTestEndpoint(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
	s.testEndpoint(w, r, c.ID, c.PartnerID)
}

// testEndpoint sends a test event to the path's endpoint, of clientID's
// when it is not "", and answers what came of it. The send waits on the
// endpoint, not the database: it is no database phase (OutsideDB), and it
// holds one of the places of TestSends, in partner's share, which bound
// it in time.
func (s *Server) testEndpoint(w http.ResponseWriter, r *http.Request, clientID, partner string) {
	var req struct {
		State storelink.OrderState `json:"state"`
	}
	r, err := decodeOptional(w, r, &req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	job, err := s.Webhooks.TestDelivery(r.Context(), clientID, r.PathValue("endpoint_id"), req.State)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.Tester == nil {
		s.writeError(w, r, storelink.Errorf(storelink.EUNAVAILABLE, "This process sends no webhooks, so it cannot send a test."))
		return
	}
	var res *storelink.TestResult
	r = OutsideDB(r, func(ctx context.Context) {
		ctx, release, terr := s.TestSends.Take(ctx, partner)
		defer release()
		if err = terr; err == nil {
			res = s.Tester.SendTest(ctx, job)
		}
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// handleListClientEndpoints answers a page of a client's endpoints, each
// as GET /admin/webhooks/{endpoint_id} shows it, paged as the operator's
// other lists are.
func (s *Server) handleListClientEndpoints(w http.ResponseWriter, r *http.Request) {
	limit, err := queryLimit(r, 50, 500)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := s.Webhooks.ClientEndpoints(r.Context(), storelink.EndpointFilter{ClientID: r.PathValue("client_id"), Limit: limit,
		After: r.URL.Query().Get("after")})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) handlePartnerEndpoints(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
	list, err := s.Webhooks.EndpointDetails(r.Context(), c.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Endpoints []storelink.EndpointDetail `json:"endpoints"`
	}{list})
}

func (s *Server) handlePartnerDeliveries(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
	f, err := deliveryFilter(r, "after")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f.ClientID = c.ID
	list, err := s.Webhooks.Deliveries(r.Context(), f)
	if storelink.ErrorCode(err) == storelink.EINVALID {
		// The one filter the service refuses is the cursor, which this
		// call names after: a partner pages on from the last delivery
		// it saw.
		err = storelink.CursorError("after", f.Before)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp := struct {
		Deliveries []storelink.Delivery `json:"deliveries"`
		NextCursor string               `json:"next_cursor,omitempty"`
	}{Deliveries: list}
	if len(list) == f.Limit {
		resp.NextCursor = list[len(list)-1].ID
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) handlePartnerRedeliver(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
	id := r.PathValue("delivery_id")
	if err := s.Webhooks.RedeliverFor(r.Context(), c.ID, id); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.Delivering()
	writeJSON(w, http.StatusAccepted, map[string]string{"delivery_id": id, "state": string(storelink.DeliveryPending)})
}
