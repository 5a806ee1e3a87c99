package main

import (
	"encoding/json"
	"fmt"
)

// uploadEventJSON is an upload's stock_upload.finished event as a receiver
// got it.
type uploadEventJSON struct {
	EventID       string `json:"event_id"`
	Type          string `json:"type"`
	ClientID      string `json:"client_id"`
	UploadID      string `json:"upload_id"`
	FileName      string `json:"file_name"`
	Status        string `json:"status"`
	RowsTotal     int    `json:"rows_total"`
	RowsApplied   int    `json:"rows_applied"`
	RowsUnchanged int    `json:"rows_unchanged"`
	RowsRejected  int    `json:"rows_rejected"`
	ReceivedAt    string `json:"received_at"`
	FinishedAt    string `json:"finished_at"`
	StatusURL     string `json:"status_url"`
}

// checkUploadEvents: every upload that ended has one delivery of its
// stock_upload.finished event to its client's late endpoint, which
// succeeded (most of them only after they failed for good while the
// receiver was down and were recovered), and the receiver got it signed,
// with the upload as the service reports it; no event of an upload that
// did not end, and none twice under two ids. (checkEndpoint fails the
// other receivers, which do not ask for it, on any event they get that is
// no order's.)
func (s *soak) checkUploadEvents(rd reader, lists map[*clientModel][]uploadJSON, inv *invariant) error {
	events, recoveredTo, most := 0, 0, 0
	for _, r := range s.receivers {
		if r.profile != profileLate {
			continue
		}
		dels, err := rd.deliveries(r.endpointID)
		if err != nil {
			return err
		}
		byUpload := map[string]deliveryJSON{}
		for _, d := range dels {
			if d.UploadID == "" || d.OrderID != "" {
				inv.fail("receiver %s: delivery %s (event %s) names order %q and upload %q, want an upload's only", r.name, d.ID, d.EventID, d.OrderID, d.UploadID)
				continue
			}
			if prev, dup := byUpload[d.UploadID]; dup {
				inv.fail("receiver %s: upload %s has two deliveries, %s and %s", r.name, d.UploadID, prev.ID, d.ID)
			}
			byUpload[d.UploadID] = d
			if d.State != "succeeded" {
				inv.fail("receiver %s: delivery %s of upload %s's event is %s after the drain", r.name, d.ID, d.UploadID, d.State)
			}
		}
		got := map[string]*uploadEventJSON{}
		succeeded := map[string]bool{}
		for _, h := range r.snapshot() {
			if h.bad != "" {
				inv.fail("receiver %s: webhook-id %s: %s", r.name, h.id, h.bad)
				continue
			}
			var ev uploadEventJSON
			if err := json.Unmarshal(h.body, &ev); err != nil || ev.Type != uploadEventKind {
				inv.fail("receiver %s: webhook-id %s is no upload event: %.200s", r.name, h.id, h.body)
				continue
			}
			if prev := got[ev.UploadID]; prev != nil && *prev != ev {
				inv.fail("receiver %s: upload %s arrived as two events, %+v and %+v", r.name, ev.UploadID, *prev, ev)
			}
			got[ev.UploadID] = &ev
			if h.success() {
				succeeded[ev.UploadID] = true
			}
		}
		listed := map[string]bool{}
		for _, u := range lists[r.client] {
			listed[u.ID] = true
			ev, d := got[u.ID], byUpload[u.ID]
			if !ended(u.Status) {
				if ev != nil || d.ID != "" {
					inv.fail("receiver %s: upload %s is %s, yet has an event", r.name, u.ID, u.Status)
				}
				continue
			}
			events++
			switch {
			case d.ID == "":
				inv.fail("receiver %s: upload %s (%s) has no delivery of its event", r.name, u.ID, u.Status)
				continue
			case ev == nil || !succeeded[u.ID]:
				inv.fail("receiver %s: upload %s (%s): its event never answered 2xx in time", r.name, u.ID, u.Status)
				continue
			}
			if d.Attempts > 1 {
				recoveredTo++
			}
			most = max(most, int(d.Attempts))
			want := uploadEventJSON{EventID: d.EventID, Type: uploadEventKind, ClientID: r.client.id, UploadID: u.ID, FileName: u.FileName,
				Status: u.Status, RowsTotal: u.RowsTotal, RowsApplied: u.RowsApplied, RowsUnchanged: u.RowsUnchanged, RowsRejected: u.RowsRejected,
				ReceivedAt: ev.ReceivedAt, FinishedAt: ev.FinishedAt, StatusURL: "/stock/" + r.client.id + "/uploads/" + u.ID}
			if *ev != want || u.FinishedAt == nil || ev.FinishedAt != u.FinishedAt.UTC().Format("2006-01-02T15:04:05.000Z") {
				inv.fail("receiver %s: upload %s's event is %+v; the service reports %+v", r.name, u.ID, *ev, u)
			}
		}
		for id := range got {
			if !listed[id] {
				inv.fail("receiver %s: got the event of upload %s, which its client does not list", r.name, id)
			}
		}
	}
	inv.note = fmt.Sprintf("%d ended uploads' events, %d of them after failed attempts (at most %d); %d deliveries recovered",
		events, recoveredTo, most, s.recovered.Load())
	return nil
}
