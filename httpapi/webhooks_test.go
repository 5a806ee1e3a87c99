package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"storelink"
	"storelink/webhook"
)

// The tests of this file deliver real order events to real receivers
// (httptest servers) through the API, a SQLite file and a running deliverer,
// with a retry schedule of 50ms, 100ms, 200ms.

// A receiver that fails twice and then takes the event: three requests with
// the same webhook-id, each signed and with a delivery's headers, spaced
// by the schedule; the delivery lists the three attempts.
func TestWebhookRetriedUntilSuccess(t *testing.T) {
	t.Parallel()
	a := newWebhookAPI(t, webhookOptions{})
	const fails = 2
	rec := newReceiver(t, func(h *hit, seen int, w http.ResponseWriter) int {
		time.Sleep(15 * time.Millisecond) // so that durations are not 0
		if seen < fails {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	ep := a.addEndpoint(fmt.Sprintf(`{"url":%q,"api_key":"partner-key-1"}`, rec.URL+"/hooks/${eventId}?from=storelink"))
	if !ep.HasAPIKey || strings.Contains(dump(ep), "partner-key-1") {
		t.Errorf("endpoint = %s: want has_api_key and the key not shown", dump(ep))
	}
	o, eventID := a.placeOrder("WH-RETRY-1")

	hits := rec.wait(fails+1, 10*time.Second)
	_, raw := orderEvents(a, o.ID)
	for i, h := range hits {
		if h.ID != eventID {
			t.Errorf("request %d: webhook-id = %q, want the event id %s", i+1, h.ID, eventID)
		}
		if want := "/hooks/" + eventID + "?from=storelink"; h.Path != want {
			t.Errorf("request %d: URL %q, want %q", i+1, h.Path, want)
		}
		if ct := h.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("request %d: Content-Type = %q", i+1, ct)
		}
		if k := h.Header.Values("x-api-key"); !slices.Equal(k, []string{"partner-key-1"}) {
			t.Errorf("request %d: x-api-key = %q", i+1, k)
		}
		ts, err := strconv.ParseInt(h.Header.Get(webhook.HeaderTimestamp), 10, 64)
		if err != nil || time.Since(time.Unix(ts, 0)).Abs() > time.Minute {
			t.Errorf("request %d: webhook-timestamp = %q, want the Unix seconds of the attempt", i+1, h.Header.Get(webhook.HeaderTimestamp))
		}
		if sigs := signatures(h); len(sigs) != 1 || !strings.HasPrefix(sigs[0], "v1,") {
			t.Errorf("request %d: webhook-signature = %q, want one v1 signature", i+1, sigs)
		}
		checkSigned(t, h, ep.Secret)
		checkNotSigned(t, h, webhook.NewSecret())
		if compact(t, h.Body) != compact(t, raw[0]) {
			t.Errorf("request %d: body %s, want the event %s", i+1, h.Body, raw[0])
		}
		if h.Event.EventID != eventID || h.Event.State != storelink.StateAssigned || h.Event.OrderID != o.ID {
			t.Errorf("request %d: event %+v", i+1, h.Event)
		}
	}
	// Each retry waits at least its step of the schedule less the jitter.
	for i, step := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond} {
		if gap := hits[i+1].At.Sub(hits[i].At); gap < step*8/10 {
			t.Errorf("attempt %d came %s after attempt %d, want at least %s", i+2, gap, i+1, step*8/10)
		}
	}

	d := a.waitDelivery(eventID, ep.ID, "succeeded", succeeded)
	if d.OrderID != o.ID || d.EventState != storelink.StateAssigned || d.ClientID != a.ClientID || d.NextAttemptAt != nil {
		t.Errorf("delivery = %s", dump(d))
	}
	wantCodes := []int{500, 500, 204}
	if len(d.Attempts) != len(wantCodes) {
		t.Fatalf("attempts = %s, want %d", dump(d.Attempts), len(wantCodes))
	}
	for i, at := range d.Attempts {
		if at.Number != i+1 || at.StatusCode != wantCodes[i] || at.Error != "" || at.DurationMS < 15 || at.DurationMS > 5000 {
			t.Errorf("attempt %d = %+v, want number %d, status %d, a duration of 15ms or more", i+1, at, i+1, wantCodes[i])
		}
		if i > 0 && at.At.Before(d.Attempts[i-1].At) {
			t.Errorf("attempt %d at %s, before attempt %d at %s", i+1, at.At, i, d.Attempts[i-1].At)
		}
	}
}

// A receiver that never succeeds: the delivery fails after the schedule
// (four attempts for three delays), is listed as failed, and is sent again
// on redelivery, with a fresh schedule.
func TestWebhookFailedThenRedelivered(t *testing.T) {
	t.Parallel()
	a := newWebhookAPI(t, webhookOptions{})
	// Attempts 1-4 fail (the schedule is spent); after the redelivery 5 and
	// 6 fail too and 7 succeeds, which it can only reach with a fresh
	// schedule.
	rec := newReceiver(t, func(h *hit, seen int, w http.ResponseWriter) int {
		if seen < 6 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	ep := a.endpointAt(rec.URL)
	_, eventID := a.placeOrder("WH-FAIL-1")

	d := a.waitDelivery(eventID, ep.ID, "failed", func(d storelink.Delivery) bool { return d.State == storelink.DeliveryFailed })
	if len(d.Attempts) != 4 || d.NextAttemptAt != nil {
		t.Fatalf("failed delivery = %s, want 4 attempts and no next attempt", dump(d))
	}
	for _, at := range d.Attempts {
		if at.StatusCode != 500 {
			t.Errorf("attempt %+v, want status 500", at)
		}
	}
	if got := a.deliveries("&state=failed"); len(got) != 1 || got[0].ID != d.ID {
		t.Errorf("?state=failed = %s, want the delivery", dump(got))
	}
	if got := a.deliveries("&state=pending"); len(got) != 0 {
		t.Errorf("?state=pending = %s, want none", dump(got))
	}
	time.Sleep(300 * time.Millisecond) // longer than any step: nothing more is sent
	if n := len(rec.got()); n != 4 {
		t.Fatalf("receiver got %d requests, want 4 and no more once failed", n)
	}

	var answer map[string]string
	asked := time.Now()
	a.admin("POST", "/admin/deliveries/"+d.ID+"/redeliver", "", 202, &answer)
	if answer["delivery_id"] != d.ID || answer["state"] != "pending" {
		t.Errorf("redeliver answered %v", answer)
	}
	hits := rec.wait(5, 5*time.Second)
	if wait := hits[4].At.Sub(asked); wait > 2*time.Second {
		t.Errorf("the redelivery went out %s after it was asked for", wait)
	}
	d = a.waitDelivery(eventID, ep.ID, "succeeded", succeeded)
	hits = rec.got()
	if len(d.Attempts) != 7 || len(hits) != 7 {
		t.Fatalf("after the redelivery: %d attempts, %d requests, want 7: %s", len(d.Attempts), len(hits), dump(d))
	}
	for i, h := range hits {
		if h.ID != eventID {
			t.Errorf("request %d: webhook-id %q, want %s", i+1, h.ID, eventID)
		}
	}
	if gap := hits[5].At.Sub(hits[4].At); gap < 40*time.Millisecond || gap > 2*time.Second {
		t.Errorf("after the redelivery the first retry came after %s, want the schedule's first step (50ms ±20%%)", gap)
	}

	// A succeeded delivery can be sent again too.
	a.admin("POST", "/admin/deliveries/"+d.ID+"/redeliver", "", 202, nil)
	rec.wait(8, 5*time.Second)
	a.waitDelivery(eventID, ep.ID, "succeeded with 8 attempts", func(d storelink.Delivery) bool {
		return succeeded(d) && len(d.Attempts) == 8
	})

	resp, body := a.do("POST", "/admin/deliveries/nope/redeliver", nil, map[string]string{"Authorization": "Bearer " + adminToken})
	problem(t, resp, body, 404)
}

// A Retry-After on 429 or 503 that is longer than the schedule's step is
// waited for; on another status it is not.
func TestWebhookRetryAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status   int
		honoured bool
	}{
		{http.StatusTooManyRequests, true},
		{http.StatusServiceUnavailable, true},
		{http.StatusInternalServerError, false},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			t.Parallel()
			a := newWebhookAPI(t, webhookOptions{})
			rec := newReceiver(t, func(h *hit, seen int, w http.ResponseWriter) int {
				if seen == 0 {
					w.Header().Set("Retry-After", "1")
					return tc.status
				}
				return http.StatusNoContent
			})
			ep := a.endpointAt(rec.URL)
			_, eventID := a.placeOrder("WH-RA-1")
			hits := rec.wait(2, 10*time.Second)
			gap := hits[1].At.Sub(hits[0].At)
			switch {
			case tc.honoured && gap < 990*time.Millisecond:
				t.Errorf("retry %s after a %d with Retry-After: 1, want at least 1s", gap, tc.status)
			case !tc.honoured && gap > 900*time.Millisecond:
				t.Errorf("retry %s after a %d with Retry-After: 1, want the schedule's 50ms", gap, tc.status)
			}
			d := a.waitDelivery(eventID, ep.ID, "succeeded", succeeded)
			if len(d.Attempts) != 2 || d.Attempts[0].StatusCode != tc.status || d.Attempts[1].StatusCode != 204 {
				t.Errorf("attempts = %s", dump(d.Attempts))
			}
		})
	}
}

// 410 Gone disables the endpoint, with the reason shown; later events are
// not sent to it, its delivery waits without being retried, and enabling
// the endpoint again sends it.
func TestWebhookGoneDisablesEndpoint(t *testing.T) {
	t.Parallel()
	a := newWebhookAPI(t, webhookOptions{})
	var gone atomic.Bool
	gone.Store(true)
	recGone := newReceiver(t, func(h *hit, seen int, w http.ResponseWriter) int {
		if gone.Load() {
			return http.StatusGone
		}
		return http.StatusNoContent
	})
	recOK := newReceiver(t, nil)
	epGone, epOK := a.endpointAt(recGone.URL), a.endpointAt(recOK.URL)

	_, ev1 := a.placeOrder("WH-GONE-1")
	recGone.wait(1, 10*time.Second)
	d := a.waitDelivery(ev1, epGone.ID, "parked after 410", func(d storelink.Delivery) bool { return len(d.Attempts) == 1 })
	if d.State != storelink.DeliveryPending || d.Attempts[0].StatusCode != 410 {
		t.Errorf("delivery after 410 = %s, want pending with one 410 attempt", dump(d))
	}
	e := a.clientEndpoint(epGone.ID)
	if e.Enabled || !strings.Contains(e.DisabledReason, "410") {
		t.Errorf("endpoint after 410 = %s, want disabled with the reason", dump(e))
	}

	_, ev2 := a.placeOrder("WH-GONE-2")
	recOK.waitIDs([]string{ev1, ev2}, 5*time.Second)
	time.Sleep(300 * time.Millisecond) // more than the whole schedule
	if hits := recGone.got(); len(hits) != 1 {
		t.Errorf("the disabled endpoint got %d requests, want only the one answered 410: %s", len(hits), dumpHits(hits))
	}
	if d, _ := a.delivery(ev1, epGone.ID); d.State != storelink.DeliveryPending || len(d.Attempts) != 1 {
		t.Errorf("parked delivery = %s, want still pending with one attempt", dump(d))
	}
	if e := a.clientEndpoint(epOK.ID); !e.Enabled {
		t.Errorf("the other endpoint = %s, want enabled", dump(e))
	}

	gone.Store(false)
	e = storelink.Endpoint{}
	a.admin("PATCH", "/admin/webhooks/"+epGone.ID, `{"enabled":true}`, 200, &e)
	if !e.Enabled || e.DisabledReason != "" {
		t.Errorf("endpoint after PATCH enabled = %s", dump(e))
	}
	hits := recGone.waitIDs([]string{ev1}, 5*time.Second)
	if hits[0].ID != ev1 || hits[1].ID != ev1 {
		t.Errorf("requests to the enabled endpoint: %s, want the parked event", dumpHits(hits))
	}
	d = a.waitDelivery(ev1, epGone.ID, "succeeded", succeeded)
	if len(d.Attempts) != 2 || d.Attempts[1].StatusCode != 204 {
		t.Errorf("delivery = %s", dump(d))
	}
	if e := a.clientEndpoint(epGone.ID); !e.Enabled || e.DisabledReason != "" {
		t.Errorf("endpoint = %s, want enabled without reason", dump(e))
	}
}

// An endpoint that answers later than --webhook-timeout: the attempt has
// failed with a timeout error and is tried again.
func TestWebhookTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	a := newWebhookAPI(t, webhookOptions{timeout: timeout})
	rec := newReceiver(t, func(h *hit, seen int, w http.ResponseWriter) int {
		if seen == 0 {
			return 0 // hang
		}
		return http.StatusNoContent
	})
	ep := a.endpointAt(rec.URL)
	_, eventID := a.placeOrder("WH-SLOW-1")
	d := a.waitDelivery(eventID, ep.ID, "succeeded", succeeded)
	if len(d.Attempts) != 2 {
		t.Fatalf("attempts = %s, want 2", dump(d.Attempts))
	}
	first := d.Attempts[0]
	if first.StatusCode != 0 || !strings.Contains(first.Error, "timeout") ||
		first.DurationMS < timeout.Milliseconds()*9/10 || first.DurationMS > 3000 {
		t.Errorf("first attempt = %+v, want a timeout error after about %s", first, timeout)
	}
	if d.Attempts[1].StatusCode != 204 {
		t.Errorf("second attempt = %+v", d.Attempts[1])
	}
	if hits := rec.got(); len(hits) != 2 || hits[1].ID != eventID {
		t.Errorf("receiver got %s", dumpHits(hits))
	}
}

// A refused connection is a failed attempt with its error, retried until
// the schedule is spent; once the URL is fixed, a redelivery arrives.
func TestWebhookConnectionRefused(t *testing.T) {
	t.Parallel()
	a := newWebhookAPI(t, webhookOptions{})
	ep := a.endpointAt(closedURL(t) + "/hooks")
	_, eventID := a.placeOrder("WH-REFUSED-1")
	d := a.waitDelivery(eventID, ep.ID, "failed", func(d storelink.Delivery) bool { return d.State == storelink.DeliveryFailed })
	if len(d.Attempts) != 4 {
		t.Errorf("attempts = %s, want 4", dump(d.Attempts))
	}
	for _, at := range d.Attempts {
		if at.StatusCode != 0 || !strings.Contains(at.Error, "refused") {
			t.Errorf("attempt %+v, want a connection refused error", at)
		}
	}

	rec := newReceiver(t, nil)
	a.admin("PATCH", "/admin/webhooks/"+ep.ID, fmt.Sprintf(`{"url":%q}`, rec.URL+"/fixed"), 200, nil)
	a.admin("POST", "/admin/deliveries/"+d.ID+"/redeliver", "", 202, nil)
	hits := rec.waitIDs([]string{eventID}, 5*time.Second)
	if hits[0].Path != "/fixed" {
		t.Errorf("redelivered to %q, want the new URL", hits[0].Path)
	}
	a.waitDelivery(eventID, ep.ID, "succeeded", succeeded)
}

// A redirect is a failed attempt with its 3xx; the target is never called,
// since it is not the URL the partner registered.
func TestWebhookRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	a := newWebhookAPI(t, webhookOptions{})
	target := newReceiver(t, nil)
	redirector := newReceiver(t, func(h *hit, seen int, w http.ResponseWriter) int {
		w.Header().Set("Location", target.URL+"/elsewhere")
		return http.StatusFound
	})
	ep := a.endpointAt(redirector.URL)
	_, eventID := a.placeOrder("WH-REDIRECT-1")
	d := a.waitDelivery(eventID, ep.ID, "failed", func(d storelink.Delivery) bool { return d.State == storelink.DeliveryFailed })
	if len(d.Attempts) != 4 {
		t.Errorf("attempts = %s, want 4", dump(d.Attempts))
	}
	for _, at := range d.Attempts {
		if at.StatusCode != http.StatusFound {
			t.Errorf("attempt %+v, want status 302", at)
		}
	}
	if hits := target.got(); len(hits) != 0 {
		t.Errorf("the redirect's target was called: %s", dumpHits(hits))
	}
}

// Per order and endpoint, in order: the first attempt of every assigned
// event fails, and no fulfilled event arrives before its order's assigned
// event was taken.
func TestWebhookOrderedPerOrder(t *testing.T) {
	t.Parallel()
	a := newWebhookAPI(t, webhookOptions{})
	rec := newReceiver(t, func(h *hit, seen int, w http.ResponseWriter) int {
		if h.Event.State == storelink.StateAssigned && seen == 0 {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	a.endpointAt(rec.URL)
	const orders = 5
	var assigned, fulfilled, all []string
	for i := range orders {
		o, ev := a.placeOrder(fmt.Sprintf("WH-SEQ-%d", i))
		f := a.fulfil(o.ID)
		assigned, fulfilled, all = append(assigned, ev), append(fulfilled, f), append(all, ev, f)
	}
	hits := rec.waitIDs(all, 10*time.Second)
	first := func(id string, ok bool) int {
		for i, h := range hits {
			if h.ID == id && (!ok || h.Status < 300) {
				return i
			}
		}
		return -1
	}
	for i := range orders {
		if taken, sent := first(assigned[i], true), first(fulfilled[i], false); sent < taken {
			t.Errorf("order %d: fulfilled sent (request %d) before assigned was taken (request %d): %s", i, sent+1, taken+1, dumpHits(hits))
		}
	}
	if len(hits) != 3*orders {
		t.Errorf("receiver got %d requests, want %d (assigned twice, fulfilled once): %s", len(hits), 3*orders, dumpHits(hits))
	}
}

// A dead endpoint (one that hangs, or refuses) does not delay a healthy
// endpoint of the same client: the healthy one gets every event within a
// second while the dead one is still being tried.
func TestWebhookDeadEndpointDoesNotDelayOthers(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"hangs", "refuses"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			a := newWebhookAPI(t, webhookOptions{timeout: 5 * time.Second})
			healthy := newReceiver(t, nil)
			deadURL := closedURL(t)
			var dead *receiver
			if mode == "hangs" {
				dead = newReceiver(t, func(*hit, int, http.ResponseWriter) int { return 0 })
				deadURL = dead.URL
			}
			deadEp := a.endpointAt(deadURL)
			a.endpointAt(healthy.URL)

			created := map[string]time.Time{}
			var ids []string
			for i := range 10 {
				o, ev := a.placeOrder(fmt.Sprintf("WH-DEAD-%d", i))
				created[ev] = time.Now()
				f := a.fulfil(o.ID)
				created[f] = time.Now()
				ids = append(ids, ev, f)
			}
			for _, h := range healthy.waitIDs(ids, 3*time.Second) {
				if late := h.At.Sub(created[h.ID]); late > time.Second {
					t.Errorf("event %s reached the healthy endpoint %s after it was made", h.ID, late)
				}
			}

			// The dead endpoint is still being tried meanwhile.
			switch mode {
			case "hangs":
				if n := len(dead.got()); n == 0 {
					t.Error("the hanging endpoint got no request")
				}
			case "refuses":
				a.waitDelivery(ids[0], deadEp.ID, "retried", func(d storelink.Delivery) bool { return len(d.Attempts) >= 2 })
			}
			for _, d := range a.deliveries("") {
				if d.EndpointID == deadEp.ID && d.State == storelink.DeliverySucceeded {
					t.Errorf("delivery to the dead endpoint succeeded: %s", dump(d))
				}
			}
		})
	}
}

// An endpoint with states [fulfilled] gets only fulfilled events; one with
// no states gets every event, and no x-api-key when it has none.
func TestWebhookStateFilter(t *testing.T) {
	t.Parallel()
	a := newWebhookAPI(t, webhookOptions{})
	recAll, recFulfilled := newReceiver(t, nil), newReceiver(t, nil)
	epAll := a.endpointAt(recAll.URL)
	epF := a.addEndpoint(fmt.Sprintf(`{"url":%q,"states":["fulfilled"]}`, recFulfilled.URL))
	if !slices.Equal(epF.States, []storelink.OrderState{storelink.StateFulfilled}) || len(epAll.States) != 0 {
		t.Errorf("states = %v and %v", epF.States, epAll.States)
	}
	o, assigned := a.placeOrder("WH-STATES-1")
	fulfilled := a.fulfil(o.ID)

	recAll.waitIDs([]string{assigned, fulfilled}, 5*time.Second)
	hits := recFulfilled.waitIDs([]string{fulfilled}, 5*time.Second)
	for _, h := range append(hits, recAll.got()...) {
		if k := h.Header.Values("x-api-key"); len(k) != 0 {
			t.Errorf("x-api-key %q sent for an endpoint without one", k)
		}
	}
	// Deliveries are made with the event, so the filter shows in them at once.
	for _, d := range a.deliveries("") {
		if d.EndpointID == epF.ID && d.EventState != storelink.StateFulfilled {
			t.Errorf("delivery of a %s event to the [fulfilled] endpoint: %s", d.EventState, dump(d))
		}
	}
	if _, ok := a.delivery(assigned, epF.ID); ok {
		t.Error("the assigned event was queued for the [fulfilled] endpoint")
	}
	if hits := recFulfilled.got(); len(hits) != 1 {
		t.Errorf("the [fulfilled] endpoint got %s", dumpHits(hits))
	}

	resp, body := a.do("POST", "/admin/clients/"+a.ClientID+"/webhooks", strings.NewReader(`{"url":"http://127.0.0.1/x","states":["shipped"]}`),
		map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"})
	problem(t, resp, body, 422)
}

// A secret rotation: during the overlap every delivery carries both
// signatures, space-separated, and each secret verifies it on its own; with
// no overlap only the new secret signs.
func TestWebhookSecretRotation(t *testing.T) {
	t.Parallel()
	a := newWebhookAPI(t, webhookOptions{})
	rec := newReceiver(t, nil)
	ep := a.endpointAt(rec.URL)
	_, ev1 := a.placeOrder("WH-ROT-1")
	h1 := rec.waitIDs([]string{ev1}, 5*time.Second)[0]
	if len(signatures(h1)) != 1 {
		t.Errorf("before the rotation: %q, want one signature", signatures(h1))
	}
	checkSigned(t, h1, ep.Secret)

	var rot storelink.EndpointSecret
	a.admin("POST", "/admin/webhooks/"+ep.ID+"/rotate-secret", "", 200, &rot)
	if rot.ID != ep.ID || rot.Secret == ep.Secret || !strings.HasPrefix(rot.Secret, webhook.SecretPrefix) ||
		rot.PreviousSecretUntil == nil || time.Until(*rot.PreviousSecretUntil) < time.Hour {
		t.Fatalf("rotate-secret = %s, want a new secret and an overlap", dump(rot))
	}
	if e := a.clientEndpoint(ep.ID); strings.Contains(dump(e), rot.Secret) || strings.Contains(dump(e), ep.Secret) {
		t.Error("GET /admin/clients shows a webhook secret")
	}
	_, ev2 := a.placeOrder("WH-ROT-2")
	h2 := rec.waitIDs([]string{ev2}, 5*time.Second)[1]
	if sigs := signatures(h2); len(sigs) != 2 || h2.Header.Get(webhook.HeaderSignature) != sigs[0]+" "+sigs[1] {
		t.Errorf("during the overlap: webhook-signature %q, want two signatures separated by a space", h2.Header.Get(webhook.HeaderSignature))
	}
	checkSigned(t, h2, rot.Secret)
	checkSigned(t, h2, ep.Secret)

	var rot2 storelink.EndpointSecret
	a.admin("POST", "/admin/webhooks/"+ep.ID+"/rotate-secret", `{"overlap":"0s"}`, 200, &rot2)
	_, ev3 := a.placeOrder("WH-ROT-3")
	h3 := rec.waitIDs([]string{ev3}, 5*time.Second)[2]
	if len(signatures(h3)) != 1 {
		t.Errorf("after a rotation without overlap: %q, want one signature", signatures(h3))
	}
	checkSigned(t, h3, rot2.Secret)
	checkNotSigned(t, h3, rot.Secret)
	checkNotSigned(t, h3, ep.Secret)

	resp, body := a.do("POST", "/admin/webhooks/nope/rotate-secret", nil, map[string]string{"Authorization": "Bearer " + adminToken})
	problem(t, resp, body, 404)
}

// Without --webhook-allow-private, loopback, private, link-local and
// metadata URLs are refused with 422, on registration and on change.
func TestWebhookPrivateURLsRefused(t *testing.T) {
	t.Parallel()
	a := newAPI(t, apiOptions{webhooks: &webhookOptions{denyPrivate: true}})
	auth := map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"}
	for _, u := range []string{
		"http://127.0.0.1/hooks", "http://127.0.0.1:8090/webhooks/${eventId}", "http://169.254.169.254/",
		"http://169.254.169.254/latest/meta-data/", "http://localhost:8080/", "http://[::1]/", "http://10.1.2.3/",
		"http://192.168.0.1/", "http://[::ffff:127.0.0.1]/", "http://0.0.0.0/",
	} {
		resp, body := a.do("POST", "/admin/clients/"+a.ClientID+"/webhooks", strings.NewReader(fmt.Sprintf(`{"url":%q}`, u)), auth)
		problem(t, resp, body, 422)
	}
	ep := a.endpointAt("https://partner.example.com/hooks/${eventId}")
	resp, body := a.do("PATCH", "/admin/webhooks/"+ep.ID, strings.NewReader(`{"url":"http://169.254.169.254/"}`), auth)
	problem(t, resp, body, 422)
	if e := a.clientEndpoint(ep.ID); e.URL != "https://partner.example.com/hooks/${eventId}" {
		t.Errorf("a refused PATCH changed the URL to %q", e.URL)
	}

	// With private addresses allowed (the other tests' default), loopback
	// is accepted.
	b := newAPI(t, apiOptions{webhooks: &webhookOptions{}})
	b.endpointAt("http://127.0.0.1:8090/webhooks")
}

// An api_key that cannot go in a header (a line break, other control
// characters, white space at an end, more than 1024 bytes) is refused with
// 422 on registration and on change, and a refused change leaves the key. A
// NUL is refused with every other JSON string that holds one: 400.
func TestWebhookAPIKeyRefused(t *testing.T) {
	t.Parallel()
	a := newWebhookAPI(t, webhookOptions{})
	auth := map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"}
	body, _ := json.Marshal(map[string]string{"url": "https://partner.example/hooks", "api_key": "key\x00"})
	resp, answer := a.do("POST", "/admin/clients/"+a.ClientID+"/webhooks", bytes.NewReader(body), auth)
	if p := problem(t, resp, answer, 400); !strings.Contains(p.Detail, "api_key holds a NUL character") {
		t.Errorf("api_key with a NUL: detail %q, want one that names the field", p.Detail)
	}
	bad := []string{"key\r\nx-injected: 1", "key\x01", "key\x7f", " key", "key\t", strings.Repeat("k", 1025)}
	for _, key := range bad {
		body, _ := json.Marshal(map[string]string{"url": "https://partner.example/hooks", "api_key": key})
		resp, answer := a.do("POST", "/admin/clients/"+a.ClientID+"/webhooks", bytes.NewReader(body), auth)
		if p := problem(t, resp, answer, 422); !strings.HasPrefix(p.Detail, "api_key: ") || strings.Contains(p.Detail, "key\r") {
			t.Errorf("api_key %q: detail %q, want one that names the field and not the key", key, p.Detail)
		}
	}
	rec := newReceiver(t, nil)
	ep := a.endpointAt(rec.URL)
	a.admin("PATCH", "/admin/webhooks/"+ep.ID, `{"api_key":"good-key\tpart two"}`, 200, nil)
	for _, key := range bad {
		body, _ := json.Marshal(map[string]string{"api_key": key})
		resp, answer := a.do("PATCH", "/admin/webhooks/"+ep.ID, bytes.NewReader(body), auth)
		problem(t, resp, answer, 422)
	}
	_, ev := a.placeOrder("WH-KEY-1")
	if h := rec.waitIDs([]string{ev}, 5*time.Second)[0]; h.Header.Get("x-api-key") != "good-key\tpart two" {
		t.Errorf("x-api-key = %q, want the key of the accepted change", h.Header.Get("x-api-key"))
	}
}
