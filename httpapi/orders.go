package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"

	"storelink"
)

func (s *Server) handleCreateOrder(w http.ResponseWriter, r *http.Request) {
	r, n, err := decodeNewOrder(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := s.Orders.CreateOrder(r.Context(), n)
	s.answerCreated(w, r, o, err)
}

func (s *Server) handleCreateWarehouseOrder(w http.ResponseWriter, r *http.Request) {
	r, n, err := decodeNewOrder(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := s.Orders.CreateWarehouseOrder(r.Context(), n)
	s.answerCreated(w, r, o, err)
}

// decodeNewOrder reads the body of a create call and its Idempotency-Key;
// the handler goes on with the request returned (decode).
func decodeNewOrder(w http.ResponseWriter, r *http.Request) (*http.Request, storelink.NewOrder, error) {
	var n storelink.NewOrder
	key, err := idempotencyKey(r.Header)
	if err != nil {
		return r, n, err
	}
	if r, err = decode(w, r, &n); err != nil {
		return r, n, err
	}
	n.IdempotencyKey = key
	return r, n, nil
}

// headerIdempotencyKey is the request header of the IETF draft "The
// Idempotency-Key HTTP Header Field"; headerReplayed marks an answer that a
// remembered key gave (the name Stripe uses), so that a caller can tell a
// retry's answer from a new order's.
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerReplayed       = "Idempotent-Replayed"
)

// idempotencyKey reads the Idempotency-Key header: "" when there is none.
// The draft makes its value a Structured Field string ("…", with \" and \\
// escapes); most clients send the bare key, as Stripe takes it. Both are
// accepted, and mean the same key.
func idempotencyKey(h http.Header) (string, error) {
	values := h.Values(headerIdempotencyKey)
	switch {
	case len(values) == 0:
		return "", nil
	case len(values) > 1:
		return "", storelink.Errorf(storelink.EINVALID, "Send one Idempotency-Key header, not %d.", len(values))
	}
	key := values[0]
	if len(key) >= 2 && key[0] == '"' && key[len(key)-1] == '"' {
		var ok bool
		if key, ok = unquoteSFString(key[1 : len(key)-1]); !ok {
			return "", storelink.Errorf(storelink.EINVALID, `Idempotency-Key is quoted but is not a valid string: inside the quotes, " and \ must be escaped with \.`)
		}
	}
	if err := storelink.CheckIdempotencyKey(key); err != nil {
		return "", err
	}
	return key, nil
}

// unquoteSFString undoes the escapes of a Structured Field string's inside
// (RFC 8941 section 3.3.3): \" and \\ only; a lone " or another escape is
// not a string.
func unquoteSFString(s string) (string, bool) {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return "", false
		case c == '\\':
			if i++; i == len(s) || (s[i] != '"' && s[i] != '\\') {
				return "", false
			}
			out = append(out, s[i])
		default:
			out = append(out, c)
		}
	}
	return string(out), true
}

// answerCreated answers a create call: 201 with the order, and its
// address in Location. A replayed answer is the order the key's first call
// made, as it now stands, at the same address; it wrote nothing, so there
// is nothing for the deliverer to wake up for.
func (s *Server) answerCreated(w http.ResponseWriter, r *http.Request, o *storelink.Order, err error) {
	if err == nil {
		w.Header().Set("Location", "/orders/"+url.PathEscape(o.ID))
	}
	if err == nil && o.Replayed {
		w.Header().Set(headerReplayed, "true")
		writeJSON(w, http.StatusCreated, o)
		return
	}
	s.answerOrder(w, r, http.StatusCreated, o, err)
}

func (s *Server) handleCancelOrder(w http.ResponseWriter, r *http.Request) {
	var req storelink.CancelRequest
	r, err := decodeOptional(w, r, &req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := s.Orders.CancelOrder(r.Context(), r.PathValue("order_id"), req)
	s.answerOrder(w, r, http.StatusOK, o, err)
}

func (s *Server) handleFulfilOrder(w http.ResponseWriter, r *http.Request) {
	var req storelink.FulfilRequest
	r, err := decodeOptional(w, r, &req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := s.Orders.FulfilOrder(r.Context(), r.PathValue("order_id"), req)
	s.answerOrder(w, r, http.StatusOK, o, err)
}

func (s *Server) handleReturnItems(w http.ResponseWriter, r *http.Request) {
	var req storelink.ReturnRequest
	r, err := decode(w, r, &req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := s.Orders.ReturnItems(r.Context(), r.PathValue("order_id"), req)
	s.answerOrder(w, r, http.StatusOK, o, err)
}

func (s *Server) handleWarehouseReturn(w http.ResponseWriter, r *http.Request) {
	var req storelink.WarehouseReturnRequest
	r, err := decode(w, r, &req)
	if err != nil {
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
