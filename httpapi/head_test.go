package httpapi_test

import (
	"strconv"
	"strings"
	"testing"
)

// HEAD answers as GET does, with GET's Content-Length and no body: JSON
// answers large enough to be chunked otherwise, files, the spec, problem
// documents and problems.
func TestHEADHasGETsContentLength(t *testing.T) {
	t.Parallel()
	a := newWebhookAPI(t, webhookOptions{})
	ep := a.endpointAt("https://partner.example/a")
	for i := range 30 { // a list of orders well over net/http's 2 KiB buffer
		mustOrder(a, "POST", "/orders", newOrderBody(a.ClientID, "HEAD-"+strconv.Itoa(i), "S1", ean1), 201)
	}
	var up struct {
		UploadID string `json:"upload_id"`
	}
	_, b := a.upload("Bestand Köln.csv", []byte(feed+"S9;"+ean1+";X;1;1.00;x\n"), nil)
	decodeInto(t, b, &up)
	a.waitUpload(up.UploadID)
	key := map[string]string{"x-api-key": a.APIKey}
	u := "/stock/" + a.ClientID + "/uploads/" + up.UploadID
	for _, c := range []struct {
		path   string
		h      map[string]string
		status int
	}{
		{"/orders?limit=500", adminAuth(), 200},
		{"/admin/clients/" + a.ClientID, adminAuth(), 200},
		{"/admin/webhooks/" + ep.ID, adminAuth(), 200},
		{"/events/" + a.ClientID, key, 200},
		{u, key, 200},
		{u + "/file", key, 200},
		{u + "/errors.csv", key, 200},
		{"/openapi.yaml", nil, 200},
		{"/problems/unsupported", nil, 200},
		{"/healthz", nil, 200},
		{"/orders/nope", adminAuth(), 404},
	} {
		get, body := a.do("GET", c.path, nil, c.h)
		head, none := a.do("HEAD", c.path, nil, c.h)
		if get.StatusCode != c.status || head.StatusCode != c.status {
			t.Errorf("%s: GET %d, HEAD %d, want %d", c.path, get.StatusCode, head.StatusCode, c.status)
			continue
		}
		want := strconv.Itoa(len(body))
		if g := get.Header.Get("Content-Length"); g != want {
			t.Errorf("%s: GET's Content-Length %q, want %s (chunked: %v)", c.path, g, want, get.TransferEncoding)
		}
		if h := head.Header.Get("Content-Length"); h != want {
			t.Errorf("%s: HEAD's Content-Length %q, want GET's %s", c.path, h, want)
		}
		if len(none) != 0 {
			t.Errorf("%s: HEAD has a body of %d bytes", c.path, len(none))
		}
		for _, name := range []string{"Content-Type", "ETag", "Cache-Control", "Content-Disposition"} {
			if g, h := get.Header.Get(name), head.Header.Get(name); g != h {
				t.Errorf("%s: %s of GET %q, of HEAD %q", c.path, name, g, h)
			}
		}
	}
	if !strings.Contains(a.etagOf("HEAD", "/admin/webhooks/"+ep.ID, adminAuth()), `"`) {
		t.Error("HEAD of an endpoint has no ETag")
	}
}
