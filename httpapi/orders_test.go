package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"storelink"
)

// EANs with valid GS1 check digits; eanNoStock is in no store's feed.
const (
	ean1       = "4006381333931"
	ean2       = "4006381333948"
	ean3       = "4006381333955"
	eanNoStock = "5901234123457"
)

// putStock uploads a feed of rows "store;ean;article_number;quantity;price;location"
// with the demo client's key and waits until it is applied cleanly.
func putStock(a *api, rows ...string) {
	a.t.Helper()
	body := "store;ean;article_number;quantity;price;store_article_location\n" + strings.Join(rows, "\n") + "\n"
	resp, b := a.upload("stock.csv", []byte(body), nil)
	var up struct {
		UploadID string `json:"upload_id"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &up) != nil {
		a.t.Fatalf("upload = %d %s", resp.StatusCode, b)
	}
	if u := a.waitUpload(up.UploadID); u.Status != storelink.UploadApplied || u.RowsRejected != 0 {
		a.t.Fatalf("upload = %+v", u)
	}
}

// orderCall sends an operator call with a JSON body.
func orderCall(a *api, method, path, body string) (*http.Response, []byte) {
	a.t.Helper()
	return a.do(method, path, strings.NewReader(body),
		map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"})
}

// mustOrder sends an order call that must answer want with an order.
func mustOrder(a *api, method, path, body string, want int) storelink.Order {
	a.t.Helper()
	resp, b := orderCall(a, method, path, body)
	if resp.StatusCode != want {
		a.t.Fatalf("%s %s %s = %d %s, want %d", method, path, body, resp.StatusCode, b, want)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		a.t.Fatalf("%s %s: Content-Type = %q", method, path, ct)
	}
	var o storelink.Order
	if err := json.Unmarshal(b, &o); err != nil {
		a.t.Fatalf("%s %s: %v: %s", method, path, err, b)
	}
	return o
}

// items makes the items of a new order: one unit per EAN listed.
func items(eans ...string) string {
	var out []string
	for i, e := range eans {
		out = append(out, fmt.Sprintf(`{"ean":%q,"marketplace_article_number":"MP-ART-%d"}`, e, i+1))
	}
	return "[" + strings.Join(out, ",") + "]"
}

// newOrderBody is a POST /orders body; store may be empty.
func newOrderBody(clientID, number, store string, eans ...string) string {
	s := ""
	if store != "" {
		s = fmt.Sprintf(`"store_id":%q,`, store)
	}
	return fmt.Sprintf(`{"order_number":%q,"client_id":%q,%s"items":%s}`, number, clientID, s, items(eans...))
}

// eventPage is the answer of both event lists.
type eventPage struct {
	Events     []json.RawMessage `json:"events"`
	NextCursor string            `json:"next_cursor"`
}

// decodeEvent reads an event strictly: a field that is not the seed's fails.
func decodeEvent(t *testing.T, raw []byte) storelink.Event {
	t.Helper()
	var e storelink.Event
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("event %s: %v", raw, err)
	}
	return e
}

// orderEvents lists an order's events with their raw JSON.
func orderEvents(a *api, orderID string) ([]storelink.Event, []json.RawMessage) {
	a.t.Helper()
	var p eventPage
	a.admin("GET", "/orders/"+orderID+"/events", "", 200, &p)
	out := make([]storelink.Event, len(p.Events))
	for i, raw := range p.Events {
		out[i] = decodeEvent(a.t, raw)
	}
	return out, p.Events
}

// pullEvents pages through GET /events/{client_id} with the client's key.
func pullEvents(a *api, limit int) []json.RawMessage {
	a.t.Helper()
	var all []json.RawMessage
	after := ""
	for range 1000 {
		resp, b := a.do("GET", fmt.Sprintf("/events/%s?limit=%d&after=%s", a.ClientID, limit, after), nil,
			map[string]string{"x-api-key": a.APIKey})
		var p eventPage
		if resp.StatusCode != 200 || json.Unmarshal(b, &p) != nil {
			a.t.Fatalf("GET /events = %d %s", resp.StatusCode, b)
		}
		if len(p.Events) > limit {
			a.t.Fatalf("GET /events?limit=%d gave %d events", limit, len(p.Events))
		}
		if len(p.Events) == 0 {
			if p.NextCursor != after {
				a.t.Fatalf("an empty page moved the cursor from %q to %q", after, p.NextCursor)
			}
			return all
		}
		all = append(all, p.Events...)
		after = p.NextCursor
	}
	a.t.Fatal("GET /events never reached an empty page")
	return nil
}

// written is what a bad request must leave as it was: every order and
// every event of the demo client.
type written struct {
	orders, events int
	ordersJSON     string
}

func snapshot(a *api) written {
	a.t.Helper()
	var l struct {
		Orders []json.RawMessage `json:"orders"`
	}
	b := a.admin("GET", "/orders?limit=500", "", 200, &l)
	return written{orders: len(l.Orders), events: len(pullEvents(a, 1000)), ordersJSON: string(b)}
}

func (w written) same(t *testing.T, after written) {
	t.Helper()
	if after.orders != w.orders || after.events != w.events {
		t.Fatalf("orders %d → %d, events %d → %d: something was written", w.orders, after.orders, w.events, after.events)
	}
	if after.ordersJSON != w.ordersJSON {
		t.Fatalf("orders changed:\n%s\n%s", w.ordersJSON, after.ordersJSON)
	}
}

// stockRow reads the stock in force of one store and EAN.
func stockRow(a *api, store, ean string) storelink.Stock {
	a.t.Helper()
	resp, b := a.do("GET", "/stock/"+a.ClientID+"/stock?store="+store+"&ean="+ean, nil, map[string]string{"x-api-key": a.APIKey})
	var l struct {
		Stock []storelink.Stock `json:"stock"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &l) != nil || len(l.Stock) != 1 {
		a.t.Fatalf("stock of %s/%s = %d %s", store, ean, resp.StatusCode, b)
	}
	return l.Stock[0]
}

func TestOrderLifecycle(t *testing.T) {
	a := newAPI(t, apiOptions{})
	putStock(a, "S1;"+ean1+";SKU-123;5;19.99;Dept 3", "S2;"+ean1+";SKU-999;1;17.50;Back")

	body := `{"order_number":"MP-1001","client_id":"` + a.ClientID + `","items":` + items(ean1, ean1, ean1) + `,
		"customer_billing_address":{"first_name":"Erika","last_name":"Mustermann","address_line_1":"Hauptstr. 1",
		"zip_code":"10115","city":"Berlin","country_code":"DE"},"delivery_details":{"delivery_carrier_name":"DHL"}}`
	resp, b := orderCall(a, "POST", "/orders", body)
	if resp.StatusCode != 201 {
		t.Fatalf("POST /orders = %d %s", resp.StatusCode, b)
	}
	var o storelink.Order
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	if o.StoreID != "S1" || o.State != storelink.StateAssigned || o.OrderNumber != "MP-1001" || o.ClientID != a.ClientID ||
		len(o.Items) != 3 || o.ID == "" {
		t.Fatalf("order = %s", b)
	}
	ids := map[string]bool{}
	for _, it := range o.Items {
		ids[it.ItemID] = true
		if it.EAN != ean1 || it.ArticleNumber != "SKU-123" || it.ArticleLocation != "Dept 3" || it.Price != 1999 ||
			it.Currency != "EUR" || it.Status != storelink.ItemAssigned || it.MarketplaceArticleNumber == "" {
			t.Fatalf("item = %+v, want the S1 stock row's article number, location and price in EUR", it)
		}
	}
	if len(ids) != 3 {
		t.Fatalf("item ids are not distinct: %s", b)
	}
	if _, got := a.do("GET", "/orders/"+o.ID, nil, map[string]string{"Authorization": "Bearer " + adminToken}); !bytes.Equal(got, b) {
		t.Fatalf("GET /orders/{id} differs from the POST answer:\n%s\n%s", got, b)
	}
	if s := stockRow(a, "S1", ean1); s.Reserved != 3 || s.Available != 2 {
		t.Fatalf("S1 after the order: reserved %d available %d, want 3 and 2", s.Reserved, s.Available)
	}

	a1, a2, a3 := o.Items[0].ItemID, o.Items[1].ItemID, o.Items[2].ItemID
	f := mustOrder(a, "POST", "/orders/"+o.ID+"/fulfil", `{"picked_item_ids":["`+a1+`","`+a2+`"],
		"cancelled_items":[{"item_id":"`+a3+`","cancellation_reason":"OUT_OF_STOCK"}],
		"delivery_details":{"delivery_tracking_number":"TRK-1"}}`, 200)
	if f.State != storelink.StateFulfilled || f.Items[0].Status != storelink.ItemFulfilled ||
		f.Items[2].Status != storelink.ItemCancelled || f.Items[2].CancellationReason != storelink.ReasonOutOfStock ||
		f.DeliveryDetails == nil || f.DeliveryDetails.DeliveryCarrierName != "DHL" || f.DeliveryDetails.DeliveryTrackingNumber != "TRK-1" {
		t.Fatalf("fulfilled = %+v", f)
	}
	// The cancelled unit is released; the fulfilled ones stay reserved
	// until the partner's next feed row for the article.
	if s := stockRow(a, "S1", ean1); s.Reserved != 2 || s.Available != 3 {
		t.Fatalf("S1 after fulfil: reserved %d available %d, want 2 and 3", s.Reserved, s.Available)
	}

	r := mustOrder(a, "POST", "/orders/"+o.ID+"/returns", `{"items":[{"item_id":"`+a1+`","return_reason_code":2,"return_location":"STORE"}]}`, 200)
	if r.State != storelink.StateReturned || r.Items[0].Status != storelink.ItemReturned || r.Items[1].Status != storelink.ItemFulfilled {
		t.Fatalf("returned = %+v", r)
	}
	// An item returned to the marketplace is recorded under the fulfilling
	// store, S1: a store_id of S2 contradicts it, and the answer says so.
	resp, b = a.do("POST", "/orders/"+o.ID+"/returns", strings.NewReader(`{"store_id":"S2","items":[{"item_id":"`+a2+`","return_location":"MARKETPLACE"}]}`),
		jsonHeader("x", "Authorization", "Bearer "+adminToken))
	if p := problem(t, resp, b, 422); p.Type != "/problems/unprocessable" || !strings.Contains(p.Detail, "item "+a2) ||
		!strings.Contains(p.Detail, "return_location MARKETPLACE") || !strings.Contains(p.Detail, `store_id is "S2"`) ||
		!strings.Contains(p.Detail, `fulfilled the order, "S1"`) {
		t.Fatalf("a return to the marketplace with store_id S2 = %+v; want a 422 naming the item, MARKETPLACE, S2 and S1", p)
	}
	r = mustOrder(a, "POST", "/orders/"+o.ID+"/returns", `{"items":[{"item_id":"`+a2+`","return_location":"MARKETPLACE"}]}`, 200)
	if r.State != storelink.StateReturned || r.Items[1].Status != storelink.ItemReturned {
		t.Fatalf("returned again = %+v", r)
	}

	events, raws := orderEvents(a, o.ID)
	var states []storelink.OrderState
	for _, e := range events {
		states = append(states, e.State)
		if e.OrderID != o.ID || e.OrderNumber != "MP-1001" || e.StoreID != "S1" || e.CustomerBillingAddress == nil {
			t.Errorf("event = %s", raws[len(states)-1])
		}
	}
	if fmt.Sprint(states) != "[assigned fulfilled returned returned]" {
		t.Fatalf("events = %v", states)
	}
	if fe := events[1]; len(fe.Items) != 2 || len(fe.CancelledItems) != 1 || fe.CancelledItems[0].ItemID != a3 ||
		fe.CancelledItems[0].CancellationReason != storelink.ReasonOutOfStock || fe.DeliveryDetails.DeliveryTrackingNumber != "TRK-1" {
		t.Fatalf("fulfilled event = %s", raws[1])
	}
	if re := events[2]; len(re.Items) != 1 || re.Items[0].ItemID != a1 || re.Items[0].ReturnReasonCode == nil ||
		*re.Items[0].ReturnReasonCode != 2 || re.Items[0].ReturnLocation != storelink.ReturnToStore {
		t.Fatalf("first returned event = %s", raws[2])
	}
	if re := events[3]; len(re.Items) != 1 || re.Items[0].ItemID != a2 || re.Items[0].ReturnReasonCode != nil ||
		re.Items[0].ReturnLocation != storelink.ReturnToMarketplace {
		t.Fatalf("second returned event = %s", raws[3])
	}

	// The partner pulls the same events, one per page.
	pulled := pullEvents(a, 1)
	if len(pulled) != len(raws) {
		t.Fatalf("pulled %d events, want %d", len(pulled), len(raws))
	}
	for i := range pulled {
		if !bytes.Equal(pulled[i], raws[i]) {
			t.Errorf("pulled event %d = %s, want %s", i, pulled[i], raws[i])
		}
	}
	// A cursor past the newest event (the consumer's, after the database
	// was restored from an older backup) is a 409 naming the newest; the
	// newest itself is an empty page.
	var all eventPage
	resp, b = a.do("GET", "/events/"+a.ClientID+"?limit=1000", nil, map[string]string{"x-api-key": a.APIKey})
	if resp.StatusCode != 200 || json.Unmarshal(b, &all) != nil || all.NextCursor == "" {
		t.Fatalf("GET /events = %d %s", resp.StatusCode, b)
	}
	newest := all.NextCursor
	n, _ := strconv.Atoi(newest)
	resp, b = a.do("GET", "/events/"+a.ClientID+"?after="+strconv.Itoa(n+7), nil, map[string]string{"x-api-key": a.APIKey})
	if p := problem(t, resp, b, 409); p.Type != "/problems/cursor_ahead" || p.NewestCursor != newest || !strings.Contains(p.Detail, "after="+newest) {
		t.Fatalf("after a cursor past the newest: %+v, want cursor_ahead naming %s", p, newest)
	}
	resp, b = a.do("GET", "/events/"+a.ClientID+"?after="+newest, nil, map[string]string{"x-api-key": a.APIKey})
	if resp.StatusCode != 200 || string(b) != `{"events":[],"next_cursor":"`+newest+`"}`+"\n" {
		t.Fatalf("after the newest cursor = %d %s, want an empty page", resp.StatusCode, b)
	}
	resp, b = a.do("GET", "/problems/cursor_ahead", nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "newest_cursor") {
		t.Fatalf("GET /problems/cursor_ahead = %d %s", resp.StatusCode, b)
	}

	// The partner's client for another country: its key here is 403.
	var other storelink.NewClient
	a.admin("POST", "/admin/partners/"+a.PartnerID+"/clients", `{"country_code":"FR","currency":"EUR"}`, 201, &other)
	resp, b = a.do("GET", "/events/"+a.ClientID, nil, map[string]string{"x-api-key": other.APIKey})
	problem(t, resp, b, 403)
	resp, b = a.do("GET", "/events/"+a.ClientID, nil, nil)
	problem(t, resp, b, 401)
	resp, b = a.do("GET", "/events/"+other.ID, nil, map[string]string{"x-api-key": other.APIKey})
	if resp.StatusCode != 200 || !bytes.Equal(b, []byte("{\"events\":[]}\n")) {
		t.Fatalf("another client's events = %d %s, want an empty list", resp.StatusCode, b)
	}

	// A feed row for the article after the sale ends the reservation.
	putStock(a, "S1;"+ean1+";SKU-123;3;19.99;Dept 3")
	if s := stockRow(a, "S1", ean1); s.Reserved != 0 || s.Available != 3 {
		t.Fatalf("S1 after the next feed: reserved %d available %d, want 0 and 3", s.Reserved, s.Available)
	}
}

// TestOrderRouting: without store_id the order goes to the store whose
// stock in force covers it, most stock first, then the lowest store id.
func TestOrderRouting(t *testing.T) {
	a := newAPI(t, apiOptions{})
	putStock(a,
		"S1;"+ean1+";A1;5;10;", "S2;"+ean1+";A1;1;10;",
		"S1;"+ean2+";A2;1;10;", "S2;"+ean2+";A2;5;10;",
		"S1;"+ean3+";A3;3;10;", "S2;"+ean3+";A3;3;10;")
	for i, c := range []struct {
		eans []string
		want string
	}{
		{[]string{ean1}, "S1"},
		{[]string{ean2}, "S2"},
		{[]string{ean3}, "S1"},             // a tie: the lowest store id
		{[]string{ean2, ean2, ean2}, "S2"}, // S1 cannot cover it
		// Stock in force counts the units now reserved: ean1 S1 4, S2 1;
		// ean2 S1 1, S2 1; ean3 S1 2, S2 3.
		{[]string{ean1, ean2}, "S1"}, // 5 units against 2
		{[]string{ean3}, "S2"},
	} {
		o := mustOrder(a, "POST", "/orders", newOrderBody(a.ClientID, fmt.Sprint("R-", i), "", c.eans...), 201)
		if o.StoreID != c.want {
			t.Errorf("order %d of %v went to %s, want %s", i, c.eans, o.StoreID, c.want)
		}
	}
}

// TestOrderCancelReassign: items cancelled for a reason of the store's
// stock go to a new order, with the same order number, at another store.
func TestOrderCancelReassign(t *testing.T) {
	a := newAPI(t, apiOptions{})
	putStock(a, "S1;"+ean1+";SKU-S1;1;19.99;Dept 3", "S2;"+ean1+";SKU-S2;1;18.50;Back", "S1;"+ean2+";SKU-2;9;5;")
	o := mustOrder(a, "POST", "/orders", newOrderBody(a.ClientID, "MP-2001", "S1", ean1), 201)
	if o.StoreID != "S1" || o.Items[0].ArticleNumber != "SKU-S1" {
		t.Fatalf("order = %+v", o)
	}
	c := mustOrder(a, "POST", "/orders/"+o.ID+"/cancel",
		`{"items":[{"item_id":"`+o.Items[0].ItemID+`","cancellation_reason":"OUT_OF_STOCK"}],"reassign":true}`, 200)
	if c.State != storelink.StateCancelled || c.ReassignedOrderID == "" || c.ReassignedOrderID == o.ID {
		t.Fatalf("cancelled = %+v, want reassigned_order_id", c)
	}
	n := mustOrder(a, "GET", "/orders/"+c.ReassignedOrderID, "", 200)
	if n.OrderNumber != "MP-2001" || n.StoreID != "S2" || n.State != storelink.StateAssigned || n.ReassignedFrom != o.ID ||
		len(n.Items) != 1 || n.Items[0].ItemID == o.Items[0].ItemID || n.Items[0].EAN != ean1 ||
		n.Items[0].ArticleNumber != "SKU-S2" || n.Items[0].ArticleLocation != "Back" || n.Items[0].Price != 1999 {
		t.Fatalf("reassigned order = %+v, want MP-2001 at S2 with S2's article data and the same price", n)
	}
	if got := mustOrder(a, "GET", "/orders/"+o.ID, "", 200); got.ReassignedOrderID != n.ID {
		t.Fatalf("the cancelled order does not name the new one: %+v", got)
	}
	oe, _ := orderEvents(a, o.ID)
	if len(oe) != 2 || oe[1].State != storelink.StateCancelled || oe[1].StoreID != "S1" ||
		oe[1].Items[0].CancellationReason != storelink.ReasonOutOfStock {
		t.Fatalf("events of the cancelled order = %+v", oe)
	}
	ne, _ := orderEvents(a, n.ID)
	if len(ne) != 1 || ne[0].State != storelink.StateAssigned || ne[0].StoreID != "S2" || ne[0].OrderNumber != "MP-2001" {
		t.Fatalf("events of the new order = %+v", ne)
	}
	if s1, s2 := stockRow(a, "S1", ean1), stockRow(a, "S2", ean1); s1.Reserved != 0 || s2.Reserved != 1 {
		t.Fatalf("reserved S1 %d S2 %d, want 0 and 1", s1.Reserved, s2.Reserved)
	}
	var l struct{ Orders []storelink.Order }
	a.admin("GET", "/orders?order_number=MP-2001", "", 200, &l)
	if len(l.Orders) != 2 || l.Orders[0].ID != n.ID || l.Orders[1].ID != o.ID {
		t.Fatalf("orders numbered MP-2001 = %+v, want the new one, then the cancelled one", l.Orders)
	}

	// No reassignment for a reason that is not about the store's stock,
	// nor when no other store has the article: the field is then absent.
	for _, tc := range []struct{ name, ean, reason string }{
		{"unknown reason", ean1, ""},
		{"no other store", ean2, `,"cancellation_reason":"ITEM_BROKEN"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := mustOrder(a, "POST", "/orders", newOrderBody(a.ClientID, "MP-"+tc.name, "S1", tc.ean), 201)
			resp, b := orderCall(a, "POST", "/orders/"+o.ID+"/cancel",
				`{"items":[{"item_id":"`+o.Items[0].ItemID+`"`+tc.reason+`}],"reassign":true}`)
			if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"state":"cancelled"`)) || bytes.Contains(b, []byte("reassigned_order_id")) {
				t.Fatalf("cancel = %d %s, want cancelled without reassigned_order_id", resp.StatusCode, b)
			}
		})
	}
}

// A new order, store or warehouse, answers 201 with Location, its
// address, where GET finds it; its replay gives the same address.
func TestCreatedOrderLocation(t *testing.T) {
	t.Parallel()
	a := newAPI(t, apiOptions{})
	putStock(a, "S1;"+ean1+";SKU-123;5;19.99;Dept 3")
	for _, path := range []string{"/orders", "/warehouse-orders"} {
		body := newOrderBody(a.ClientID, "LOC"+path, "", ean1)
		key := ptr("loc" + path)
		resp, b := keyCall(a, path, body, key)
		o := wantCreated(t, resp, b, false)
		var got storelink.Order
		a.admin("GET", resp.Header.Get("Location"), "", 200, &got)
		if got.ID != o.ID || got.OrderNumber != o.OrderNumber {
			t.Errorf("GET %s = %s, want the order made", resp.Header.Get("Location"), dump(got))
		}
		resp, b = keyCall(a, path, body, key)
		if again := wantCreated(t, resp, b, true); again.ID != o.ID {
			t.Errorf("the replay names order %s, want %s", again.ID, o.ID)
		}
	}
}

// TestWarehouseOrder: the marketplace warehouse's orders have no store, in
// the order nor in its events, and hold no store's stock.
func TestWarehouseOrder(t *testing.T) {
	a := newAPI(t, apiOptions{})
	putStock(a, "S2;"+ean1+";SKU-123;5;19.99;Dept 3")
	o := mustOrder(a, "POST", "/warehouse-orders", `{"order_number":"WH-1","client_id":"`+a.ClientID+`","items":[
		{"ean":"`+ean1+`","marketplace_article_number":"M1"},
		{"ean":"`+eanNoStock+`","marketplace_article_number":"M2","article_number":"OWN-1","price":7.5}]}`, 201)
	if o.State != storelink.StateWarehouseFulfilled || o.StoreID != "" || len(o.Items) != 2 ||
		o.Items[0].ArticleNumber != "SKU-123" || o.Items[0].Price != 1999 || o.Items[1].ArticleNumber != "OWN-1" ||
		o.Items[1].Price != 750 || o.Items[0].Status != storelink.ItemFulfilled ||
		o.Items[0].ArticleLocation != "Dept 3" || o.Items[1].ArticleLocation != "" {
		t.Fatalf("warehouse order = %+v; want the article location of S2's row on the first item only", o)
	}
	r := mustOrder(a, "POST", "/orders/"+o.ID+"/warehouse-returns", `{"items":[{"item_id":"`+o.Items[1].ItemID+`","return_reason_code":8}]}`, 200)
	if r.State != storelink.StateWarehouseReturned || r.Items[1].Status != storelink.ItemReturned {
		t.Fatalf("returned = %+v", r)
	}
	events, raws := orderEvents(a, o.ID)
	if len(events) != 2 || events[0].State != storelink.StateWarehouseFulfilled || events[1].State != storelink.StateWarehouseReturned {
		t.Fatalf("events = %+v", events)
	}
	for _, raw := range raws {
		if bytes.Contains(raw, []byte("store_id")) {
			t.Errorf("a warehouse event names a store: %s", raw)
		}
	}
	if !bytes.Contains(raws[0], []byte(`"marketplace_article_number":"M1","article_location":"Dept 3"`)) ||
		bytes.Count(raws[0], []byte(`"article_location"`)) != 1 {
		t.Errorf("the warehouse event's items, as JSON: %s; want article_location Dept 3 on the first item only", raws[0])
	}
	if it := events[1].Items; len(it) != 1 || it[0].ReturnReasonCode == nil || *it[0].ReturnReasonCode != 8 || it[0].ReturnLocation != "" {
		t.Fatalf("warehouse return event = %s", raws[1])
	}
	if s := stockRow(a, "S2", ean1); s.Reserved != 0 {
		t.Fatalf("a warehouse order reserved %d units of S2", s.Reserved)
	}
}

// TestOrderEventPrices: prices in events are the exact decimals, as the
// partner's JSON parser reads them.
func TestOrderEventPrices(t *testing.T) {
	a := newAPI(t, apiOptions{})
	putStock(a, "S1;"+ean1+";SKU-123;5;19.99;Dept 3", "S1;"+ean2+";SKU-2;5;0.1;", "S1;"+ean3+";SKU-3;5;1000000;")
	o := mustOrder(a, "POST", "/orders", `{"order_number":"P-1","client_id":"`+a.ClientID+`","items":[
		{"ean":"`+ean1+`","marketplace_article_number":"M1"},
		{"ean":"`+ean2+`","marketplace_article_number":"M2"},
		{"ean":"`+ean3+`","marketplace_article_number":"M3"},
		{"ean":"`+ean1+`","marketplace_article_number":"M4","price":0.3},
		{"ean":"`+ean1+`","marketplace_article_number":"M5","price":"20.00"}]}`, 201)
	_, raws := orderEvents(a, o.ID)
	pulled := pullEvents(a, 100)
	if len(raws) != 1 || len(pulled) != 1 {
		t.Fatalf("events %d, pulled %d, want 1", len(raws), len(pulled))
	}
	for _, raw := range []json.RawMessage{raws[0], pulled[0]} {
		for _, want := range []string{`"price":19.99,`, `"price":0.1,`, `"price":1000000,`, `"price":0.3,`, `"price":20,`} {
			if !bytes.Contains(raw, []byte(want)) {
				t.Errorf("event lacks %s: %s", want, raw)
			}
		}
		if bytes.Contains(raw, []byte("999999")) || bytes.Contains(raw, []byte("000001")) || bytes.Contains(raw, []byte("e+")) {
			t.Errorf("event holds a float artefact: %s", raw)
		}
	}
	if _, b := a.do("GET", "/orders/"+o.ID, nil, map[string]string{"Authorization": "Bearer " + adminToken}); !bytes.Contains(b, []byte(`"price":19.99,`)) {
		t.Errorf("order answer lacks \"price\":19.99: %s", b)
	}
}

// TestOpenAPIOrderEnums checks the spec's order enums against the code's
// tables, in the schemas the requests use and in the event schema.
func TestOpenAPIOrderEnums(t *testing.T) {
	spec, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(spec)
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, s := range storelink.OrderStates {
		states = append(states, string(s))
	}
	reasons := []string{string(storelink.ReasonItemBroken), string(storelink.ReasonItemMissing),
		string(storelink.ReasonOutOfStock), string(storelink.ReasonUnknownReason)}
	var codes []string
	for c := range storelink.ReturnReasons {
		codes = append(codes, fmt.Sprint(c))
	}
	event := doc.Components.Schemas["OrderEvent"].Value
	item := doc.Components.Schemas["OrderEventItem"].Value
	for _, c := range []struct {
		name   string
		schema *openapi3.Schema
		want   []string
	}{
		{"OrderState", doc.Components.Schemas["OrderState"].Value, states},
		{"OrderEvent.state", event.Properties["state"].Value, states},
		{"CancellationReason", doc.Components.Schemas["CancellationReason"].Value, reasons},
		{"OrderEventItem.cancellation_reason", item.Properties["cancellation_reason"].Value, reasons},
		{"ReturnReasonCode", doc.Components.Schemas["ReturnReasonCode"].Value, codes},
		{"OrderEventItem.return_reason_code", item.Properties["return_reason_code"].Value, codes},
		{"ReturnLocation", doc.Components.Schemas["ReturnLocation"].Value, []string{"STORE", "MARKETPLACE"}},
	} {
		var got []string
		for _, v := range c.schema.Enum {
			got = append(got, fmt.Sprint(v))
		}
		slices.Sort(got)
		slices.Sort(c.want)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s enum = %v, want %v", c.name, got, c.want)
		}
	}
}
