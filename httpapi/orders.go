package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"

	"storelink"
)

func (s *Server) handleCreateOrder(w http.ResponseWriter, r *http.Request) {
	var n storelink.NewOrder
	if err := decode(r, &n); err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := s.Orders.CreateOrder(r.Context(), n)
	s.answerOrder(w, r, http.StatusCreated, o, err)
}

func (s *Server) handleCreateWarehouseOrder(w http.ResponseWriter, r *http.Request) {
	var n storelink.NewOrder
	if err := decode(r, &n); err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := s.Orders.CreateWarehouseOrder(r.Context(), n)
	s.answerOrder(w, r, http.StatusCreated, o, err)
}

func (s *Server) handleCancelOrder(w http.ResponseWriter, r *http.Request) {
	var req storelink.CancelRequest
	if err := decodeOptional(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := s.Orders.CancelOrder(r.Context(), r.PathValue("order_id"), req)
	s.answerOrder(w, r, http.StatusOK, o, err)
}

func (s *Server) handleFulfilOrder(w http.ResponseWriter, r *http.Request) {
	var req storelink.FulfilRequest
	if err := decodeOptional(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := s.Orders.FulfilOrder(r.Context(), r.PathValue("order_id"), req)
	s.answerOrder(w, r, http.StatusOK, o, err)
}

func (s *Server) handleReturnItems(w http.ResponseWriter, r *http.Request) {
	var req storelink.ReturnRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := s.Orders.ReturnItems(r.Context(), r.PathValue("order_id"), req)
	s.answerOrder(w, r, http.StatusOK, o, err)
}

func (s *Server) handleWarehouseReturn(w http.ResponseWriter, r *http.Request) {
	var req storelink.WarehouseReturnRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := s.Orders.WarehouseReturn(r.Context(), r.PathValue("order_id"), req)
	s.answerOrder(w, r, http.StatusOK, o, err)
}

func (s *Server) answerOrder(w http.ResponseWriter, r *http.Request, status int, o *storelink.Order, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.Delivering() // wakes the background loops: a new event is waiting
	writeJSON(w, status, o)
}

func (s *Server) handleGetOrder(w http.ResponseWriter, r *http.Request) {
	o, err := s.Orders.Order(r.Context(), r.PathValue("order_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, o)
}

// eventList is a page of events: each the exact JSON partners receive.
type eventList struct {
	Events     []json.RawMessage `json:"events"`
	NextCursor string            `json:"next_cursor,omitempty"`
}

func payloads(list []storelink.EventRecord) []json.RawMessage {
	out := make([]json.RawMessage, len(list))
	for i, e := range list {
		out[i] = e.Payload
	}
	return out
}

func (s *Server) handleOrderEvents(w http.ResponseWriter, r *http.Request) {
	list, err := s.Orders.OrderEvents(r.Context(), r.PathValue("order_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, eventList{Events: payloads(list)})
}

func (s *Server) handleListOrders(w http.ResponseWriter, r *http.Request) {
	limit, err := queryLimit(r, 50, 500)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	state := storelink.OrderState(q.Get("state"))
	if state != "" && !slices.Contains(storelink.OrderStates, state) {
		s.writeError(w, r, storelink.Errorf(storelink.EINVALID, "state %q is not an order state.", state))
		return
	}
	list, err := s.Orders.Orders(r.Context(), storelink.OrderFilter{
		ClientID: q.Get("client_id"), OrderNumber: q.Get("order_number"), State: state, Limit: limit, Before: q.Get("before"),
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp := struct {
		Orders     []storelink.Order `json:"orders"`
		NextBefore string            `json:"next_before,omitempty"`
	}{Orders: list}
	if len(list) == limit {
		resp.NextBefore = list[len(list)-1].ID
	}
	writeJSON(w, http.StatusOK, resp)
}

// handleEvents is the partner's pull feed: its client's events in order.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
	limit, err := queryLimit(r, 100, 1000)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list, next, err := s.Events.Events(r.Context(), c.ID, r.URL.Query().Get("after"), limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, eventList{Events: payloads(list), NextCursor: next})
}
