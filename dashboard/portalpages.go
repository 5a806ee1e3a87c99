package dashboard

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"storelink"
	"storelink/httpapi"
)

// The portal's pages. Each reads only the signed-in client's data: lists
// are filtered by its id, and a single upload, order, delivery or endpoint
// is looked up within it, so that another client's answers 404 as if it did
// not exist.

type portalHomeData struct {
	portalClient
	Gauge     gauge
	Chart     chart
	Endpoints []storelink.EndpointDetail
	// Failed and Pending sum the deliveries of its endpoints.
	Failed, Pending int
	Uploads         []storelink.Upload
	Orders          []storelink.Order
}

func (h *Handler) handlePortalHome(w http.ResponseWriter, r *http.Request, v view, c portalClient) {
	ctx, now := r.Context(), h.Now()
	d := portalHomeData{portalClient: c}
	capacity, err := h.Uploads.Capacity(ctx, c.ID, h.Capacity)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	d.Gauge = newGauge(capacity)
	uploads, err := h.uploadsSince(ctx, c.ID, chartSince(now, h.Capacity.Window))
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	d.Chart = newChart(uploads, now, h.Capacity.Window, capacity.BytesPerWindow, 720, 120)
	if d.Endpoints, err = h.Webhooks.EndpointDetails(ctx, c.ID); err != nil {
		h.renderError(w, r, err)
		return
	}
	for _, e := range d.Endpoints {
		d.Failed += e.Stats.FailedDeliveries
		d.Pending += e.Stats.Pending
	}
	if d.Uploads, err = h.Uploads.Uploads(ctx, c.ID, storelink.UploadFilter{Limit: 5}); err != nil {
		h.renderError(w, r, err)
		return
	}
	if d.Orders, err = h.Orders.Orders(ctx, storelink.OrderFilter{ClientID: c.ID, Limit: 5}); err != nil {
		h.renderError(w, r, err)
		return
	}
	v.Title, v.Nav, v.Data = c.Label(), "home", d
	h.render(w, r, http.StatusOK, "portal_home", v)
}

type portalUploadsData struct {
	Status string
	// HasErrors is the has_errors filter as given: "", "true" or "false".
	HasErrors string
	Statuses  []storelink.UploadStatus
	Uploads   []storelink.Upload
	Next      string
	// Form is a refused upload, nil when none was.
	Form *uploadForm
}

func (h *Handler) handlePortalUploads(w http.ResponseWriter, r *http.Request, v view, c portalClient) {
	h.showPortalUploads(w, r, http.StatusOK, v, c, nil)
}

// showPortalUploads renders the client's uploads as the query filters
// them, with the upload form, and beside it form's error when it was
// refused.
func (h *Handler) showPortalUploads(w http.ResponseWriter, r *http.Request, status int, v view, c portalClient, form *uploadForm) {
	q := r.URL.Query()
	d := portalUploadsData{Status: q.Get("status"), HasErrors: q.Get("has_errors"), Statuses: storelink.UploadStatuses, Form: form}
	if d.Status != "" && !slices.Contains(storelink.UploadStatuses, storelink.UploadStatus(d.Status)) {
		h.renderError(w, r, storelink.Errorf(storelink.EINVALID, "status must be accepted, processing, applied, rejected or cancelled."))
		return
	}
	f, err := uploadListFilter(d.Status, d.HasErrors)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	limit := queryLimit(r, uploadsPage, 500)
	f.Before, f.Limit = q.Get("before"), limit
	d.Uploads, err = h.Uploads.Uploads(r.Context(), c.ID, f)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	if len(d.Uploads) == limit {
		d.Next = d.Uploads[limit-1].ID
	}
	v.Title, v.Nav, v.Data = "Uploads", "uploads", d
	h.render(w, r, status, "portal_uploads", v)
}

func (h *Handler) handlePortalUpload(w http.ResponseWriter, r *http.Request, v view, c portalClient) {
	u, err := h.Uploads.Upload(r.Context(), c.ID, r.PathValue("upload_id"))
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	d := uploadData{Upload: u, ClientLabel: c.Label(), Errors: groupProblems(u.Errors), Warnings: groupProblems(u.Warnings)}
	if !u.Status.Final() {
		v.Refresh = 1 // until it is applied or rejected
	}
	v.Title, v.Nav, v.Data = "Upload "+u.FileName, "uploads", d
	h.render(w, r, http.StatusOK, "portal_upload", v)
}

// handlePortalUploadFile gives the file of an upload of the client's, as
// received, while it is kept (the operator's page too, of the path's
// client).
func (h *Handler) handlePortalUploadFile(w http.ResponseWriter, r *http.Request, _ view, client string) {
	release, err := h.download(w, r, client)
	defer release()
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	id := r.PathValue("upload_id")
	data, err := h.Uploads.UploadFile(r.Context(), client, id)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	name := id + ".csv"
	if u, err := h.Uploads.Upload(r.Context(), client, id); err == nil {
		name = u.FileName
	}
	download(w, "text/csv", name, data)
}

// handlePortalErrorFile gives the error file of a processed upload of the
// client's (the operator's page too, of the path's client).
func (h *Handler) handlePortalErrorFile(w http.ResponseWriter, r *http.Request, _ view, client string) {
	release, err := h.download(w, r, client)
	defer release()
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	id := r.PathValue("upload_id")
	data, err := h.Uploads.UploadErrorFile(r.Context(), client, id)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	name := id + "-errors.csv"
	if u, err := h.Uploads.Upload(r.Context(), client, id); err == nil {
		name = u.ErrorFileName()
	}
	download(w, "text/csv; charset=utf-8", name, storelink.ChunksOf(data))
}

// download takes a place among the file downloads, in the share of the
// signed-in client's partner on the portal and in the operator's on the
// dashboard, whoever's file it is.
func (h *Handler) download(w http.ResponseWriter, r *http.Request, client string) (release func(), err error) {
	partner, err := h.shareOf(r, client)
	if err != nil {
		return func() {}, err
	}
	return h.Download(w, partner)
}

// shareOf is the share of the shared pools that a request draws on: its
// client's partner's on the portal, the operator's on the dashboard.
func (h *Handler) shareOf(r *http.Request, client string) (string, error) {
	if !realmOf(r).partner {
		return "", nil
	}
	c, err := h.Admin.Client(r.Context(), client)
	if err != nil {
		return "", err
	}
	return c.PartnerID, nil
}

// download answers a file as an attachment named name, as the API's
// downloads are. ServeHTTP sets nosniff on every answer; it is set here too
// because a download, the partner's own bytes, is where it matters.
func download(w http.ResponseWriter, contentType, name string, data storelink.Chunks) {
	hd := w.Header()
	hd.Set("Content-Type", contentType)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Disposition", httpapi.Attachment(name))
	hd.Set("Content-Length", strconv.FormatInt(data.Len(), 10))
	w.WriteHeader(http.StatusOK)
	_, _ = data.WriteTo(w)
}

func (h *Handler) handlePortalStock(w http.ResponseWriter, r *http.Request, v view, c portalClient) {
	q := r.URL.Query()
	d := stockData{Client: c.ID, Stores: c.Stores, Store: q.Get("store"), EAN: q.Get("ean"), After: q.Get("after")}
	var err error
	d.Rows, d.Next, err = h.Stock.Stock(r.Context(), c.ID, storelink.StockFilter{
		StoreID: d.Store, EAN: d.EAN, Limit: queryLimit(r, stockPage, 1000), After: d.After,
	})
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	v.Title, v.Nav, v.Data = "Stock in force", "stock", d
	h.render(w, r, http.StatusOK, "portal_stock", v)
}

func (h *Handler) handlePortalOrders(w http.ResponseWriter, r *http.Request, v view, c portalClient) {
	q := r.URL.Query()
	d := ordersData{Client: c.ID, State: q.Get("state"), Number: q.Get("number")}
	if d.State != "" && !slices.Contains(storelink.OrderStates, storelink.OrderState(d.State)) {
		h.renderError(w, r, storelink.Errorf(storelink.EINVALID, "state must be one of the six order states."))
		return
	}
	limit := queryLimit(r, ordersPage, 500)
	var err error
	d.Orders, err = h.Orders.Orders(r.Context(), storelink.OrderFilter{
		ClientID: c.ID, OrderNumber: d.Number, State: storelink.OrderState(d.State), Limit: limit, Before: q.Get("before"),
	})
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	if len(d.Orders) == limit {
		d.Next = d.Orders[limit-1].ID
	}
	v.Title, v.Nav, v.Data = "Orders", "orders", d
	h.render(w, r, http.StatusOK, "portal_orders", v)
}

// handlePortalOrder shows an order of the client's with its events and
// their deliveries; another client's order is not found.
func (h *Handler) handlePortalOrder(w http.ResponseWriter, r *http.Request, v view, c portalClient) {
	ctx, id := r.Context(), r.PathValue("order_id")
	o, err := h.Orders.Order(ctx, id)
	if err == nil && o.ClientID != c.ID {
		err = storelink.Errorf(storelink.ENOTFOUND, "Order %q not found.", id)
	}
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	d, err := h.orderTimeline(r, o)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	d.ClientLabel = c.Label()
	v.Title, v.Nav, v.Data = "Order "+o.OrderNumber, "orders", d
	h.render(w, r, http.StatusOK, "portal_order", v)
}

type portalDeliveriesData struct {
	// The filters as given: the endpoint's id, the status, the order
	// number and the event id.
	Endpoint, Status, Order, Event string
	Statuses                       []storelink.DeliveryState
	Endpoints                      []storelink.Endpoint
	Rows                           []deliveryRow
	// Next is the before= of the next page.
	Next string
}

// handlePortalDeliveries lists the client's deliveries, newest first, as
// the filters of its GET form select them, in pages that keep the
// filters. It takes the partner API's filters under the same names.
func (h *Handler) handlePortalDeliveries(w http.ResponseWriter, r *http.Request, v view, c portalClient) {
	ctx, q := r.Context(), r.URL.Query()
	d := portalDeliveriesData{Endpoint: q.Get("endpoint_id"), Status: q.Get("status"), Order: strings.TrimSpace(q.Get("order_number")),
		Event: strings.TrimSpace(q.Get("event_id")), Statuses: deliveryStates}
	if d.Status == "" {
		d.Status = q.Get("state") // the older name of the filter, which saved links carry
	}
	if d.Status != "" && !slices.Contains(deliveryStates, storelink.DeliveryState(d.Status)) {
		h.renderError(w, r, storelink.Errorf(storelink.EINVALID, "status must be pending, succeeded, failed or cancelled."))
		return
	}
	limit := queryLimit(r, deliveriesPage, 500)
	f := storelink.DeliveryFilter{ClientID: c.ID, EndpointID: d.Endpoint, State: storelink.DeliveryState(d.Status),
		OrderNumber: d.Order, EventID: d.Event, Before: q.Get("before"), Limit: limit}
	if err := f.CheckValues(); err != nil {
		h.renderError(w, r, err)
		return
	}
	list, err := h.Webhooks.Deliveries(ctx, f)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	if d.Endpoints, err = h.Webhooks.Endpoints(ctx, c.ID); err != nil {
		h.renderError(w, r, err)
		return
	}
	urls, err := h.endpointURLs(ctx, []string{c.ID})
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	for _, dl := range list {
		d.Rows = append(d.Rows, deliveryRow{Delivery: dl, URL: urls[dl.EndpointID]})
	}
	if len(list) == limit {
		d.Next = list[limit-1].ID
	}
	v.Title, v.Nav, v.Data = "Deliveries", "deliveries", d
	h.render(w, r, http.StatusOK, "portal_deliveries", v)
}

// portalTest is a test send just made from the endpoints page.
type portalTest struct {
	EndpointID string
	State      string
	Result     *storelink.TestResult
}

func (h *Handler) handlePortalEndpoints(w http.ResponseWriter, r *http.Request, v view, c portalClient) {
	h.showPortalEndpoints(w, r, http.StatusOK, v, c, portalEndpointsData{})
}
