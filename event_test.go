package storelink_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"storelink"
)

// updateGolden rewrites testdata/events from the current code:
// go test -run TestEventGolden -update .
var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata/events")

const (
	schemaPath = "schema/order-event.json"
	goldenDir  = "testdata/events"
)

// idGen makes deterministic, UUID-shaped ids: a scenario number and a counter.
type idGen struct {
	scenario, n int
}

func (g *idGen) next() string {
	g.n++
	return fmt.Sprintf("%08d-0000-4000-8000-%012d", g.scenario, g.n)
}

// clock is a fixed clock that moves on by a fixed step at each reading.
type clock struct {
	t    time.Time
	step time.Duration
}

func (c *clock) now() time.Time {
	t := c.t
	c.t = c.t.Add(c.step)
	return t
}

var (
	testClient = &storelink.Client{ID: "client-de", PartnerID: "partner-1", CountryCode: "DE", Currency: "EUR"}

	// EANs with valid check digits.
	eanPen    = "4006381333931"
	eanGS1    = "5901234123457"
	eanShort  = "96385074"
	eanUPC    = "036000291452"
	eanGTIN14 = "10012345678902"
)

func stock(store, ean, article, location string, price storelink.Money) *storelink.Stock {
	return &storelink.Stock{StockRow: storelink.StockRow{StoreID: store, EAN: ean, ArticleNumber: article,
		Quantity: 10, Price: price, ArticleLocation: location}, Available: 10}
}

func money(m storelink.Money) *storelink.Money { return &m }

func code(c storelink.ReturnReasonCode) *storelink.ReturnReasonCode { return &c }

type namedEvent struct {
	name  string
	event *storelink.Event
}

// goldenEvents builds one event of each state through the domain functions,
// with fixed clocks and ids, so that every run gives the same bytes.
func goldenEvents(t testing.TB) []namedEvent {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var out []namedEvent

	// 1. A full store order: assigned with address and delivery details,
	// fulfilled with cancelled items, returned to another store, then to the
	// marketplace.
	ids := &idGen{scenario: 1}
	clk := &clock{t: time.Date(2026, 3, 2, 9, 15, 30, 125_000_000, time.UTC), step: 26*time.Hour + 17*time.Minute + 1500*time.Millisecond}
	rows := map[string]*storelink.Stock{
		eanPen:   stock("store-1", eanPen, "SKU-PEN-BLUE", "dept-12", 1999),
		eanGS1:   stock("store-1", eanGS1, "SKU-GS1", "", 1500),
		eanShort: stock("store-1", eanShort, "SKU-SHORT", "aisle 3 / shelf B", 50),
	}
	n := &storelink.NewOrder{
		OrderNumber: "10203040-5", ClientID: testClient.ID, StoreID: "store-1",
		Items: []storelink.NewItem{
			{EAN: eanPen, MarketplaceArticleNumber: "MP-PEN"},
			{EAN: eanPen, MarketplaceArticleNumber: "MP-PEN"},
			{EAN: eanGS1, MarketplaceArticleNumber: "MP-GS1", Price: money(2000), ArticleNumber: "SKU-GS1-GIVEN"},
			{EAN: eanShort, MarketplaceArticleNumber: "MP-SHORT"},
		},
		CustomerBillingAddress: &storelink.Address{FirstName: "Zoë", LastName: "Müller-Lüdenscheidt", AddressLine1: "Hauptstraße 5",
			AddressLine2: "USt-IdNr. DE123456789", AddressLine3: "Hinterhaus, 3. OG <bei Schmidt> & Co", ZipCode: "10115", City: "Berlin", CountryCode: "DE"},
		DeliveryDetails: &storelink.DeliveryDetails{DeliveryCarrierName: "DHL"},
	}
	must(n.Validate())
	o, e, err := storelink.Assign(n, testClient, "store-1", rows, ids.next, clk.now())
	must(err)
	out = append(out, namedEvent{"assigned", e})
	e, err = o.Fulfil(storelink.FulfilRequest{
		PickedItemIDs:   []string{o.Items[0].ItemID, o.Items[2].ItemID, o.Items[1].ItemID},
		CancelledItems:  []storelink.ItemReason{{ItemID: o.Items[3].ItemID, CancellationReason: storelink.ReasonItemBroken}},
		DeliveryDetails: &storelink.DeliveryDetails{DeliveryTrackingNumber: "00340434161094042557"},
	}, ids.next(), clk.now())
	must(err)
	out = append(out, namedEvent{"fulfilled", e})
	storeExists := func(id string) bool { return id == "store-1" || id == "store-2" }
	e, err = o.Return(storelink.ReturnRequest{
		StoreID: "store-2",
		Items: []storelink.ReturnItem{
			{ItemID: o.Items[0].ItemID, ReturnReasonCode: code(2), ReturnLocation: storelink.ReturnToStore},
			{ItemID: o.Items[2].ItemID, ReturnLocation: storelink.ReturnToStore},
		},
		DeliveryDetails: &storelink.DeliveryDetails{ReturnTrackingNumber: "RT-0001", ReturnCarrierName: "Hermes"},
	}, storeExists, ids.next(), clk.now())
	must(err)
	out = append(out, namedEvent{"returned_store", e})
	e, err = o.Return(storelink.ReturnRequest{
		// No store_id: a marketplace return is recorded under the fulfilling store.
		Items: []storelink.ReturnItem{{ItemID: o.Items[1].ItemID, ReturnReasonCode: code(-1), ReturnLocation: storelink.ReturnToMarketplace}},
	}, storeExists, ids.next(), clk.now())
	must(err)
	out = append(out, namedEvent{"returned_marketplace", e})

	// 2. A minimal order: no address, no delivery details, no stock rows (so
	// no article_location); cancelled, and re-assigned to another store.
	ids = &idGen{scenario: 2}
	clk = &clock{t: time.Date(2026, 12, 31, 23, 59, 59, 0, time.FixedZone("CET", 3600)), step: time.Second + time.Millisecond}
	n = &storelink.NewOrder{
		OrderNumber: "MIN-1", ClientID: testClient.ID,
		Items: []storelink.NewItem{
			{EAN: eanUPC, MarketplaceArticleNumber: "MP-UPC", Price: money(1999), ArticleNumber: "SKU-UPC"},
			{EAN: eanGTIN14, MarketplaceArticleNumber: "MP-GTIN", Price: money(100000), ArticleNumber: "SKU-GTIN"},
			{EAN: eanUPC, MarketplaceArticleNumber: "MP-UPC", Price: money(1), ArticleNumber: "SKU-UPC"},
		},
	}
	must(n.Validate())
	o, e, err = storelink.Assign(n, testClient, "store-1", nil, ids.next, clk.now())
	must(err)
	out = append(out, namedEvent{"assigned_minimal", e})
	e, again, err := o.Cancel(storelink.CancelRequest{
		Items: []storelink.ItemReason{
			{ItemID: o.Items[0].ItemID, CancellationReason: storelink.ReasonOutOfStock},
			{ItemID: o.Items[2].ItemID, CancellationReason: storelink.ReasonItemMissing},
		},
		Reassign: true,
	}, ids.next(), clk.now())
	must(err)
	out = append(out, namedEvent{"cancelled", e})
	_, e = storelink.Reassign(o, again, "store-2", map[string]*storelink.Stock{
		eanUPC: stock("store-2", eanUPC, "SKU-UPC-S2", "back room", 2500),
	}, ids.next, clk.now())
	out = append(out, namedEvent{"assigned_reassigned", e})

	// 3. A marketplace warehouse order, returned to the warehouse twice.
	ids = &idGen{scenario: 3}
	clk = &clock{t: time.Date(2026, 1, 5, 0, 0, 0, 999_000_000, time.UTC), step: 48 * time.Hour}
	n = &storelink.NewOrder{
		OrderNumber: "WH-77", ClientID: testClient.ID,
		Items: []storelink.NewItem{
			{EAN: eanPen, MarketplaceArticleNumber: "MP-PEN"},
			{EAN: eanShort, MarketplaceArticleNumber: "MP-SHORT", Price: money(1050), ArticleNumber: "SKU-SHORT-WH"},
			{EAN: eanGS1, MarketplaceArticleNumber: "MP-GS1"},
		},
		CustomerBillingAddress: &storelink.Address{FirstName: "Ann", LastName: "Lee", AddressLine1: "1 Main St", AddressLine2: "c/o Bob",
			ZipCode: "1011 AB", City: "Amsterdam", CountryCode: "NL"},
		DeliveryDetails: &storelink.DeliveryDetails{DeliveryTrackingNumber: "WH-TRACK-1", DeliveryCarrierName: "PostNL"},
	}
	must(n.Validate())
	o, e, err = storelink.NewWarehouseOrder(n, testClient, rows, ids.next, clk.now())
	must(err)
	out = append(out, namedEvent{"marketplace_warehouse_fulfilled", e})
	e, err = o.WarehouseReturn(storelink.WarehouseReturnRequest{Items: []storelink.WarehouseReturnItem{
		{ItemID: o.Items[1].ItemID, ReturnReasonCode: code(8)},
		{ItemID: o.Items[0].ItemID},
	}}, ids.next(), clk.now())
	must(err)
	out = append(out, namedEvent{"marketplace_warehouse_returned", e})
	e, err = o.WarehouseReturn(storelink.WarehouseReturnRequest{Items: []storelink.WarehouseReturnItem{
		{ItemID: o.Items[2].ItemID, ReturnReasonCode: code(10)},
	}}, ids.next(), clk.now())
	must(err)
	out = append(out, namedEvent{"marketplace_warehouse_returned_again", e})
	return out
}

// indented is the golden form of an event: its own Marshal output, indented.
func indented(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		t.Fatalf("indent %s: %v", b, err)
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}

func TestEventGolden(t *testing.T) {
	events := goldenEvents(t)
	if *updateGolden {
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	names := map[string]bool{}
	for _, g := range events {
		names[g.name+".json"] = true
		t.Run(g.name, func(t *testing.T) {
			got := indented(t, g.event.Marshal())
			path := filepath.Join(goldenDir, g.name+".json")
			if *updateGolden {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestEventGolden -update . to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the event the code makes now:\n--- got\n%s\n--- want\n%s", path, got, want)
			}
		})
	}
	// A golden file no event produces any more is a stale claim about the JSON.
	entries, err := os.ReadDir(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range entries {
		if !names[de.Name()] {
			t.Errorf("%s/%s: no golden event produces it; remove it", goldenDir, de.Name())
		}
	}
}

// TestEventDeterministic: building the goldens twice gives the same bytes,
// so the goldens depend only on the fixed clock and ids.
func TestEventDeterministic(t *testing.T) {
	a, b := goldenEvents(t), goldenEvents(t)
	for i := range a {
		if !bytes.Equal(a[i].event.Marshal(), b[i].event.Marshal()) {
			t.Errorf("%s: two builds differ", a[i].name)
		}
	}
}

func readGoldens(t *testing.T) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden files in %s: %v", goldenDir, err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

func decodeMap(t testing.TB, b []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return m
}

// TestGoldenCoverage: every optional field of the seed is present in at least
// one golden and absent in another, and every state has a golden.
func TestGoldenCoverage(t *testing.T) {
	type probe struct {
		name string
		has  func(e map[string]any) bool
	}
	items := func(e map[string]any) []map[string]any {
		var out []map[string]any
		for _, key := range []string{"items", "cancelled_items"} {
			list, _ := e[key].([]any)
			for _, it := range list {
				out = append(out, it.(map[string]any))
			}
		}
		return out
	}
	anyItem := func(f func(map[string]any) bool) func(map[string]any) bool {
		return func(e map[string]any) bool { return slices.ContainsFunc(items(e), f) }
	}
	sub := func(obj, field string) func(map[string]any) bool {
		return func(e map[string]any) bool {
			m, ok := e[obj].(map[string]any)
			_, has := m[field]
			return ok && has
		}
	}
	top := func(field string) func(map[string]any) bool {
		return func(e map[string]any) bool { _, ok := e[field]; return ok }
	}
	itemField := func(field string, value any) func(map[string]any) bool {
		return anyItem(func(it map[string]any) bool {
			v, ok := it[field]
			return ok && (value == nil || fmt.Sprint(v) == fmt.Sprint(value))
		})
	}
	probes := []probe{
		{"store_id", top("store_id")},
		{"delivery_details", top("delivery_details")},
		{"customer_billing_address", top("customer_billing_address")},
		{"cancelled_items", top("cancelled_items")},
		{"address_line_2", sub("customer_billing_address", "address_line_2")},
		{"address_line_3", sub("customer_billing_address", "address_line_3")},
		{"article_location", itemField("article_location", nil)},
		{"return_reason_code", itemField("return_reason_code", nil)},
		{"return_location", itemField("return_location", nil)},
		{"cancellation_reason", itemField("cancellation_reason", nil)},
	}
	for _, f := range []string{"delivery_tracking_number", "delivery_carrier_name", "return_tracking_number", "return_carrier_name"} {
		probes = append(probes, probe{"delivery_details." + f, sub("delivery_details", f)})
	}
	// Values that must each appear somewhere (absence is covered above).
	values := []probe{
		{"return_reason_code -1", itemField("return_reason_code", -1)},
		{"return_location STORE", itemField("return_location", "STORE")},
		{"return_location MARKETPLACE", itemField("return_location", "MARKETPLACE")},
		{"cancellation_reason in cancelled_items", func(e map[string]any) bool {
			list, _ := e["cancelled_items"].([]any)
			for _, it := range list {
				if _, ok := it.(map[string]any)["cancellation_reason"]; ok {
					return true
				}
			}
			return false
		}},
		{"delivery_details with all four fields", func(e map[string]any) bool {
			m, _ := e["delivery_details"].(map[string]any)
			return len(m) == 4
		}},
		{"address with lines 2 and 3", func(e map[string]any) bool {
			m, _ := e["customer_billing_address"].(map[string]any)
			_, l2 := m["address_line_2"]
			_, l3 := m["address_line_3"]
			return l2 && l3
		}},
		{"item without article_location", anyItem(func(it map[string]any) bool { _, ok := it["article_location"]; return !ok })},
		{"returned item without return_reason_code", func(e map[string]any) bool {
			s := fmt.Sprint(e["state"])
			return strings.HasSuffix(s, "returned") && anyItem(func(it map[string]any) bool { _, ok := it["return_reason_code"]; return !ok })(e)
		}},
	}
	for _, s := range storelink.OrderStates {
		values = append(values, probe{"state " + string(s), func(e map[string]any) bool { return e["state"] == string(s) }})
	}
	goldens := readGoldens(t)
	var events []map[string]any
	for _, b := range goldens {
		events = append(events, decodeMap(t, b))
	}
	for _, p := range probes {
		present, absent := 0, 0
		for _, e := range events {
			if p.has(e) {
				present++
			} else {
				absent++
			}
		}
		if present == 0 || absent == 0 {
			t.Errorf("%s: present in %d goldens, absent in %d; want both", p.name, present, absent)
		}
	}
	for _, p := range values {
		if !slices.ContainsFunc(events, p.has) {
			t.Errorf("no golden has %s", p.name)
		}
	}
}

// TestWarehouseEventArticleLocation: the items of the warehouse events, as
// their JSON reads, carry the article_location of the stock row their EAN
// was described by, whether or not the request gave the article number and
// price, and none where that row has no location.
func TestWarehouseEventArticleLocation(t *testing.T) {
	want := map[string]any{eanPen: "dept-12", eanShort: "aisle 3 / shelf B", eanGS1: nil}
	goldens := readGoldens(t)
	for _, name := range []string{"marketplace_warehouse_fulfilled.json", "marketplace_warehouse_returned.json",
		"marketplace_warehouse_returned_again.json"} {
		e := decodeMap(t, goldens[name])
		items, _ := e["items"].([]any)
		if len(items) == 0 {
			t.Fatalf("%s has no items", name)
		}
		for _, raw := range items {
			it := raw.(map[string]any)
			ean := it["ean"].(string)
			if got := it["article_location"]; got != want[ean] {
				t.Errorf("%s: item of EAN %s has article_location %v, want %v (its stock row's)", name, ean, got, want[ean])
			}
		}
	}
}

// TestGoldenPrices: prices are written as exact decimals, the way the
// partner's feed wrote them.
func TestGoldenPrices(t *testing.T) {
	all := readGoldens(t)
	var joined []byte
	for _, b := range all {
		joined = append(joined, b...)
	}
	for _, want := range []string{`"price": 19.99,`, `"price": 20,`, `"price": 0.5,`, `"price": 0.01,`, `"price": 1000,`, `"price": 10.5,`} {
		if !bytes.Contains(joined, []byte(want)) {
			t.Errorf("no golden contains %s", want)
		}
	}
	price := regexp.MustCompile(`"price": ([^,\n]*)`)
	exact := regexp.MustCompile(`^(0|[1-9][0-9]*)(\.[0-9]?[1-9])?$`)
	for name, b := range all {
		for _, m := range price.FindAllSubmatch(b, -1) {
			if !exact.Match(m[1]) {
				t.Errorf("%s: price %s is not a shortest exact decimal", name, m[1])
			}
		}
		if bytes.Contains(b, []byte("null")) {
			t.Errorf("%s contains null", name)
		}
	}
}

// eventSchema compiles schema/order-event.json with formats asserted
// (event_id must be a UUID, timestamp a date-time).
func eventSchema(t testing.TB) *jsonschema.Schema { return compileEventSchema(t, true) }

// compileEventSchema compiles the schema, asserting formats or, as many
// validators do by default, treating them as annotations only.
func compileEventSchema(t testing.TB, assertFormat bool) *jsonschema.Schema {
	return compileSchemaFile(t, schemaPath, assertFormat)
}

// compileSchemaFile compiles the JSON Schema at path, asserting formats or
// treating them as annotations only.
func compileSchemaFile(t testing.TB, path string, assertFormat bool) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if assertFormat {
		c.AssertFormat()
	}
	if err := c.AddResource(path, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(path)
	if err != nil {
		t.Fatalf("compile %s: %v", path, err)
	}
	return sch
}

func validate(t testing.TB, sch *jsonschema.Schema, b []byte) error {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("instance %s: %v", b, err)
	}
	return sch.Validate(inst)
}

func TestEventSchemaAcceptsGoldens(t *testing.T) {
	sch := eventSchema(t)
	for name, b := range readGoldens(t) {
		if err := validate(t, sch, b); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestEventSchemaAcceptsGenerated validates events made in the test, compact
// as they are sent, including shapes the goldens do not have.
func TestEventSchemaAcceptsGenerated(t *testing.T) {
	sch := eventSchema(t)
	for _, g := range goldenEvents(t) {
		if err := validate(t, sch, g.event.Marshal()); err != nil {
			t.Errorf("%s: %v", g.name, err)
		}
	}
	item := storelink.EventItem{ItemID: "i1", EAN: eanPen, Price: 5, Currency: "EUR", ArticleNumber: "A", MarketplaceArticleNumber: "M"}
	for _, e := range []storelink.Event{
		// The seed allows a timestamp without fractional seconds.
		{EventID: "0190f6c4-58a1-7cc2-9d3e-0123456789ab", OrderID: "o", OrderNumber: "n", State: storelink.StateAssigned,
			StoreID: "s", Timestamp: "2026-02-28T23:59:59Z", Items: []storelink.EventItem{item}},
		{EventID: storelink.NewID(time.Now()), OrderID: "o", OrderNumber: "n", State: storelink.StateWarehouseFulfilled,
			Timestamp: time.Now().Format(storelink.EventTimeLayout), Items: []storelink.EventItem{item},
			DeliveryDetails: &storelink.DeliveryDetails{ReturnCarrierName: "UPS"}},
	} {
		if err := validate(t, sch, e.Marshal()); err != nil {
			t.Errorf("%s: %v", e.Marshal(), err)
		}
	}
	// Every reason, location and return code the domain accepts is in the schema.
	for c := range storelink.ReturnReasons {
		for _, loc := range []storelink.ReturnLocation{storelink.ReturnToStore, storelink.ReturnToMarketplace} {
			for _, r := range []storelink.CancellationReason{storelink.ReasonItemBroken, storelink.ReasonItemMissing, storelink.ReasonOutOfStock, storelink.ReasonUnknownReason} {
				it := item
				it.ReturnReasonCode, it.ReturnLocation, it.CancellationReason = code(c), loc, r
				e := storelink.Event{EventID: "0190f6c4-58a1-7cc2-9d3e-0123456789ab", OrderID: "o", OrderNumber: "n",
					State: storelink.StateReturned, StoreID: "s", Timestamp: "2026-01-01T00:00:00.000Z", Items: []storelink.EventItem{it}}
				if err := validate(t, sch, e.Marshal()); err != nil {
					t.Errorf("%s: %v", e.Marshal(), err)
				}
			}
		}
	}
}

// TestExampleEventsValid: the example event of a test send is valid against
// the schema in every state, with the store for the store states only, a
// TEST- order number and ids of its own.
func TestExampleEventsValid(t *testing.T) {
	sch := eventSchema(t)
	now := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	for _, state := range storelink.OrderStates {
		e := storelink.ExampleEvent(state, "S1", "EUR", now, func() string { return storelink.NewID(now) })
		b := e.Marshal()
		if err := validate(t, sch, b); err != nil {
			t.Errorf("example %s event %s: %v", state, b, err)
		}
		warehouse := state == storelink.StateWarehouseFulfilled || state == storelink.StateWarehouseReturned
		if e.State != state || (e.StoreID == "") != warehouse || !strings.HasPrefix(e.OrderNumber, "TEST-") ||
			e.EventID == e.OrderID || e.Timestamp != "2026-11-21T09:00:00.000Z" {
			t.Errorf("example %s event = %s", state, b)
		}
	}
}

// TestEventSchemaRejects: the schema is not vacuous; each mutation of a
// valid event must fail validation, also for a validator that treats
// "format" as an annotation (patterns carry the UUID and timestamp shapes).
func TestEventSchemaRejects(t *testing.T) {
	schemas := []*jsonschema.Schema{compileEventSchema(t, true), compileEventSchema(t, false)}
	goldens := readGoldens(t)
	firstItem := func(e map[string]any) map[string]any { return e["items"].([]any)[0].(map[string]any) }
	address := func(e map[string]any) map[string]any { return e["customer_billing_address"].(map[string]any) }
	tests := []struct {
		name   string
		golden string
		mutate func(e map[string]any)
	}{
		{"null delivery_details", "assigned_minimal.json", func(e map[string]any) { e["delivery_details"] = nil }},
		{"null customer_billing_address", "assigned_minimal.json", func(e map[string]any) { e["customer_billing_address"] = nil }},
		{"null cancelled_items", "assigned_minimal.json", func(e map[string]any) { e["cancelled_items"] = nil }},
		{"null store_id on a warehouse state", "marketplace_warehouse_fulfilled.json", func(e map[string]any) { e["store_id"] = nil }},
		{"null article_location", "assigned_minimal.json", func(e map[string]any) { firstItem(e)["article_location"] = nil }},
		{"null return_reason_code", "returned_store.json", func(e map[string]any) { firstItem(e)["return_reason_code"] = nil }},
		{"null return_location", "returned_store.json", func(e map[string]any) { firstItem(e)["return_location"] = nil }},
		{"null cancellation_reason", "cancelled.json", func(e map[string]any) { firstItem(e)["cancellation_reason"] = nil }},
		{"null address_line_2", "assigned.json", func(e map[string]any) { address(e)["address_line_2"] = nil }},
		{"null delivery_tracking_number", "assigned.json", func(e map[string]any) {
			e["delivery_details"].(map[string]any)["delivery_tracking_number"] = nil
		}},
		{"extra property", "assigned.json", func(e map[string]any) { e["client_id"] = "client-de" }},
		{"extra item property", "assigned.json", func(e map[string]any) { firstItem(e)["status"] = "assigned" }},
		{"extra address property", "assigned.json", func(e map[string]any) { address(e)["state"] = "BE" }},
		{"extra delivery property", "assigned.json", func(e map[string]any) { e["delivery_details"].(map[string]any)["eta"] = "soon" }},
		{"store_id on marketplace_warehouse_fulfilled", "marketplace_warehouse_fulfilled.json", func(e map[string]any) { e["store_id"] = "store-1" }},
		{"store_id on marketplace_warehouse_returned", "marketplace_warehouse_returned.json", func(e map[string]any) { e["store_id"] = "store-1" }},
		{"store_id missing on assigned", "assigned.json", func(e map[string]any) { delete(e, "store_id") }},
		{"store_id missing on cancelled", "cancelled.json", func(e map[string]any) { delete(e, "store_id") }},
		{"store_id missing on fulfilled", "fulfilled.json", func(e map[string]any) { delete(e, "store_id") }},
		{"store_id missing on returned", "returned_marketplace.json", func(e map[string]any) { delete(e, "store_id") }},
		{"return_reason_code 11", "returned_store.json", func(e map[string]any) { firstItem(e)["return_reason_code"] = 11 }},
		{"return_reason_code 0", "returned_store.json", func(e map[string]any) { firstItem(e)["return_reason_code"] = 0 }},
		{"return_reason_code 2.5", "returned_store.json", func(e map[string]any) { firstItem(e)["return_reason_code"] = 2.5 }},
		{"return_reason_code as a string", "returned_store.json", func(e map[string]any) { firstItem(e)["return_reason_code"] = "2" }},
		{"price as a string", "assigned.json", func(e map[string]any) { firstItem(e)["price"] = "19.99" }},
		{"timestamp without Z", "assigned.json", func(e map[string]any) { e["timestamp"] = "2026-03-02T09:15:30.125" }},
		{"timestamp with an offset", "assigned.json", func(e map[string]any) { e["timestamp"] = "2026-03-02T10:15:30.125+01:00" }},
		{"timestamp without seconds", "assigned.json", func(e map[string]any) { e["timestamp"] = "2026-03-02T09:15Z" }},
		{"timestamp date only", "assigned.json", func(e map[string]any) { e["timestamp"] = "2026-03-02" }},
		{"timestamp month 13", "assigned.json", func(e map[string]any) { e["timestamp"] = "2026-13-02T09:15:30Z" }},
		{"event_id not a UUID", "assigned.json", func(e map[string]any) { e["event_id"] = "evt-1" }},
		{"event_id a UUID without dashes", "assigned.json", func(e map[string]any) { e["event_id"] = "0190f6c458a17cc29d3e0123456789ab" }},
		{"timestamp with microseconds", "assigned.json", func(e map[string]any) { e["timestamp"] = "2026-03-02T09:15:30.125000Z" }},
		{"timestamp with a lower-case z", "assigned.json", func(e map[string]any) { e["timestamp"] = "2026-03-02T09:15:30.125z" }},
		{"unknown state", "assigned.json", func(e map[string]any) { e["state"] = "shipped" }},
		{"no items", "assigned.json", func(e map[string]any) { e["items"] = []any{} }},
		{"items missing", "assigned.json", func(e map[string]any) { delete(e, "items") }},
		{"order_id missing", "assigned.json", func(e map[string]any) { delete(e, "order_id") }},
		{"order_number a number", "assigned.json", func(e map[string]any) { e["order_number"] = 10203040 }},
		{"item ean missing", "assigned.json", func(e map[string]any) { delete(firstItem(e), "ean") }},
		{"item marketplace_article_number missing", "assigned.json", func(e map[string]any) { delete(firstItem(e), "marketplace_article_number") }},
		{"lower-case currency", "assigned.json", func(e map[string]any) { firstItem(e)["currency"] = "eur" }},
		{"currency of 4 letters", "assigned.json", func(e map[string]any) { firstItem(e)["currency"] = "EURO" }},
		{"unknown return_location", "returned_store.json", func(e map[string]any) { firstItem(e)["return_location"] = "HOME" }},
		{"unknown cancellation_reason", "cancelled.json", func(e map[string]any) { firstItem(e)["cancellation_reason"] = "CHANGED_MIND" }},
		{"address without city", "assigned.json", func(e map[string]any) { delete(address(e), "city") }},
		{"cancelled item without price", "fulfilled.json", func(e map[string]any) {
			delete(e["cancelled_items"].([]any)[0].(map[string]any), "price")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, ok := goldens[tt.golden]
			if !ok {
				t.Fatalf("no golden %s", tt.golden)
			}
			e := decodeMap(t, b)
			tt.mutate(e)
			mutated, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			for i, sch := range schemas {
				if err := validate(t, sch, b); err != nil {
					t.Fatalf("%s is not valid to begin with: %v", tt.golden, err)
				}
				err := validate(t, sch, mutated)
				if err == nil {
					t.Fatalf("schema (format asserted: %v) accepts %s", i == 0, mutated)
				}
				t.Logf("%#v", err)
			}
		})
	}
}

// TestEventSchemaMatchesTypes: the schema's properties and required lists are
// the JSON tags of the Go types (omitempty exactly for optional fields), and
// no type in the schema admits null. Together with the goldens this keeps
// schema and code from drifting apart.
func TestEventSchemaMatchesTypes(t *testing.T) {
	b, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if err := json.Unmarshal(b, &root); err != nil {
		t.Fatal(err)
	}
	defs := root["$defs"].(map[string]any)
	for _, c := range []struct {
		name   string
		schema map[string]any
		typ    reflect.Type
	}{
		{"event", root, reflect.TypeFor[storelink.Event]()},
		{"Item", defs["Item"].(map[string]any), reflect.TypeFor[storelink.EventItem]()},
		{"CustomerBillingAddress", defs["CustomerBillingAddress"].(map[string]any), reflect.TypeFor[storelink.Address]()},
		{"DeliveryDetails", defs["DeliveryDetails"].(map[string]any), reflect.TypeFor[storelink.DeliveryDetails]()},
	} {
		schemaMatchesType(t, c.name, c.schema, c.typ)
	}
	noNull(t, root)
}

// schemaMatchesType fails when the schema's properties are not the JSON
// tags of typ, its required list not the fields without omitempty, or it
// admits properties of its own.
func schemaMatchesType(t *testing.T, name string, schema map[string]any, typ reflect.Type) {
	t.Helper()
	var fields, required []string
	for i := 0; i < typ.NumField(); i++ {
		tag, opts, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if tag == "-" || tag == "" {
			continue
		}
		fields = append(fields, tag)
		if !strings.Contains(opts, "omitempty") {
			required = append(required, tag)
		}
	}
	var props []string
	for k := range schema["properties"].(map[string]any) {
		props = append(props, k)
	}
	var req []string
	for _, r := range asSlice(schema["required"]) {
		req = append(req, r.(string))
	}
	sort.Strings(fields)
	sort.Strings(required)
	sort.Strings(props)
	sort.Strings(req)
	if !slices.Equal(fields, props) {
		t.Errorf("%s: Go fields %v, schema properties %v", name, fields, props)
	}
	if !slices.Equal(required, req) {
		t.Errorf("%s: Go fields without omitempty %v, schema required %v", name, required, req)
	}
	if schema["additionalProperties"] != false {
		t.Errorf("%s: additionalProperties must be false", name)
	}
}

// noNull fails when any type in the schema root admits null.
func noNull(t *testing.T, root map[string]any) {
	t.Helper()
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ty, ok := v["type"]; ok && (ty == "null" || slices.Contains(asSlice(ty), any("null"))) {
				t.Errorf("%s admits null", path)
			}
			for k, x := range v {
				walk(path+"/"+k, x)
			}
		case []any:
			for i, x := range v {
				walk(fmt.Sprintf("%s/%d", path, i), x)
			}
		}
	}
	walk("#", root)
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
