package storetest

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"storelink"
)

// The cases of an endpoint's operations: its stats, deletion, recovery of
// failed deliveries, test sends, and the partner's view of its own.

// testEndpointStats: the stats count the endpoint's attempts of the last
// 24 hours (not another endpoint's, not older ones), give the median and
// 95th percentile of their durations by nearest rank, the last success and
// failure however long ago, and the pending and failed deliveries now; an
// attempt keeps the URL it went to.
func testEndpointStats(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 100, 100))
	a, _ := e.endpoint("https://a.test/${eventId}", "")
	b, _ := e.endpoint("https://b.test/", "")

	fresh, err := s.Webhooks.Endpoint(ctx, "", a.ID)
	must(t, err)
	if st := fresh.Stats; st.Attempts != 0 || st.SuccessRate != nil || st.LatencyP50MS != nil || st.LastSuccessAt != nil ||
		st.LastFailureAt != nil || st.Pending != 0 || st.FailedDeliveries != 0 || !st.Since.Equal(e.clock.Now().Add(-24*time.Hour)) {
		t.Fatalf("stats of a new endpoint = %+v, want nothing but since", st)
	}

	// An attempt each to a and b, a's a failure that is 25 hours old by
	// the time the stats are read.
	e.create(e.newOrder("S-1", eanA))
	old := e.clock.Now()
	for _, j := range e.claim("w", 10, 10) {
		r := e.result(j, storelink.OutcomeSucceeded, 204)
		if j.EndpointID == a.ID {
			r = e.result(j, storelink.OutcomeRetry, 500)
			r.Attempt.DurationMS, r.Attempt.URL = 5000, "https://a.test/then"
		}
		e.record(r)
	}
	e.setEnabled(b.ID, false) // b gets nothing more
	e.clock.Advance(25 * time.Hour)
	// 20 attempts to a, 10 to 200 ms: 19 fail, the last succeeds.
	var last storelink.AttemptResult
	for i := 1; i <= 20; i++ {
		j := e.claimOne("w")
		last = e.result(j, storelink.OutcomeRetry, 503)
		if i == 20 {
			last = e.result(j, storelink.OutcomeSucceeded, 200)
		}
		last.Attempt.DurationMS, last.Attempt.URL = int64(10*i), "https://a.test/"+j.EventID
		e.record(last)
		e.clock.Advance(time.Second)
	}
	// A delivery to a fails for good, another waits.
	e.create(e.newOrder("S-2", eanA))
	j := e.claimOne("w")
	failed := e.result(j, storelink.OutcomeFailed, 0)
	failed.Attempt.Error, failed.Attempt.DurationMS = "connection refused", 1
	e.record(failed)
	e.create(e.newOrder("S-3", eanA))

	d, err := s.Webhooks.Endpoint(ctx, "", a.ID)
	must(t, err)
	st := d.Stats
	if st.Attempts != 21 || st.Succeeded != 1 || st.Failed != 20 || st.SuccessRate == nil || *st.SuccessRate != 0.0476 {
		t.Fatalf("stats = %+v, want 21 attempts in the window, 1 succeeded, 20 failed, rate 0.0476", st)
	}
	// 21 durations, 1 and 10 to 200: the 11th is 100, the 20th 190.
	if st.LatencyP50MS == nil || *st.LatencyP50MS != 100 || st.LatencyP95MS == nil || *st.LatencyP95MS != 190 {
		t.Fatalf("latencies = %v, %v; want 100 and 190", st.LatencyP50MS, st.LatencyP95MS)
	}
	if st.LastSuccessAt == nil || !st.LastSuccessAt.Equal(last.Attempt.At) || st.LastFailureAt == nil || !st.LastFailureAt.Equal(failed.Attempt.At) {
		t.Fatalf("last success %v, failure %v; want %s and %s", st.LastSuccessAt, st.LastFailureAt, last.Attempt.At, failed.Attempt.At)
	}
	if st.Pending != 1 || st.FailedDeliveries != 1 || !st.Since.Equal(e.clock.Now().Add(-24*time.Hour)) {
		t.Fatalf("stats = %+v, want 1 pending and 1 failed delivery", st)
	}
	if d.Endpoint.ID != a.ID || d.URL != a.URL {
		t.Fatalf("endpoint = %+v, want %s", d.Endpoint, a.ID)
	}

	other, err := s.Webhooks.Endpoint(ctx, e.client.ID, b.ID)
	must(t, err)
	if st := other.Stats; st.Attempts != 0 || st.LastSuccessAt == nil || !st.LastSuccessAt.Equal(old) || st.LastFailureAt != nil ||
		st.Pending != 0 {
		t.Fatalf("stats of b = %+v, want no attempt in the window and its success 25h ago", st)
	}
	list, err := s.Webhooks.EndpointDetails(ctx, e.client.ID)
	must(t, err)
	if len(list) != 2 || list[0].ID != a.ID || list[0].Stats.Attempts != 21 || list[1].ID != b.ID {
		t.Fatalf("EndpointDetails = %+v, want a with its stats, then b", list)
	}

	// Each attempt lists the URL it went to.
	ds, err := s.Webhooks.Deliveries(ctx, storelink.DeliveryFilter{ClientID: e.client.ID, EndpointID: a.ID, Limit: 10})
	must(t, err)
	first := ds[len(ds)-1]
	if len(ds) != 3 || len(first.Attempts) != 21 || first.Attempts[0].URL != "https://a.test/then" ||
		first.Attempts[20].URL != "https://a.test/"+first.EventID {
		t.Fatalf("deliveries to a = %+v, want 3, the first with 21 attempts and their URLs", ds)
	}
}

// testDeleteEndpoint: a deleted endpoint gets no more deliveries, its
// pending ones (in flight too) are cancelled and stay so when the attempt
// in flight is recorded, nothing of it is claimed, it cannot be changed,
// tested, recovered or redelivered to, and it and its deliveries stay
// readable; the events stay in the pull feed. Deleting it again changes
// nothing.
func testDeleteEndpoint(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 100, 100))
	a, _ := e.endpoint("https://a.test/", "")
	b, _ := e.endpoint("https://b.test/", "")
	o1 := e.create(e.newOrder("D-1", eanA))
	e.create(e.newOrder("D-2", eanA))
	jobs := e.claim("w", 1, 100) // one in flight
	if len(jobs) != 1 {
		t.Fatalf("claimed%s\nwant one", describe(jobs...))
	}
	flying := jobs[0]
	events := len(e.clientEvents(e.client.ID))

	e.clock.Advance(time.Minute)
	deletedAt := e.clock.Now()
	must(t, s.Webhooks.DeleteEndpoint(ctx, "", a.ID, nil))
	d, err := s.Webhooks.Endpoint(ctx, "", a.ID)
	must(t, err)
	if d.DeletedAt == nil || !d.DeletedAt.Equal(deletedAt) || d.Enabled {
		t.Fatalf("deleted endpoint = %+v, want deleted at %s and disabled", d.Endpoint, deletedAt)
	}
	eps, err := s.Webhooks.Endpoints(ctx, e.client.ID)
	must(t, err)
	if len(eps) != 1 || eps[0].ID != b.ID {
		t.Fatalf("endpoints after deleting a = %+v, want only b", eps)
	}
	toA := func() []storelink.Delivery {
		t.Helper()
		ds, err := s.Webhooks.Deliveries(ctx, storelink.DeliveryFilter{EndpointID: a.ID, Limit: 10})
		must(t, err)
		return ds
	}
	for _, dl := range toA() {
		if dl.State != storelink.DeliveryCancelled || dl.NextAttemptAt != nil {
			t.Fatalf("delivery to the deleted endpoint = %+v, want cancelled, not due", dl)
		}
	}
	if n := len(toA()); n != 2 {
		t.Fatalf("%d deliveries to a listed, want its 2", n)
	}
	if d.Stats.Pending != 0 {
		t.Fatalf("stats of the deleted endpoint = %+v, want nothing pending", d.Stats)
	}

	// The attempt in flight is recorded; the delivery stays cancelled.
	if flying.EndpointID == a.ID {
		e.record(e.result(flying, storelink.OutcomeSucceeded, 204))
		e.wantDelivery(flying.DeliveryID, storelink.DeliveryCancelled, nil, 1)
	} else {
		e.record(e.result(flying, storelink.OutcomeSucceeded, 204))
	}
	// Only b's deliveries go; a new event is not queued for a.
	e.create(e.newOrder("D-3", eanA))
	for range 3 {
		for _, j := range e.claim("w", 100, 100) {
			if j.EndpointID == a.ID {
				t.Fatalf("claimed a delivery to the deleted endpoint:%s", describe(j))
			}
			e.record(e.result(j, storelink.OutcomeSucceeded, 204))
		}
	}
	if n := len(toA()); n != 2 {
		t.Fatalf("%d deliveries to a after a new event, want still 2", n)
	}
	cancelled, err := s.Webhooks.Deliveries(ctx, storelink.DeliveryFilter{ClientID: e.client.ID, State: storelink.DeliveryCancelled, Limit: 10})
	must(t, err)
	if len(cancelled) != 2 {
		t.Fatalf("cancelled deliveries = %+v, want a's 2", cancelled)
	}
	if n := len(e.clientEvents(e.client.ID)); n != events+1 {
		t.Fatalf("%d events in the pull feed, want %d", n, events+1)
	}

	on := true
	_, err = s.Webhooks.UpdateEndpoint(ctx, "", a.ID, storelink.EndpointPatch{Enabled: &on})
	wantCode(t, err, storelink.ECONFLICT)
	_, err = s.Webhooks.RotateSecret(ctx, "", a.ID, storelink.SecretRotation{Secret: newSecret(), Overlap: time.Hour})
	wantCode(t, err, storelink.ECONFLICT)
	wantCode(t, s.Webhooks.Redeliver(ctx, cancelled[0].ID), storelink.ECONFLICT)
	_, err = s.Webhooks.RecoverDeliveries(ctx, "", a.ID, deletedAt.Add(-time.Hour))
	wantCode(t, err, storelink.ECONFLICT)
	_, err = s.Webhooks.TestDelivery(ctx, "", a.ID, "")
	wantCode(t, err, storelink.ECONFLICT)
	must(t, s.Webhooks.DeleteEndpoint(ctx, "", a.ID, nil))
	if again, err := s.Webhooks.Endpoint(ctx, "", a.ID); err != nil || !again.DeletedAt.Equal(deletedAt) {
		t.Fatalf("after deleting again: %+v, %v; want deleted at %s still", again, err, deletedAt)
	}
	wantCode(t, s.Webhooks.DeleteEndpoint(ctx, "", "nope", nil), storelink.ENOTFOUND)
	e.wantStates(o1.ID, storelink.StateAssigned)
}

// testRecoverDeliveries: the failed deliveries of an endpoint queued since
// a time are pending again, with a fresh schedule and their attempts kept,
// and go in event order per order: a recovered event goes before the later
// events of its order that are pending, which wait for it. Older failed
// ones, other endpoints' and succeeded ones are left as they are.
func testRecoverDeliveries(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 100, 100))
	a, _ := e.endpoint("https://a.test/", "")
	failOne := func() storelink.DeliveryJob {
		t.Helper()
		j := e.claimOne("w")
		e.record(e.result(j, storelink.OutcomeFailed, 500))
		return j
	}
	e.create(e.newOrder("R-0", eanA))
	tooOld := failOne()
	e.clock.Advance(time.Hour)
	since := e.clock.Now()
	o := e.create(e.newOrder("R-1", eanA))
	assigned := failOne()
	_, err := s.Orders.FulfilOrder(ctx, o.ID, storelink.FulfilRequest{})
	must(t, err)
	fulfilled := failOne()
	_, err = s.Orders.ReturnItems(ctx, o.ID, storelink.ReturnRequest{Items: []storelink.ReturnItem{{ItemID: o.Items[0].ItemID,
		ReturnLocation: storelink.ReturnToStore}}})
	must(t, err)
	returned := e.eventOf(o.ID, storelink.StateReturned).EventID // pending, not claimed

	e.clock.Advance(time.Minute)
	n, err := s.Webhooks.RecoverDeliveries(ctx, "", a.ID, since)
	must(t, err)
	if n != 2 {
		t.Fatalf("recovered %d deliveries, want R-1's assigned and fulfilled", n)
	}
	now := e.clock.Now()
	e.wantDelivery(assigned.DeliveryID, storelink.DeliveryPending, &now, 1)
	e.wantDelivery(fulfilled.DeliveryID, storelink.DeliveryPending, &now, 1)
	e.wantDelivery(tooOld.DeliveryID, storelink.DeliveryFailed, nil, 1)

	// In event order, one at a time: assigned, fulfilled, returned.
	for _, want := range []string{assigned.EventID, fulfilled.EventID, returned} {
		jobs := e.claim("w", 10, 10)
		if len(jobs) != 1 || jobs[0].EventID != want {
			t.Fatalf("claimed%s\nwant only event %s", describe(jobs...), want)
		}
		if jobs[0].EventID != returned && (jobs[0].Try != 1 || jobs[0].Attempt != 2) {
			t.Fatalf("recovered delivery claimed as %s, want attempt 2, try 1", describe(jobs[0]))
		}
		e.claimNone("while the order's earlier event is in flight")
		e.record(e.result(jobs[0], storelink.OutcomeSucceeded, 204))
	}
	if n, err := s.Webhooks.RecoverDeliveries(ctx, "", a.ID, since); err != nil || n != 0 {
		t.Fatalf("recovering again = %d, %v; want nothing left to recover", n, err)
	}
	_, err = s.Webhooks.RecoverDeliveries(ctx, "", "nope", since)
	wantCode(t, err, storelink.ENOTFOUND)
}

// testTestDelivery: a test send's job is an example event of the state
// asked for (assigned by default), valid as an event of the client (its
// currency, its first store; none for the warehouse states), signed with
// the endpoint's secrets and sent with its key, and stored nowhere.
func testTestDelivery(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	a, secret := e.endpoint("https://a.test/${eventId}", "partner-key")
	events := len(e.clientEvents(e.client.ID))
	for _, c := range []struct {
		state       storelink.OrderState
		want        storelink.OrderState
		store       string
		cancelledTo bool
	}{
		{"", storelink.StateAssigned, "S1", false},
		{storelink.StateFulfilled, storelink.StateFulfilled, "S1", true},
		{storelink.StateReturned, storelink.StateReturned, "S1", false},
		{storelink.StateWarehouseReturned, storelink.StateWarehouseReturned, "", false},
	} {
		j, err := s.Webhooks.TestDelivery(ctx, e.client.ID, a.ID, c.state)
		must(t, err)
		var ev storelink.Event
		must(t, json.Unmarshal(j.Body, &ev))
		if ev.State != c.want || ev.StoreID != c.store || ev.EventID != j.EventID || len(ev.Items) != 1 ||
			ev.Items[0].Currency != "EUR" || (len(ev.CancelledItems) == 1) != c.cancelledTo {
			t.Fatalf("test event of %q = %s, want a %s event at %q in EUR", c.state, j.Body, c.want, c.store)
		}
		if j.URL != a.URL || j.APIKey != "partner-key" || !slices.Equal(j.Secrets, []string{secret}) || j.Unsealable != "" {
			t.Fatalf("test job = %s, url %s, key %q; want the endpoint's url, key and secret", describe(*j), j.URL, j.APIKey)
		}
	}
	_, err := s.Webhooks.TestDelivery(ctx, "", a.ID, "open")
	wantCode(t, err, storelink.EUNPROCESSABLE)
	if n := len(e.clientEvents(e.client.ID)); n != events {
		t.Fatalf("%d events after test sends, want %d: a test event is not stored", n, events)
	}
	if ds := e.deliveries(); len(ds) != 0 {
		t.Fatalf("deliveries after test sends = %+v, want none", ds)
	}
	// During a rotation's overlap both secrets sign.
	_, err = s.Webhooks.RotateSecret(ctx, "", a.ID, storelink.SecretRotation{Secret: newSecret(), Overlap: time.Hour})
	must(t, err)
	j, err := s.Webhooks.TestDelivery(ctx, "", a.ID, storelink.StateCancelled)
	must(t, err)
	if len(j.Secrets) != 2 || j.Secrets[1] != secret {
		t.Fatalf("test job after a rotation has %d secrets, want the new one and the old", len(j.Secrets))
	}
}

// testPartnerScope: the calls a partner makes for its client see none of
// another client's endpoints and deliveries: each is not found, as one
// that does not exist, and another client's delivery is no cursor of the
// client's listing.
func testPartnerScope(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 100, 100))
	a, _ := e.endpoint("https://a.test/", "")
	e.create(e.newOrder("P-1", eanA))
	j := e.claimOne("w")
	e.record(e.result(j, storelink.OutcomeFailed, 500))
	p, err := s.Partners.CreatePartner(ctx, "Other")
	must(t, err)
	other, err := s.Partners.CreateClient(ctx, p.ID, "FR", "EUR")
	must(t, err)

	_, err = s.Webhooks.Endpoint(ctx, other.ID, a.ID)
	wantCode(t, err, storelink.ENOTFOUND)
	_, err = s.Webhooks.TestDelivery(ctx, other.ID, a.ID, "")
	wantCode(t, err, storelink.ENOTFOUND)
	wantCode(t, s.Webhooks.RedeliverFor(ctx, other.ID, j.DeliveryID), storelink.ENOTFOUND)
	e.wantDelivery(j.DeliveryID, storelink.DeliveryFailed, nil, 1)
	_, err = s.Webhooks.Deliveries(ctx, storelink.DeliveryFilter{ClientID: other.ID, Before: j.DeliveryID, Limit: 10})
	wantCode(t, err, storelink.EINVALID)
	if list, err := s.Webhooks.EndpointDetails(ctx, other.ID); err != nil || len(list) != 0 {
		t.Fatalf("endpoints of the other client = %+v, %v; want none", list, err)
	}
	off := false
	_, err = s.Webhooks.UpdateEndpoint(ctx, other.ID, a.ID, storelink.EndpointPatch{Enabled: &off})
	wantCode(t, err, storelink.ENOTFOUND)
	_, err = s.Webhooks.RotateSecret(ctx, other.ID, a.ID, storelink.SecretRotation{Secret: newSecret(), Overlap: time.Hour})
	wantCode(t, err, storelink.ENOTFOUND)
	_, err = s.Webhooks.RecoverDeliveries(ctx, other.ID, a.ID, e.clock.Now().Add(-time.Hour))
	wantCode(t, err, storelink.ENOTFOUND)
	wantCode(t, s.Webhooks.DeleteEndpoint(ctx, other.ID, a.ID, nil), storelink.ENOTFOUND)
	if d, err := s.Webhooks.Endpoint(ctx, e.client.ID, a.ID); err != nil || !d.Enabled || d.DeletedAt != nil || d.Stats.FailedDeliveries != 1 {
		t.Fatalf("after the other client's calls, the endpoint = %+v, %v; want it enabled, not deleted, one failed delivery", d, err)
	}

	must(t, s.Webhooks.RedeliverFor(ctx, e.client.ID, j.DeliveryID))
	now := e.clock.Now()
	e.wantDelivery(j.DeliveryID, storelink.DeliveryPending, &now, 1)
	if d, err := s.Webhooks.Endpoint(ctx, e.client.ID, a.ID); err != nil || d.ID != a.ID {
		t.Fatalf("the client's own endpoint = %+v, %v", d, err)
	}
	wantCode(t, s.Webhooks.RedeliverFor(ctx, e.client.ID, "nope"), storelink.ENOTFOUND)
}

// testPartnerAndClientPages: the operator's lists page by their sort keys
// with cursors, search without regard to the case of A to Z (both
// databases alike), and refuse a cursor they did not make.
func testPartnerAndClientPages(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	// The env made partner "Acme" with its client in DE.
	var ps []*storelink.Partner
	for _, name := range []string{"beta", "Zed", "ÄRZTE Bedarf", "Beta"} {
		p, err := s.Partners.CreatePartner(ctx, name)
		must(t, err)
		ps = append(ps, p)
	}
	var names []string
	after := ""
	for range 10 {
		page, err := s.Partners.ListPartners(ctx, storelink.PartnerFilter{Limit: 2, After: after})
		must(t, err)
		for _, p := range page.Partners {
			names = append(names, p.Name)
		}
		if page.NextCursor == "" {
			break
		}
		after = page.NextCursor
	}
	if want := []string{"Acme", "Beta", "Zed", "beta", "ÄRZTE Bedarf"}; !slices.Equal(names, want) {
		t.Fatalf("partners paged by 2 = %q, want %q (bytewise)", names, want)
	}
	search := func(q string) []string {
		t.Helper()
		page, err := s.Partners.ListPartners(ctx, storelink.PartnerFilter{Q: q, Limit: 10})
		must(t, err)
		var out []string
		for _, p := range page.Partners {
			out = append(out, p.Name)
		}
		return out
	}
	if got := search(" BETA "); !slices.Equal(got, []string{"Beta", "beta"}) {
		t.Fatalf("search BETA = %q, want Beta and beta", got)
	}
	if got := search("rzte bed"); !slices.Equal(got, []string{"ÄRZTE Bedarf"}) {
		t.Fatalf("search rzte bed = %q, want ÄRZTE Bedarf", got)
	}
	if got := search("ärzte"); len(got) != 0 {
		t.Fatalf("search ärzte = %q, want none: only A to Z match in either case", got)
	}
	if got := search(ps[1].ID); !slices.Equal(got, []string{"Zed"}) {
		t.Fatalf("search by id = %q, want Zed", got)
	}
	for _, bad := range []string{"garbage!", "Zm9v", "QUFB"} {
		_, err := s.Partners.ListPartners(ctx, storelink.PartnerFilter{Limit: 2, After: bad})
		wantCode(t, err, storelink.EINVALID)
		_, err = s.Partners.ListClients(ctx, storelink.ClientFilter{Limit: 2, After: bad})
		wantCode(t, err, storelink.EINVALID)
	}

	zed := ps[1]
	for _, country := range []string{"FR", "AT", "NL"} {
		_, err := s.Partners.CreateClient(ctx, zed.ID, country, "EUR")
		must(t, err)
	}
	var got []string
	after = ""
	for range 10 {
		page, err := s.Partners.ListClients(ctx, storelink.ClientFilter{PartnerID: zed.ID, Limit: 2, After: after})
		must(t, err)
		for _, c := range page.Clients {
			if c.PartnerName != "Zed" || c.PartnerID != zed.ID || c.Currency != "EUR" || c.CreatedAt.IsZero() {
				t.Fatalf("client listed = %+v, want one of Zed's", c)
			}
			got = append(got, c.CountryCode)
		}
		if page.NextCursor == "" {
			break
		}
		after = page.NextCursor
	}
	if !slices.Equal(got, []string{"AT", "FR", "NL"}) {
		t.Fatalf("Zed's clients paged by 2 = %q, want AT, FR, NL", got)
	}
	all, err := s.Partners.ListClients(ctx, storelink.ClientFilter{Limit: 10})
	must(t, err)
	if len(all.Clients) != 4 || all.NextCursor != "" {
		t.Fatalf("all clients = %+v, want 4 on one page", all)
	}
	for _, c := range []struct {
		q    string
		want int
	}{{"zed", 3}, {"fr", 1}, {"acme", 1}, {e.client.ID, 1}, {"nobody", 0}} {
		page, err := s.Partners.ListClients(ctx, storelink.ClientFilter{Q: c.q, Limit: 10})
		must(t, err)
		if len(page.Clients) != c.want {
			t.Fatalf("clients matching %q = %+v, want %d", c.q, page.Clients, c.want)
		}
	}
	if page, err := s.Partners.ListClients(ctx, storelink.ClientFilter{PartnerID: "nope", Limit: 10}); err != nil || len(page.Clients) != 0 {
		t.Fatalf("clients of no partner = %+v, %v", page, err)
	}
}

// testClientEndpointPages: a client's endpoints page oldest first, the
// deleted ones left out, two made in one millisecond told apart by id; a
// cursor that is none and a limit below 1 are EINVALID, an unknown client
// ENOTFOUND.
func testClientEndpointPages(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	a, _ := e.endpoint("https://a.test/", "")
	var same []*storelink.Endpoint
	for _, u := range []string{"https://b.test/", "https://c.test/"} {
		ep, err := s.Webhooks.CreateEndpoint(ctx, e.client.ID, storelink.NewEndpoint{URL: u}, newSecret())
		must(t, err)
		same = append(same, ep)
	}
	e.clock.Advance(time.Millisecond)
	gone, _ := e.endpoint("https://gone.test/", "")
	d, _ := e.endpoint("https://d.test/", "")
	must(t, s.Webhooks.DeleteEndpoint(ctx, "", gone.ID, nil))
	slices.SortFunc(same, func(x, y *storelink.Endpoint) int { return strings.Compare(x.ID, y.ID) })
	want := []string{a.ID, same[0].ID, same[1].ID, d.ID}

	var got []string
	after := ""
	for range 5 {
		p, err := s.Webhooks.ClientEndpoints(ctx, storelink.EndpointFilter{ClientID: e.client.ID, Limit: 2, After: after})
		must(t, err)
		for _, ep := range p.Endpoints {
			got = append(got, ep.ID)
			if !ep.Stats.Since.Equal(e.clock.Now().Add(-storelink.StatsWindow)) {
				t.Fatalf("endpoint %s of a page has stats %+v, want its stats", ep.ID, ep.Stats)
			}
		}
		if p.NextCursor == "" {
			break
		}
		after = p.NextCursor
	}
	if !slices.Equal(got, want) {
		t.Fatalf("client endpoints by 2 = %v, want %v (oldest first, by id within a millisecond, the deleted one left out)", got, want)
	}
	all, err := s.Webhooks.ClientEndpoints(ctx, storelink.EndpointFilter{ClientID: e.client.ID, Limit: 10})
	must(t, err)
	if len(all.Endpoints) != 4 || all.NextCursor != "" {
		t.Fatalf("client endpoints by 10 = %d, next %q; want 4 and no next page", len(all.Endpoints), all.NextCursor)
	}

	other, err := s.Partners.CreateClient(ctx, e.client.PartnerID, "AT", "EUR")
	must(t, err)
	none, err := s.Webhooks.ClientEndpoints(ctx, storelink.EndpointFilter{ClientID: other.ID, Limit: 10})
	must(t, err)
	if none.Endpoints == nil || len(none.Endpoints) != 0 {
		t.Fatalf("endpoints of a client with none = %+v, want an empty list", none)
	}
	_, err = s.Webhooks.ClientEndpoints(ctx, storelink.EndpointFilter{ClientID: "no-such-client", Limit: 10})
	wantCode(t, err, storelink.ENOTFOUND)
	_, err = s.Webhooks.ClientEndpoints(ctx, storelink.EndpointFilter{ClientID: e.client.ID, Limit: 10, After: "garbage"})
	wantCode(t, err, storelink.EINVALID)
	_, err = s.Webhooks.ClientEndpoints(ctx, storelink.EndpointFilter{ClientID: e.client.ID, Limit: 0})
	wantCode(t, err, storelink.EINVALID)
}
