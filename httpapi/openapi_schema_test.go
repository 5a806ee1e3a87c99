package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

// eventSchemaFile is the JSON Schema (draft 2020-12) of the order event.
const eventSchemaFile = "../schema/order-event.json"

// eventSchemaRefs pairs each object of schema/order-event.json with the
// component of openapi.yaml that must say the same thing. Every $defs entry
// needs a pair, and a $ref on one side must point at the pair of the other
// side's $ref.
var eventSchemaRefs = map[string]string{
	"#":                              "#/components/schemas/OrderEvent",
	"#/$defs/Item":                   "#/components/schemas/OrderEventItem",
	"#/$defs/DeliveryDetails":        "#/components/schemas/DeliveryDetails",
	"#/$defs/CustomerBillingAddress": "#/components/schemas/CustomerBillingAddress",
}

// schemaPair is a JSON Schema under schema/ and the components of
// openapi.yaml that must say the same thing.
type schemaPair struct {
	// file is the JSON Schema.
	file string
	// refs pairs each object of file with its component ("#", the root,
	// with the event's own).
	refs map[string]string
}

// component is the name of the spec's schema of the JSON Schema's root.
func (p schemaPair) component() string {
	return strings.TrimPrefix(p.refs["#"], "#/components/schemas/")
}

var (
	orderEventPair  = schemaPair{file: eventSchemaFile, refs: eventSchemaRefs}
	uploadEventPair = schemaPair{file: "../schema/stock-upload-event.json",
		refs: map[string]string{"#": "#/components/schemas/StockUploadEvent"}}
)

// schemaAnnotations are the keywords that say nothing about which documents
// are valid; the two sides may word them differently.
var schemaAnnotations = []string{"description", "title", "example", "examples", "$comment"}

// TestOpenAPIEventSchemaMatchesJSONSchema proves that the order event schema
// of the spec (OrderEvent, OrderEventItem, DeliveryDetails,
// CustomerBillingAddress) is schema/order-event.json: the same properties,
// required lists, types, enums, patterns and formats, additionalProperties
// false on every object, and the same verdicts on a set of sample events,
// among them every state with and without store_id, which is how the JSON
// Schema's if/then/else and the spec's oneOf are shown to agree.
func TestOpenAPIEventSchemaMatchesJSONSchema(t *testing.T) {
	js, spec := loadSchemas(t, eventSchemaFile)
	samples := eventSamples(t)
	for _, d := range schemaDrift(orderEventPair, js, spec, samples) {
		t.Error(d)
	}

	// The comparison itself must see drift: each change below, made in
	// memory to one side, has to be reported.
	t.Run("detects drift", func(t *testing.T) {
		specSchema := func(doc map[string]any, name string) map[string]any {
			return doc["components"].(map[string]any)["schemas"].(map[string]any)[name].(map[string]any)
		}
		jsDef := func(doc map[string]any, name string) map[string]any {
			return doc["$defs"].(map[string]any)[name].(map[string]any)
		}
		props := func(s map[string]any) map[string]any { return s["properties"].(map[string]any) }
		for _, m := range []struct {
			name   string
			mutate func(js, spec map[string]any)
		}{
			{"spec item loses article_location", func(_, spec map[string]any) {
				delete(props(specSchema(spec, "OrderEventItem")), "article_location")
			}},
			{"JSON Schema event loses cancelled_items", func(js, _ map[string]any) { delete(props(js), "cancelled_items") }},
			{"spec address gains a property", func(_, spec map[string]any) {
				props(specSchema(spec, "CustomerBillingAddress"))["state"] = map[string]any{"type": "string"}
			}},
			{"JSON Schema item requires article_location", func(js, _ map[string]any) {
				jsDef(js, "Item")["required"] = append(jsDef(js, "Item")["required"].([]any), "article_location")
			}},
			{"spec drops a cancellation_reason", func(_, spec map[string]any) {
				p := props(specSchema(spec, "OrderEventItem"))["cancellation_reason"].(map[string]any)
				p["enum"] = p["enum"].([]any)[:3]
			}},
			{"JSON Schema adds a state", func(js, _ map[string]any) {
				p := props(js)["state"].(map[string]any)
				p["enum"] = append(p["enum"].([]any), "lost")
			}},
			{"spec return_reason_code becomes a string", func(_, spec map[string]any) {
				props(specSchema(spec, "OrderEventItem"))["return_reason_code"].(map[string]any)["type"] = "string"
			}},
			{"JSON Schema currency pattern changes", func(js, _ map[string]any) {
				props(jsDef(js, "Item"))["currency"].(map[string]any)["pattern"] = "^[A-Za-z]{3}$"
			}},
			{"spec delivery details open", func(_, spec map[string]any) {
				specSchema(spec, "DeliveryDetails")["additionalProperties"] = true
			}},
			{"spec oneOf no longer requires store_id", func(_, spec map[string]any) {
				delete(specSchema(spec, "OrderEvent")["oneOf"].([]any)[0].(map[string]any), "required")
			}},
			{"JSON Schema if names returned a warehouse state", func(js, _ map[string]any) {
				p := js["if"].(map[string]any)["properties"].(map[string]any)["state"].(map[string]any)
				p["enum"] = append(p["enum"].([]any), "returned")
			}},
			{"spec items point at DeliveryDetails", func(_, spec map[string]any) {
				props(specSchema(spec, "OrderEvent"))["items"].(map[string]any)["items"] =
					map[string]any{"$ref": "#/components/schemas/DeliveryDetails"}
			}},
		} {
			js2, spec2 := copyJSON(t, js), copyJSON(t, spec)
			m.mutate(js2, spec2)
			d := schemaDrift(orderEventPair, js2, spec2, samples)
			if len(d) == 0 {
				t.Errorf("%s: not reported", m.name)
			}
			t.Logf("%s: %d differences, first: %s", m.name, len(d), strings.Join(d[:min(len(d), 1)], ""))
		}
	})
}

// loadSchemas reads the JSON Schema file and openapi.yaml as plain JSON
// values (maps, slices, float64s, strings, bools), so that both sides
// compare with reflect.DeepEqual.
func loadSchemas(t *testing.T, file string) (js, spec map[string]any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &js); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	b, err = os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	var y map[string]any
	if err := yaml.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", specFile, err)
	}
	return js, copyJSON(t, y)
}

// copyJSON copies a JSON value through its encoding.
func copyJSON(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// schemaDrift lists every difference between the JSON Schema js of p and
// its components in the spec document spec: first structural, then the
// samples on which the two validators disagree or give a verdict other than
// the one the contract wants.
func schemaDrift(p schemaPair, js, spec map[string]any, samples []eventSample) []string {
	var drift []string
	report := func(format string, args ...any) { drift = append(drift, fmt.Sprintf(format, args...)) }

	schemas, _ := jsonAt(spec, "components", "schemas").(map[string]any)
	defs, _ := js["$defs"].(map[string]any)
	for name := range defs {
		if _, ok := p.refs["#/$defs/"+name]; !ok {
			report("%s: $defs/%s has no counterpart in openapi.yaml; add it to the pair's refs", p.file, name)
		}
	}
	for _, jsRef := range slices.Sorted(maps.Keys(p.refs)) {
		specRef := p.refs[jsRef]
		jsObj := jsonPointer(js, jsRef)
		specObj, _ := schemas[strings.TrimPrefix(specRef, "#/components/schemas/")].(map[string]any)
		switch {
		case jsObj == nil:
			report("%s: %s is missing", p.file, jsRef)
			continue
		case specObj == nil:
			report("openapi.yaml: %s is missing", specRef)
			continue
		}
		where := fmt.Sprintf("%s %s / openapi.yaml %s", p.file, jsRef, specRef)
		for side, obj := range map[string]map[string]any{p.file: jsObj, "openapi.yaml": specObj} {
			if obj["type"] != "object" {
				report("%s: %s is not of type object", side, where)
			}
			if obj["additionalProperties"] != false {
				report("%s: %s: additionalProperties must be false", side, where)
			}
		}
		compareSchemas(p, where, jsObj, specObj, jsRef == "#", report)
	}

	// The conditional rule, and everything else, by the verdicts.
	jsSch, err := compileJSONSchema(js, p.file)
	if err != nil {
		return append(drift, fmt.Sprintf("%s does not compile: %v", p.file, err))
	}
	specSch, err := loadSpecSchema(spec, p.component())
	if err != nil {
		return append(drift, fmt.Sprintf("openapi.yaml does not load: %v", err))
	}
	for _, s := range samples {
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(s.doc))
		if err != nil {
			panic(err)
		}
		jsErr := jsSch.Validate(inst)
		var v any
		if err := json.Unmarshal(s.doc, &v); err != nil {
			panic(err)
		}
		specErr := specSch.VisitJSON(v)
		if (jsErr == nil) != (specErr == nil) {
			report("sample %q: %s says %s, openapi.yaml says %s", s.name, p.file, schemaVerdict(jsErr), schemaVerdict(specErr))
		} else if (jsErr == nil) != s.valid {
			report("sample %q: both schemas say %s (%v), want valid=%v", s.name, schemaVerdict(jsErr), jsErr, s.valid)
		}
	}
	return drift
}

func schemaVerdict(err error) string {
	if err == nil {
		return "valid"
	}
	msg, _, _ := strings.Cut(err.Error(), "\nSchema:") // kin-openapi's dump of the schema
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return "invalid (" + msg + ")"
}

// compareSchemas compares two schemas keyword by keyword, leaving out
// annotations and, at the event's top level, the keywords that only one
// language has for the store_id rule (if/then/else and oneOf) and the JSON
// Schema's own ($schema, $id, $defs); the samples compare the rule.
func compareSchemas(p schemaPair, where string, js, spec map[string]any, top bool, report func(string, ...any)) {
	skip := slices.Clone(schemaAnnotations)
	if top {
		skip = append(skip, "$schema", "$id", "$defs", "if", "then", "else", "oneOf")
	}
	keys := map[string]bool{}
	for k := range js {
		keys[k] = true
	}
	for k := range spec {
		keys[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if slices.Contains(skip, k) {
			continue
		}
		a, inJS := js[k]
		b, inSpec := spec[k]
		switch {
		case !inJS:
			report("%s: %q is only in openapi.yaml (%v)", where, k, b)
			continue
		case !inSpec:
			report("%s: %q is only in %s (%v)", where, k, p.file, a)
			continue
		}
		switch k {
		case "properties":
			ap, _ := a.(map[string]any)
			bp, _ := b.(map[string]any)
			for _, name := range slices.Sorted(maps.Keys(ap)) {
				if _, ok := bp[name]; !ok {
					report("%s: property %q is only in %s", where, name, p.file)
				}
			}
			for _, name := range slices.Sorted(maps.Keys(bp)) {
				x, ok := ap[name]
				if !ok {
					report("%s: property %q is only in openapi.yaml", where, name)
					continue
				}
				xm, _ := x.(map[string]any)
				ym, _ := bp[name].(map[string]any)
				compareSchemas(p, where+" ."+name, xm, ym, false, report)
			}
		case "items":
			am, _ := a.(map[string]any)
			bm, _ := b.(map[string]any)
			compareSchemas(p, where+" []", am, bm, false, report)
		case "$ref":
			if want, ok := p.refs[fmt.Sprint(a)]; !ok || want != b {
				report("%s: $ref %v in %s, %v in openapi.yaml; they are not a pair", where, a, p.file, b)
			}
		case "required", "enum":
			if as, bs := sortedJSON(a), sortedJSON(b); !slices.Equal(as, bs) {
				report("%s: %s is %v in %s, %v in openapi.yaml", where, k, as, p.file, bs)
			}
		default:
			if !reflect.DeepEqual(a, b) {
				report("%s: %s is %v in %s, %v in openapi.yaml", where, k, a, p.file, b)
			}
		}
	}
}

// sortedJSON is a list's members in their JSON encoding, sorted.
func sortedJSON(v any) []string {
	var out []string
	l, ok := v.([]any)
	if !ok {
		return []string{fmt.Sprintf("not a list: %v", v)}
	}
	for _, x := range l {
		b, _ := json.Marshal(x)
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}

func jsonAt(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// jsonPointer follows a local JSON pointer such as #/$defs/Item.
func jsonPointer(doc map[string]any, ref string) map[string]any {
	var path []string
	if p := strings.TrimPrefix(ref, "#"); p != "" {
		path = strings.Split(strings.TrimPrefix(p, "/"), "/")
	}
	m, _ := jsonAt(doc, path...).(map[string]any)
	return m
}

// compileJSONSchema compiles the JSON Schema of file with formats asserted,
// as event_test.go does.
func compileJSONSchema(js map[string]any, file string) (*jsonschema.Schema, error) {
	b, err := json.Marshal(js)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	url := "file:///" + filepath.Base(file)
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// loadSpecSchema loads the spec with kin-openapi and returns one component
// schema, its $refs resolved.
func loadSpecSchema(spec map[string]any, name string) (*openapi3.Schema, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		return nil, err
	}
	ref, ok := doc.Components.Schemas[name]
	if !ok || ref.Value == nil {
		return nil, fmt.Errorf("components/schemas/%s is missing", name)
	}
	return ref.Value, nil
}

// eventSample is an event document and whether the contract takes it.
type eventSample struct {
	name  string
	doc   []byte
	valid bool
}

// eventSamples are the golden events of the root package, every state with
// and without store_id, and single changes to a full event that each keep
// it valid or break one rule of the schema.
func eventSamples(t *testing.T) []eventSample {
	t.Helper()
	var out []eventSample
	goldens, err := filepath.Glob("../testdata/events/*.json")
	if err != nil || len(goldens) == 0 {
		t.Fatalf("no golden events in ../testdata/events: %v", err)
	}
	for _, g := range goldens {
		b, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, eventSample{"golden " + filepath.Base(g), b, true})
	}

	base := func() map[string]any {
		item := func(n int) map[string]any {
			return map[string]any{
				"item_id": fmt.Sprintf("item-%d", n), "ean": "4006381333931", "price": 19.99, "currency": "EUR",
				"article_number": "SKU-1", "marketplace_article_number": "MP-1", "article_location": "Dept 3",
			}
		}
		return map[string]any{
			"event_id":     "0b7e5b2c-3f6e-4d2a-9a7e-1c2d3e4f5a6b",
			"order_id":     "order-1",
			"order_number": "MP-1",
			"state":        "fulfilled",
			"store_id":     "S1",
			"timestamp":    "2026-03-02T09:15:30.125Z",
			"delivery_details": map[string]any{
				"delivery_tracking_number": "T-1", "delivery_carrier_name": "DHL",
				"return_tracking_number": "RT-1", "return_carrier_name": "Hermes",
			},
			"customer_billing_address": map[string]any{
				"first_name": "Erika", "last_name": "Mustermann", "address_line_1": "Hauptstr. 1",
				"address_line_2": "c/o Muster", "address_line_3": "3. OG", "zip_code": "10115", "city": "Berlin",
				"country_code": "DE",
			},
			"items":           []any{item(1)},
			"cancelled_items": []any{item(2)},
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
	item := func(e map[string]any, key string) map[string]any { return e[key].([]any)[0].(map[string]any) }
	sub := func(e map[string]any, key string) map[string]any { return e[key].(map[string]any) }

	// The store_id rule: required for the store states, absent for the
	// marketplace warehouse states.
	for _, s := range []struct {
		state string
		store bool
	}{
		{"assigned", true}, {"cancelled", true}, {"fulfilled", true}, {"returned", true},
		{"marketplace_warehouse_fulfilled", false}, {"marketplace_warehouse_returned", false},
	} {
		add(s.state+" with store_id", s.store, func(e map[string]any) { e["state"] = s.state })
		add(s.state+" without store_id", !s.store, func(e map[string]any) { e["state"] = s.state; delete(e, "store_id") })
	}
	add("unknown state with store_id", false, func(e map[string]any) { e["state"] = "lost" })
	add("unknown state without store_id", false, func(e map[string]any) { e["state"] = "lost"; delete(e, "store_id") })
	add("state as a number", false, func(e map[string]any) { e["state"] = 1 })
	add("empty store_id", true, func(e map[string]any) { e["store_id"] = "" })
	add("store_id null", false, func(e map[string]any) { e["store_id"] = nil })

	add("full event", true, func(map[string]any) {})
	add("minimal event", true, func(e map[string]any) {
		for _, k := range []string{"delivery_details", "customer_billing_address", "cancelled_items"} {
			delete(e, k)
		}
		for _, k := range []string{"article_location"} {
			delete(item(e, "items"), k)
		}
	})
	for _, k := range []string{"event_id", "order_id", "order_number", "state", "timestamp", "items"} {
		add("event without "+k, false, func(e map[string]any) { delete(e, k) })
	}
	add("event with an unknown property", false, func(e map[string]any) { e["client_id"] = "c-1" })
	add("optional field null", false, func(e map[string]any) { e["delivery_details"] = nil })
	add("event_id not a UUID", false, func(e map[string]any) { e["event_id"] = "event-1" })
	add("event_id in upper case", true, func(e map[string]any) { e["event_id"] = "0B7E5B2C-3F6E-4D2A-9A7E-1C2D3E4F5A6B" })
	add("timestamp without fraction", true, func(e map[string]any) { e["timestamp"] = "2026-03-02T09:15:30Z" })
	add("timestamp with an offset", false, func(e map[string]any) { e["timestamp"] = "2026-03-02T10:15:30+01:00" })
	add("timestamp with microseconds", false, func(e map[string]any) { e["timestamp"] = "2026-03-02T09:15:30.125000Z" })
	add("timestamp with a space", false, func(e map[string]any) { e["timestamp"] = "2026-03-02 09:15:30Z" })
	add("order_id a number", false, func(e map[string]any) { e["order_id"] = 7 })
	add("no items", false, func(e map[string]any) { e["items"] = []any{} })
	add("no cancelled items", true, func(e map[string]any) { e["cancelled_items"] = []any{} })
	add("items an object", false, func(e map[string]any) { e["items"] = item(e, "items") })

	// Items.
	for _, k := range []string{"item_id", "ean", "price", "currency", "article_number", "marketplace_article_number"} {
		add("item without "+k, false, func(e map[string]any) { delete(item(e, "items"), k) })
		add("cancelled item without "+k, false, func(e map[string]any) { delete(item(e, "cancelled_items"), k) })
	}
	add("item with an unknown property", false, func(e map[string]any) { item(e, "items")["quantity"] = 1 })
	add("item price an integer", true, func(e map[string]any) { item(e, "items")["price"] = 20 })
	add("item price a string", false, func(e map[string]any) { item(e, "items")["price"] = "19.99" })
	add("item currency in lower case", false, func(e map[string]any) { item(e, "items")["currency"] = "eur" })
	add("item currency of four letters", false, func(e map[string]any) { item(e, "items")["currency"] = "EURO" })
	add("item ean a number", false, func(e map[string]any) { item(e, "items")["ean"] = 4006381333931 })
	for _, c := range []any{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, -1} {
		add(fmt.Sprintf("return_reason_code %v", c), true, func(e map[string]any) { item(e, "items")["return_reason_code"] = c })
	}
	for _, c := range []any{0, 11, -2, 2.5, "2"} {
		add(fmt.Sprintf("return_reason_code %#v", c), false, func(e map[string]any) { item(e, "items")["return_reason_code"] = c })
	}
	for _, l := range []any{"STORE", "MARKETPLACE"} {
		add("return_location "+l.(string), true, func(e map[string]any) { item(e, "items")["return_location"] = l })
	}
	for _, l := range []any{"store", "HOME", ""} {
		add(fmt.Sprintf("return_location %q", l), false, func(e map[string]any) { item(e, "items")["return_location"] = l })
	}
	for _, r := range []any{"ITEM_BROKEN", "ITEM_MISSING", "OUT_OF_STOCK", "UNKNOWN_REASON"} {
		add("cancellation_reason "+r.(string), true, func(e map[string]any) { item(e, "cancelled_items")["cancellation_reason"] = r })
	}
	for _, r := range []any{"item_broken", "DAMAGED", 1} {
		add(fmt.Sprintf("cancellation_reason %#v", r), false, func(e map[string]any) { item(e, "cancelled_items")["cancellation_reason"] = r })
	}

	// Delivery details: every field optional, none other allowed.
	add("empty delivery details", true, func(e map[string]any) { e["delivery_details"] = map[string]any{} })
	add("delivery details with an unknown property", false, func(e map[string]any) { sub(e, "delivery_details")["carrier"] = "DHL" })
	add("delivery tracking number a number", false, func(e map[string]any) { sub(e, "delivery_details")["delivery_tracking_number"] = 1 })
	add("delivery details a string", false, func(e map[string]any) { e["delivery_details"] = "DHL" })

	// Billing address.
	for _, k := range []string{"first_name", "last_name", "address_line_1", "zip_code", "city", "country_code"} {
		add("address without "+k, false, func(e map[string]any) { delete(sub(e, "customer_billing_address"), k) })
	}
	for _, k := range []string{"address_line_2", "address_line_3"} {
		add("address without "+k, true, func(e map[string]any) { delete(sub(e, "customer_billing_address"), k) })
	}
	add("address with an unknown property", false, func(e map[string]any) { sub(e, "customer_billing_address")["street"] = "x" })
	add("address zip code a number", false, func(e map[string]any) { sub(e, "customer_billing_address")["zip_code"] = 10115 })
	return out
}
