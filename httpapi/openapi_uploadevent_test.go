package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"storelink"
)

// TestOpenAPIUploadEventSchemaMatchesJSONSchema proves that the spec's
// StockUploadEvent is schema/stock-upload-event.json: the same properties,
// required list, types, enums, patterns and formats, additionalProperties
// false, and the same verdicts on the golden upload events of the root
// package and on single changes to one that keep it valid or break one
// rule.
func TestOpenAPIUploadEventSchemaMatchesJSONSchema(t *testing.T) {
	js, spec := loadSchemas(t, uploadEventPair.file)
	samples := uploadEventSamples(t)
	for _, d := range schemaDrift(uploadEventPair, js, spec, samples) {
		t.Error(d)
	}

	t.Run("detects drift", func(t *testing.T) {
		specProps := func(spec map[string]any) map[string]any {
			return jsonAt(spec, "components", "schemas", "StockUploadEvent", "properties").(map[string]any)
		}
		jsProps := func(js map[string]any) map[string]any { return js["properties"].(map[string]any) }
		for _, m := range []struct {
			name   string
			mutate func(js, spec map[string]any)
		}{
			{"spec loses rows_unchanged", func(_, spec map[string]any) { delete(specProps(spec), "rows_unchanged") }},
			{"JSON Schema status takes accepted", func(js, _ map[string]any) {
				p := jsProps(js)["status"].(map[string]any)
				p["enum"] = append(p["enum"].([]any), "accepted")
			}},
			{"spec no longer requires finished_at", func(_, spec map[string]any) {
				s := jsonAt(spec, "components", "schemas", "StockUploadEvent").(map[string]any)
				var req []any
				for _, r := range s["required"].([]any) {
					if r != "finished_at" {
						req = append(req, r)
					}
				}
				s["required"] = req
			}},
			{"JSON Schema rows_total becomes a number", func(js, _ map[string]any) {
				jsProps(js)["rows_total"].(map[string]any)["type"] = "number"
			}},
			{"spec status_url pattern changes", func(_, spec map[string]any) {
				specProps(spec)["status_url"].(map[string]any)["pattern"] = "^/.*$"
			}},
			{"spec opens the event", func(_, spec map[string]any) {
				jsonAt(spec, "components", "schemas", "StockUploadEvent").(map[string]any)["additionalProperties"] = true
			}},
		} {
			js2, spec2 := copyJSON(t, js), copyJSON(t, spec)
			m.mutate(js2, spec2)
			d := schemaDrift(uploadEventPair, js2, spec2, samples)
			if len(d) == 0 {
				t.Errorf("%s: not reported", m.name)
			}
			t.Logf("%s: %d differences, first: %s", m.name, len(d), strings.Join(d[:min(len(d), 1)], ""))
		}
	})
}

// uploadEventSamples are the golden upload events of the root package and
// single changes to one, each keeping it valid or breaking one rule.
func uploadEventSamples(t *testing.T) []eventSample {
	t.Helper()
	var out []eventSample
	goldens, err := filepath.Glob("../testdata/upload-events/*.json")
	if err != nil || len(goldens) == 0 {
		t.Fatalf("no golden upload events in ../testdata/upload-events: %v", err)
	}
	for _, g := range goldens {
		b, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, eventSample{"golden " + filepath.Base(g), b, true})
	}
	base := func() map[string]any {
		return map[string]any{
			"event_id": "01a1fd42-c3a0-7b1e-8f2d-6a0c9e4b7d21", "type": "stock_upload.finished", "client_id": "c-1",
			"upload_id": "u-1", "file_name": "stock.csv", "status": "applied", "rows_total": 5, "rows_applied": 3,
			"rows_unchanged": 1, "rows_rejected": 2, "received_at": "2026-11-21T08:40:12.118Z",
			"finished_at": "2026-11-21T08:40:12.604Z", "status_url": "/stock/c-1/uploads/u-1",
		}
	}
	add := func(name string, valid bool, change func(e map[string]any)) {
		e := base()
		change(e)
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, eventSample{name, b, valid})
	}
	add("full event", true, func(map[string]any) {})
	for _, k := range []string{"event_id", "type", "client_id", "upload_id", "file_name", "status", "rows_total", "rows_applied",
		"rows_unchanged", "rows_rejected", "received_at", "finished_at", "status_url"} {
		add("without "+k, false, func(e map[string]any) { delete(e, k) })
		add(k+" null", false, func(e map[string]any) { e[k] = nil })
	}
	for _, s := range []string{"applied", "rejected", "cancelled"} {
		add("status "+s, true, func(e map[string]any) { e["status"] = s })
	}
	for _, s := range []any{"accepted", "processing", "Applied", "", 1} {
		add(fmt.Sprintf("status %#v", s), false, func(e map[string]any) { e["status"] = s })
	}
	add("an order state as type", false, func(e map[string]any) { e["type"] = "assigned" })
	add("an unknown property", false, func(e map[string]any) { e["has_errors"] = true })
	add("an order_id", false, func(e map[string]any) { e["order_id"] = "o-1" })
	add("no rows at all", true, func(e map[string]any) {
		e["rows_total"], e["rows_applied"], e["rows_unchanged"], e["rows_rejected"] = 0, 0, 0, 0
	})
	add("negative rows_applied", false, func(e map[string]any) { e["rows_applied"] = -1 })
	add("fractional rows_rejected", false, func(e map[string]any) { e["rows_rejected"] = 1.5 })
	add("rows_total a string", false, func(e map[string]any) { e["rows_total"] = "5" })
	add("event_id not a UUID", false, func(e map[string]any) { e["event_id"] = "event-1" })
	add("received_at without fraction", true, func(e map[string]any) { e["received_at"] = "2026-11-21T08:40:12Z" })
	add("received_at with an offset", false, func(e map[string]any) { e["received_at"] = "2026-11-21T09:40:12.118+01:00" })
	add("finished_at with microseconds", false, func(e map[string]any) { e["finished_at"] = "2026-11-21T08:40:12.604000Z" })
	add("finished_at empty", false, func(e map[string]any) { e["finished_at"] = "" })
	add("status_url absolute", false, func(e map[string]any) { e["status_url"] = "https://storelink.example/stock/c-1/uploads/u-1" })
	add("status_url of the stock", false, func(e map[string]any) { e["status_url"] = "/stock/c-1/stock" })
	return out
}

// TestOpenAPIUploadEventConform: the calls that name stock_upload.finished
// (registering, changing and reading endpoints that ask for it, a test send
// of it) and the listings of the deliveries of a real upload event, which
// name the upload and no order, answer as the spec says; each event
// delivered is signed, valid against StockUploadEvent and
// schema/stock-upload-event.json, and absent from the pull feed.
func TestOpenAPIUploadEventConform(t *testing.T) {
	router := specRouter(t)
	a := newAPI(t, apiOptions{webhooks: &webhookOptions{}})
	rec := newTestReceiver(t, false)
	admin := map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"}
	key := map[string]string{"x-api-key": a.APIKey}
	keyJSON := map[string]string{"x-api-key": a.APIKey, "Content-Type": "application/json"}
	c := "/webhooks/" + a.ClientID

	var uploads, both storelink.EndpointSecret
	decodeInto(t, conform(t, a, router, call{"POST", "/admin/clients/" + a.ClientID + "/webhooks",
		`{"url":"` + rec.URL + `/uploads","states":["stock_upload.finished"]}`, admin, 201}), &uploads)
	decodeInto(t, conform(t, a, router, call{"POST", c + "/endpoints",
		`{"url":"` + rec.URL + `/both","states":["assigned","stock_upload.finished"]}`, keyJSON, 201}), &both)
	if !slices.Equal(uploads.States, []storelink.OrderState{storelink.EventUploadFinished}) || len(both.States) != 2 {
		t.Fatalf("endpoints registered with states %v and %v", uploads.States, both.States)
	}
	for _, cl := range []call{
		{"PATCH", "/admin/webhooks/" + uploads.ID, `{"states":["stock_upload.finished","cancelled"]}`, admin, 200},
		{"PATCH", "/admin/webhooks/" + uploads.ID, `{"states":["stock_upload.finished"]}`, admin, 200},
		{"PATCH", c + "/endpoints/" + both.ID, `{"states":["stock_upload.finished","assigned"]}`, keyJSON, 200},
		{"PATCH", c + "/endpoints/" + both.ID, `{"states":["stock_upload.started"]}`, keyJSON, 422},
		{"GET", "/admin/webhooks/" + uploads.ID, "", admin, 200},
		{"GET", c + "/endpoints", "", key, 200},
		{"GET", "/admin/clients/" + a.ClientID, "", admin, 200},
	} {
		conform(t, a, router, cl)
	}

	// An upload ends; the announcer (here called at once) writes its event
	// for both endpoints.
	putStock(a, "S1;"+ean1+";SKU-1;5;19.99;Dept 3")
	if n, err := a.webhooks.Orders.AnnounceUploads(t.Context(), 10); err != nil || n != 1 {
		t.Fatalf("AnnounceUploads = %d, %v; want the upload's event", n, err)
	}
	list := waitDeliveriesFinal(t, a, 2)
	js, spec := loadSchemas(t, uploadEventPair.file)
	jsSch, err := compileJSONSchema(js, uploadEventPair.file)
	if err != nil {
		t.Fatal(err)
	}
	specSch, err := loadSpecSchema(spec, "StockUploadEvent")
	if err != nil {
		t.Fatal(err)
	}
	valid := func(what string, body []byte) storelink.UploadEvent {
		t.Helper()
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		if err := jsSch.Validate(inst); err != nil {
			t.Errorf("%s %s: not valid against %s: %v", what, body, uploadEventPair.file, err)
		}
		if err := specSch.VisitJSON(v); err != nil {
			t.Errorf("%s %s: not valid against StockUploadEvent: %v", what, body, err)
		}
		var ev storelink.UploadEvent
		decodeInto(t, body, &ev)
		return ev
	}
	hits := rec.waitFor(t, 2)
	var uploadID string
	for _, h := range hits {
		checkSigned(t, h, map[string]string{"/uploads": uploads.Secret, "/both": both.Secret}[h.Path])
		ev := valid("delivered event", h.Body)
		if ev.Status != storelink.UploadApplied || ev.EventID != h.ID || ev.ClientID != a.ClientID || ev.RowsApplied != 1 {
			t.Errorf("delivered event %s", h.Body)
		}
		uploadID = ev.UploadID
		conform(t, a, router, call{"GET", ev.StatusURL, "", key, 200})
	}
	for _, d := range list {
		if d.UploadID != uploadID || d.OrderID != "" || d.EventState != storelink.EventUploadFinished || d.State != storelink.DeliverySucceeded {
			t.Errorf("delivery of the upload event = %+v, want upload %s, no order, succeeded", d, uploadID)
		}
	}
	var page struct {
		Deliveries []storelink.Delivery `json:"deliveries"`
	}
	decodeInto(t, conform(t, a, router, call{"GET", c + "/deliveries?endpoint_id=" + uploads.ID, "", key, 200}), &page)
	if len(page.Deliveries) != 1 || page.Deliveries[0].UploadID != uploadID || page.Deliveries[0].OrderID != "" {
		t.Errorf("the partner's deliveries of the upload endpoint = %s, want the upload event's", dump(page.Deliveries))
	}
	for _, cl := range []call{
		{"GET", "/admin/deliveries?client_id=" + a.ClientID, "", admin, 200},
		{"GET", "/admin/deliveries?endpoint_id=" + uploads.ID, "", admin, 200},
		{"GET", c + "/deliveries", "", key, 200},
		{"GET", c + "/deliveries?event_id=" + hits[0].ID, "", key, 200},
		{"POST", c + "/endpoints/" + both.ID + "/test", `{"state":"stock_upload.finished"}`, keyJSON, 200},
		{"POST", "/admin/webhooks/" + uploads.ID + "/test", `{"state":"stock_upload.finished"}`, admin, 200},
		{"POST", "/admin/webhooks/" + uploads.ID + "/test", `{"state":"stock_upload"}`, admin, 422},
	} {
		conform(t, a, router, cl)
	}
	for _, h := range rec.waitFor(t, 4)[2:] {
		if ev := valid("test event", h.Body); ev.FileName != "test-stock.csv" || h.Header.Get("webhook-test") != "true" {
			t.Errorf("test send of the upload event: %s with headers %v", h.Body, h.Header)
		}
	}
	// Order events only in the pull feed.
	var feed struct {
		Events []json.RawMessage `json:"events"`
	}
	decodeInto(t, conform(t, a, router, call{"GET", "/events/" + a.ClientID, "", key, 200}), &feed)
	if len(feed.Events) != 0 {
		t.Errorf("pull feed = %s, want no event: upload events are not in it", feed.Events)
	}
}
