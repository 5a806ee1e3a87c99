package dashboard

import (
	"net/http"
	"slices"

	"storelink"
)

type stockData struct {
	Clients []clientOption
	Client  string
	Stores  []storelink.Store
	Store   string
	EAN     string
	After   string
	Rows    []storelink.Stock
	// Next is the after= of the next page, "" on the last.
	Next string
}

// stockPage is how many stock rows the page shows at once.
const stockPage = 100

func (h *Handler) handleStock(w http.ResponseWriter, r *http.Request, v view) {
	ctx, q := r.Context(), r.URL.Query()
	d := stockData{Client: q.Get("client"), Store: q.Get("store"), EAN: q.Get("ean"), After: q.Get("after")}
	var err error
	if d.Clients, err = h.clientOptions(ctx); err != nil {
		h.renderError(w, r, err)
		return
	}
	if d.Client == "" && len(d.Clients) > 0 {
		d.Client = d.Clients[0].ID // stock is per client: show the first
	}
	if d.Client != "" {
		if d.Stores, err = h.Admin.Stores(ctx, d.Client); err != nil {
			h.renderError(w, r, err)
			return
		}
		d.Rows, d.Next, err = h.Stock.Stock(ctx, d.Client, storelink.StockFilter{
			StoreID: d.Store, EAN: d.EAN, Limit: queryLimit(r, stockPage, 1000), After: d.After,
		})
		if err != nil {
			h.renderError(w, r, err)
			return
		}
	}
	v.Title, v.Nav, v.Data = "Stock in force", "stock", d
	h.render(w, r, http.StatusOK, "stock", v)
}

type ordersData struct {
	Clients []clientOption
	Labels  map[string]string
	Client  string
	State   string
	Number  string
	Orders  []storelink.Order
	Next    string
}

// ordersPage is how many orders the list shows at once.
const ordersPage = 50

func (h *Handler) handleOrders(w http.ResponseWriter, r *http.Request, v view) {
	ctx, q := r.Context(), r.URL.Query()
	d := ordersData{Client: q.Get("client"), State: q.Get("state"), Number: q.Get("number"), Labels: map[string]string{}}
	if d.State != "" && !slices.Contains(storelink.OrderStates, storelink.OrderState(d.State)) {
		h.renderError(w, r, storelink.Errorf(storelink.EINVALID, "state must be one of the six order states."))
		return
	}
	var err error
	if d.Clients, err = h.clientOptions(ctx); err != nil {
		h.renderError(w, r, err)
		return
	}
	for _, c := range d.Clients {
		d.Labels[c.ID] = c.Label
	}
	limit := queryLimit(r, ordersPage, 500)
	d.Orders, err = h.Orders.Orders(ctx, storelink.OrderFilter{
		ClientID: d.Client, OrderNumber: d.Number, State: storelink.OrderState(d.State), Limit: limit, Before: q.Get("before"),
	})
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	if len(d.Orders) == limit {
		d.Next = d.Orders[limit-1].ID
	}
	v.Title, v.Nav, v.Data = "Orders", "orders", d
	h.render(w, r, http.StatusOK, "orders", v)
}

// eventRow is one step of an order's timeline: the event and where it was
// delivered.
type eventRow struct {
	storelink.EventRecord
	Deliveries []deliveryRow
}

type orderData struct {
	*storelink.Order
	ClientLabel string
	Events      []eventRow
	// Scanned is how many of the client's latest deliveries were searched
	// for this order's: an older order's may be beyond them.
	Scanned int
}

// orderDeliveryScan bounds the client's deliveries read to find an order's
// (each comes with its attempts).
const orderDeliveryScan = 200

func (h *Handler) handleOrder(w http.ResponseWriter, r *http.Request, v view) {
	o, err := h.Orders.Order(r.Context(), r.PathValue("order_id"))
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	d, err := h.orderTimeline(r, o)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	if d.ClientLabel, err = h.clientLabel(r.Context(), o.ClientID); err != nil {
		h.renderError(w, r, err)
		return
	}
	v.Title, v.Nav, v.Data = "Order "+o.OrderNumber, "orders", d
	h.render(w, r, http.StatusOK, "order", v)
}

// orderTimeline reads an order's events and, among its client's latest
// deliveries, theirs.
func (h *Handler) orderTimeline(r *http.Request, o *storelink.Order) (orderData, error) {
	ctx := r.Context()
	d := orderData{Order: o, Scanned: orderDeliveryScan}
	events, err := h.Orders.OrderEvents(ctx, o.ID)
	if err != nil {
		return d, err
	}
	deliveries, err := h.Webhooks.Deliveries(ctx, storelink.DeliveryFilter{ClientID: o.ClientID, Limit: orderDeliveryScan})
	if err != nil {
		return d, err
	}
	urls, err := h.endpointURLs(ctx, []string{o.ClientID})
	if err != nil {
		return d, err
	}
	byEvent := map[string][]deliveryRow{}
	for _, dl := range deliveries {
		if dl.OrderID == o.ID {
			byEvent[dl.EventID] = append(byEvent[dl.EventID], deliveryRow{Delivery: dl, URL: urls[dl.EndpointID]})
		}
	}
	for _, e := range events {
		d.Events = append(d.Events, eventRow{EventRecord: e, Deliveries: byEvent[e.EventID]})
	}
	return d, nil
}
