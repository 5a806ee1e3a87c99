package dashboard

import (
	"context"
	"net/http"
	"slices"

	"storelink"
)

// deliveryRow is a delivery with the URL of its endpoint.
type deliveryRow struct {
	storelink.Delivery
	URL         string
	ClientLabel string
}

// deliveryGroup is the deliveries in one state.
type deliveryGroup struct {
	State storelink.DeliveryState
	Rows  []deliveryRow
	// More tells that the group was cut at its limit.
	More bool
}

type deliveriesData struct {
	Clients []clientOption
	Client  string
	State   string
	States  []storelink.DeliveryState
	Groups  []deliveryGroup
	// Next is the before= of the next page when one state is shown.
	Next string
}

// deliveryStates is the order the page shows them in: failed ones first,
// as they are what an operator acts on; cancelled ones (of deleted
// endpoints) last.
var deliveryStates = []storelink.DeliveryState{storelink.DeliveryFailed, storelink.DeliveryPending, storelink.DeliverySucceeded,
	storelink.DeliveryCancelled}

// deliveriesPage is how many deliveries of each state the page shows.
const deliveriesPage = 50

func (h *Handler) handleDeliveries(w http.ResponseWriter, r *http.Request, v view) {
	ctx, q := r.Context(), r.URL.Query()
	d := deliveriesData{Client: q.Get("client"), State: q.Get("state"), States: deliveryStates}
	states := deliveryStates
	if d.State != "" {
		if !slices.Contains(deliveryStates, storelink.DeliveryState(d.State)) {
			h.renderError(w, r, storelink.Errorf(storelink.EINVALID, "state must be pending, succeeded, failed or cancelled."))
			return
		}
		states = []storelink.DeliveryState{storelink.DeliveryState(d.State)}
	}
	var err error
	if d.Clients, err = h.clientOptions(ctx); err != nil {
		h.renderError(w, r, err)
		return
	}
	labels := map[string]string{}
	for _, c := range d.Clients {
		labels[c.ID] = c.Label
	}
	limit := queryLimit(r, deliveriesPage, 500)
	var shown []storelink.Delivery
	for _, s := range states {
		f := storelink.DeliveryFilter{ClientID: d.Client, State: s, Limit: limit + 1}
		if d.State != "" {
			f.Before = q.Get("before")
		}
		list, err := h.Webhooks.Deliveries(ctx, f)
		if err != nil {
			h.renderError(w, r, err)
			return
		}
		g := deliveryGroup{State: s, More: len(list) > limit}
		list = list[:min(len(list), limit)]
		shown = append(shown, list...)
		for _, dl := range list {
			g.Rows = append(g.Rows, deliveryRow{Delivery: dl, ClientLabel: labels[dl.ClientID]})
		}
		if d.State != "" && g.More {
			d.Next = g.Rows[len(g.Rows)-1].ID
		}
		d.Groups = append(d.Groups, g)
	}
	urls, err := h.endpointURLs(ctx, clientsOf(shown))
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	for _, g := range d.Groups {
		for i := range g.Rows {
			g.Rows[i].URL = urls[g.Rows[i].EndpointID]
		}
	}
	v.Title, v.Nav, v.Data = "Deliveries", "deliveries", d
	h.render(w, r, http.StatusOK, "deliveries", v)
}

// clientsOf lists the clients of deliveries, each once.
func clientsOf(list []storelink.Delivery) []string {
	var ids []string
	for _, d := range list {
		if !slices.Contains(ids, d.ClientID) {
			ids = append(ids, d.ClientID)
		}
	}
	return ids
}

// endpointURLs maps the endpoints of the clients that are not deleted to
// their URLs, with any password hidden.
func (h *Handler) endpointURLs(ctx context.Context, clientIDs []string) (map[string]string, error) {
	endpoints, err := h.Webhooks.Endpoints(ctx, clientIDs...)
	if err != nil {
		return nil, err
	}
	urls := make(map[string]string, len(endpoints))
	for _, e := range endpoints {
		urls[e.ID] = redactURL(e.URL)
	}
	return urls, nil
}

// handleRedeliver sends a delivery's event again: the delivery is pending
// and due at once, with a fresh retry schedule.
func (h *Handler) handleRedeliver(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("delivery_id")
	if err := h.Webhooks.Redeliver(r.Context(), id); err != nil {
		h.renderError(w, r, err)
		return
	}
	h.Wake()
	h.logger.Info("dashboard: redeliver", "delivery_id", id)
	http.Redirect(w, r, withParam(r.PostFormValue("back"), "done", "redelivered"), http.StatusSeeOther)
}

// handleEndpointEnabled enables or disables an endpoint. Deliveries to a
// disabled endpoint wait; enabling it sends them.
func (h *Handler) handleEndpointEnabled(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("endpoint_id")
	var on bool
	switch r.PostFormValue("enabled") {
	case "true":
		on = true
	case "false":
	default:
		h.renderError(w, r, storelink.Errorf(storelink.EINVALID, "enabled must be true or false."))
		return
	}
	if _, err := h.Webhooks.UpdateEndpoint(r.Context(), "", id, storelink.EndpointPatch{Enabled: &on}); err != nil {
		h.renderError(w, r, err)
		return
	}
	done := "disabled"
	if on {
		done = "enabled"
		h.Wake()
	}
	h.logger.Info("dashboard: endpoint "+done, "endpoint_id", id)
	http.Redirect(w, r, withParam(r.PostFormValue("back"), "done", done), http.StatusSeeOther)
}
