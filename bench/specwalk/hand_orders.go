package main

import (
	"encoding/json"
	"fmt"
)

// The orders' bodies: three items at store S1 (two of one article), one
// routed by stock, one for the warehouse.
const (
	orderBody = `{"order_number":"WALK-1","client_id":"<client>","store_id":"S1","items":[` +
		`{"ean":"4006381333931","marketplace_article_number":"MP-1"},` +
		`{"ean":"4006381333931","marketplace_article_number":"MP-1","price":18.5},` +
		`{"ean":"4006381333948","marketplace_article_number":"MP-2","article_number":"SKU-2"}],` +
		`"customer_billing_address":{"first_name":"Erika","last_name":"Mustermann","address_line_1":"Hauptstr. 1","zip_code":"10115","city":"Berlin","country_code":"DE"},` +
		`"delivery_details":{"delivery_carrier_name":"DHL"}}`
	routedBody    = `{"order_number":"WALK-2","client_id":"<client>","items":[{"ean":"4006381333948","marketplace_article_number":"MP-2"}]}`
	warehouseBody = `{"order_number":"WALK-W1","client_id":"<client>","items":[{"ean":"4006381333931","marketplace_article_number":"MP-1"}]}`
)

// savingItems keeps the ids of the answer's items as <prefix1>, <prefix2>…
func (s step) savingItems(prefix string) step {
	s.after = func(w *walker, a *answer) error {
		var o struct {
			Items []struct {
				ID string `json:"item_id"`
			} `json:"items"`
		}
		if err := json.Unmarshal(a.body, &o); err != nil || len(o.Items) == 0 {
			return fmt.Errorf("the order's items: %v %s", err, short(a.body, 200))
		}
		for i, it := range o.Items {
			w.vars[fmt.Sprintf("%s%d", prefix, i+1)] = it.ID
		}
		return nil
	}
	return s
}

// orderSteps take orders through their states, and pull their events.
func orderSteps() []step {
	return []step{
		ok("createOrder", "an order at a store", 201, authAdmin, "/orders", orderBody).withHeader("Idempotency-Key", "walk-order-1").
			saving("order", "order_id").savingItems("item"),
		ok("createOrder", "the same again, replayed", 201, authAdmin, "/orders", orderBody).withHeader("Idempotency-Key", "walk-order-1"),
		ok("createOrder", "an order routed by stock", 201, authAdmin, "/orders", routedBody).saving("routed", "order_id"),
		bad("createOrder", "the same key with another body", 422, authAdmin, "/orders", routedBody).withHeader("Idempotency-Key", "walk-order-1"),
		bad("createOrder", "no items", 422, authAdmin, "/orders", `{"order_number":"WALK-3","client_id":"<client>"}`),
		bad("createOrder", "an unknown client", 422, authAdmin, "/orders", `{"order_number":"WALK-3","client_id":"`+unknownID+`","items":[{"ean":"4006381333931","marketplace_article_number":"MP-1"}]}`),
		bad("createOrder", "an EAN that is none", 422, authAdmin, "/orders", `{"order_number":"WALK-3","client_id":"<client>","items":[{"ean":"4006381333932","marketplace_article_number":"MP-1"}]}`),
		bad("createOrder", "a store that is not the client's", 422, authAdmin, "/orders", `{"order_number":"WALK-3","client_id":"<client>","store_id":"S9","items":[{"ean":"4006381333931","marketplace_article_number":"MP-1"}]}`),
		bad("createOrder", "an article no store has", 409, authAdmin, "/orders", `{"order_number":"WALK-3","client_id":"<client>","items":[{"ean":"4006381333955","marketplace_article_number":"MP-3"}]}`),
		ok("listOrders", "the client's orders", 200, authAdmin, "/orders?client_id=<client>", ""),
		ok("listOrders", "by number and state", 200, authAdmin, "/orders?order_number=WALK-1&state=assigned&limit=5", ""),
		bad("listOrders", "a state that is none", 400, authAdmin, "/orders?state=shipped", ""),
		bad("listOrders", "a limit out of range", 400, authAdmin, "/orders?limit=0", ""),
		ok("getOrder", "the order", 200, authAdmin, "/orders/<order>", ""),
		bad("getOrder", "an unknown order", 404, authAdmin, "/orders/"+unknownID, ""),
		ok("listOrderEvents", "the order's events", 200, authAdmin, "/orders/<order>/events", ""),
		bad("listOrderEvents", "an unknown order", 404, authAdmin, "/orders/"+unknownID+"/events", ""),

		bad("cancelOrder", "an item the order does not have", 422, authAdmin, "/orders/<routed>/cancel", `{"items":[{"item_id":"`+unknownID+`"}]}`),
		bad("cancelOrder", "a reason outside the table", 422, authAdmin, "/orders/<routed>/cancel", `{"items":[{"item_id":"`+unknownID+`","cancellation_reason":"BORED"}]}`),
		ok("cancelOrder", "the routed order", 200, authAdmin, "/orders/<routed>/cancel", `{}`),
		bad("cancelOrder", "a cancelled order", 409, authAdmin, "/orders/<routed>/cancel", `{}`),
		bad("cancelOrder", "an unknown order", 404, authAdmin, "/orders/"+unknownID+"/cancel", `{}`),
		bad("fulfilOrder", "an item the order does not have", 422, authAdmin, "/orders/<order>/fulfil", `{"picked_item_ids":["`+unknownID+`"]}`),
		bad("fulfilOrder", "a cancelled order", 409, authAdmin, "/orders/<routed>/fulfil", `{}`),
		ok("fulfilOrder", "two items picked, one broken", 200, authAdmin, "/orders/<order>/fulfil",
			`{"picked_item_ids":["<item1>","<item2>"],"cancelled_items":[{"item_id":"<item3>","cancellation_reason":"ITEM_BROKEN"}],"delivery_details":{"delivery_tracking_number":"T-1"}}`),
		bad("fulfilOrder", "a fulfilled order", 409, authAdmin, "/orders/<order>/fulfil", `{}`),
		bad("fulfilOrder", "an unknown order", 404, authAdmin, "/orders/"+unknownID+"/fulfil", `{}`),
		bad("returnItems", "a cancelled order", 409, authAdmin, "/orders/<routed>/returns", `{"items":[{"item_id":"<item1>","return_location":"STORE"}]}`),
		bad("returnItems", "a return location outside the table", 422, authAdmin, "/orders/<order>/returns", `{"items":[{"item_id":"<item1>","return_location":"SHELF"}]}`),
		bad("returnItems", "a cancelled item", 422, authAdmin, "/orders/<order>/returns", `{"items":[{"item_id":"<item3>","return_location":"STORE"}]}`),
		bad("returnItems", "no items", 422, authAdmin, "/orders/<order>/returns", `{"store_id":"S1"}`),
		ok("returnItems", "an item back at the store", 200, authAdmin, "/orders/<order>/returns", `{"items":[{"item_id":"<item1>","return_location":"STORE","return_reason_code":2}],"delivery_details":{"return_tracking_number":"R-1"}}`),
		bad("returnItems", "to the marketplace, with a store_id that is not the fulfilling store", 422, authAdmin, "/orders/<order>/returns", `{"store_id":"S2","items":[{"item_id":"<item2>","return_location":"MARKETPLACE"}]}`),
		ok("returnItems", "another, to the marketplace", 200, authAdmin, "/orders/<order>/returns", `{"items":[{"item_id":"<item2>","return_location":"MARKETPLACE","return_reason_code":-1}]}`),
		bad("returnItems", "an item returned already", 422, authAdmin, "/orders/<order>/returns", `{"items":[{"item_id":"<item1>","return_location":"STORE"}]}`),
		bad("returnItems", "an unknown order", 404, authAdmin, "/orders/"+unknownID+"/returns", `{"items":[{"item_id":"<item1>","return_location":"STORE"}]}`),
		ok("createWarehouseOrder", "a warehouse order", 201, authAdmin, "/warehouse-orders", warehouseBody).withHeader("Idempotency-Key", "walk-warehouse-1").
			saving("worder", "order_id").savingItems("witem"),
		bad("createWarehouseOrder", "a store id", 422, authAdmin, "/warehouse-orders", `{"order_number":"WALK-W2","client_id":"<client>","store_id":"S1","items":[{"ean":"4006381333931","marketplace_article_number":"MP-1"}]}`),
		bad("createWarehouseOrder", "no client", 422, authAdmin, "/warehouse-orders", `{"order_number":"WALK-W2","items":[{"ean":"4006381333931","marketplace_article_number":"MP-1"}]}`),
		bad("createWarehouseOrder", "a key used for POST /orders", 422, authAdmin, "/warehouse-orders", warehouseBody).withHeader("Idempotency-Key", "walk-order-1"),
		bad("warehouseReturn", "a store's order", 409, authAdmin, "/orders/<order>/warehouse-returns", `{"items":[{"item_id":"<item1>"}]}`),
		ok("warehouseReturn", "the item back", 200, authAdmin, "/orders/<worder>/warehouse-returns", `{"items":[{"item_id":"<witem1>","return_reason_code":1}]}`),
		bad("warehouseReturn", "an item returned already", 422, authAdmin, "/orders/<worder>/warehouse-returns", `{"items":[{"item_id":"<witem1>"}]}`),
		bad("warehouseReturn", "an unknown order", 404, authAdmin, "/orders/"+unknownID+"/warehouse-returns", `{"items":[{"item_id":"<witem1>"}]}`),

		ok("pullEvents", "the first page", 200, authKey, "/events/<client>?limit=2", "").saving("cursor", "next_cursor"),
		ok("pullEvents", "the next page", 200, authKey, "/events/<client>?after=<cursor>", ""),
		bad("pullEvents", "a cursor of another form", 400, authKey, "/events/<client>?after=nonsense", ""),
		bad("pullEvents", "a cursor past the newest event", 409, authKey, "/events/<client>?after=999999.9f86d081", ""),
		bad("pullEvents", "a limit out of range", 400, authKey, "/events/<client>?limit=0", ""),
	}
}
