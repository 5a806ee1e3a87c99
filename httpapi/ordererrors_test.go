package httpapi_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"storelink"
)

// orderIn builds an order of two units in the given state.
func orderIn(a *api, state storelink.OrderState, number string) storelink.Order {
	a.t.Helper()
	body := newOrderBody(a.ClientID, number, "", ean1, ean1)
	var o storelink.Order
	switch state {
	case storelink.StateWarehouseFulfilled, storelink.StateWarehouseReturned:
		o = mustOrder(a, "POST", "/warehouse-orders", body, 201)
		if state == storelink.StateWarehouseReturned {
			o = mustOrder(a, "POST", "/orders/"+o.ID+"/warehouse-returns", `{"items":[{"item_id":"`+o.Items[0].ItemID+`"}]}`, 200)
		}
	default:
		o = mustOrder(a, "POST", "/orders", body, 201)
		switch state {
		case storelink.StateCancelled:
			o = mustOrder(a, "POST", "/orders/"+o.ID+"/cancel", "", 200)
		case storelink.StateFulfilled, storelink.StateReturned:
			o = mustOrder(a, "POST", "/orders/"+o.ID+"/fulfil", "", 200)
			if state == storelink.StateReturned {
				o = mustOrder(a, "POST", "/orders/"+o.ID+"/returns",
					`{"items":[{"item_id":"`+o.Items[0].ItemID+`","return_location":"STORE"}]}`, 200)
			}
		}
	}
	if o.State != state {
		a.t.Fatalf("built an order in %s, want %s", o.State, state)
	}
	return o
}

// returnable is an item that may still be returned, else the first.
func returnable(o storelink.Order) string {
	for _, it := range o.Items {
		if it.Status == storelink.ItemFulfilled {
			return it.ItemID
		}
	}
	return o.Items[0].ItemID
}

// TestOrderTransitionsOverHTTP calls every operation on an order in every
// state: the seed's table allows some, and every other answers 409 naming
// the current state and writes nothing.
func TestOrderTransitionsOverHTTP(t *testing.T) {
	a := newAPI(t, apiOptions{})
	putStock(a, "S1;"+ean1+";SKU-123;1000;19.99;Dept 3")
	ops := []struct {
		name string
		to   storelink.OrderState
		body func(o storelink.Order) string
	}{
		{"cancel", storelink.StateCancelled, func(storelink.Order) string { return `{}` }},
		{"fulfil", storelink.StateFulfilled, func(storelink.Order) string { return `{}` }},
		{"returns", storelink.StateReturned, func(o storelink.Order) string {
			return `{"items":[{"item_id":"` + returnable(o) + `","return_reason_code":1,"return_location":"STORE"}]}`
		}},
		{"warehouse-returns", storelink.StateWarehouseReturned, func(o storelink.Order) string {
			return `{"items":[{"item_id":"` + returnable(o) + `","return_reason_code":-1}]}`
		}},
	}
	allowed := map[string]bool{
		"assigned cancel": true, "assigned fulfil": true,
		"fulfilled returns": true, "returned returns": true,
		"marketplace_warehouse_fulfilled warehouse-returns": true,
		"marketplace_warehouse_returned warehouse-returns":  true,
	}
	n := 0
	for _, from := range storelink.OrderStates {
		for _, op := range ops {
			t.Run(string(from)+" "+op.name, func(t *testing.T) {
				n++
				o := orderIn(a, from, fmt.Sprint("T-", n))
				before, _ := orderEvents(a, o.ID)
				w := snapshot(a)
				resp, b := orderCall(a, "POST", "/orders/"+o.ID+"/"+op.name, op.body(o))
				after, _ := orderEvents(a, o.ID)
				if allowed[string(from)+" "+op.name] {
					var got storelink.Order
					if resp.StatusCode != 200 || json.Unmarshal(b, &got) != nil || got.State != op.to {
						t.Fatalf("%s → %s = %d %s, want 200 and state %s", from, op.to, resp.StatusCode, b, op.to)
					}
					if len(after) != len(before)+1 || after[len(after)-1].State != op.to {
						t.Fatalf("events went from %d to %d, want one more of state %s", len(before), len(after), op.to)
					}
					return
				}
				p := problem(t, resp, b, 409)
				if p.Type != "/problems/conflict" || !strings.Contains(p.Detail, "is "+string(from)) {
					t.Fatalf("409 detail %q does not name the current state %s", p.Detail, from)
				}
				if len(after) != len(before) {
					t.Fatalf("a refused transition wrote an event: %d → %d", len(before), len(after))
				}
				w.same(t, snapshot(a))
			})
		}
	}
}

// TestOrderBadInput: every bad request is a clear 4xx problem and writes
// nothing.
func TestOrderBadInput(t *testing.T) {
	a := newAPI(t, apiOptions{})
	putStock(a, "S1;"+ean1+";SKU-123;100;19.99;Dept 3")
	x := orderIn(a, storelink.StateAssigned, "BAD-1")
	r := orderIn(a, storelink.StateReturned, "BAD-2") // item 0 returned, item 1 fulfilled
	w := orderIn(a, storelink.StateWarehouseFulfilled, "BAD-3")
	x0, r0, r1, w0 := x.Items[0].ItemID, r.Items[0].ItemID, r.Items[1].ItemID, w.Items[0].ItemID
	c := a.ClientID
	withItem := func(item string) string {
		return `{"order_number":"N-1","client_id":"` + c + `","items":[` + item + `]}`
	}
	admin := map[string]string{"Authorization": "Bearer " + adminToken}
	key := map[string]string{"x-api-key": a.APIKey}
	for _, tc := range []struct {
		name, method, path, body string
		header                   map[string]string // nil: the admin token
		status                   int
		detail                   string // a part of the detail, when it matters
	}{
		{"unknown client", "POST", "/orders", newOrderBody("no-such-client", "N-1", "", ean1), nil, 422, "client_id"},
		{"unknown store", "POST", "/orders", newOrderBody(c, "N-1", "S9", ean1), nil, 422, "S9"},
		{"no store has stock", "POST", "/orders", newOrderBody(c, "N-1", "", eanNoStock), nil, 409, "stock"},
		{"more units than any store has", "POST", "/orders", newOrderBody(c, "N-1", "", slices.Repeat([]string{ean1}, 101)...), nil, 409, "stock"},
		{"invalid EAN", "POST", "/orders", newOrderBody(c, "N-1", "", "4006381333932"), nil, 422, "ean"},
		{"price with 3 decimals", "POST", "/orders", withItem(`{"ean":"` + ean1 + `","marketplace_article_number":"M","price":19.999}`), nil, 422, "price"},
		{"price 0", "POST", "/orders", withItem(`{"ean":"` + ean1 + `","marketplace_article_number":"M","price":0}`), nil, 422, "price"},
		{"negative price", "POST", "/orders", withItem(`{"ean":"` + ean1 + `","marketplace_article_number":"M","price":-1}`), nil, 422, "price"},
		{"no marketplace article number", "POST", "/orders", withItem(`{"ean":"` + ean1 + `"}`), nil, 422, "marketplace_article_number"},
		{"no items", "POST", "/orders", `{"order_number":"N-1","client_id":"` + c + `","items":[]}`, nil, 422, "items"},
		{"no order number", "POST", "/orders", newOrderBody(c, " ", "", ean1), nil, 422, "order_number"},
		{"billing address without city", "POST", "/orders", `{"order_number":"N-1","client_id":"` + c + `","items":` + items(ean1) +
			`,"customer_billing_address":{"first_name":"A","last_name":"B","address_line_1":"C","zip_code":"1","country_code":"DE"}}`, nil, 422, "city"},
		{"malformed JSON", "POST", "/orders", `{"order_number":`, nil, 400, ""},
		{"not JSON", "POST", "/orders", `order_number=1`, nil, 400, ""},
		{"empty body", "POST", "/orders", ``, nil, 400, ""},
		{"two JSON values", "POST", "/orders", newOrderBody(c, "N-1", "", ean1) + `{}`, nil, 400, ""},
		{"unknown field", "POST", "/orders", `{"order_number":"N-1","client_id":"` + c + `","items":` + items(ean1) + `,"colour":"red"}`, nil, 400, "colour"},
		{"unknown item field", "POST", "/orders", withItem(`{"ean":"` + ean1 + `","marketplace_article_number":"M","size":"L"}`), nil, 400, "size"},
		{"body of 10 MB", "POST", "/orders", `{"order_number":"` + strings.Repeat("x", 10<<20) + `"}`, nil, 413, ""},
		{"no admin token", "POST", "/orders", newOrderBody(c, "N-1", "", ean1), map[string]string{}, 401, ""},
		{"wrong admin token", "POST", "/orders", newOrderBody(c, "N-1", "", ean1), map[string]string{"Authorization": "Bearer nope"}, 401, ""},
		{"partner key on an operator call", "POST", "/orders", newOrderBody(c, "N-1", "", ean1), key, 401, ""},

		{"warehouse order with a store", "POST", "/warehouse-orders", newOrderBody(c, "N-1", "S1", ean1), nil, 422, "store_id"},
		{"warehouse order of an unknown client", "POST", "/warehouse-orders", newOrderBody("nope", "N-1", "", ean1), nil, 422, "client_id"},
		{"warehouse order without article data", "POST", "/warehouse-orders", newOrderBody(c, "N-1", "", eanNoStock), nil, 422, "article_number"},

		{"cancel an unknown item", "POST", "/orders/" + x.ID + "/cancel", `{"items":[{"item_id":"nope"}]}`, nil, 422, "nope"},
		{"cancellation reason FOO", "POST", "/orders/" + x.ID + "/cancel", `{"items":[{"item_id":"` + x0 + `","cancellation_reason":"FOO"}]}`, nil, 422, "FOO"},
		{"cancel an item twice", "POST", "/orders/" + x.ID + "/cancel", `{"items":[{"item_id":"` + x0 + `"},{"item_id":"` + x0 + `"}]}`, nil, 422, "twice"},
		{"cancel with an unknown field", "POST", "/orders/" + x.ID + "/cancel", `{"reason":"x"}`, nil, 400, "reason"},
		{"cancel with malformed JSON", "POST", "/orders/" + x.ID + "/cancel", `{`, nil, 400, ""},
		{"fulfil an unknown item", "POST", "/orders/" + x.ID + "/fulfil", `{"picked_item_ids":["nope"]}`, nil, 422, "nope"},
		{"fulfil cancelling an unknown item", "POST", "/orders/" + x.ID + "/fulfil", `{"cancelled_items":[{"item_id":"nope","cancellation_reason":"OUT_OF_STOCK"}]}`, nil, 422, "nope"},
		{"fulfil with reason FOO", "POST", "/orders/" + x.ID + "/fulfil", `{"cancelled_items":[{"item_id":"` + x0 + `","cancellation_reason":"FOO"}]}`, nil, 422, "FOO"},
		{"fulfil nothing picked", "POST", "/orders/" + x.ID + "/fulfil", `{"picked_item_ids":[]}`, nil, 422, "picked"},
		{"fulfil an item picked and cancelled", "POST", "/orders/" + x.ID + "/fulfil", `{"picked_item_ids":["` + x0 + `"],"cancelled_items":[{"item_id":"` + x0 + `"}]}`, nil, 422, x0},

		{"return an unknown item", "POST", "/orders/" + r.ID + "/returns", `{"items":[{"item_id":"nope","return_location":"STORE"}]}`, nil, 422, "nope"},
		{"return reason 11", "POST", "/orders/" + r.ID + "/returns", `{"items":[{"item_id":"` + r1 + `","return_reason_code":11,"return_location":"STORE"}]}`, nil, 422, "11"},
		{"return reason 0", "POST", "/orders/" + r.ID + "/returns", `{"items":[{"item_id":"` + r1 + `","return_reason_code":0,"return_location":"STORE"}]}`, nil, 422, "0"},
		{"return location HOME", "POST", "/orders/" + r.ID + "/returns", `{"items":[{"item_id":"` + r1 + `","return_location":"HOME"}]}`, nil, 422, "HOME"},
		{"return without location", "POST", "/orders/" + r.ID + "/returns", `{"items":[{"item_id":"` + r1 + `"}]}`, nil, 422, "return_location"},
		{"return an item again", "POST", "/orders/" + r.ID + "/returns", `{"items":[{"item_id":"` + r0 + `","return_location":"STORE"}]}`, nil, 422, "already"},
		{"return an item twice at once", "POST", "/orders/" + r.ID + "/returns", `{"items":[{"item_id":"` + r1 + `","return_location":"STORE"},{"item_id":"` + r1 + `","return_location":"STORE"}]}`, nil, 422, "twice"},
		{"return to an unknown store", "POST", "/orders/" + r.ID + "/returns", `{"store_id":"S9","items":[{"item_id":"` + r1 + `","return_location":"STORE"}]}`, nil, 422, "S9"},
		{"return nothing", "POST", "/orders/" + r.ID + "/returns", `{"items":[]}`, nil, 422, "items"},
		{"return with no body", "POST", "/orders/" + r.ID + "/returns", ``, nil, 400, ""},
		{"warehouse return of an unknown item", "POST", "/orders/" + w.ID + "/warehouse-returns", `{"items":[{"item_id":"nope"}]}`, nil, 422, "nope"},
		{"warehouse return reason 11", "POST", "/orders/" + w.ID + "/warehouse-returns", `{"items":[{"item_id":"` + w0 + `","return_reason_code":11}]}`, nil, 422, "11"},
		{"warehouse return with a location", "POST", "/orders/" + w.ID + "/warehouse-returns", `{"items":[{"item_id":"` + w0 + `","return_location":"STORE"}]}`, nil, 400, "return_location"},

		{"unknown order", "GET", "/orders/nope", ``, nil, 404, "nope"},
		{"events of an unknown order", "GET", "/orders/nope/events", ``, nil, 404, "nope"},
		{"cancel an unknown order", "POST", "/orders/nope/cancel", `{}`, nil, 404, "nope"},
		{"fulfil an unknown order", "POST", "/orders/nope/fulfil", `{}`, nil, 404, "nope"},
		{"return to an unknown order", "POST", "/orders/nope/returns", `{"items":[{"item_id":"` + r1 + `","return_location":"STORE"}]}`, nil, 404, "nope"},
		{"warehouse return to an unknown order", "POST", "/orders/nope/warehouse-returns", `{"items":[{"item_id":"` + w0 + `"}]}`, nil, 404, "nope"},
		{"list orders in state nope", "GET", "/orders?state=nope", ``, nil, 400, "nope"},
		{"list orders limit 0", "GET", "/orders?limit=0", ``, nil, 400, "limit"},
		{"events without token", "GET", "/orders/" + x.ID + "/events", ``, map[string]string{}, 401, ""},
		{"pull after a bad cursor", "GET", "/events/" + c + "?after=abc", ``, key, 400, "abc"},
		{"pull with limit 1001", "GET", "/events/" + c + "?limit=1001", ``, key, 400, "limit"},
		{"pull with a wrong key", "GET", "/events/" + c, ``, map[string]string{"x-api-key": "slk_wrong"}, 401, ""},
		{"pull with the admin token", "GET", "/events/" + c, ``, admin, 401, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(a)
			h := tc.header
			if h == nil {
				h = map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"}
			}
			resp, b := a.do(tc.method, tc.path, strings.NewReader(tc.body), h)
			p := problem(t, resp, b, tc.status)
			if !strings.Contains(p.Detail, tc.detail) {
				t.Errorf("detail %q does not mention %q", p.Detail, tc.detail)
			}
			if tc.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("a 401 without WWW-Authenticate")
			}
			before.same(t, snapshot(a))
		})
	}
}
