package storetest

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"storelink"
	"storelink/service"
)

// testUploadEvents: an upload that ends (applied, with or without rows
// dropped, rejected, set aside, cancelled) has its stock_upload.finished
// event written once, by whichever AnnounceUploads comes first, and queued
// for the client's enabled endpoints that name it, alone or beside order
// states; never for an endpoint that does not name it (one that takes every
// order state included), a disabled one, or another client's. The event
// carries the upload as it ended, its deliveries name the upload, and the
// order event feed does not show it. An endpoint that names only it gets
// no order event.
func testUploadEvents(e *env) {
	t, ctx, id := e.t, e.ctx, e.client.ID
	s := e.s.With(service.WithUploadStatusURL(func(clientID, uploadID string) string {
		return "/stock/" + clientID + "/uploads/" + uploadID
	}))
	e.s = s
	kind := storelink.EventUploadFinished
	every, _ := e.endpoint("https://every-order-state.test", "")
	uploads, _ := e.endpoint("https://uploads.test", "", kind)
	both, _ := e.endpoint("https://both.test", "", storelink.StateAssigned, kind)
	off, _ := e.endpoint("https://off.test", "", kind)
	e.setEnabled(off.ID, false)
	other := e.batchClient("Other")
	_, err := s.Webhooks.CreateEndpoint(ctx, other, storelink.NewEndpoint{URL: "https://other.test", States: []storelink.OrderState{kind}}, newSecret())
	must(t, err)

	// Applied with a row dropped (store S9 is no store of the client).
	partial := e.accept("partial.csv", 10)
	c, err := s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	e.clock.Advance(time.Second)
	_, err = s.Uploads.Apply(ctx, c, rows(row("S1", eanX, 5, 100), row("S9", eanX, 5, 100), row("S2", eanX, 5, 100)))
	must(t, err)
	// Rejected: a file-level problem applies nothing.
	rejected := e.accept("rejected.csv", 10)
	c, err = s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	_, err = s.Uploads.Apply(ctx, c, func(map[string]bool, func(storelink.StockRow) error) (storelink.FeedReport, error) {
		return storelink.FeedReport{FileError: true, Errors: []storelink.Problem{{Type: "Invalid header", Message: "no header", LineNumbers: []storelink.LineRef{}}}}, nil
	})
	must(t, err)
	// Set aside after its processing failed again and again.
	failed := e.accept("failed.csv", 10)
	c, err = s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	must(t, s.Uploads.Fail(ctx, c, storelink.Problem{Type: "Processing failed", Message: "gave up", LineNumbers: []storelink.LineRef{}}))
	// Cancelled while it waited, and two applied in one batch, the second
	// leaving its only row as the first wrote it.
	cancelled := e.accept("cancelled.csv", 10)
	_, err = s.Uploads.Cancel(ctx, id, cancelled.ID, storelink.CapacityPolicy{Base: 1 << 30, Window: time.Hour})
	must(t, err)
	b1, b2 := e.accept("batch-1.csv", 10), e.accept("batch-2.csv", 10)
	for _, r := range s.Uploads.ApplyBatch(ctx, e.claimBatch("w", b1, b2), feeds(map[string]storelink.FeedApply{
		"batch-1.csv": rows(row("S1", eanY, 1, 100)), "batch-2.csv": rows(row("S1", eanY, 1, 100)),
	})) {
		must(t, r.Err)
	}

	if list := e.deliveries(); len(list) != 0 {
		t.Fatalf("deliveries before AnnounceUploads = %+v, want none: the events are only due", list)
	}
	// Two announcers at once: each event is written once.
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, err := s.Orders.AnnounceUploads(ctx, 100); err != nil {
				t.Errorf("AnnounceUploads: %v", err)
			}
		})
	}
	wg.Wait()
	if n, err := s.Orders.AnnounceUploads(ctx, 100); err != nil || n != 0 {
		t.Fatalf("AnnounceUploads once all were written = %d, %v; want 0", n, err)
	}

	ended := []*storelink.Upload{partial, rejected, failed, cancelled, b1, b2}
	byUpload := map[string][]string{}
	for _, d := range e.deliveries() {
		if d.EventState != kind || d.OrderID != "" || d.UploadID == "" || d.State != storelink.DeliveryPending || d.ClientID != id {
			t.Fatalf("delivery %+v, want a pending %s delivery naming its upload and no order", d, kind)
		}
		byUpload[d.UploadID] = append(byUpload[d.UploadID], d.EndpointID)
	}
	wantTo := []string{uploads.ID, both.ID}
	sort.Strings(wantTo)
	for _, u := range ended {
		to := byUpload[u.ID]
		sort.Strings(to)
		if !slices.Equal(to, wantTo) {
			t.Fatalf("upload %s is delivered to %v, want once to each of %v (not to %s, %s)", u.FileName, to, wantTo, every.ID, off.ID)
		}
	}
	if len(byUpload) != len(ended) {
		t.Fatalf("deliveries name %d uploads, want %d", len(byUpload), len(ended))
	}
	// Listed by the event, and by the upload as an order's are by the order.
	one := e.deliveries()[0]
	for _, f := range []storelink.DeliveryFilter{{ClientID: id, EventID: one.EventID, Limit: 10}, {ClientID: id, OrderID: one.UploadID, Limit: 10}} {
		byEvent, err := s.Webhooks.Deliveries(ctx, f)
		must(t, err)
		if len(byEvent) != 2 || byEvent[0].EventID != one.EventID || byEvent[1].EventID != one.EventID || byEvent[0].UploadID != one.UploadID {
			t.Fatalf("deliveries of %+v = %+v, want the event's two", f, byEvent)
		}
	}
	theirs, err := s.Webhooks.Deliveries(ctx, storelink.DeliveryFilter{ClientID: other, Limit: 10})
	must(t, err)
	if len(theirs) != 0 {
		t.Fatalf("the other client's endpoint got %+v, want nothing: none of its uploads ended", theirs)
	}

	// What the endpoints receive: the upload as it ended.
	got := map[string]storelink.UploadEvent{}
	for _, j := range e.claim("d", 100, 100) {
		var ev storelink.UploadEvent
		dec := json.NewDecoder(strings.NewReader(string(j.Body)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("delivery body %s: %v", j.Body, err)
		}
		if ev.EventID != j.EventID {
			t.Fatalf("body's event_id %s, job's %s", ev.EventID, j.EventID)
		}
		if prev, ok := got[ev.UploadID]; ok && prev.EventID != ev.EventID {
			t.Fatalf("upload %s has two events, %s and %s", ev.UploadID, prev.EventID, ev.EventID)
		}
		got[ev.UploadID] = ev
	}
	for _, u := range ended {
		stored, err := s.Uploads.Upload(ctx, id, u.ID)
		must(t, err)
		ev, ok := got[u.ID]
		want := storelink.UploadEvent{EventID: ev.EventID, Type: kind, ClientID: id, UploadID: u.ID, FileName: u.FileName,
			Status: stored.Status, RowsTotal: stored.RowsTotal, RowsApplied: stored.RowsApplied, RowsUnchanged: stored.RowsUnchanged,
			RowsRejected: stored.RowsRejected, ReceivedAt: stored.ReceivedAt.Format(storelink.EventTimeLayout),
			FinishedAt: stored.FinishedAt.Format(storelink.EventTimeLayout), StatusURL: "/stock/" + id + "/uploads/" + u.ID}
		if !ok || ev != want {
			t.Fatalf("event of %s = %+v, want %+v", u.FileName, ev, want)
		}
	}
	for name, want := range map[string]struct {
		status                              storelink.UploadStatus
		total, applied, unchanged, rejected int
	}{
		"partial.csv": {storelink.UploadApplied, 3, 2, 0, 1}, "rejected.csv": {storelink.UploadRejected, 0, 0, 0, 0},
		"failed.csv": {storelink.UploadRejected, 0, 0, 0, 0}, "cancelled.csv": {storelink.UploadCancelled, 0, 0, 0, 0},
		"batch-1.csv": {storelink.UploadApplied, 1, 1, 0, 0}, "batch-2.csv": {storelink.UploadApplied, 1, 1, 1, 0},
	} {
		var ev storelink.UploadEvent
		for _, g := range got {
			if g.FileName == name {
				ev = g
			}
		}
		if ev.Status != want.status || ev.RowsTotal != want.total || ev.RowsApplied != want.applied ||
			ev.RowsUnchanged != want.unchanged || ev.RowsRejected != want.rejected {
			t.Fatalf("event of %s = %+v, want %s with %d rows, %d applied, %d unchanged, %d rejected", name, ev,
				want.status, want.total, want.applied, want.unchanged, want.rejected)
		}
	}

	// Order events: none in the feed is an upload's; the endpoint that
	// names only the upload event gets no order event.
	e.feed(row("S1", eanA, 10, 100))
	o := e.create(e.newOrder("U-1", eanA))
	for _, r := range e.clientEvents(id) {
		if r.OrderID == "" || r.State == kind {
			t.Fatalf("the event feed shows %+v, want order events only", r)
		}
	}
	for _, d := range e.deliveries() {
		if d.EventState == kind {
			continue
		}
		if d.OrderID != o.ID || d.EndpointID == uploads.ID || d.EndpointID == off.ID {
			t.Fatalf("order delivery %+v, want order %s's to %s and %s only", d, o.ID, every.ID, both.ID)
		}
	}

	// The feed's upload ended too.
	if n, err := s.Orders.AnnounceUploads(ctx, 100); err != nil || n != 1 {
		t.Fatalf("AnnounceUploads after the feed = %d, %v; want its upload's event", n, err)
	}
	// With no enabled endpoint that asks for it (off still names it), an
	// upload's end leaves nothing due.
	must(t, s.Webhooks.DeleteEndpoint(ctx, id, uploads.ID, nil))
	must(t, s.Webhooks.DeleteEndpoint(ctx, id, both.ID, nil))
	quiet := e.accept("quiet.csv", 10)
	_, err = s.Uploads.Cancel(ctx, id, quiet.ID, storelink.CapacityPolicy{Base: 1 << 30, Window: time.Hour})
	must(t, err)
	if n, err := s.Orders.AnnounceUploads(ctx, 100); err != nil || n != 0 {
		t.Fatalf("AnnounceUploads after an upload no endpoint asks for ended = %d, %v; want 0", n, err)
	}
}
