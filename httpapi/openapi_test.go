package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"gopkg.in/yaml.v3"

	"storelink"
)

// specFile is the one source of the spec, embedded and served; rootSpecFile
// is where the repository shows it to readers, a link to specFile.
const (
	specFile     = "openapi.yaml"
	rootSpecFile = "../openapi.yaml"
)

// routePattern matches the mux patterns registered in routes.go, such as
// m.HandleFunc("PUT /stock/{client_id}/{file}", ...). The dashboard's pages
// (m.Handle(..., s.Dashboard)) are HTML for people, not API calls, and are
// left out of the spec.
var routePattern = regexp.MustCompile(`m\.Handle(?:Func)?\("([^"]*)",\s*([^\n]*)`)

// routeOperations lists "METHOD /path" for every route in routes.go.
func routeOperations(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("routes.go")
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, m := range routePattern.FindAllSubmatch(src, -1) {
		if strings.HasPrefix(string(m[2]), "s.Dashboard") {
			continue
		}
		method, path, ok := strings.Cut(string(m[1]), " ")
		if !ok || method != strings.ToUpper(method) || !strings.HasPrefix(path, "/") {
			t.Errorf("route %q is not METHOD /path; the spec needs one operation per method", m[1])
			continue
		}
		ops = append(ops, method+" "+path)
	}
	if len(ops) == 0 {
		t.Fatal("found no route in routes.go; has the registration pattern changed?")
	}
	slices.Sort(ops)
	return ops
}

// specOperations lists "METHOD /path" for every operation in the spec.
func specOperations(t *testing.T, spec []byte) []string {
	t.Helper()
	var doc struct {
		OpenAPI string                          `yaml:"openapi"`
		Paths   map[string]map[string]yaml.Node `yaml:"paths"`
	}
	if err := yaml.Unmarshal(spec, &doc); err != nil {
		t.Fatalf("parse %s: %v", specFile, err)
	}
	if doc.OpenAPI != "3.0.3" {
		t.Fatalf("openapi = %q, want 3.0.3", doc.OpenAPI)
	}
	methods := []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}
	var ops []string
	for path, item := range doc.Paths {
		for key := range item {
			if slices.Contains(methods, key) {
				ops = append(ops, strings.ToUpper(key)+" "+path)
			}
		}
	}
	slices.Sort(ops)
	return ops
}

// TestOpenAPIOperationsMatchRoutes keeps the spec and routes.go in step: a
// route without an operation, or an operation without a route, fails.
func TestOpenAPIOperationsMatchRoutes(t *testing.T) {
	spec, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	routes, ops := routeOperations(t), specOperations(t, spec)
	for _, r := range routes {
		if !slices.Contains(ops, r) {
			t.Errorf("route %q has no operation in openapi.yaml", r)
		}
	}
	for _, o := range ops {
		if !slices.Contains(routes, o) {
			t.Errorf("operation %q of openapi.yaml has no route in routes.go", o)
		}
	}
}

// TestOpenAPIValid loads the spec as OpenAPI 3.0.3 and validates it,
// examples included, and checks the enums partners rely on against the code.
func TestOpenAPIValid(t *testing.T) {
	spec, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(spec)
	if err != nil {
		t.Fatalf("load %s: %v", specFile, err)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatalf("%s is not valid OpenAPI: %v", specFile, err)
	}

	// Every feed problem type of the code is listed.
	feedTypes := enumOf(t, doc, "FeedProblemType")
	for _, typ := range []string{
		storelink.ProblemEncoding, storelink.ProblemFile, storelink.ProblemEmpty, storelink.ProblemMissingColumns,
		storelink.ProblemUnknownColumns, storelink.ProblemColumnsMismatch, storelink.ProblemMissingValues,
		storelink.ProblemUnknownStore, storelink.ProblemInvalidValue, storelink.ProblemMinimumPrice,
		storelink.ProblemDuplicated,
	} {
		if !slices.Contains(feedTypes, typ) {
			t.Errorf("FeedProblemType lacks %q", typ)
		}
	}
	// Every upload status of the code is listed.
	statuses := enumOf(t, doc, "UploadStatus")
	for _, s := range []storelink.UploadStatus{storelink.UploadAccepted, storelink.UploadProcessing,
		storelink.UploadApplied, storelink.UploadRejected} {
		if !slices.Contains(statuses, string(s)) {
			t.Errorf("UploadStatus lacks %q", s)
		}
	}
	// The order states are the six, and an endpoint's states are those and
	// stock_upload.finished, in the code's order.
	for _, c := range []struct {
		schema string
		want   []storelink.OrderState
	}{{"OrderState", storelink.OrderStates}, {"EndpointState", storelink.EndpointStates}} {
		var want []string
		for _, s := range c.want {
			want = append(want, string(s))
		}
		if got := enumOf(t, doc, c.schema); !slices.Equal(got, want) {
			t.Errorf("%s enum %v, want %v", c.schema, got, want)
		}
	}
}

func enumOf(t *testing.T, doc *openapi3.T, schema string) []string {
	t.Helper()
	ref, ok := doc.Components.Schemas[schema]
	if !ok || ref.Value == nil {
		t.Fatalf("components/schemas/%s is missing", schema)
	}
	var out []string
	for _, v := range ref.Value.Enum {
		s, ok := v.(string)
		if !ok {
			t.Fatalf("%s enum holds %v, not a string", schema, v)
		}
		out = append(out, s)
	}
	return out
}

// TestOpenAPIAtRoot checks that the repository's root openapi.yaml, where
// readers look for the spec, is the file the server embeds.
func TestOpenAPIAtRoot(t *testing.T) {
	want, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(rootSpecFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s (%d bytes) is not %s (%d bytes)", rootSpecFile, len(got), specFile, len(want))
	}
}

// TestOpenAPIServed checks that the running server answers GET /openapi.yaml
// with the repository's file, byte for byte, and that every problem code the
// spec lists is explained at its type URI.
func TestOpenAPIServed(t *testing.T) {
	want, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	a := newAPI(t, apiOptions{})
	resp, got := a.do("GET", "/openapi.yaml", nil, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /openapi.yaml = %d %s", resp.StatusCode, got)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/yaml" {
		t.Errorf("Content-Type = %q, want application/yaml", ct)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("GET /openapi.yaml served %d bytes that differ from the %d bytes of %s", len(got), len(want), specFile)
	}

	doc, err := openapi3.NewLoader().LoadFromData(want)
	if err != nil {
		t.Fatal(err)
	}
	codes := enumOf(t, doc, "ProblemCode")
	for _, code := range codes {
		resp, b := a.do("GET", "/problems/"+code, nil, nil)
		if resp.StatusCode != 200 || len(b) == 0 {
			t.Errorf("GET /problems/%s = %d %s", code, resp.StatusCode, b)
		}
	}
	// Every type a problem answer may have is a code GET /problems/{code}
	// takes.
	for _, typ := range doc.Components.Schemas["Problem"].Value.Properties["type"].Value.Enum {
		if code := strings.TrimPrefix(fmt.Sprint(typ), "/problems/"); !slices.Contains(codes, code) {
			t.Errorf("Problem.type %q is not in ProblemCode, so GET /problems/%s is outside the spec", typ, code)
		}
	}
}

// call is one request of the conformance test and the status it must get.
type call struct {
	method, path, body string
	header             map[string]string
	status             int
}

// TestOpenAPIResponsesConform sends real requests, at least one for every
// status the spec documents for the main calls, and checks each answer
// (status, required headers, body) against the spec, and each request that
// succeeds against the spec's parameters and request bodies.
func TestOpenAPIResponsesConform(t *testing.T) {
	router := specRouter(t)

	// With webhooks wired, as serve runs: GET /admin/clients/{client_id}
	// then lists the (here no) webhook endpoints. The webhook calls are in
	// TestOpenAPIWebhookResponsesConform.
	a := newAPI(t, apiOptions{webhooks: &webhookOptions{}})
	admin := map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"}
	key := map[string]string{"x-api-key": a.APIKey}
	csv := map[string]string{"x-api-key": a.APIKey, "Content-Type": "application/csv"}
	var p storelink.Partner
	a.admin("POST", "/admin/partners", `{"name":"Other"}`, 201, &p)
	// The partner's client for another country: its key is valid, for
	// another client (403).
	var other storelink.NewClient
	a.admin("POST", "/admin/partners/"+a.PartnerID+"/clients", `{"country_code":"fr","currency":"eur"}`, 201, &other)
	var k storelink.NewAPIKey
	a.admin("POST", "/admin/clients/"+a.ClientID+"/api-keys", "", 201, &k)
	var up struct {
		UploadID string `json:"upload_id"`
	}
	_, b := a.upload("seed.csv", []byte(feed), nil)
	if err := json.Unmarshal(b, &up); err != nil {
		t.Fatal(err)
	}
	a.waitUpload(up.UploadID)
	c := "/admin/clients/" + a.ClientID
	s := "/stock/" + a.ClientID

	calls := []call{
		{"POST", "/admin/partners", `{"name":"Acme"}`, admin, 201},
		{"POST", "/admin/partners", `{"name":"Acme"}`, nil, 401},
		{"POST", "/admin/partners", `{"nam":"Acme"}`, admin, 400},
		{"POST", "/admin/partners", `{"name":"Acme","name":"Acme"}`, admin, 400},
		{"POST", "/admin/partners", `{"name":"Acme\u0007"}`, admin, 422},
		{"POST", "/admin/partners", `{"name":"Acme"}`, withHeader(admin, "Content-Type", "text/plain"), 415},
		{"POST", "/admin/partners/" + p.ID + "/clients", `{"country_code":"NL","currency":"EUR"}`, withHeader(admin, "Content-Type", ""), 415},
		{"PUT", c + "/stores/S5", `<name>x</name>`, withHeader(admin, "Content-Type", "application/xml"), 415},
		{"POST", "/admin/partners/" + p.ID + "/clients", `{"country_code":"NL","currency":"EUR"}`, admin, 201},
		{"POST", "/admin/partners/" + p.ID + "/clients", `{"country_code":"NL","currency":"EUR"}`, admin, 409},
		{"POST", "/admin/partners/nope/clients", `{"country_code":"NL","currency":"EUR"}`, admin, 404},
		{"GET", c, "", admin, 200},
		{"GET", "/admin/clients/nope", "", admin, 404},
		{"POST", c + "/api-keys", "", admin, 201},
		{"DELETE", c + "/api-keys/" + k.KeyID, "", admin, 204},
		{"DELETE", c + "/api-keys/" + k.KeyID, "", admin, 404},
		{"PUT", c + "/stores/S3", `{"name":"Hamburg"}`, admin, 201},
		{"PUT", c + "/stores/S3", `{"name":"Hamburg Altona"}`, admin, 200},
		{"PUT", c + "/stores/%20S4", `{"name":"x"}`, admin, 400},
		{"PUT", c + "/stores/S4", `{"name":"x\u0001"}`, admin, 422},
		{"DELETE", c + "/stores/S3", "", admin, 204},
		{"DELETE", c + "/stores/S3", "", admin, 404},
		{"GET", "/admin/partners?q=acme&limit=1", "", admin, 200},
		{"GET", "/admin/partners?after=%21", "", admin, 400},
		{"GET", "/admin/partners", "", nil, 401},
		{"GET", "/admin/clients?partner_id=" + a.PartnerID + "&q=de&limit=1", "", admin, 200},
		{"GET", "/admin/clients?after=garbage", "", admin, 400},
		{"GET", "/admin/clients?limit=0", "", admin, 400},
		{"GET", "/admin/clients", "", nil, 401},

		{"PUT", s + "/feed.csv", feed, csv, 200},
		{"PUT", s + "/feed.csv", feed, map[string]string{"Content-Type": "text/csv"}, 401},
		{"PUT", "/stock/" + other.ID + "/feed.csv", feed, csv, 403},
		{"PUT", s + "/feed.txt", feed, csv, 400},
		{"PUT", s + "/feed.csv", "", csv, 400},
		{"PUT", s + "/feed.csv", feed, map[string]string{"x-api-key": a.APIKey, "Content-Type": "application/json"}, 415},
		{"PUT", s + "/validate", feed, csv, 200},
		{"PUT", s + "/validate", "store;ean\n", csv, 200},
		{"PUT", s + "/validate", "", csv, 400},
		{"PUT", s + "/validate", feed, nil, 401},
		{"PUT", s + "/validate", feed, map[string]string{"x-api-key": a.APIKey, "Content-Type": "image/png"}, 415},
		{"GET", s + "/uploads", "", key, 200},
		{"GET", s + "/uploads?limit=1&before=" + up.UploadID, "", key, 200},
		{"GET", s + "/uploads?limit=0", "", key, 400},
		{"GET", s + "/uploads?before=garbage", "", key, 400},
		{"GET", "/stock/" + other.ID + "/uploads", "", key, 403},
		{"GET", s + "/uploads/" + up.UploadID, "", key, 200},
		{"GET", s + "/uploads/nope", "", key, 404},
		{"GET", s + "/uploads/nope", "", nil, 401},
		{"GET", s + "/stock?store=S1&limit=1", "", key, 200},
		{"GET", s + "/stock?after=%21", "", key, 400},
		{"GET", s + "/stock", "", nil, 401},

		{"GET", "/healthz", "", nil, 200},
		{"GET", "/readyz", "", nil, 200},
		{"GET", "/metrics", "", admin, 200},
		{"GET", "/metrics", "", nil, 401},
		{"GET", "/metrics", "", map[string]string{"Authorization": "Bearer not-the-token"}, 401},
		{"GET", "/openapi.yaml", "", nil, 200},
		{"GET", "/problems/rate_limited", "", nil, 200},
		{"GET", "/problems/nope", "", nil, 404},
	}
	for _, cl := range calls {
		conform(t, a, router, cl)
	}
	// The lists' next pages, from their cursors.
	var pp storelink.PartnerPage
	decodeInto(t, conform(t, a, router, call{"GET", "/admin/partners?limit=1", "", admin, 200}), &pp)
	var cp storelink.ClientPage
	decodeInto(t, conform(t, a, router, call{"GET", "/admin/clients?limit=1", "", admin, 200}), &cp)
	if pp.NextCursor == "" || cp.NextCursor == "" {
		t.Fatalf("first pages of one: partners %s, clients %s; want a next_cursor on each", dump(pp), dump(cp))
	}
	conform(t, a, router, call{"GET", "/admin/partners?limit=1&after=" + pp.NextCursor, "", admin, 200})
	conform(t, a, router, call{"GET", "/admin/clients?limit=1&after=" + cp.NextCursor, "", admin, 200})
	for _, cl := range orderConformCalls(a, admin, other.ID) {
		conform(t, a, router, cl)
	}

	// A small bucket (200 bytes per hour) and file size (1000 bytes) for
	// the capacity answers.
	small := newAPI(t, apiOptions{
		capacity:    storelink.CapacityPolicy{Base: 200, Window: time.Hour},
		maxFileSize: 1000,
	})
	csv = map[string]string{"x-api-key": small.APIKey, "Content-Type": "text/plain; charset=utf-8"}
	s = "/stock/" + small.ClientID
	for _, cl := range []call{
		{"PUT", s + "/feed.csv", feed, csv, 200},
		{"PUT", s + "/feed.csv", feed, csv, 429},
		{"PUT", s + "/feed.csv", strings.Repeat("x", 201), csv, 413},
		{"PUT", s + "/feed.csv", strings.Repeat("x", 1001), csv, 413},
		{"PUT", s + "/validate", strings.Repeat("x", 1001), csv, 413},
	} {
		conform(t, small, router, cl)
	}
	// Without a database, /readyz gives 503.
	small.db.Close()
	conform(t, small, router, call{"GET", "/readyz", "", nil, 503})
}

// conform sends c and checks the request (when it should succeed) and the
// answer against the spec. It returns the answer's body.
func conform(t *testing.T, a *api, router routers.Router, c call) []byte {
	t.Helper()
	name := fmt.Sprintf("%s %s = %d", c.method, c.path, c.status)
	req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	route, params, err := router.FindRoute(req)
	if err != nil {
		t.Errorf("%s: no operation in the spec: %v", name, err)
		return nil
	}
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}
	if c.status < 300 {
		if err := openapi3filter.ValidateRequest(t.Context(), in); err != nil {
			t.Errorf("%s: the request does not conform to the spec: %v", name, err)
		}
	}
	resp, body := a.do(c.method, c.path, strings.NewReader(c.body), c.header)
	if resp.StatusCode != c.status {
		t.Errorf("%s: got %d %s", name, resp.StatusCode, body)
		return body
	}
	in.Options = &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}
	err = openapi3filter.ValidateResponse(t.Context(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(body)), Options: in.Options,
	})
	if err != nil {
		t.Errorf("%s: the answer does not conform to the spec: %v\n%s", name, err, body)
	}
	return body
}

// orderConformCalls are the order and event calls of the conformance test,
// in an order that takes each order through its states.
func orderConformCalls(a *api, admin map[string]string, otherClient string) []call {
	a.t.Helper()
	putStock(a, "S1;"+ean1+";SKU-123;5;19.99;Dept 3", "S2;"+ean1+";SKU-456;5;19.99;Back")
	c := a.ClientID
	key := map[string]string{"x-api-key": a.APIKey}
	big := `{"order_number":"` + strings.Repeat("x", 1<<20) + `"}`
	full := `{"order_number":"MP-1","client_id":"` + c + `","items":[{"ean":"` + ean1 + `","marketplace_article_number":"M1","price":19.99,
		"article_number":"OWN-1"}],"customer_billing_address":{"first_name":"Erika","last_name":"Mustermann","address_line_1":"Hauptstr. 1",
		"address_line_2":"c/o Muster","zip_code":"10115","city":"Berlin","country_code":"DE"},"delivery_details":{"delivery_carrier_name":"DHL"}}`
	f := mustOrder(a, "POST", "/orders", newOrderBody(c, "MP-2", "", ean1, ean1), 201)     // fulfilled, then returned
	x := mustOrder(a, "POST", "/orders", newOrderBody(c, "MP-3", "S1", ean1), 201)         // cancelled with reassign
	w := mustOrder(a, "POST", "/warehouse-orders", newOrderBody(c, "MP-4", "", ean1), 201) // returned to the warehouse
	f0, f1, x0, w0 := f.Items[0].ItemID, f.Items[1].ItemID, x.Items[0].ItemID, w.Items[0].ItemID
	o := "/orders/"
	// The same operator headers with an Idempotency-Key.
	keyed := func(key string) map[string]string {
		h := map[string]string{"Idempotency-Key": key}
		for k, v := range admin {
			h[k] = v
		}
		return h
	}
	return []call{
		{"POST", "/orders", full, keyed("k-1"), 201},
		{"POST", "/orders", full, keyed("k-1"), 201}, // a replay
		{"POST", "/orders", newOrderBody(c, "MP-1", "", ean1), keyed("k-1"), 422},
		{"POST", "/orders", full, keyed(strings.Repeat("k", 256)), 400},
		{"POST", "/warehouse-orders", newOrderBody(c, "MP-7", "", ean1), keyed("k-2"), 201},
		{"POST", "/warehouse-orders", newOrderBody(c, "MP-7", "", ean1), keyed("k-2"), 201},
		{"POST", "/warehouse-orders", full, keyed("k-2"), 422},
		{"POST", "/warehouse-orders", newOrderBody(c, "MP-7", "", ean1), keyed("ключ"), 400},
		{"POST", "/orders", full, admin, 201},
		{"POST", "/orders", `{"order_number":`, admin, 400},
		{"POST", "/orders", full, nil, 401},
		{"POST", "/orders", full, withHeader(admin, "Content-Type", "text/plain"), 415},
		{"POST", "/warehouse-orders", full, withHeader(admin, "Content-Type", "application/xml"), 415},
		{"POST", o + f.ID + "/cancel", `{}`, withHeader(admin, "Content-Type", "application/x-www-form-urlencoded"), 415},
		{"POST", o + f.ID + "/fulfil", `{}`, withHeader(admin, "Content-Type", "text/plain"), 415},
		{"POST", o + f.ID + "/returns", `{"items":[]}`, withHeader(admin, "Content-Type", "text/plain"), 415},
		{"POST", o + w.ID + "/warehouse-returns", `{"items":[]}`, withHeader(admin, "Content-Type", "text/plain"), 415},
		{"POST", "/orders", newOrderBody(c, "MP-5", "", eanNoStock), admin, 409},
		{"POST", "/orders", big, admin, 413},
		{"POST", "/orders", newOrderBody("nope", "MP-5", "", ean1), admin, 422},
		{"GET", "/orders?client_id=" + c + "&state=assigned&limit=1", "", admin, 200},
		{"GET", "/orders?order_number=MP-2&before=" + x.ID, "", admin, 200},
		{"GET", "/orders?state=open", "", admin, 400},
		{"GET", "/orders", "", nil, 401},
		{"GET", o + f.ID, "", admin, 200},
		{"GET", o + "nope", "", admin, 404},
		{"GET", o + f.ID, "", nil, 401},

		{"POST", o + f.ID + "/fulfil", `{"x":1}`, admin, 400},
		{"POST", o + f.ID + "/fulfil", `{"picked_item_ids":["nope"]}`, admin, 422},
		{"POST", o + f.ID + "/fulfil", big, admin, 413},
		{"POST", o + f.ID + "/fulfil", `{}`, nil, 401},
		{"POST", o + f.ID + "/fulfil", `{"picked_item_ids":["` + f0 + `"],"cancelled_items":[{"item_id":"` + f1 +
			`","cancellation_reason":"OUT_OF_STOCK"}],"delivery_details":{"delivery_tracking_number":"T-1"}}`, admin, 200},
		{"POST", o + f.ID + "/fulfil", `{}`, admin, 409},
		{"POST", o + "nope/fulfil", `{}`, admin, 404},

		{"POST", o + f.ID + "/returns", `{"items":[{"item_id":"` + f0 + `","return_location":"HOME"}]}`, admin, 422},
		{"POST", o + f.ID + "/returns", `{"items":[{"item_id":"` + f0 + `","return_location":"STORE","x":1}]}`, admin, 400},
		{"POST", o + f.ID + "/returns", big, admin, 413},
		{"POST", o + f.ID + "/returns", `{"items":[]}`, nil, 401},
		{"POST", o + f.ID + "/returns", `{"store_id":"S2","items":[{"item_id":"` + f0 + `","return_reason_code":2,"return_location":"STORE"}],
			"delivery_details":{"return_tracking_number":"RT-1","return_carrier_name":"DHL"}}`, admin, 200},
		{"POST", o + f.ID + "/returns", `{"items":[{"item_id":"` + f0 + `","return_location":"STORE"}]}`, admin, 422},
		{"POST", o + x.ID + "/returns", `{"items":[{"item_id":"` + x0 + `","return_location":"STORE"}]}`, admin, 409},
		{"POST", o + "nope/returns", `{"items":[{"item_id":"` + f0 + `","return_location":"STORE"}]}`, admin, 404},

		{"POST", o + x.ID + "/cancel", `{"items":[{"item_id":"nope"}]}`, admin, 422},
		{"POST", o + x.ID + "/cancel", `{`, admin, 400},
		{"POST", o + x.ID + "/cancel", big, admin, 413},
		{"POST", o + x.ID + "/cancel", ``, nil, 401},
		{"POST", o + x.ID + "/cancel", `{"items":[{"item_id":"` + x0 + `","cancellation_reason":"ITEM_MISSING"}],"reassign":true}`, admin, 200},
		{"POST", o + x.ID + "/cancel", ``, admin, 409},
		{"POST", o + "nope/cancel", ``, admin, 404},

		{"POST", "/warehouse-orders", newOrderBody(c, "MP-6", "", ean1, ean1), admin, 201},
		{"POST", "/warehouse-orders", `{"colour":1}`, admin, 400},
		{"POST", "/warehouse-orders", newOrderBody(c, "MP-6", "", ean1), nil, 401},
		{"POST", "/warehouse-orders", big, admin, 413},
		{"POST", "/warehouse-orders", newOrderBody(c, "MP-6", "S1", ean1), admin, 422},
		{"POST", o + w.ID + "/warehouse-returns", `{"items":[{"item_id":"` + w0 + `","return_reason_code":11}]}`, admin, 422},
		{"POST", o + w.ID + "/warehouse-returns", `{"items":[{"item_id":"` + w0 + `","return_location":"STORE"}]}`, admin, 400},
		{"POST", o + w.ID + "/warehouse-returns", big, admin, 413},
		{"POST", o + w.ID + "/warehouse-returns", `{"items":[]}`, nil, 401},
		{"POST", o + w.ID + "/warehouse-returns", `{"items":[{"item_id":"` + w0 + `","return_reason_code":8}]}`, admin, 200},
		{"POST", o + w.ID + "/warehouse-returns", `{"items":[{"item_id":"` + w0 + `"}]}`, admin, 422},
		{"POST", o + f.ID + "/warehouse-returns", `{"items":[{"item_id":"` + f1 + `"}]}`, admin, 409},
		{"POST", o + "nope/warehouse-returns", `{"items":[{"item_id":"` + w0 + `"}]}`, admin, 404},

		{"GET", o + f.ID + "/events", "", admin, 200},
		{"GET", o + w.ID + "/events", "", admin, 200},
		{"GET", o + "nope/events", "", admin, 404},
		{"GET", o + f.ID + "/events", "", nil, 401},
		{"GET", "/events/" + c, "", key, 200},
		{"GET", "/events/" + c + "?after=2&limit=3", "", key, 200},
		{"GET", "/events/" + c + "?after=abc", "", key, 400},
		{"GET", "/events/" + c + "?after=9999999", "", key, 409},
		{"GET", "/events/" + c + "?limit=0", "", key, 400},
		{"GET", "/events/" + c, "", nil, 401},
		{"GET", "/events/" + otherClient, "", key, 403},
	}
}
