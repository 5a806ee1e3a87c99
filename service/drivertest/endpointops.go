package drivertest

import (
	"slices"
	"strings"
	"time"

	"storelink"
	"storelink/service"
)

// testEndpointOpRows: an endpoint is read deleted or not, with its keys
// sealed; attempts are recorded with their URL, endpoint and outcome, and
// counted and ranked by duration from a time on; the pending and failed
// deliveries of an endpoint are counted, the failed ones since a time made
// pending again, the pending ones cancelled; a deleted endpoint is no more
// listed, and a redelivery leaves its deliveries as they are.
func testEndpointOpRows(e *env) {
	t, ctx := e.t, e.ctx
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	a, err := e.seed.Webhooks.CreateEndpoint(ctx, e.client.ID, storelink.NewEndpoint{URL: "https://a.test/", APIKey: "key-a"}, secret)
	must(t, err)
	b, err := e.seed.Webhooks.CreateEndpoint(ctx, e.client.ID, storelink.NewEndpoint{URL: "https://b.test/"}, secret)
	must(t, err)
	got, err := e.d.Webhooks.GetEndpoint(ctx, a.ID)
	must(t, err)
	e.sameEndpoint("GetEndpoint", got, *a)
	keys, err := e.d.Webhooks.EndpointKeys(ctx, a.ID)
	must(t, err)
	if keys.Secret == "" || strings.Contains(keys.Secret, secret[6:]) || keys.APIKey == "" || keys.APIKey == "key-a" ||
		keys.Previous != "" || !keys.PreviousUntil.IsZero() {
		t.Fatalf("EndpointKeys = %+v, want the key and secret sealed, no previous secret", keys)
	}
	_, err = e.d.Webhooks.GetEndpoint(ctx, "nope")
	wantNotFound(t, "GetEndpoint of no endpoint", err)
	_, err = e.d.Webhooks.EndpointKeys(ctx, "nope")
	wantNotFound(t, "EndpointKeys of no endpoint", err)

	var orders []*storelink.Order
	created := map[string]time.Time{}
	for range 3 {
		o := e.order("S1", eanA)
		e.insert(o)
		orders = append(orders, o)
		at := e.tick()
		created[e.queue(o, a.ID, at).EventID] = at
	}
	e.queue(orders[0], b.ID, e.tick())
	var claimed []service.Claimed
	e.round(func(tx service.RoundTx) { claimed = e.claimDue(tx, "w", e.tick(), 10, 10) })
	if len(claimed) != 4 {
		t.Fatalf("claimed %s, want four", events(claimed))
	}
	at := e.tick()
	byEvent := map[string]string{} // event → delivery, of a
	var results []storelink.AttemptResult
	var moves []service.Move
	for i, c := range claimed {
		j := c.Job
		r := storelink.AttemptResult{Job: &j, Attempt: storelink.Attempt{Number: 1, At: at, DurationMS: 99, StatusCode: 204, URL: "https://b.test/"}}
		m := service.Move{Kind: service.MoveSucceeded, End: storelink.DeliverySucceeded}
		if j.EndpointID == a.ID {
			byEvent[j.EventID] = j.DeliveryID
			r.Attempt.DurationMS, r.Attempt.URL = int64(10*(i+1)), "https://a.test/"+j.EventID
			switch i {
			case 1:
				m, r.Attempt.StatusCode, r.Attempt.Error = service.Move{Kind: service.MoveFailed, End: storelink.DeliveryFailed}, 500, "HTTP 500"
			case 2:
				m, r.Attempt.StatusCode = service.Move{Kind: service.MoveRetry, NextAt: at.Add(time.Hour)}, 503
			}
		}
		results, moves = append(results, r), append(moves, m)
	}
	e.round(func(tx service.RoundTx) {
		must(t, tx.RecordAttempts(ctx, service.RecordAttemptsParams{Results: results, Moves: moves, Now: at, Pending: storelink.DeliveryPending}))
	})

	both, err := e.d.Webhooks.EndpointStats(ctx, service.EndpointStatsParams{EndpointIDs: []string{a.ID, b.ID, "nope"}, Since: at, Counts: true})
	must(t, err)
	c := both[a.ID]
	if c.Attempts != 3 || c.Succeeded != 1 || c.LastSuccess == nil || !c.LastSuccess.Equal(at) || c.LastFailure == nil || !c.LastFailure.Equal(at) {
		t.Fatalf("EndpointStats(a, since the attempts) = %+v, want 3, 1 succeeded, the last of each at %s", c, at)
	}
	if c := both[b.ID]; c.Attempts != 1 || c.Succeeded != 1 || c.LastSuccess == nil || !c.LastSuccess.Equal(at) || c.LastFailure != nil {
		t.Fatalf("EndpointStats(b, read with a) = %+v, want its one attempt, succeeded at %s", c, at)
	}
	if c := both["nope"]; c.Attempts != 0 || c.LastSuccess != nil || c.LastFailure != nil {
		t.Fatalf("EndpointStats of no endpoint, read with a = %+v", c)
	}
	c = e.figures(service.EndpointStatsParams{EndpointIDs: []string{a.ID}, Since: at.Add(time.Millisecond), Counts: true})[a.ID]
	if c.Attempts != 0 || c.Succeeded != 0 || c.LastSuccess == nil || c.LastFailure == nil {
		t.Fatalf("EndpointStats(a, after the attempts) = %+v, want none counted, the last of each however long ago", c)
	}
	ranked := e.figures(service.EndpointStatsParams{Since: at, Ranks: map[string][]int64{a.ID: {2, 0, 3}, b.ID: {0, 1}, "nope": {0}}})
	if ds := ranked[a.ID].Durations; len(ds) != 2 || ds[0] != 10 || ds[2] != 30 {
		t.Fatalf("EndpointStats(a, ranks 2, 0, 3) = %v, want 0: 10 ms, 2: 30 ms and no rank 3", ds)
	}
	if ds := ranked[b.ID].Durations; len(ds) != 1 || ds[0] != 99 {
		t.Fatalf("EndpointStats(b, ranks 0, 1) = %v, want 0: 99 ms and no rank 1", ds)
	}
	if c := e.figures(service.EndpointStatsParams{EndpointIDs: []string{"nope"}, Since: at, Counts: true})["nope"]; c.Attempts != 0 || c.LastSuccess != nil || c.LastFailure != nil {
		t.Fatalf("EndpointStats of no endpoint = %+v", c)
	}
	list, err := e.d.Webhooks.ListDeliveries(ctx, storelink.DeliveryFilter{EndpointID: a.ID, Limit: 10})
	must(t, err)
	if len(list) != 3 {
		t.Fatalf("deliveries to a = %+v, want 3", list)
	}
	for _, d := range list {
		if len(d.Attempts) != 1 || d.Attempts[0].URL != "https://a.test/"+d.EventID || d.EndpointID != a.ID {
			t.Fatalf("delivery to a = %+v, want its attempt with the URL it went to", d)
		}
	}
	f := e.figures(service.EndpointStatsParams{EndpointIDs: []string{a.ID, b.ID}, Since: at, Counts: true})
	if pending, failed := f[a.ID].Pending, f[a.ID].Failed; pending != 1 || failed != 1 {
		t.Fatalf("EndpointStats(a) = %d, %d; want 1 pending, 1 failed", pending, failed)
	}
	if pending, failed := f[b.ID].Pending, f[b.ID].Failed; pending != 0 || failed != 0 {
		t.Fatalf("EndpointStats(b) = %d, %d; want none pending or failed", pending, failed)
	}
	failedID := byEvent[claimed[1].Job.EventID]
	d, err := e.d.Webhooks.GetDelivery(ctx, failedID)
	must(t, err)
	if d.ID != failedID || d.EndpointID != a.ID || d.ClientID != e.client.ID || d.State != storelink.DeliveryFailed || d.NextAttemptAt != nil ||
		!d.CreatedAt.Equal(created[claimed[1].Job.EventID]) {
		t.Fatalf("GetDelivery = %+v, want the failed delivery to a", d)
	}
	_, err = e.d.Webhooks.GetDelivery(ctx, "nope")
	wantNotFound(t, "GetDelivery of no delivery", err)

	// Recovered since its creation, not since after it.
	recoverAt := e.tick()
	e.inTx(func(tx service.WebhookTx) {
		n, err := tx.RecoverDeliveries(ctx, service.MoveDeliveriesParams{EndpointID: a.ID, Since: d.CreatedAt.Add(time.Millisecond), At: recoverAt, To: storelink.DeliveryPending})
		must(t, err)
		if n != 0 {
			t.Fatalf("RecoverDeliveries since after the failed one was queued = %d, want 0", n)
		}
		if n, err = tx.RecoverDeliveries(ctx, service.MoveDeliveriesParams{EndpointID: a.ID, Since: d.CreatedAt, At: recoverAt, To: storelink.DeliveryPending}); err != nil || n != 1 {
			t.Fatalf("RecoverDeliveries since it was queued = %d, %v; want 1", n, err)
		}
	})
	var again []service.Claimed
	e.round(func(tx service.RoundTx) { again = e.claimDue(tx, "w", recoverAt, 10, 10) })
	if len(again) != 1 || again[0].Job.DeliveryID != failedID || again[0].Job.Try != 1 || again[0].Job.Attempt != 2 {
		t.Fatalf("claim after the recovery = %s, want the recovered delivery, attempt 2, try 1", events(again))
	}

	// Deleted: its two pending deliveries (one in flight) are cancelled.
	deletedAt := e.tick()
	off := false
	e.inTx(func(tx service.WebhookTx) {
		locked, err := tx.LockEndpoint(ctx, a.ID)
		must(t, err)
		e.sameEndpoint("LockEndpoint", locked, *a)
		must(t, tx.LockClientEvents(ctx, e.client.ID))
		_, err = tx.UpdateEndpoint(ctx, a.ID, service.EndpointChange{Enabled: &off, DeletedAt: &deletedAt, At: deletedAt})
		must(t, err)
		n, err := tx.CancelDeliveries(ctx, service.MoveDeliveriesParams{EndpointID: a.ID, At: deletedAt, To: storelink.DeliveryCancelled})
		must(t, err)
		if n != 2 {
			t.Fatalf("CancelDeliveries = %d, want 2", n)
		}
		_, err = tx.LockEndpoint(ctx, "nope")
		wantNotFound(t, "LockEndpoint of no endpoint", err)
	})
	deleted, err := e.d.Webhooks.GetEndpoint(ctx, a.ID)
	must(t, err)
	if deleted.DeletedAt == nil || !deleted.DeletedAt.Equal(deletedAt) || deleted.Enabled {
		t.Fatalf("deleted endpoint = %+v, want deleted at %s, disabled", deleted, deletedAt)
	}
	eps, err := e.d.Webhooks.ListEndpoints(ctx, []string{e.client.ID})
	must(t, err)
	if len(eps) != 1 || eps[0].ID != b.ID {
		t.Fatalf("ListEndpoints after deleting a = %+v, want b only", eps)
	}
	cancelled, err := e.d.Webhooks.ListDeliveries(ctx, storelink.DeliveryFilter{ClientID: e.client.ID, State: storelink.DeliveryCancelled, Limit: 10})
	must(t, err)
	var ids []string
	for _, d := range cancelled {
		ids = append(ids, d.ID)
		if d.NextAttemptAt != nil || !d.UpdatedAt.Equal(deletedAt) {
			t.Fatalf("cancelled delivery = %+v, want not due, updated at %s", d, deletedAt)
		}
	}
	if len(ids) != 2 || !slices.Contains(ids, failedID) {
		t.Fatalf("cancelled deliveries = %v, want the recovered one and the retried one", ids)
	}
	if f := e.figures(service.EndpointStatsParams{EndpointIDs: []string{a.ID}, Counts: true})[a.ID]; f.Pending != 0 || f.Failed != 0 {
		t.Fatalf("EndpointStats(a) after its deletion = %d, %d; want none", f.Pending, f.Failed)
	}
	// The attempt in flight is recorded and moves nothing.
	flying := again[0].Job
	e.round(func(tx service.RoundTx) {
		must(t, tx.RecordAttempts(ctx, service.RecordAttemptsParams{
			Results: []storelink.AttemptResult{{Job: &flying, Attempt: storelink.Attempt{Number: 2, At: deletedAt, StatusCode: 204}}},
			Moves:   []service.Move{{Kind: service.MoveSucceeded, End: storelink.DeliverySucceeded}}, Now: deletedAt,
			Pending: storelink.DeliveryPending}))
		if got := e.claimDue(tx, "w", e.tick(), 10, 10); len(got) != 0 {
			t.Fatalf("claimed %s after the endpoint was deleted", events(got))
		}
	})
	if d, err := e.d.Webhooks.GetDelivery(ctx, failedID); err != nil || d.State != storelink.DeliveryCancelled {
		t.Fatalf("the cancelled delivery after its attempt was recorded = %+v, %v; want cancelled", d, err)
	}
	// A redelivery of a deleted endpoint's delivery changes nothing.
	succeeded := byEvent[claimed[0].Job.EventID]
	must(t, e.d.Webhooks.Redeliver(ctx, service.RedeliverParams{ID: succeeded, At: e.tick(), Pending: storelink.DeliveryPending}))
	if d, err := e.d.Webhooks.GetDelivery(ctx, succeeded); err != nil || d.State != storelink.DeliverySucceeded {
		t.Fatalf("a deleted endpoint's delivery after a redelivery = %+v, %v; want it succeeded still", d, err)
	}
}

// testListingRows: partners and clients are listed by their sort keys,
// bytewise, from after a key, matching a folded text in their names and
// ids with A to Z folded, and clients with their partner's name.
func testListingRows(e *env) {
	t, ctx := e.t, e.ctx
	for _, name := range []string{"g", "G", "Ärzte"} {
		must(t, e.d.Partners.InsertPartner(ctx, &storelink.Partner{ID: storelink.NewID(e.tick()), Name: name, CreatedAt: e.at}))
	}
	names := func(q string, after *storelink.ListCursor, limit int) []string {
		t.Helper()
		ps, err := e.d.Partners.ListPartners(ctx, q, after, limit)
		must(t, err)
		out := []string{}
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	all, err := e.d.Partners.ListPartners(ctx, "", nil, 10)
	must(t, err)
	if len(all) != 4 || all[0].Name != "Acme" || all[1].Name != "G" || all[2].Name != "g" || all[3].Name != "Ärzte" {
		t.Fatalf("ListPartners = %+v, want Acme, G, g, Ärzte", all)
	}
	for _, c := range []struct {
		q     string
		after *storelink.ListCursor
		limit int
		want  []string
	}{
		{"", nil, 2, []string{"Acme", "G"}},
		{"", &storelink.ListCursor{First: "G", Second: all[1].ID}, 10, []string{"g", "Ärzte"}},
		{"", &storelink.ListCursor{First: "G", Second: ""}, 10, []string{"G", "g", "Ärzte"}},
		{"g", nil, 10, []string{"G", "g"}}, // ids are hex: no g
		{"rzte", nil, 10, []string{"Ärzte"}},
		{"ärzte", nil, 10, []string{}},
		{"cme", &storelink.ListCursor{First: "Acme", Second: all[0].ID}, 10, []string{}},
		{all[3].ID, nil, 10, []string{"Ärzte"}},
	} {
		if got := names(c.q, c.after, c.limit); !slices.Equal(got, c.want) {
			t.Fatalf("ListPartners(%q, %+v, %d) = %q, want %q", c.q, c.after, c.limit, got, c.want)
		}
	}

	g := all[1].ID
	for _, country := range []string{"FR", "AT"} {
		e.inPartnerTx(func(tx service.PartnerTx) {
			_, err := tx.InsertClient(ctx, &storelink.Client{ID: storelink.NewID(e.tick()), PartnerID: g, CountryCode: country,
				Currency: "EUR", CreatedAt: e.at})
			must(t, err)
		})
	}
	countries := func(partner, q string, after *storelink.ListCursor) []string {
		t.Helper()
		cs, err := e.d.Partners.ListClients(ctx, service.ListClientsParams{PartnerID: partner, Q: q, After: after, Limit: 10})
		must(t, err)
		out := []string{}
		for _, c := range cs {
			if c.PartnerName == "" || c.Currency != "EUR" || c.CreatedAt.IsZero() {
				t.Fatalf("client listed = %+v, want its partner's name and its fields", c)
			}
			out = append(out, c.PartnerName+"/"+c.CountryCode)
		}
		return out
	}
	for _, c := range []struct {
		partner, q string
		after      *storelink.ListCursor
		want       []string
	}{
		{g, "", nil, []string{"G/AT", "G/FR"}},
		{g, "", &storelink.ListCursor{First: g, Second: "AT"}, []string{"G/FR"}},
		{"", "fr", nil, []string{"G/FR"}},
		{"", "acme", nil, []string{"Acme/DE"}},
		{"", e.client.ID, nil, []string{"Acme/DE"}},
		{"nope", "", nil, []string{}},
	} {
		got := countries(c.partner, c.q, c.after)
		if !slices.Equal(got, c.want) {
			t.Fatalf("ListClients(%q, %q, %+v) = %q, want %q", c.partner, c.q, c.after, got, c.want)
		}
	}
	if got := countries("", "", nil); len(got) != 3 {
		t.Fatalf("ListClients = %q, want all 3", got)
	}
}

// figures reads the endpoints' figures p asks.
func (e *env) figures(p service.EndpointStatsParams) map[string]service.EndpointFigures {
	e.t.Helper()
	f, err := e.d.Webhooks.EndpointStats(e.ctx, p)
	must(e.t, err)
	return f
}
