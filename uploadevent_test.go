package storelink_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"storelink"
)

const (
	uploadSchemaPath = "schema/stock-upload-event.json"
	uploadGoldenDir  = "testdata/upload-events"
)

// uploadStatusURL is the status_url serve gives an upload event (the API's
// path of the upload's status).
func uploadStatusURL(clientID, uploadID string) string {
	return "/stock/" + clientID + "/uploads/" + uploadID
}

type namedUpload struct {
	name   string
	upload storelink.Upload
}

// endedUploads are uploads as each way of ending leaves them, with fixed ids
// and times: received in another zone than UTC and with nanoseconds, which
// the event gives in UTC with milliseconds.
func endedUploads() []namedUpload {
	cet := time.FixedZone("CET", 3600)
	received := time.Date(2026, 11, 21, 8, 54, 21, 605_123_456, cet)
	after := func(d time.Duration) *time.Time { t := received.Add(d); return &t }
	up := func(n int, file string, status storelink.UploadStatus, took time.Duration) storelink.Upload {
		return storelink.Upload{ID: "00000010-0000-4000-8000-00000000000" + string(rune('0'+n)), ClientID: testClient.ID,
			FileName: file, Status: status, ReceivedAt: received, FinishedAt: after(took)}
	}
	applied := up(1, "stock.csv", storelink.UploadApplied, 2500*time.Millisecond)
	applied.RowsTotal, applied.RowsApplied, applied.RowsUnchanged = 3, 3, 1
	partial := up(2, "stock-partial.csv", storelink.UploadApplied, 3*time.Second)
	partial.RowsTotal, partial.RowsApplied, partial.RowsUnchanged, partial.RowsRejected = 5, 3, 1, 2
	noValidRow := up(3, "stock-bad.csv", storelink.UploadRejected, 900*time.Millisecond)
	noValidRow.RowsTotal, noValidRow.RowsRejected = 2, 2
	// A file-level problem, or processing that failed and set it aside:
	// nothing read, nothing applied.
	fileProblem := up(4, "stock-latin1.csv", storelink.UploadRejected, 150*time.Millisecond)
	cancelled := up(5, "stock-monday.csv", storelink.UploadCancelled, 40*time.Second)
	return []namedUpload{
		{"applied", applied}, {"applied_rows_rejected", partial}, {"rejected_no_valid_row", noValidRow},
		{"rejected_file", fileProblem}, {"cancelled", cancelled},
	}
}

// uploadEvent is the event of u as the announcer writes it, with a fixed id.
func uploadEvent(u *storelink.Upload) *storelink.UploadEvent {
	return storelink.NewUploadEvent(u, "00000011-0000-4000-8000-"+u.ID[len(u.ID)-12:], uploadStatusURL(u.ClientID, u.ID))
}

// TestUploadEventGolden: the event of each way an upload ends is the JSON in
// testdata/upload-events (go test -run TestUploadEventGolden -update .).
func TestUploadEventGolden(t *testing.T) {
	if *updateGolden {
		if err := os.MkdirAll(uploadGoldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	names := map[string]bool{}
	for _, g := range endedUploads() {
		names[g.name+".json"] = true
		t.Run(g.name, func(t *testing.T) {
			got := indented(t, uploadEvent(&g.upload).Marshal())
			path := filepath.Join(uploadGoldenDir, g.name+".json")
			if *updateGolden {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestUploadEventGolden -update . to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the event the code makes now:\n--- got\n%s\n--- want\n%s", path, got, want)
			}
		})
	}
	entries, err := os.ReadDir(uploadGoldenDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range entries {
		if !names[de.Name()] {
			t.Errorf("%s/%s: no ended upload produces it; remove it", uploadGoldenDir, de.Name())
		}
	}
}

// TestUploadEventCarriesUpload: the event names the upload and tells how it
// ended, its times in UTC with milliseconds as an order event's timestamp.
func TestUploadEventCarriesUpload(t *testing.T) {
	for _, g := range endedUploads() {
		u := g.upload
		var got map[string]any
		if err := json.Unmarshal(uploadEvent(&u).Marshal(), &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			"event_id": "00000011-0000-4000-8000-" + u.ID[len(u.ID)-12:], "type": "stock_upload.finished",
			"client_id": u.ClientID, "upload_id": u.ID, "file_name": u.FileName, "status": string(u.Status),
			"rows_total": float64(u.RowsTotal), "rows_applied": float64(u.RowsApplied),
			"rows_unchanged": float64(u.RowsUnchanged), "rows_rejected": float64(u.RowsRejected),
			"received_at": "2026-11-21T07:54:21.605Z", "finished_at": u.FinishedAt.UTC().Format("2006-01-02T15:04:05.000Z"),
			"status_url": "/stock/client-de/uploads/" + u.ID,
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: event\n%v\nwant\n%v", g.name, got, want)
		}
	}
}

// uploadEventSchemas are the schema with formats asserted and as a
// validator that treats formats as annotations sees it.
func uploadEventSchemas(t *testing.T) []*jsonschema.Schema {
	return []*jsonschema.Schema{compileSchemaFile(t, uploadSchemaPath, true), compileSchemaFile(t, uploadSchemaPath, false)}
}

// TestUploadEventSchemaAccepts: the event of every way an upload ends, and
// that of a test send (ExampleUpload), is valid against
// schema/stock-upload-event.json.
func TestUploadEventSchemaAccepts(t *testing.T) {
	schemas := uploadEventSchemas(t)
	now := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	example := storelink.ExampleUpload("client-de", now, func() string { return storelink.NewID(now) })
	cases := append(endedUploads(), namedUpload{"test send", *example})
	for _, c := range cases {
		b := storelink.NewUploadEvent(&c.upload, storelink.NewID(now), uploadStatusURL(c.upload.ClientID, c.upload.ID)).Marshal()
		for i, sch := range schemas {
			if err := validate(t, sch, b); err != nil {
				t.Errorf("%s (format asserted: %v): %s: %v", c.name, i == 0, b, err)
			}
		}
	}
	// The test send's upload is plainly made up, and shows rows dropped.
	if example.FileName != "test-stock.csv" || example.Status != storelink.UploadApplied || example.RowsRejected == 0 ||
		example.FinishedAt == nil || example.ClientID != "client-de" {
		t.Errorf("ExampleUpload = %+v", example)
	}
}

// TestUploadEventSchemaRejects: the schema is not vacuous: a payload
// missing any field, with a status an upload does not end in, or otherwise
// off, is refused, with formats asserted or not.
func TestUploadEventSchemaRejects(t *testing.T) {
	schemas := uploadEventSchemas(t)
	u := endedUploads()[1].upload
	valid := uploadEvent(&u).Marshal()
	type mutation struct {
		name   string
		mutate func(e map[string]any)
	}
	var tests []mutation
	for _, k := range []string{"event_id", "type", "client_id", "upload_id", "file_name", "status", "rows_total", "rows_applied",
		"rows_unchanged", "rows_rejected", "received_at", "finished_at", "status_url"} {
		tests = append(tests, mutation{k + " missing", func(e map[string]any) { delete(e, k) }},
			mutation{k + " null", func(e map[string]any) { e[k] = nil }})
	}
	for _, s := range []string{"accepted", "processing", "finished", "APPLIED", ""} {
		tests = append(tests, mutation{"status " + s, func(e map[string]any) { e["status"] = s }})
	}
	tests = append(tests,
		mutation{"an order state as type", func(e map[string]any) { e["type"] = "assigned" }},
		mutation{"a state in place of type", func(e map[string]any) { delete(e, "type"); e["state"] = "stock_upload.finished" }},
		mutation{"extra property", func(e map[string]any) { e["has_errors"] = true }},
		mutation{"order_id", func(e map[string]any) { e["order_id"] = "o-1" }},
		mutation{"negative rows_rejected", func(e map[string]any) { e["rows_rejected"] = -1 }},
		mutation{"fractional rows_total", func(e map[string]any) { e["rows_total"] = 2.5 }},
		mutation{"rows_applied as a string", func(e map[string]any) { e["rows_applied"] = "3" }},
		mutation{"event_id not a UUID", func(e map[string]any) { e["event_id"] = "evt-1" }},
		mutation{"received_at with an offset", func(e map[string]any) { e["received_at"] = "2026-11-21T08:54:21.605+01:00" }},
		mutation{"finished_at empty", func(e map[string]any) { e["finished_at"] = "" }},
		mutation{"finished_at with microseconds", func(e map[string]any) { e["finished_at"] = "2026-11-21T07:54:24.605123Z" }},
		mutation{"status_url absolute", func(e map[string]any) { e["status_url"] = "https://storelink.example/stock/c/uploads/u" }},
		mutation{"status_url of another call", func(e map[string]any) { e["status_url"] = "/stock/c/stock" }},
	)
	for i, sch := range schemas {
		if err := validate(t, sch, valid); err != nil {
			t.Fatalf("%s is not valid to begin with: %v", valid, err)
		}
		for _, tt := range tests {
			e := decodeMap(t, valid)
			tt.mutate(e)
			b, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			if validate(t, sch, b) == nil {
				t.Errorf("%s: schema (format asserted: %v) accepts %s", tt.name, i == 0, b)
			}
		}
	}
}

// TestUploadEventSchemaMatchesType: the schema's properties and required
// list are UploadEvent's JSON tags, no type admits null, its statuses are
// exactly those an upload ends in, and its type the one kind.
func TestUploadEventSchemaMatchesType(t *testing.T) {
	b, err := os.ReadFile(uploadSchemaPath)
	if err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if err := json.Unmarshal(b, &root); err != nil {
		t.Fatal(err)
	}
	schemaMatchesType(t, "upload event", root, reflect.TypeFor[storelink.UploadEvent]())
	noNull(t, root)
	props := root["properties"].(map[string]any)
	var statuses []string
	for _, s := range []storelink.UploadStatus{storelink.UploadAccepted, storelink.UploadProcessing, storelink.UploadApplied,
		storelink.UploadRejected, storelink.UploadCancelled} {
		if s.Final() {
			statuses = append(statuses, string(s))
		}
	}
	var enum []string
	for _, s := range asSlice(props["status"].(map[string]any)["enum"]) {
		enum = append(enum, s.(string))
	}
	if slices.Sort(enum); !slices.Equal(enum, slices.Sorted(slices.Values(statuses))) {
		t.Errorf("status enum %v, want the final statuses %v", enum, statuses)
	}
	if got := asSlice(props["type"].(map[string]any)["enum"]); !reflect.DeepEqual(got, []any{string(storelink.EventUploadFinished)}) {
		t.Errorf("type enum %v, want [%s]", got, storelink.EventUploadFinished)
	}
}
