package dashboard

import (
	"context"
	"net/http"
	"time"

	"storelink"
)

// clientRow is a client as its page shows it: who it is, its capacity and
// how much it has sent, and what may need a look.
type clientRow struct {
	storelink.Client
	PartnerName string
	Stores      int
	Gauge       gauge
	Chart       chart
	Endpoints   int
	// EndpointsOff counts disabled endpoints.
	EndpointsOff int
	LastUpload   *storelink.Upload
	// Failed counts failed deliveries, up to failedCap.
	Failed int
}

// failedCap bounds the failed deliveries counted on a client's page; more
// shows as "100+".
const failedCap = 100

// clientRow gathers what the overview and the client page show of a client.
func (h *Handler) clientRow(ctx context.Context, c storelink.Client, partner string, now time.Time, width, height float64) (clientRow, error) {
	row := clientRow{Client: c, PartnerName: partner}
	stores, err := h.Admin.Stores(ctx, c.ID)
	if err != nil {
		return row, err
	}
	row.Stores = len(stores)
	capacity, err := h.Uploads.Capacity(ctx, c.ID, h.Capacity)
	if err != nil {
		return row, err
	}
	row.Gauge = newGauge(capacity)
	uploads, err := h.uploadsSince(ctx, c.ID, chartSince(now, h.Capacity.Window))
	if err != nil {
		return row, err
	}
	row.Chart = newChart(uploads, now, h.Capacity.Window, capacity.BytesPerWindow, width, height)
	if len(uploads) > 0 {
		row.LastUpload = &uploads[0]
	} else if last, err := h.Uploads.Uploads(ctx, c.ID, storelink.UploadFilter{Limit: 1}); err != nil {
		return row, err
	} else if len(last) > 0 {
		row.LastUpload = &last[0]
	}
	endpoints, err := h.Webhooks.Endpoints(ctx, c.ID)
	if err != nil {
		return row, err
	}
	row.Endpoints = len(endpoints)
	for _, e := range endpoints {
		if !e.Enabled {
			row.EndpointsOff++
		}
	}
	failed, err := h.Webhooks.Deliveries(ctx, storelink.DeliveryFilter{ClientID: c.ID, State: storelink.DeliveryFailed, Limit: failedCap + 1})
	if err != nil {
		return row, err
	}
	row.Failed = len(failed)
	return row, nil
}

// maxChartUploads bounds the uploads read for one client's chart; a client
// that sends more in the charted period is charted on its newest ones.
const maxChartUploads = 5000

// uploadsSince lists a client's uploads received since t, newest first.
func (h *Handler) uploadsSince(ctx context.Context, clientID string, t time.Time) ([]storelink.Upload, error) {
	var out []storelink.Upload
	before := ""
	for len(out) < maxChartUploads {
		page, err := h.Uploads.Uploads(ctx, clientID, storelink.UploadFilter{Limit: 500, Before: before})
		if err != nil {
			return nil, err
		}
		for _, u := range page {
			if u.ReceivedAt.Before(t) {
				return out, nil
			}
			out = append(out, u)
		}
		if len(page) < 500 {
			break
		}
		before = page[len(page)-1].ID
	}
	return out, nil
}

// partnerNames maps partner ids to names.
func (h *Handler) partnerNames(ctx context.Context) (map[string]string, error) {
	partners, err := h.Admin.Partners(ctx)
	if err != nil {
		return nil, err
	}
	names := make(map[string]string, len(partners))
	for _, p := range partners {
		names[p.ID] = p.Name
	}
	return names, nil
}

// clientOption is a client in a filter's drop-down.
type clientOption struct {
	ID, Label string
}

// clientOptions lists every client for the filters, labelled by partner
// and country.
func (h *Handler) clientOptions(ctx context.Context) ([]clientOption, error) {
	clients, err := h.Admin.Clients(ctx)
	if err != nil {
		return nil, err
	}
	names, err := h.partnerNames(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]clientOption, len(clients))
	for i, c := range clients {
		out[i] = clientOption{ID: c.ID, Label: names[c.PartnerID] + " · " + c.CountryCode}
	}
	return out, nil
}

type clientData struct {
	clientRow
	Detail    *storelink.ClientDetail
	Endpoints []storelink.EndpointDetail
	Uploads   []storelink.Upload
	Orders    []storelink.Order
	clientForms
}

func (h *Handler) handleClient(w http.ResponseWriter, r *http.Request, v view) {
	h.showClient(w, r, http.StatusOK, v, clientForms{})
}

// showClient renders a client's page with what forms adds: a refused form
// with what was typed in it, a secret or key shown once.
func (h *Handler) showClient(w http.ResponseWriter, r *http.Request, status int, v view, forms clientForms) {
	ctx, id := r.Context(), r.PathValue("client_id")
	detail, err := h.Admin.Client(ctx, id)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	names, err := h.partnerNames(ctx)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	d := clientData{Detail: detail, clientForms: forms}
	if d.clientRow, err = h.clientRow(ctx, detail.Client, names[detail.PartnerID], h.Now(), 720, 120); err != nil {
		h.renderError(w, r, err)
		return
	}
	if d.Endpoints, err = h.Webhooks.EndpointDetails(ctx, id); err != nil {
		h.renderError(w, r, err)
		return
	}
	if d.Uploads, err = h.Uploads.Uploads(ctx, id, storelink.UploadFilter{Limit: 10}); err != nil {
		h.renderError(w, r, err)
		return
	}
	if d.Orders, err = h.Orders.Orders(ctx, storelink.OrderFilter{ClientID: id, Limit: 10}); err != nil {
		h.renderError(w, r, err)
		return
	}
	d.States, d.MaxKeys = storelink.EndpointStates, storelink.MaxAPIKeys
	d.EndpointsSeen, d.KeysSeen = endpointsSeen(d.Endpoints), keysSeen(detail.APIKeys)
	v.Title, v.Nav, v.Data = d.PartnerName+" · "+detail.CountryCode, "overview", d
	h.render(w, r, status, "client", v)
}

// clientLabel names a client as the filters do.
func (h *Handler) clientLabel(ctx context.Context, clientID string) (string, error) {
	c, err := h.Admin.Client(ctx, clientID)
	if err != nil {
		return "", err
	}
	names, err := h.partnerNames(ctx)
	if err != nil {
		return "", err
	}
	return names[c.PartnerID] + " · " + c.CountryCode, nil
}
