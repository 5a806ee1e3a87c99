package drivertest

import (
	"time"

	"storelink"
	"storelink/service"
)

// testClientFigureRows: every client is read with its figures in one call:
// its stores, its endpoints not deleted and how many are disabled, the
// failed deliveries of those endpoints, its uploads rejected since a time,
// its bucket and its latest upload; a client with nothing has zeros and
// nils; the search matches as ListClients's does.
func testClientFigureRows(e *env) {
	t, ctx := e.t, e.ctx
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	var eps []*storelink.Endpoint
	for _, u := range []string{"https://a.test/", "https://b.test/", "https://c.test/"} {
		ep, err := e.seed.Webhooks.CreateEndpoint(ctx, e.client.ID, storelink.NewEndpoint{URL: u}, secret)
		must(t, err)
		eps = append(eps, ep)
	}
	off := false
	_, err := e.seed.Webhooks.UpdateEndpoint(ctx, "", eps[1].ID, storelink.EndpointPatch{Enabled: &off})
	must(t, err)
	// Two failed deliveries to a, one to c, which is then deleted.
	for _, ep := range []string{eps[0].ID, eps[0].ID, eps[2].ID} {
		o := e.order("S1", eanA)
		e.insert(o)
		e.queue(o, ep, e.tick())
	}
	at := e.tick()
	var claimed []service.Claimed
	e.round(func(tx service.RoundTx) { claimed = e.claimDue(tx, "w", at, 10, 10) })
	if len(claimed) != 3 {
		t.Fatalf("claimed %s, want three", events(claimed))
	}
	var results []storelink.AttemptResult
	var moves []service.Move
	for _, c := range claimed {
		j := c.Job
		results = append(results, storelink.AttemptResult{Job: &j, Attempt: storelink.Attempt{Number: 1, At: at, StatusCode: 500}})
		moves = append(moves, service.Move{Kind: service.MoveFailed, End: storelink.DeliveryFailed})
	}
	e.round(func(tx service.RoundTx) {
		must(t, tx.RecordAttempts(ctx, service.RecordAttemptsParams{Results: results, Moves: moves, Now: at, Pending: storelink.DeliveryPending}))
	})
	must(t, e.seed.Webhooks.DeleteEndpoint(ctx, "", eps[2].ID, nil))

	// Uploads: rejected, rejected, applied, waiting.
	var ups []*storelink.Upload
	for i, status := range []storelink.UploadStatus{storelink.UploadRejected, storelink.UploadRejected, storelink.UploadApplied} {
		u := e.accept("body")
		ups = append(ups, u)
		e.apply(e.claim("w", u), status)
		if i == 0 {
			e.tick()
		}
	}
	waiting := e.accept("later")
	between := ups[0].ReceivedAt.Add(time.Second) // after the first rejected one, before the second

	other, err := e.seed.Partners.CreatePartner(ctx, "Zeta Shoes")
	must(t, err)
	oc, err := e.seed.Partners.CreateClient(ctx, other.ID, "AT", "EUR")
	must(t, err)

	figures := func(q string, since time.Time) []service.ClientFigures {
		t.Helper()
		fs, err := e.d.Partners.ClientFigures(ctx, service.ClientFiguresParams{Q: q, Failed: storelink.DeliveryFailed,
			Rejected: storelink.UploadRejected, RejectedSince: since})
		must(t, err)
		return fs
	}
	fs := figures("", between)
	if len(fs) != 2 || fs[0].ID != e.client.ID || fs[1].ID != oc.ID {
		t.Fatalf("ClientFigures = %+v, want the two clients in the order of ListClients", fs)
	}
	a := fs[0]
	if a.PartnerName != "Acme" || a.CountryCode != "DE" || a.Currency != "EUR" || a.CreatedAt.IsZero() ||
		a.Stores != 2 || a.Endpoints != 2 || a.EndpointsDisabled != 1 || a.FailedDeliveries != 2 || a.RejectedUploads != 1 {
		t.Fatalf("figures of the busy client = %+v, want Acme/DE/EUR, 2 stores, 2 endpoints (1 disabled), 2 failed, 1 rejected", a)
	}
	if a.Bucket == nil || a.Bucket.Tokens != 100 || !a.Bucket.UpdatedAt.Equal(waiting.ReceivedAt) {
		t.Fatalf("bucket = %+v, want 100 tokens as of %s", a.Bucket, waiting.ReceivedAt)
	}
	if u := a.LastUpload; u == nil || u.ID != waiting.ID || u.ClientID != e.client.ID || u.FileName != waiting.FileName ||
		u.SizeBytes != waiting.SizeBytes || u.Status != storelink.UploadAccepted || !u.ReceivedAt.Equal(waiting.ReceivedAt) {
		t.Fatalf("last upload = %+v, want the waiting one %+v", a.LastUpload, waiting)
	}
	b := fs[1]
	if b.PartnerName != "Zeta Shoes" || b.Stores != 0 || b.Endpoints != 0 || b.EndpointsDisabled != 0 || b.FailedDeliveries != 0 ||
		b.RejectedUploads != 0 || b.Bucket != nil || b.LastUpload != nil {
		t.Fatalf("figures of the idle client = %+v, want zeros and nils", b)
	}
	if fs := figures("", ups[0].ReceivedAt); fs[0].RejectedUploads != 2 {
		t.Fatalf("rejected since the first upload = %d, want 2", fs[0].RejectedUploads)
	}
	if fs := figures("", waiting.ReceivedAt); fs[0].RejectedUploads != 0 {
		t.Fatalf("rejected since the last upload = %d, want 0", fs[0].RejectedUploads)
	}
	for q, want := range map[string]string{"zeta": oc.ID, "acme": e.client.ID, oc.ID: oc.ID} {
		if fs := figures(q, between); len(fs) != 1 || fs[0].ID != want {
			t.Fatalf("ClientFigures(%q) = %+v, want client %s only", q, fs, want)
		}
	}
	if fs := figures("nobody", between); fs == nil || len(fs) != 0 {
		t.Fatalf("ClientFigures(nobody) = %#v, want an empty list", fs)
	}
}
