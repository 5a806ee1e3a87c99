package dashboard

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"storelink"
)

// An endpoint's page: the endpoint with its stats of the last 24 hours and
// its latest deliveries, and the operator's actions on it: enable or
// disable, recover its failed deliveries, send a test event, delete it.

type endpointData struct {
	*storelink.EndpointDetail
	ClientLabel string
	Deliveries  []deliveryRow
	// Since is the recover form's default: the start of the stats' window.
	Since string
	// Overlaps are the rotation form's choices.
	Overlaps []overlapChoice
	endpointExtra
}

// endpointExtra is what an endpoint's page adds after a form: what came
// of a test send, a refused rotation, a secret shown once.
type endpointExtra struct {
	Test      *storelink.TestResult
	TestState string
	Rotate    *endpointFailure
	Shown     *shownOnce
}

// endpointDeliveries is how many of an endpoint's latest deliveries its
// page shows.
const endpointDeliveries = 10

func (h *Handler) handleEndpoint(w http.ResponseWriter, r *http.Request, v view) {
	h.showEndpointWith(w, r, http.StatusOK, v, endpointExtra{})
}

// showEndpointWith renders the endpoint's page with what x adds.
func (h *Handler) showEndpointWith(w http.ResponseWriter, r *http.Request, status int, v view, x endpointExtra) {
	ctx, id := r.Context(), r.PathValue("endpoint_id")
	e, err := h.Webhooks.Endpoint(ctx, "", id)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	d := endpointData{EndpointDetail: e, endpointExtra: x, Overlaps: overlaps,
		Since: e.Stats.Since.UTC().Format(time.RFC3339)}
	if d.ClientLabel, err = h.clientLabel(ctx, e.ClientID); err != nil {
		h.renderError(w, r, err)
		return
	}
	list, err := h.Webhooks.Deliveries(ctx, storelink.DeliveryFilter{EndpointID: e.ID, Limit: endpointDeliveries})
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	for _, dl := range list {
		d.Deliveries = append(d.Deliveries, deliveryRow{Delivery: dl, URL: redactURL(e.URL)})
	}
	v.Title, v.Nav, v.Data = "Endpoint "+redactURL(e.URL), "deliveries", d
	v.Path = "/dashboard/endpoints/" + e.ID
	h.render(w, r, status, "endpoint", v)
}

// seenStamp is an endpoint's version as a rotation form sends it back.
func seenStamp(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// handleRecover makes the endpoint's failed deliveries queued since the
// form's time pending again.
func (h *Handler) handleRecover(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("endpoint_id")
	since, err := parseSince(r.PostFormValue("since"))
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	n, err := h.Webhooks.RecoverDeliveries(r.Context(), "", id, since)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	if n > 0 {
		h.Wake()
	}
	h.logger.Info("dashboard: recover", "endpoint_id", id, "since", since, "deliveries", n)
	http.Redirect(w, r, withParams(operatorRealm, "/dashboard/endpoints/"+id, "done", "recovered", "n", strconv.Itoa(n)), http.StatusSeeOther)
}

// parseSince reads the recover form's time: RFC 3339, or a date (midnight
// UTC), or what a datetime-local field sends (taken as UTC).
func parseSince(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, storelink.Errorf(storelink.EINVALID, "since is required: the time from which failed deliveries are sent again, such as 2026-11-21T00:00:00Z.")
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return time.Time{}, storelink.Errorf(storelink.EINVALID, "since: %q is not a time such as 2026-11-21T00:00:00Z (RFC 3339) or 2026-11-21.", s)
}

// handleTestEndpoint sends a signed example event to the endpoint now and
// shows what came of it on the endpoint's page.
func (h *Handler) handleTestEndpoint(w http.ResponseWriter, r *http.Request) {
	r, res, state, ok := h.testSend(w, r, "")
	if !ok {
		return
	}
	v := view{CSRF: h.csrfFor(r, operatorRealm), LoggedIn: true}
	h.showEndpointWith(w, r, http.StatusOK, v, endpointExtra{Test: res, TestState: state})
}

// testSend makes and sends the test event of the form's state to the
// path's endpoint, of client's when it is not "", and tells what came of
// it, with the request to go on with: the send is no database phase
// (Deps.OutsideDB). When it could not be sent it has answered with the
// error page.
func (h *Handler) testSend(w http.ResponseWriter, r *http.Request, client string) (*http.Request, *storelink.TestResult, string, bool) {
	id, state := r.PathValue("endpoint_id"), storelink.OrderState(r.PostFormValue("state"))
	job, err := h.Webhooks.TestDelivery(r.Context(), client, id, state)
	if err != nil {
		h.renderError(w, r, err)
		return r, nil, "", false
	}
	if h.Tester == nil {
		h.renderError(w, r, storelink.Errorf(storelink.EUNAVAILABLE, "This process sends no webhooks, so it cannot send a test."))
		return r, nil, "", false
	}
	partner, err := h.shareOf(r, client)
	if err != nil {
		h.renderError(w, r, err)
		return r, nil, "", false
	}
	var res *storelink.TestResult
	r = h.OutsideDB(r, func(ctx context.Context) {
		ctx, release, terr := h.TestSend(ctx, partner)
		defer release()
		if err = terr; err == nil {
			res = h.Tester.SendTest(ctx, job)
		}
	})
	if err != nil {
		h.renderError(w, r, err)
		return r, nil, "", false
	}
	h.logger.Info("dashboard: test send", "endpoint_id", id, "partner", client != "", "status", res.StatusCode, "error", res.Error)
	if state == storelink.StateNone {
		state = storelink.StateAssigned
	}
	return r, res, string(state), true
}

// handleDeleteEndpoint deletes the endpoint for good, when the form's box
// saying so is ticked.
func (h *Handler) handleDeleteEndpoint(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("endpoint_id")
	if r.PostFormValue("confirm") != "yes" {
		h.renderError(w, r, storelink.Errorf(storelink.EINVALID, "Tick the box that confirms the deletion: it cannot be undone."))
		return
	}
	if err := h.Webhooks.DeleteEndpoint(r.Context(), "", id, nil); err != nil {
		h.renderError(w, r, err)
		return
	}
	h.EndpointDeleted(id)
	h.logger.Info("dashboard: endpoint deleted", "endpoint_id", id)
	http.Redirect(w, r, withParams(operatorRealm, "/dashboard/endpoints/"+id, "done", "deleted"), http.StatusSeeOther)
}
