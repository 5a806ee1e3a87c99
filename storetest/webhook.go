package storetest

import (
	"fmt"
	"reflect"
	"slices"
	"time"

	"storelink"
)

// testEndpoints: endpoints are made, listed and changed; the state filter
// is checked; a rotated secret keeps signing until its overlap ends.
func testEndpoints(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	_, err := s.Webhooks.CreateEndpoint(ctx, id, storelink.NewEndpoint{URL: "https://x.test", States: []storelink.OrderState{"shipped"}}, newSecret())
	wantCode(t, err, storelink.EUNPROCESSABLE)
	_, err = s.Webhooks.CreateEndpoint(ctx, "nope", storelink.NewEndpoint{URL: "https://x.test"}, newSecret())
	wantCode(t, err, storelink.ENOTFOUND)

	created := e.clock.Now()
	all, _ := e.endpoint("https://a.test/hook/${eventId}", "key-a")
	fulfilled, _ := e.endpoint("https://b.test/hook", "", storelink.StateFulfilled)
	if all.ID == "" || all.ClientID != id || all.URL != "https://a.test/hook/${eventId}" || len(all.States) != 0 || !all.Enabled ||
		!all.HasAPIKey || all.DisabledReason != "" || all.PreviousSecretUntil != nil || !all.CreatedAt.Equal(created) || !all.UpdatedAt.Equal(created) {
		t.Fatalf("new endpoint = %+v", all)
	}
	if fulfilled.HasAPIKey || !reflect.DeepEqual(fulfilled.States, []storelink.OrderState{storelink.StateFulfilled}) || all.ID == fulfilled.ID {
		t.Fatalf("new endpoint with a state filter = %+v", fulfilled)
	}
	list, err := s.Webhooks.Endpoints(ctx, id)
	must(t, err)
	if !reflect.DeepEqual(list, []storelink.Endpoint{*all, *fulfilled}) {
		t.Fatalf("endpoints = %+v, want %+v and %+v", list, all, fulfilled)
	}
	p, err := s.Partners.CreatePartner(ctx, "Other")
	must(t, err)
	other, err := s.Partners.CreateClient(ctx, p.ID, "FR", "EUR")
	must(t, err)
	if list, err := s.Webhooks.Endpoints(ctx, other.ID); err != nil || len(list) != 0 {
		t.Fatalf("endpoints of another client = %+v, %v; want none", list, err)
	}

	// Changes: each field alone; the others stay.
	e.clock.Advance(time.Second)
	url, key, states := "https://b.test/v2", "key-b", []storelink.OrderState{storelink.StateAssigned, storelink.StateCancelled}
	got, err := s.Webhooks.UpdateEndpoint(ctx, "", fulfilled.ID, storelink.EndpointPatch{URL: &url})
	must(t, err)
	if got.URL != url || !reflect.DeepEqual(got.States, fulfilled.States) || got.HasAPIKey || !got.Enabled ||
		!got.UpdatedAt.Equal(e.clock.Now()) || !got.CreatedAt.Equal(fulfilled.CreatedAt) {
		t.Fatalf("endpoint after a new URL = %+v", got)
	}
	got, err = s.Webhooks.UpdateEndpoint(ctx, "", fulfilled.ID, storelink.EndpointPatch{States: &states, APIKey: &key})
	must(t, err)
	if got.URL != url || !reflect.DeepEqual(got.States, states) || !got.HasAPIKey {
		t.Fatalf("endpoint after new states and key = %+v", got)
	}
	none := []storelink.OrderState{}
	got, err = s.Webhooks.UpdateEndpoint(ctx, "", fulfilled.ID, storelink.EndpointPatch{States: &none})
	must(t, err)
	if len(got.States) != 0 {
		t.Fatalf("endpoint after clearing its states = %+v, want every state", got)
	}
	bad := []storelink.OrderState{storelink.StateAssigned, "ASSIGNED"}
	_, err = s.Webhooks.UpdateEndpoint(ctx, "", fulfilled.ID, storelink.EndpointPatch{States: &bad})
	wantCode(t, err, storelink.EUNPROCESSABLE)
	if got := e.setEnabled(fulfilled.ID, false); got.DisabledReason != "" {
		t.Fatalf("endpoint disabled by the operator = %+v, want no reason", got)
	}
	noKey := ""
	got, err = s.Webhooks.UpdateEndpoint(ctx, "", all.ID, storelink.EndpointPatch{APIKey: &noKey})
	must(t, err)
	if got.HasAPIKey || got.URL != all.URL {
		t.Fatalf("endpoint after removing its key = %+v", got)
	}
	_, err = s.Webhooks.UpdateEndpoint(ctx, "", "nope", storelink.EndpointPatch{URL: &url})
	wantCode(t, err, storelink.ENOTFOUND)
	list, err = s.Webhooks.Endpoints(ctx, id)
	must(t, err)
	if len(list) != 2 || list[0].HasAPIKey || list[1].Enabled || list[1].URL != url || !list[1].HasAPIKey || len(list[1].States) != 0 {
		t.Fatalf("endpoints after the changes = %+v", list)
	}

	// A rotation: the claimed job signs with the new and the old secret
	// until the overlap ends, then with the new one only.
	_, err = s.Webhooks.RotateSecret(ctx, "", "nope", storelink.SecretRotation{Secret: newSecret(), Overlap: time.Hour})
	wantCode(t, err, storelink.ENOTFOUND)
	e.setEnabled(all.ID, false)
	ep, old := e.endpoint("https://c.test", "key-c")
	e.feed(row("S1", eanA, 10, 100))
	o := e.create(e.newOrder("R-1", eanA))
	fresh := newSecret()
	rotated, err := s.Webhooks.RotateSecret(ctx, "", ep.ID, storelink.SecretRotation{Secret: fresh, Overlap: time.Hour})
	must(t, err)
	until := e.clock.Now().Add(time.Hour)
	if rotated.PreviousSecretUntil == nil || !rotated.PreviousSecretUntil.Equal(until) || rotated.ID != ep.ID || !rotated.Enabled {
		t.Fatalf("rotated endpoint = %+v, want the old secret until %s", rotated, until)
	}
	j := e.claimOne("w")
	if j.EndpointID != ep.ID || j.EventID != e.eventOf(o.ID, storelink.StateAssigned).EventID || j.APIKey != "key-c" ||
		!reflect.DeepEqual(j.Secrets, []string{fresh, old}) {
		t.Fatalf("job during the overlap = %s, want secrets [new old]", describe(j))
	}
	e.clock.Advance(59 * time.Minute)
	r := e.result(j, storelink.OutcomeRetry, 500)
	r.NextAt = e.clock.Now()
	e.record(r)
	j = e.claimOne("w")
	if !reflect.DeepEqual(j.Secrets, []string{fresh, old}) {
		t.Fatalf("job a minute before the overlap ends = %s, want secrets [new old]", describe(j))
	}
	r = e.result(j, storelink.OutcomeRetry, 500)
	r.NextAt = until.Add(time.Second)
	e.record(r)
	e.clock.Advance(time.Minute + time.Second)
	j = e.claimOne("w")
	if !reflect.DeepEqual(j.Secrets, []string{fresh}) {
		t.Fatalf("job after the overlap = %s, want only the new secret", describe(j))
	}
}

// testDeliveriesWithEvents: each event is queued, in the transaction that
// writes it, for the enabled endpoints of its client that want its state.
func testDeliveriesWithEvents(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	e.feed(row("S1", eanA, 10, 100), row("S2", eanA, 10, 100))
	all, _ := e.endpoint("https://all.test", "")
	fulfilled, _ := e.endpoint("https://fulfilled.test", "", storelink.StateFulfilled)
	off, _ := e.endpoint("https://off.test", "")
	e.setEnabled(off.ID, false)
	// Another client's endpoint never gets this client's events.
	p, err := s.Partners.CreatePartner(ctx, "Other")
	must(t, err)
	other, err := s.Partners.CreateClient(ctx, p.ID, "FR", "EUR")
	must(t, err)
	_, err = s.Webhooks.CreateEndpoint(ctx, other.ID, storelink.NewEndpoint{URL: "https://other.test"}, newSecret())
	must(t, err)

	o := e.create(e.newOrder("D-1", eanA))
	assigned := e.eventOf(o.ID, storelink.StateAssigned)
	e.clock.Advance(time.Second)
	_, err = s.Orders.FulfilOrder(ctx, o.ID, storelink.FulfilRequest{})
	must(t, err)
	done := e.eventOf(o.ID, storelink.StateFulfilled)
	type queued struct {
		event    storelink.EventRecord
		endpoint string
	}
	// Newest first: the fulfilled event's two, then the assigned event's.
	wants := []queued{{done, fulfilled.ID}, {done, all.ID}, {assigned, all.ID}}
	list := e.deliveries()
	if len(list) != len(wants) {
		t.Fatalf("deliveries = %+v, want %d", list, len(wants))
	}
	slices.SortStableFunc(list[:2], func(a, b storelink.Delivery) int {
		return slices.Index([]string{fulfilled.ID, all.ID}, a.EndpointID) - slices.Index([]string{fulfilled.ID, all.ID}, b.EndpointID)
	})
	for i, w := range wants {
		d := list[i]
		if d.ID == "" || d.EventID != w.event.EventID || d.EndpointID != w.endpoint || d.ClientID != id || d.OrderID != o.ID ||
			d.EventState != w.event.State || d.State != storelink.DeliveryPending || d.NextAttemptAt == nil ||
			!d.NextAttemptAt.Equal(w.event.CreatedAt) || !d.CreatedAt.Equal(w.event.CreatedAt) || len(d.Attempts) != 0 {
			t.Fatalf("delivery %d = %+v, want the %s event %s to %s, pending, due at %s", i, d, w.event.State, w.event.EventID, w.endpoint, w.event.CreatedAt)
		}
	}
	theirs, err := s.Webhooks.Deliveries(ctx, storelink.DeliveryFilter{ClientID: other.ID, Limit: 10})
	must(t, err)
	if len(theirs) != 0 {
		t.Fatalf("the other client has deliveries %+v, want none", theirs)
	}

	// A change whose event cannot be written queues nothing.
	heal := e.failEvents(t, "")
	_, err = s.Orders.CreateOrder(ctx, e.newOrder("D-2", eanA))
	wantCode(t, err, storelink.EINTERNAL)
	heal()
	o2 := e.create(e.newOrder("D-2", eanA))
	heal = e.failEvents(t, "")
	_, err = s.Orders.FulfilOrder(ctx, o2.ID, storelink.FulfilRequest{})
	wantCode(t, err, storelink.EINTERNAL)
	heal()
	// The cancelled event and its delivery are written, then the reassigned
	// order's event fails: both go with the transaction.
	heal = e.failEvents(t, storelink.StateAssigned)
	_, err = s.Orders.CancelOrder(ctx, o2.ID, storelink.CancelRequest{Reassign: true,
		Items: []storelink.ItemReason{{ItemID: o2.Items[0].ItemID, CancellationReason: storelink.ReasonOutOfStock}}})
	wantCode(t, err, storelink.EINTERNAL)
	heal()
	list = e.deliveries()
	if len(list) != 4 || list[0].OrderID != o2.ID || list[0].EventState != storelink.StateAssigned || list[0].EndpointID != all.ID {
		t.Fatalf("deliveries after the failed writes = %+v, want only one more: D-2 assigned to %s", list, all.ID)
	}
	for _, d := range list {
		if d.EndpointID == off.ID {
			t.Fatalf("delivery %+v to a disabled endpoint", d)
		}
	}
	// Enabled again, it gets the events from then on, not the earlier ones.
	e.setEnabled(off.ID, true)
	_, err = s.Orders.CancelOrder(ctx, o2.ID, storelink.CancelRequest{})
	must(t, err)
	list = e.deliveries()
	var to []string
	for _, d := range list[:2] {
		to = append(to, d.EndpointID)
	}
	slices.Sort(to)
	want := []string{all.ID, off.ID}
	slices.Sort(want)
	if len(list) != 6 || list[0].EventState != storelink.StateCancelled || list[1].EventState != storelink.StateCancelled || !slices.Equal(to, want) {
		t.Fatalf("deliveries after enabling %s = %+v, want the cancelled event to it and to %s", off.ID, list, all.ID)
	}
}

// testClaimDeliveries: a claim hands out due deliveries with what their
// attempt needs and leases them until the lease runs out.
func testClaimDeliveries(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 10, 100))
	ep, secret := e.endpoint("https://a.test/${eventId}", "key-a")
	e.claimNone("without events")
	o := e.create(e.newOrder("C-1", eanA))
	ev := e.eventOf(o.ID, storelink.StateAssigned)
	d := e.deliveries()[0]
	jobs, err := s.Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w1", Lease: lease, Limit: 0, Caps: storelink.EndpointCap(10)})
	must(t, err)
	if len(jobs) != 0 {
		t.Fatalf("a claim of at most 0 gave %s", describe(jobs...))
	}
	j := e.claimOne("w1")
	want := storelink.DeliveryJob{DeliveryID: d.ID, EventID: ev.EventID, EndpointID: ep.ID, Attempt: 1, Try: 1,
		URL: "https://a.test/${eventId}", APIKey: "key-a", Secrets: []string{secret}, Body: []byte(ev.Payload), Owner: "w1"}
	if !reflect.DeepEqual(j, want) {
		show := func(j storelink.DeliveryJob) string {
			body := j.Body
			j.Body = nil
			return fmt.Sprintf("%+v, body %s", j, body)
		}
		t.Fatalf("claimed job:\n got  %s\n want %s", show(j), show(want))
	}
	if string(j.Body) != string(ev.Payload) {
		t.Fatalf("job body %s, want the stored event %s", j.Body, ev.Payload)
	}
	// Leased: not claimed again until the lease runs out; then again, as
	// its next attempt.
	e.claimNone("while leased")
	e.clock.Advance(lease)
	e.claimNone("as the lease ends")
	e.clock.Advance(time.Millisecond)
	j2 := e.claimOne("w2")
	if j2.DeliveryID != d.ID || j2.Attempt != 2 || j2.Try != 2 || j2.Owner != "w2" || string(j2.Body) != string(ev.Payload) {
		t.Fatalf("claim after the lease = %s, want delivery %s, attempt 2", describe(j2), d.ID)
	}
	e.claimNone("while the second lease holds")
	e.wantDelivery(d.ID, storelink.DeliveryPending, &ev.CreatedAt)

	// A disabled endpoint's deliveries wait; enabled, they go again.
	e.record(e.result(j2, storelink.OutcomeSucceeded, 200))
	o2 := e.create(e.newOrder("C-2", eanA))
	e.setEnabled(ep.ID, false)
	e.claimNone("to a disabled endpoint")
	e.setEnabled(ep.ID, true)
	if j := e.claimOne("w1"); j.EventID != e.eventOf(o2.ID, storelink.StateAssigned).EventID || j.Attempt != 1 {
		t.Fatalf("claim after enabling = %s, want the C-2 event", describe(j))
	}
}
