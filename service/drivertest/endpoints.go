package drivertest

import (
	"encoding/json"
	"errors"
	"time"

	"storelink"
	"storelink/service"
)

// sameEndpoint fails unless got is want, every field.
func (e *env) sameEndpoint(what string, got *storelink.Endpoint, want storelink.Endpoint) {
	e.t.Helper()
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	if string(a) != string(b) {
		e.t.Fatalf("%s:\n got  %s\n want %s", what, a, b)
	}
}

// testEndpointRows: endpoints read back as written, inserted, rotated and
// updated; an update writes only the fields it sets, and a rollback keeps
// none; an unknown id is ErrNotFound.
func testEndpointRows(e *env) {
	t, ctx := e.t, e.ctx
	if ok, err := e.d.Webhooks.ClientExists(ctx, e.client.ID); err != nil || !ok {
		t.Fatalf("ClientExists(%s) = %v, %v; want true", e.client.ID, ok, err)
	}
	if ok, err := e.d.Webhooks.ClientExists(ctx, "nope"); err != nil || ok {
		t.Fatalf("ClientExists(nope) = %v, %v; want false", ok, err)
	}
	if check, err := e.d.SecretKeys.SealingKeyCheck(ctx); err != nil || check != "" {
		t.Fatalf("SealingKeyCheck with none recorded = %q, %v; want \"\"", check, err)
	}

	at := e.tick()
	keyed, err := e.d.Webhooks.InsertEndpoint(ctx, service.NewEndpoint{ID: storelink.NewID(at), ClientID: e.client.ID, URL: "https://a.test/hook",
		States: []storelink.OrderState{storelink.StateFulfilled, storelink.StateReturned}, APIKey: "sealed-key", Secret: "sealed-secret", At: at, Max: 2})
	must(t, err)
	want := storelink.Endpoint{ID: keyed.ID, ClientID: e.client.ID, URL: "https://a.test/hook",
		States: []storelink.OrderState{storelink.StateFulfilled, storelink.StateReturned}, Enabled: true, HasAPIKey: true, CreatedAt: at, UpdatedAt: at}
	e.sameEndpoint("inserted with a key and states", keyed, want)
	at2 := e.tick()
	plain, err := e.d.Webhooks.InsertEndpoint(ctx, service.NewEndpoint{ID: storelink.NewID(at2), ClientID: e.client.ID, URL: "https://b.test/",
		Secret: "sealed-secret", At: at2, Max: 2})
	must(t, err)
	// The client has Max endpoints: a third is ErrFull, and nothing is written.
	if _, err := e.d.Webhooks.InsertEndpoint(ctx, service.NewEndpoint{ID: storelink.NewID(e.tick()), ClientID: e.client.ID, URL: "https://c.test/",
		Secret: "sealed-secret", At: at2, Max: 2}); !errors.Is(err, service.ErrFull) {
		t.Fatalf("InsertEndpoint of a third at Max 2 = %v, want ErrFull", err)
	}
	wantPlain := storelink.Endpoint{ID: plain.ID, ClientID: e.client.ID, URL: "https://b.test/", States: []storelink.OrderState{},
		Enabled: true, CreatedAt: at2, UpdatedAt: at2}
	e.sameEndpoint("inserted without key or states", plain, wantPlain)

	list, err := e.d.Webhooks.ListEndpoints(ctx, []string{e.client.ID})
	must(t, err)
	if len(list) != 2 {
		t.Fatalf("ListEndpoints = %+v, want both, oldest first", list)
	}
	e.sameEndpoint("listed first", &list[0], want)
	e.sameEndpoint("listed second", &list[1], wantPlain)
	if both, err := e.d.Webhooks.ListEndpoints(ctx, []string{"nope", e.client.ID}); err != nil || len(both) != 2 || both[0].ID != keyed.ID || both[1].ID != plain.ID {
		t.Fatalf("ListEndpoints of no client and the client = %+v, %v; want the client's two, oldest first", both, err)
	}
	if none, err := e.d.Webhooks.ListEndpoints(ctx, []string{"nope"}); err != nil || none == nil || len(none) != 0 {
		t.Fatalf("ListEndpoints of no client = %#v, %v; want empty, not nil", none, err)
	}

	rotated, until := e.tick(), at.Add(time.Hour)
	got, err := e.d.Webhooks.RotateSecret(ctx, service.RotateSecretParams{ID: keyed.ID, Sealed: "sealed-secret-2", Until: until, At: rotated})
	must(t, err)
	want.PreviousSecretUntil, want.UpdatedAt = &until, rotated
	e.sameEndpoint("rotated", got, want)
	_, err = e.d.Webhooks.RotateSecret(ctx, service.RotateSecretParams{ID: "nope", Sealed: "sealed", Until: until, At: rotated})
	wantNotFound(t, "RotateSecret of an unknown endpoint", err)

	// An update writes what it sets: here the URL, the flag and the
	// reason; states and key stay.
	url, off, reason := "https://a.test/moved", false, "The endpoint answered 410 Gone."
	changed := e.tick()
	e.inTx(func(tx service.WebhookTx) {
		got, err := tx.UpdateEndpoint(ctx, keyed.ID, service.EndpointChange{URL: &url, Enabled: &off, DisabledReason: &reason, At: changed})
		must(t, err)
		want.URL, want.Enabled, want.DisabledReason, want.UpdatedAt = url, false, reason, changed
		e.sameEndpoint("updated", got, want)
	})
	noKey, states := "", []storelink.OrderState{storelink.StateCancelled}
	changed = e.tick()
	e.inTx(func(tx service.WebhookTx) {
		got, err := tx.UpdateEndpoint(ctx, keyed.ID, service.EndpointChange{APIKey: &noKey, States: &states, At: changed})
		must(t, err)
		want.HasAPIKey, want.States, want.UpdatedAt = false, states, changed
		e.sameEndpoint("key and states updated", got, want)
		_, err = tx.UpdateEndpoint(ctx, "nope", service.EndpointChange{At: changed})
		wantNotFound(t, "UpdateEndpoint of an unknown endpoint", err)
	})
	tx := e.begin()
	other := "https://a.test/never"
	_, err = tx.UpdateEndpoint(ctx, keyed.ID, service.EndpointChange{URL: &other, At: e.tick()})
	must(t, err)
	must(t, tx.Rollback(ctx))
	list, err = e.d.Webhooks.ListEndpoints(ctx, []string{e.client.ID})
	must(t, err)
	e.sameEndpoint("after a rolled back update", &list[0], want)
}

// testDeliveryListing: deliveries are listed newest first, filtered by
// client and state, paged by limit and cursor, each with its attempts;
// pending ones are counted; a redelivery makes a finished delivery pending
// again, leaves one in flight to its attempt, and an unknown id is
// ErrNotFound.
func testDeliveryListing(e *env) {
	t, ctx := e.t, e.ctx
	ep, err := e.seed.Webhooks.CreateEndpoint(ctx, e.client.ID, storelink.NewEndpoint{URL: "https://all.test/"}, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	must(t, err)
	var queued []time.Time
	for range 3 {
		o := e.order("S1", eanA)
		e.insert(o)
		ev, at := event(o), e.tick()
		queued = append(queued, at)
		e.writeEvent(o, ev, at, ep.ID)
	}
	list := func(f storelink.DeliveryFilter) []storelink.Delivery {
		t.Helper()
		if f.Limit == 0 {
			f.Limit = 10
		}
		ds, err := e.d.Webhooks.ListDeliveries(ctx, f)
		must(t, err)
		if ds == nil {
			t.Fatalf("ListDeliveries(%+v) = nil, want a list", f)
		}
		return ds
	}
	all := list(storelink.DeliveryFilter{ClientID: e.client.ID})
	if len(all) != 3 || !all[0].CreatedAt.Equal(queued[2]) || !all[2].CreatedAt.Equal(queued[0]) {
		t.Fatalf("deliveries = %+v, want the three, newest first", all)
	}
	for _, d := range all {
		if d.State != storelink.DeliveryPending || d.Attempts == nil || len(d.Attempts) != 0 || d.EndpointID != ep.ID {
			t.Fatalf("delivery = %+v, want pending to %s with no attempts (not nil)", d, ep.ID)
		}
	}
	if page := list(storelink.DeliveryFilter{Limit: 2}); len(page) != 2 || page[0].ID != all[0].ID || page[1].ID != all[1].ID {
		t.Fatalf("first page of 2 = %+v", page)
	}
	if page := list(storelink.DeliveryFilter{ClientID: e.client.ID, Before: all[1].ID}); len(page) != 1 || page[0].ID != all[2].ID {
		t.Fatalf("page before %s = %+v, want %s", all[1].ID, page, all[2].ID)
	}
	if other := list(storelink.DeliveryFilter{ClientID: "nope"}); len(other) != 0 {
		t.Fatalf("deliveries of no client = %+v", other)
	}
	if b, err := e.d.Webhooks.PendingDeliveries(ctx); err != nil || b.Pending != 3 || b.Oldest == nil || !b.Oldest.Equal(queued[0]) {
		t.Fatalf("PendingDeliveries = %d, %v, %v; want 3 since %s", b.Pending, b.Oldest, err, queued[0])
	}

	// One attempt fails for good, one succeeds, one stays in flight.
	jobs, err := e.seed.Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "drivertest", Lease: time.Hour, Limit: 10, Caps: storelink.EndpointCap(10)})
	must(t, err)
	if len(jobs) != 3 {
		t.Fatalf("claimed %d deliveries, want 3", len(jobs))
	}
	byID := map[string]*storelink.DeliveryJob{}
	for i := range jobs {
		byID[jobs[i].DeliveryID] = &jobs[i]
	}
	failed, succeeded, flying := all[2].ID, all[1].ID, all[0].ID
	at := e.tick()
	must(t, e.seed.Webhooks.RecordAttempts(ctx, []storelink.AttemptResult{
		{Job: byID[failed], Outcome: storelink.OutcomeFailed, Attempt: storelink.Attempt{Number: 1, At: at, DurationMS: 12, StatusCode: 500,
			Error: "HTTP 500", Response: "boom"}},
		{Job: byID[succeeded], Outcome: storelink.OutcomeSucceeded, Attempt: storelink.Attempt{Number: 1, At: at, DurationMS: 3, StatusCode: 204}},
	}))
	for state, id := range map[storelink.DeliveryState]string{storelink.DeliveryFailed: failed, storelink.DeliverySucceeded: succeeded,
		storelink.DeliveryPending: flying} {
		ds := list(storelink.DeliveryFilter{ClientID: e.client.ID, State: state})
		if len(ds) != 1 || ds[0].ID != id || ds[0].State != state {
			t.Fatalf("%s deliveries = %+v, want %s", state, ds, id)
		}
	}
	f := list(storelink.DeliveryFilter{State: storelink.DeliveryFailed})[0]
	if len(f.Attempts) != 1 || f.NextAttemptAt != nil {
		t.Fatalf("failed delivery = %+v, want its one attempt and no next attempt", f)
	}
	if a := f.Attempts[0]; a.Number != 1 || !a.At.Equal(at) || a.DurationMS != 12 || a.StatusCode != 500 || a.Error != "HTTP 500" ||
		a.Response != "boom" {
		t.Fatalf("attempt of the failed delivery = %+v, want number 1 at %s, 12 ms, 500, its error and response", a, at)
	}
	if b, err := e.d.Webhooks.PendingDeliveries(ctx); err != nil || b.Pending != 1 {
		t.Fatalf("PendingDeliveries = %d, %v; want 1", b.Pending, err)
	}

	again := e.tick()
	must(t, e.d.Webhooks.Redeliver(ctx, service.RedeliverParams{ID: failed, At: again, Pending: storelink.DeliveryPending}))
	must(t, e.d.Webhooks.Redeliver(ctx, service.RedeliverParams{ID: flying, At: again, Pending: storelink.DeliveryPending})) // its lease is live: left alone
	ds := list(storelink.DeliveryFilter{State: storelink.DeliveryPending})
	if len(ds) != 2 || ds[1].ID != failed || ds[1].NextAttemptAt == nil || !ds[1].NextAttemptAt.Equal(again) ||
		ds[0].ID != flying || ds[0].NextAttemptAt == nil || !ds[0].NextAttemptAt.Equal(queued[2]) {
		t.Fatalf("pending after redelivering = %+v, want %s due at %s and %s as it was", ds, failed, again, flying)
	}
	wantNotFound(t, "Redeliver of an unknown delivery", e.d.Webhooks.Redeliver(ctx, service.RedeliverParams{ID: "nope", At: again, Pending: storelink.DeliveryPending}))
}
