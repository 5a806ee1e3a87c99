package storetest

import (
	"time"

	"storelink"
)

// testClientSummaries: the overview's figures of every client: capacity
// worked out of the bucket as of now (exhausted below a tenth, refilling
// with the clock), uploads rejected within the last 24 hours, the latest
// upload, failed deliveries of endpoints not deleted; the search is
// ListClients's.
func testClientSummaries(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	other, err := s.Partners.CreatePartner(ctx, "Zeta Shoes")
	must(t, err)
	oc, err := s.Partners.CreateClient(ctx, other.ID, "AT", "EUR")
	must(t, err)

	// Stock for an order, whose delivery fails for good.
	e.feed(row("S1", eanA, 100, 100))
	ep, _ := e.endpoint("https://hooks.test/", "")
	e.create(e.newOrder("S-1", eanA))
	e.record(e.result(e.claimOne("w"), storelink.OutcomeFailed, 500))

	// 1150 of 1200 bytes sent; a file no store of the client knows is
	// rejected.
	_, _, err = s.Uploads.Accept(ctx, storelink.NewUpload{ClientID: e.client.ID, FileName: "big.csv", Body: storelink.ChunksOf(make([]byte, 1150)), SHA256: "00"}, policy)
	must(t, err)
	c, err := s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	rejected, err := s.Uploads.Apply(ctx, c, rows(row("S9", "4006381333931", 1, 100)))
	must(t, err)
	if rejected.Status != storelink.UploadRejected {
		t.Fatalf("upload = %+v, want rejected", rejected)
	}

	summaries := func(q string) []storelink.ClientSummary {
		t.Helper()
		list, err := s.Partners.ClientSummaries(ctx, q, policy)
		must(t, err)
		return list
	}
	list := summaries("")
	if len(list) != 2 {
		t.Fatalf("ClientSummaries = %+v, want both clients", list)
	}
	a, z := list[0], list[1]
	if a.ID != e.client.ID {
		a, z = z, a
	}
	if a.ID != e.client.ID || z.ID != oc.ID {
		t.Fatalf("ClientSummaries = %+v, want the two clients", list)
	}
	if a.PartnerName != "Acme" || a.Stores != 2 || a.Endpoints != 1 || a.FailedDeliveries != 1 || a.RejectedUploads != 1 ||
		a.LastUpload == nil || a.LastUpload.ID != rejected.ID || a.LastUpload.Status != storelink.UploadRejected {
		t.Fatalf("Acme's summary = %+v, want 2 stores, 1 endpoint, 1 failed delivery, 1 rejected upload, the last one", a)
	}
	if a.Capacity.BytesPerWindow != 1200 || a.Capacity.BytesLeft != 50 || !a.CapacityExhausted() {
		t.Fatalf("Acme's capacity = %+v, want 50 of 1200 left, exhausted", a.Capacity)
	}
	if z.Capacity.BytesPerWindow != 1000 || z.Capacity.BytesLeft != 1000 || z.CapacityExhausted() || z.LastUpload != nil ||
		z.FailedDeliveries != 0 || z.RejectedUploads != 0 || z.Endpoints != 0 {
		t.Fatalf("Zeta's summary = %+v, want a full bucket and nothing else", z)
	}

	// Half an hour later 600 bytes have come back; a day later the
	// rejection is out of the window. A deleted endpoint's failures no
	// longer count.
	e.clock.Advance(30 * time.Minute)
	if a := summaries("acme")[0]; a.Capacity.BytesLeft != 650 || a.CapacityExhausted() {
		t.Fatalf("capacity half an hour later = %+v, want 650 left, not exhausted", a.Capacity)
	}
	e.clock.Advance(24 * time.Hour)
	must(t, s.Webhooks.DeleteEndpoint(ctx, "", ep.ID, nil))
	if a := summaries("acme")[0]; a.RejectedUploads != 0 || a.FailedDeliveries != 0 || a.Endpoints != 0 || a.LastUpload == nil {
		t.Fatalf("a day later, the endpoint deleted = %+v, want no rejection, no failed delivery, no endpoint, the last upload kept", a)
	}
	if list := summaries("zeta"); len(list) != 1 || list[0].ID != oc.ID {
		t.Fatalf("ClientSummaries(zeta) = %+v, want Zeta's client only", list)
	}
	if list := summaries("nobody"); len(list) != 0 {
		t.Fatalf("ClientSummaries(nobody) = %+v, want none", list)
	}
}
