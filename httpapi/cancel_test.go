package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"storelink"
)

// DELETE of a waiting upload answers it cancelled, with its bytes back in
// the capacity; again, the same; once applied, 409; of another client or
// of no upload, 404. Every answer is as the spec says.
func TestCancelUpload(t *testing.T) {
	a := newAPI(t, apiOptions{noProcessor: true, capacity: storelink.CapacityPolicy{Base: 20 << 20, PerStore: 2 << 20, Window: 10000 * time.Hour}})
	key := map[string]string{"x-api-key": a.APIKey}
	resp, b := a.upload("feed.csv", []byte(feed), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("upload = %d %s", resp.StatusCode, b)
	}
	before := capacityLeft(t, resp.Header.Get("RateLimit"))
	var accepted struct {
		UploadID string `json:"upload_id"`
	}
	if err := json.Unmarshal(b, &accepted); err != nil {
		t.Fatal(err)
	}
	path := "/stock/" + a.ClientID + "/uploads/" + accepted.UploadID
	for i := range 2 {
		resp, b = a.do("DELETE", path, nil, key)
		if resp.StatusCode != 200 {
			t.Fatalf("cancel %d = %d %s", i+1, resp.StatusCode, b)
		}
		conformAnswer(t, "DELETE", path, resp, b)
		var u storelink.Upload
		if err := json.Unmarshal(b, &u); err != nil {
			t.Fatal(err)
		}
		if u.ID != accepted.UploadID || u.Status != storelink.UploadCancelled || u.FinishedAt == nil {
			t.Fatalf("cancel %d = %s, want the upload cancelled", i+1, b)
		}
		if back := capacityLeft(t, resp.Header.Get("RateLimit")) - before; back < int64(len(feed)) || back > int64(len(feed))+16 {
			t.Fatalf("cancel %d: %d bytes of capacity back, want the upload's %d", i+1, back, len(feed))
		}
	}
	resp, b = a.do("GET", path, nil, key)
	if resp.StatusCode != 200 || !json.Valid(b) || !strings.Contains(string(b), `"status":"cancelled"`) {
		t.Fatalf("status after cancel = %d %s", resp.StatusCode, b)
	}
	resp, b = a.do("DELETE", "/stock/"+a.ClientID+"/uploads/no-such-upload", nil, key)
	problem(t, resp, b, http.StatusNotFound)
	conformAnswer(t, "DELETE", "/stock/"+a.ClientID+"/uploads/no-such-upload", resp, b)

	applied := newAPI(t, apiOptions{})
	resp, b = applied.upload("feed.csv", []byte(feed), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("upload = %d %s", resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, &accepted); err != nil {
		t.Fatal(err)
	}
	applied.waitUpload(accepted.UploadID)
	path = "/stock/" + applied.ClientID + "/uploads/" + accepted.UploadID
	resp, b = applied.do("DELETE", path, nil, map[string]string{"x-api-key": applied.APIKey})
	if p := problem(t, resp, b, http.StatusConflict); !strings.Contains(p.Detail, "is applied") {
		t.Fatalf("cancel of an applied upload: %+v", p)
	}
	conformAnswer(t, "DELETE", path, resp, b)
}
