package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	legacyrouter "github.com/getkin/kin-openapi/routers/legacy"

	"storelink"
)

// specRouter loads openapi.yaml and routes requests to its operations.
func specRouter(t *testing.T) routers.Router {
	t.Helper()
	spec, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(spec)
	if err != nil {
		t.Fatal(err)
	}
	// The answers of test servers on any address are matched to the
	// spec's paths: its servers list where a deployment listens.
	doc.Servers = nil
	// Examples are checked in TestOpenAPIValid; here the answers are.
	router, err := legacyrouter.NewRouter(doc, openapi3.DisableExamplesValidation())
	if err != nil {
		t.Fatal(err)
	}
	return router
}

// TestOpenAPIWebhookResponsesConform is TestOpenAPIResponsesConform for the
// webhook calls: it registers endpoints, lets a real order event be
// delivered (a receiver that answers 503 with a body, then 204; and a port
// where nothing listens), and sends every documented status of the five
// webhook and delivery calls, checking each request that should succeed and
// each answer against the spec. The deliveries it lists therefore hold
// attempts with a status code, a response excerpt and an error.
func TestOpenAPIWebhookResponsesConform(t *testing.T) {
	router := specRouter(t)
	a := newAPI(t, apiOptions{webhooks: &webhookOptions{schedule: []time.Duration{10 * time.Millisecond}}})
	if a.webhooks == nil {
		t.Skip("newAPI wired no webhook store (a.webhooks is nil), so the webhook calls cannot be checked; " +
			"wire Deps.Webhooks in server_test.go's newAPI for apiOptions.webhooks")
	}
	admin := map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"}
	putStock(a, "S1;"+ean1+";SKU-123;5;19.99;Dept 3")

	// The receiver answers each event's first request 503 with a body, and
	// later ones 204.
	var mu sync.Mutex
	seen := map[string]bool{}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		again := seen[r.Header.Get("webhook-id")]
		seen[r.Header.Get("webhook-id")] = true
		mu.Unlock()
		if !again {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"maintenance"}`))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(recv.Close)
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()

	c := "/admin/clients/" + a.ClientID
	big := `{"url":"https://partner.example/` + strings.Repeat("x", 1<<20) + `"}`
	var ok, gone storelink.EndpointSecret
	decodeInto(t, conform(t, a, router, call{"POST", c + "/webhooks",
		`{"url":"` + recv.URL + `/hooks/${eventId}","api_key":"partner-key-1","states":["assigned","cancelled"]}`, admin, 201}), &ok)
	decodeInto(t, conform(t, a, router, call{"POST", c + "/webhooks", `{"url":"` + deadURL + `/events"}`, admin, 201}), &gone)
	if ok.ID == "" || gone.ID == "" {
		t.Fatal("no endpoint was registered")
	}
	for _, cl := range []call{
		{"POST", c + "/webhooks", `{"url":"https://partner.example/hooks","secret":"x"}`, admin, 400},
		{"POST", c + "/webhooks", ``, admin, 400},
		{"POST", c + "/webhooks", `{"url":"https://partner.example/hooks"}`, nil, 401},
		{"POST", "/admin/clients/nope/webhooks", `{"url":"https://partner.example/hooks"}`, admin, 404},
		{"POST", c + "/webhooks", big, admin, 413},
		{"POST", c + "/webhooks", `{"url":"https://user:pw@partner.example/hooks"}`, admin, 422},
		{"POST", c + "/webhooks", `{"url":"ftp://partner.example/hooks"}`, admin, 422},
		{"POST", c + "/webhooks", `{"url":"https://partner.example/hooks","states":["open"]}`, admin, 422},
	} {
		conform(t, a, router, cl)
	}

	// One event, delivered to both endpoints: to the receiver after a 503,
	// to the closed port not at all.
	mustOrder(a, "POST", "/orders", newOrderBody(a.ClientID, "MP-W1", "S1", ean1), 201)
	list := waitDeliveriesFinal(t, a, 2)

	var failed string
	for _, d := range list {
		if d.State == storelink.DeliveryFailed {
			failed = d.ID
		}
	}
	if failed == "" {
		t.Fatalf("no failed delivery among %+v", list)
	}
	d := "/admin/deliveries"
	for _, cl := range []call{
		{"GET", d + "?client_id=" + a.ClientID, "", admin, 200},
		{"GET", d + "?state=failed&limit=1", "", admin, 200},
		{"GET", d + "?state=succeeded&before=" + failed, "", admin, 200},
		{"GET", d + "?client_id=nope", "", admin, 200},
		{"GET", d + "?state=bogus", "", admin, 400},
		{"GET", d + "?limit=0", "", admin, 400},
		{"GET", d, "", nil, 401},

		{"PATCH", "/admin/webhooks/" + gone.ID, `{"url":"https://partner.example/storelink/events","states":["fulfilled","returned"],"api_key":"k2"}`, admin, 200},
		{"PATCH", "/admin/webhooks/" + gone.ID, `{"enabled":false}`, admin, 200},
		{"PATCH", "/admin/webhooks/" + gone.ID, `{}`, admin, 200},
		{"PATCH", "/admin/webhooks/" + gone.ID, `{"enable":true}`, admin, 400},
		{"PATCH", "/admin/webhooks/" + gone.ID, ``, admin, 400},
		{"PATCH", "/admin/webhooks/" + gone.ID, `{"enabled":true}`, nil, 401},
		{"PATCH", "/admin/webhooks/nope", `{"enabled":true}`, admin, 404},
		{"PATCH", "/admin/webhooks/" + gone.ID, big, admin, 413},
		{"PATCH", "/admin/webhooks/" + gone.ID, `{"url":"ftp://partner.example/hooks"}`, admin, 422},
		{"PATCH", "/admin/webhooks/" + gone.ID, `{"states":["open"]}`, admin, 422},

		{"POST", "/admin/webhooks/" + ok.ID + "/rotate-secret", ``, admin, 200},
		{"POST", "/admin/webhooks/" + ok.ID + "/rotate-secret", `{"overlap":"1h"}`, admin, 200},
		{"POST", "/admin/webhooks/" + ok.ID + "/rotate-secret", `{"overlp":"1h"}`, admin, 400},
		{"POST", "/admin/webhooks/" + ok.ID + "/rotate-secret", ``, nil, 401},
		{"POST", "/admin/webhooks/nope/rotate-secret", ``, admin, 404},
		{"POST", "/admin/webhooks/" + ok.ID + "/rotate-secret", `{"overlap":"` + strings.Repeat("1", 1<<20) + `h"}`, admin, 413},
		{"POST", "/admin/webhooks/" + ok.ID + "/rotate-secret", `{"overlap":"1y"}`, admin, 422},
		{"POST", "/admin/webhooks/" + ok.ID + "/rotate-secret", `{"overlap":"721h"}`, admin, 422},

		{"POST", d + "/" + failed + "/redeliver", ``, admin, 202},
		{"POST", d + "/" + failed + "/redeliver", ``, nil, 401},
		{"POST", d + "/nope/redeliver", ``, admin, 404},

		// The client now shows its endpoints, one rotated, one disabled.
		{"GET", c, "", admin, 200},
	} {
		conform(t, a, router, cl)
	}

	conformWebhookOperations(t, a, router, ok.ID, gone.ID, failed, deadURL)

	// The answers checked above held every optional field of an attempt.
	var status, excerpt, errText bool
	for _, d := range list {
		for _, at := range d.Attempts {
			status = status || at.StatusCode != 0
			excerpt = excerpt || at.Response != ""
			errText = errText || at.Error != ""
		}
	}
	if !status || !excerpt || !errText {
		t.Errorf("the deliveries checked lack an attempt with a status code, a response or an error: %+v", list)
	}
}

// waitDeliveriesFinal waits until the demo client has n deliveries, none of
// them pending, and returns them.
func waitDeliveriesFinal(t *testing.T, a *api, n int) []storelink.Delivery {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, err := a.webhooks.Webhooks.Deliveries(t.Context(), storelink.DeliveryFilter{ClientID: a.ClientID, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		done := len(list) == n
		for _, d := range list {
			done = done && d.State != storelink.DeliveryPending
		}
		if done {
			return list
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries after 10s, want %d, none pending: %+v", n, list)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func decodeInto(t *testing.T, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
}

// conformWebhookOperations sends every documented status of the endpoint
// operations (stats, test, recover, delete) and of the partner's webhook
// calls. ok is an endpoint with a delivery that succeeded; gone a disabled
// one whose failed delivery was made pending again; deadURL a loopback
// address where nothing listens.
func conformWebhookOperations(t *testing.T, a *api, router routers.Router, ok, gone, failed, deadURL string) {
	t.Helper()
	admin := map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"}
	key := map[string]string{"x-api-key": a.APIKey}
	var other storelink.NewClient
	a.admin("POST", "/admin/partners/"+a.PartnerID+"/clients", `{"country_code":"AT","currency":"EUR"}`, 201, &other)
	otherKey := map[string]string{"x-api-key": other.APIKey}
	keyJSON := map[string]string{"x-api-key": a.APIKey, "Content-Type": "application/json"}
	var dead storelink.EndpointSecret
	decodeInto(t, conform(t, a, router, call{"POST", "/admin/clients/" + a.ClientID + "/webhooks", `{"url":"` + deadURL + `/x"}`, admin, 201}), &dead)
	var done string
	for _, d := range a.deliveries("") {
		if d.EndpointID == ok && d.State == storelink.DeliverySucceeded {
			done = d.ID
		}
	}
	if done == "" {
		t.Fatal("no succeeded delivery to the receiver")
	}
	big := `{"state":"` + strings.Repeat("x", 1<<20) + `"}`
	deep := strings.Repeat("[", 1<<20)
	w, c := "/admin/webhooks/", "/webhooks/"+a.ClientID
	var page struct {
		NextCursor string `json:"next_cursor"`
	}
	decodeInto(t, conform(t, a, router, call{"GET", c + "/deliveries?limit=1", "", key, 200}), &page)
	for _, cl := range []call{
		{"GET", w + ok, "", admin, 200},
		{"GET", w + dead.ID, "", admin, 200},
		{"GET", w + "nope", "", admin, 404},
		{"GET", w + ok, "", nil, 401},

		{"POST", w + ok + "/test", `{"state":"cancelled"}`, admin, 200},
		{"POST", w + dead.ID + "/test", ``, admin, 200},
		{"POST", w + ok + "/test", `{"stat":"cancelled"}`, admin, 400},
		{"POST", w + ok + "/test", ``, nil, 401},
		{"POST", w + "nope/test", ``, admin, 404},
		{"POST", w + ok + "/test", big, admin, 413},
		{"POST", w + "nope/test", deep, admin, 400},
		{"POST", w + ok + "/test", `{"state":"open"}`, admin, 422},

		{"POST", w + ok + "/recover", `{"since":"2020-01-01T00:00:00Z"}`, admin, 202},
		{"POST", w + ok + "/recover", `{"since":"2020-01-01T00:00:00Z","x":1}`, admin, 400},
		{"POST", w + ok + "/recover", `{"since":"2020-01-01T00:00:00Z"}`, nil, 401},
		{"POST", w + "nope/recover", `{"since":"2020-01-01T00:00:00Z"}`, admin, 404},
		{"POST", w + ok + "/recover", big, admin, 413},
		{"POST", w + ok + "/recover", `{"since":"last week"}`, admin, 422},

		{"GET", c + "/endpoints", "", key, 200},
		{"GET", c + "/endpoints", "", nil, 401},
		{"GET", c + "/endpoints", "", otherKey, 403},
		{"GET", c + "/deliveries?state=succeeded&endpoint_id=" + ok + "&after=" + page.NextCursor, "", key, 200},
		{"GET", c + "/deliveries?after=garbage", "", key, 400},
		{"GET", c + "/deliveries?order_id=" + done + "&order_number=N-1&event_id=" + done, "", key, 200},
		{"GET", c + "/deliveries?event_id=" + strings.Repeat("e", 129), "", key, 400},
		{"GET", c + "/deliveries", "", nil, 401},
		{"GET", c + "/deliveries", "", otherKey, 403},
		{"POST", c + "/deliveries/" + done + "/redeliver", "", key, 202},
		{"POST", c + "/deliveries/" + done + "/redeliver", "", nil, 401},
		{"POST", c + "/deliveries/" + done + "/redeliver", "", otherKey, 403},
		{"POST", "/webhooks/" + other.ID + "/deliveries/" + done + "/redeliver", "", otherKey, 404},
		{"POST", c + "/endpoints/" + ok + "/test", `{"state":"returned"}`, keyJSON, 200},
		{"POST", c + "/endpoints/" + ok + "/test", `[]`, keyJSON, 400},
		{"POST", c + "/endpoints/" + ok + "/test", "", nil, 401},
		{"POST", c + "/endpoints/" + ok + "/test", "", otherKey, 403},
		{"POST", "/webhooks/" + other.ID + "/endpoints/" + ok + "/test", "", otherKey, 404},
		{"POST", c + "/endpoints/" + ok + "/test", big, keyJSON, 413},
		{"POST", c + "/endpoints/nope/test", deep, keyJSON, 400},
		{"POST", c + "/endpoints/" + ok + "/test", `{"state":"open"}`, keyJSON, 422},

		{"GET", c + "/endpoints/" + ok, "", key, 200},
		{"GET", c + "/endpoints/nope", "", key, 404},
		{"GET", c + "/endpoints/" + ok, "", nil, 401},
		{"GET", c + "/endpoints/" + ok, "", otherKey, 403},
		{"PATCH", w + ok, `{"enabled":true}`, withHeader(admin, "If-Match", `"nope"`), 412},
		{"PATCH", w + ok, `{"enabled":true}`, withHeader(admin, "If-Match", "nope"), 400},
		{"PATCH", w + ok, `{"enabled":true}`, withHeader(admin, "Content-Type", "text/plain"), 415},
		{"PATCH", c + "/endpoints/" + ok, `{"enabled":true}`, withHeader(keyJSON, "If-Match", `W/"x"`), 412},
		{"PATCH", c + "/endpoints/" + ok, `{"enabled":true}`, key, 415},
		{"POST", c + "/endpoints", `{"url":"https://partner.example/x"}`, key, 415},
		{"POST", w + ok + "/recover", `{"since":"2020-01-01T00:00:00Z"}`, withHeader(admin, "Content-Type", "application/xml"), 415},
		{"DELETE", w + ok, "", withHeader(admin, "If-Match", `"nope"`), 412},
		{"DELETE", c + "/endpoints/" + ok, "", withHeader(key, "If-Match", `"a", "b"`), 412},
		{"DELETE", c + "/endpoints/" + ok, "", withHeader(key, "If-Match", `"a`), 400},
		{"DELETE", w + gone, "", nil, 401},
		{"DELETE", w + "nope", "", admin, 404},
		{"DELETE", w + gone, "", admin, 204},
		{"DELETE", w + gone, "", admin, 204},
		{"GET", w + gone, "", admin, 200},
		{"GET", "/admin/deliveries?state=cancelled&endpoint_id=" + gone, "", admin, 200},
		{"PATCH", w + gone, `{"enabled":true}`, admin, 409},
		{"POST", w + gone + "/rotate-secret", ``, admin, 409},
		{"POST", w + gone + "/test", ``, admin, 409},
		{"POST", w + gone + "/recover", `{"since":"2020-01-01T00:00:00Z"}`, admin, 409},
		{"POST", "/admin/deliveries/" + failed + "/redeliver", ``, admin, 409},
		{"POST", c + "/deliveries/" + failed + "/redeliver", "", key, 409},
		{"POST", c + "/endpoints/" + gone + "/test", "", key, 409},
	} {
		conform(t, a, router, cl)
	}
	var list struct {
		Deliveries []storelink.Delivery `json:"deliveries"`
	}
	a.admin("GET", "/admin/deliveries?state=cancelled&endpoint_id="+gone, "", 200, &list)
	if len(list.Deliveries) != 1 || list.Deliveries[0].ID != failed {
		t.Errorf("cancelled deliveries of the deleted endpoint = %s, want its one", dump(list.Deliveries))
	}
}
