package storetest

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"

	"storelink"
)

// testOrderCancelReassign: items cancelled for stock reasons go to another
// store that has them, as a new order with the same order number.
func testOrderCancelReassign(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(
		row("S1", eanA, 5, 100), row("S1", eanB, 1, 100), row("S1", eanC, 3, 100),
		storelink.StockRow{StoreID: "S2", EAN: eanA, ArticleNumber: "S2-A", Quantity: 1, Price: 300, ArticleLocation: "Back"},
		row("S2", eanC, 1, 100),
	)
	// Only S1 has B.
	o := e.create(e.newOrder("C-1", eanA, eanB, eanC))
	if o.StoreID != "S1" {
		t.Fatalf("order at %s, want S1", o.StoreID)
	}
	ids := itemIDs(o)
	got, err := s.Orders.CancelOrder(ctx, o.ID, storelink.CancelRequest{Reassign: true, Items: []storelink.ItemReason{
		{ItemID: ids[0], CancellationReason: storelink.ReasonOutOfStock},
		{ItemID: ids[2], CancellationReason: storelink.ReasonItemBroken},
	}})
	must(t, err)
	if got.State != storelink.StateCancelled || got.ReassignedOrderID == "" || got.ReassignedOrderID == o.ID {
		t.Fatalf("cancel with reassign = %+v", got)
	}
	e.sameAsStored(got)
	for i, want := range []storelink.CancellationReason{storelink.ReasonOutOfStock, storelink.ReasonUnknownReason, storelink.ReasonItemBroken} {
		if it := got.Items[i]; it.Status != storelink.ItemCancelled || it.CancellationReason != want {
			t.Fatalf("item %d after the cancel = %+v, want cancelled for %s", i, it, want)
		}
	}
	// The new order: S1 could not serve them, so S2, though S1 has more of
	// both articles in force.
	n, err := s.Orders.Order(ctx, got.ReassignedOrderID)
	must(t, err)
	if n.OrderNumber != o.OrderNumber || n.ClientID != o.ClientID || n.ReassignedFrom != o.ID || n.StoreID != "S2" ||
		n.State != storelink.StateAssigned || len(n.Items) != 2 {
		t.Fatalf("reassigned order = %+v", n)
	}
	if a := n.Items[0]; a.EAN != eanA || a.ArticleNumber != "S2-A" || a.ArticleLocation != "Back" || a.Price != o.Items[0].Price ||
		a.Currency != "EUR" || a.MarketplaceArticleNumber != o.Items[0].MarketplaceArticleNumber || slices.Contains(ids, a.ItemID) {
		t.Fatalf("reassigned item = %+v: the customer's price, the new store's article data, a new item id", a)
	}
	if n.Items[1].EAN != eanC {
		t.Fatalf("reassigned items = %+v, want A and C (B was cancelled for an unknown reason)", n.Items)
	}
	// Two events, in order: the old order cancelled, then the new assigned.
	all := e.clientEvents(e.client.ID)
	if len(all) != 3 || all[1].OrderID != o.ID || all[1].State != storelink.StateCancelled ||
		all[2].OrderID != n.ID || all[2].State != storelink.StateAssigned {
		t.Fatalf("events = %+v, want assigned, cancelled, assigned", all)
	}
	cancelled := e.decodeEvent(all[1])
	if cancelled.StoreID != "S1" || len(cancelled.Items) != 3 || cancelled.Items[0].CancellationReason != storelink.ReasonOutOfStock ||
		cancelled.Items[1].CancellationReason != storelink.ReasonUnknownReason {
		t.Fatalf("cancelled event = %+v", cancelled)
	}
	assigned := e.decodeEvent(all[2])
	if assigned.StoreID != "S2" || assigned.OrderNumber != o.OrderNumber ||
		!reflect.DeepEqual(eventItemIDs(assigned.Items), itemIDs(n)) {
		t.Fatalf("assigned event of the reassigned order = %+v", assigned)
	}
	e.wantStock("S1", eanA, 5, 0, 5)
	e.wantStock("S1", eanB, 1, 0, 1)
	e.wantStock("S2", eanA, 1, 1, 0)
	e.wantStock("S2", eanC, 1, 1, 0)
	list, err := s.Orders.Orders(ctx, storelink.OrderFilter{ClientID: e.client.ID, OrderNumber: "C-1", Limit: 10})
	must(t, err)
	if len(list) != 2 || list[0].ID != n.ID || list[1].ID != o.ID {
		t.Fatalf("orders numbered C-1 = %+v, want the new then the old", list)
	}

	// No other store has B: the cancel still succeeds, without a new order.
	o = e.create(e.newOrder("C-2", eanB))
	got, err = s.Orders.CancelOrder(ctx, o.ID, storelink.CancelRequest{Reassign: true,
		Items: []storelink.ItemReason{{ItemID: o.Items[0].ItemID, CancellationReason: storelink.ReasonOutOfStock}}})
	must(t, err)
	if got.State != storelink.StateCancelled || got.ReassignedOrderID != "" {
		t.Fatalf("cancel with nothing to reassign to = %+v", got)
	}
	e.sameAsStored(got)
	e.wantStates(o.ID, storelink.StateAssigned, storelink.StateCancelled)
	// Without "reassign", or for an unknown reason, nothing is reassigned,
	// though S2 has A in force again (5, one reserved by the new order).
	e.feed(row("S2", eanA, 5, 100))
	e.wantStock("S2", eanA, 5, 1, 4)
	for _, r := range []storelink.CancelRequest{
		{Items: []storelink.ItemReason{{CancellationReason: storelink.ReasonOutOfStock}}},
		{Reassign: true, Items: []storelink.ItemReason{{CancellationReason: storelink.ReasonUnknownReason}}},
		{Reassign: true},
	} {
		o = e.create(e.newOrder("C-3", eanA))
		r.Items = setItemIDs(r.Items, o)
		got, err = s.Orders.CancelOrder(ctx, o.ID, r)
		must(t, err)
		if got.ReassignedOrderID != "" {
			t.Fatalf("cancel %+v reassigned to %s", r, got.ReassignedOrderID)
		}
		e.wantStates(o.ID, storelink.StateAssigned, storelink.StateCancelled)
	}
	list, err = s.Orders.Orders(ctx, storelink.OrderFilter{ClientID: e.client.ID, OrderNumber: "C-3", Limit: 10})
	must(t, err)
	if len(list) != 3 {
		t.Fatalf("%d orders numbered C-3, want the 3 made: none reassigned", len(list))
	}
	// Unknown items and reasons are refused.
	o = e.create(e.newOrder("C-4", eanA))
	before := e.world()
	_, err = s.Orders.CancelOrder(ctx, o.ID, storelink.CancelRequest{Items: []storelink.ItemReason{{ItemID: "nope"}}})
	e.refused(before, err, storelink.EUNPROCESSABLE, "a cancel naming an unknown item")
	_, err = s.Orders.CancelOrder(ctx, o.ID, storelink.CancelRequest{Items: []storelink.ItemReason{{ItemID: o.Items[0].ItemID, CancellationReason: "LOST"}}})
	e.refused(before, err, storelink.EUNPROCESSABLE, "a cancel with an unknown reason")
	_, err = s.Orders.CancelOrder(ctx, "nope", storelink.CancelRequest{})
	e.refused(before, err, storelink.ENOTFOUND, "a cancel of an unknown order")
}

// setItemIDs fills the item ids of reasons with o's items, in order.
func setItemIDs(rs []storelink.ItemReason, o *storelink.Order) []storelink.ItemReason {
	for i := range rs {
		rs[i].ItemID = o.Items[i].ItemID
	}
	return rs
}

// testOrderFulfil: picked items are fulfilled, the others cancelled; the
// event lists each kind.
func testOrderFulfil(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 10, 1999), row("S1", eanB, 10, 500))
	n := e.newOrder("P-1", eanA, eanA, eanB)
	n.DeliveryDetails = &storelink.DeliveryDetails{DeliveryCarrierName: "DHL"}
	o := e.create(n)
	ids := itemIDs(o)
	before := e.world()
	for _, c := range []struct {
		name string
		r    storelink.FulfilRequest
		code string
	}{
		{"nothing picked", storelink.FulfilRequest{PickedItemIDs: []string{}, CancelledItems: []storelink.ItemReason{{ItemID: ids[0]}}}, storelink.EUNPROCESSABLE},
		{"every item cancelled", storelink.FulfilRequest{CancelledItems: []storelink.ItemReason{{ItemID: ids[0]}, {ItemID: ids[1]}, {ItemID: ids[2]}}}, storelink.EUNPROCESSABLE},
		{"an unknown item picked", storelink.FulfilRequest{PickedItemIDs: []string{"nope"}}, storelink.EUNPROCESSABLE},
		{"an item picked and cancelled", storelink.FulfilRequest{PickedItemIDs: ids[:1], CancelledItems: []storelink.ItemReason{{ItemID: ids[0]}}}, storelink.EUNPROCESSABLE},
		{"an item picked twice", storelink.FulfilRequest{PickedItemIDs: []string{ids[0], ids[0]}}, storelink.EUNPROCESSABLE},
	} {
		_, err := s.Orders.FulfilOrder(ctx, o.ID, c.r)
		e.refused(before, err, c.code, "a fulfil with "+c.name)
	}
	_, err := s.Orders.FulfilOrder(ctx, "nope", storelink.FulfilRequest{})
	e.refused(before, err, storelink.ENOTFOUND, "a fulfil of an unknown order")

	// Picked: the two A; the B is cancelled with its reason.
	got, err := s.Orders.FulfilOrder(ctx, o.ID, storelink.FulfilRequest{PickedItemIDs: ids[:2],
		CancelledItems:  []storelink.ItemReason{{ItemID: ids[2], CancellationReason: storelink.ReasonItemMissing}},
		DeliveryDetails: &storelink.DeliveryDetails{DeliveryTrackingNumber: "T-1"}})
	must(t, err)
	e.sameAsStored(got)
	if got.State != storelink.StateFulfilled || got.Items[0].Status != storelink.ItemFulfilled || got.Items[1].Status != storelink.ItemFulfilled ||
		got.Items[2].Status != storelink.ItemCancelled || got.Items[2].CancellationReason != storelink.ReasonItemMissing {
		t.Fatalf("fulfilled order = %+v", got)
	}
	e.wantStates(o.ID, storelink.StateAssigned, storelink.StateFulfilled)
	ev := e.lastEvent(o.ID)
	if ev.StoreID != "S1" || !reflect.DeepEqual(eventItemIDs(ev.Items), ids[:2]) || len(ev.CancelledItems) != 1 ||
		ev.CancelledItems[0].ItemID != ids[2] || ev.CancelledItems[0].CancellationReason != storelink.ReasonItemMissing ||
		ev.Items[0].CancellationReason != "" || ev.Items[0].Price != 1999 || ev.CancelledItems[0].Price != 500 {
		t.Fatalf("fulfilled event = %+v", ev)
	}
	if d := ev.DeliveryDetails; d == nil || d.DeliveryCarrierName != "DHL" || d.DeliveryTrackingNumber != "T-1" {
		t.Fatalf("fulfilled event delivery details = %+v, want the order's and the fulfil's", d)
	}

	// By default every item is picked; items neither picked nor cancelled
	// are cancelled for an unknown reason.
	o = e.create(e.newOrder("P-2", eanA, eanB))
	got, err = s.Orders.FulfilOrder(ctx, o.ID, storelink.FulfilRequest{})
	must(t, err)
	if ev := e.lastEvent(o.ID); len(ev.Items) != 2 || ev.CancelledItems != nil || got.Items[1].Status != storelink.ItemFulfilled {
		t.Fatalf("fulfil with the defaults: %+v, event %+v", got, ev)
	}
	o = e.create(e.newOrder("P-3", eanA, eanB, eanB))
	ids = itemIDs(o)
	_, err = s.Orders.FulfilOrder(ctx, o.ID, storelink.FulfilRequest{PickedItemIDs: ids[1:2]})
	must(t, err)
	if ev := e.lastEvent(o.ID); !reflect.DeepEqual(eventItemIDs(ev.Items), ids[1:2]) ||
		!reflect.DeepEqual(eventItemIDs(ev.CancelledItems), []string{ids[0], ids[2]}) ||
		ev.CancelledItems[1].CancellationReason != storelink.ReasonUnknownReason {
		t.Fatalf("fulfil of one picked item: event %+v", ev)
	}
	o = e.create(e.newOrder("P-4", eanA, eanB))
	ids = itemIDs(o)
	_, err = s.Orders.FulfilOrder(ctx, o.ID, storelink.FulfilRequest{CancelledItems: []storelink.ItemReason{{ItemID: ids[0], CancellationReason: storelink.ReasonOutOfStock}}})
	must(t, err)
	if ev := e.lastEvent(o.ID); !reflect.DeepEqual(eventItemIDs(ev.Items), ids[1:]) || len(ev.CancelledItems) != 1 {
		t.Fatalf("fulfil with one item cancelled and none listed as picked: event %+v", ev)
	}
}

func code(c storelink.ReturnReasonCode) *storelink.ReturnReasonCode { return &c }

// testOrderReturns: fulfilled items come back, each once, to a store or the
// marketplace. A store_id other than the fulfilling store contradicts an
// item returned to the MARKETPLACE (recorded under the fulfilling store):
// the return is refused, saying which item and both stores, and nothing is
// written.
func testOrderReturns(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 10, 100))
	o := e.create(e.newOrder("T-1", eanA, eanA, eanA))
	ids := itemIDs(o)
	_, err := s.Orders.FulfilOrder(ctx, o.ID, storelink.FulfilRequest{PickedItemIDs: ids[:2]})
	must(t, err)
	ret := func(id string, loc storelink.ReturnLocation) storelink.ReturnRequest {
		return storelink.ReturnRequest{Items: []storelink.ReturnItem{{ItemID: id, ReturnLocation: loc}}}
	}
	before := e.world()
	for _, c := range []struct {
		name string
		r    storelink.ReturnRequest
	}{
		{"a cancelled item", ret(ids[2], storelink.ReturnToStore)},
		{"an unknown item", ret("nope", storelink.ReturnToStore)},
		{"no items", storelink.ReturnRequest{}},
		{"an item twice", storelink.ReturnRequest{Items: []storelink.ReturnItem{{ItemID: ids[0], ReturnLocation: storelink.ReturnToStore}, {ItemID: ids[0], ReturnLocation: storelink.ReturnToStore}}}},
		{"an unknown location", ret(ids[0], "HOME")},
		{"an unknown reason code", storelink.ReturnRequest{Items: []storelink.ReturnItem{{ItemID: ids[0], ReturnLocation: storelink.ReturnToStore, ReturnReasonCode: code(11)}}}},
		{"an unknown store", storelink.ReturnRequest{StoreID: "S9", Items: ret(ids[0], storelink.ReturnToStore).Items}},
		{"items to the marketplace and to another store at once", storelink.ReturnRequest{StoreID: "S2", Items: []storelink.ReturnItem{
			{ItemID: ids[0], ReturnLocation: storelink.ReturnToMarketplace}, {ItemID: ids[1], ReturnLocation: storelink.ReturnToStore}}}},
	} {
		_, err := s.Orders.ReturnItems(ctx, o.ID, c.r)
		e.refused(before, err, storelink.EUNPROCESSABLE, "a return of "+c.name)
	}

	// To the fulfilling store by default.
	got, err := s.Orders.ReturnItems(ctx, o.ID, storelink.ReturnRequest{Items: []storelink.ReturnItem{{ItemID: ids[0], ReturnLocation: storelink.ReturnToStore, ReturnReasonCode: code(2)}},
		DeliveryDetails: &storelink.DeliveryDetails{ReturnTrackingNumber: "R-1"}})
	must(t, err)
	e.sameAsStored(got)
	if it := got.Items[0]; got.State != storelink.StateReturned || it.Status != storelink.ItemReturned || it.ReturnStoreID != "S1" ||
		it.ReturnLocation != storelink.ReturnToStore || it.ReturnReasonCode == nil || *it.ReturnReasonCode != 2 || got.Items[1].Status != storelink.ItemFulfilled {
		t.Fatalf("order after a return = %+v", got)
	}
	ev := e.lastEvent(o.ID)
	if ev.State != storelink.StateReturned || ev.StoreID != "S1" || len(ev.Items) != 1 || ev.Items[0].ItemID != ids[0] ||
		ev.Items[0].ReturnLocation != storelink.ReturnToStore || ev.Items[0].ReturnReasonCode == nil || *ev.Items[0].ReturnReasonCode != 2 ||
		ev.DeliveryDetails == nil || ev.DeliveryDetails.ReturnTrackingNumber != "R-1" {
		t.Fatalf("returned event = %+v", ev)
	}
	before = e.world()
	_, err = s.Orders.ReturnItems(ctx, o.ID, ret(ids[0], storelink.ReturnToStore))
	e.refused(before, err, storelink.EUNPROCESSABLE, "a second return of an item")

	// Returned → returned; to the marketplace the store is the fulfilling
	// one, which another store_id contradicts.
	before = e.world()
	_, err = s.Orders.ReturnItems(ctx, o.ID, storelink.ReturnRequest{StoreID: "S2", Items: ret(ids[1], storelink.ReturnToMarketplace).Items})
	e.refused(before, err, storelink.EUNPROCESSABLE, "a return to the marketplace with store_id S2")
	if se := (*storelink.Error)(nil); !errors.As(err, &se) || !strings.Contains(se.Message, "items[0] (item "+ids[1]+")") ||
		!strings.Contains(se.Message, "return_location MARKETPLACE") || !strings.Contains(se.Message, `store_id is "S2"`) ||
		!strings.Contains(se.Message, `fulfilled the order, "S1"`) {
		t.Fatalf("a return to the marketplace with store_id S2: %v; want a message naming the item, MARKETPLACE, S2 and S1", err)
	}
	got, err = s.Orders.ReturnItems(ctx, o.ID, storelink.ReturnRequest{StoreID: "S1", Items: ret(ids[1], storelink.ReturnToMarketplace).Items})
	must(t, err)
	if got.State != storelink.StateReturned || got.Items[1].ReturnStoreID != "S1" {
		t.Fatalf("order after a return to the marketplace = %+v", got)
	}
	ev = e.lastEvent(o.ID)
	if ev.StoreID != "S1" || len(ev.Items) != 1 || ev.Items[0].ReturnLocation != storelink.ReturnToMarketplace || ev.Items[0].ReturnReasonCode != nil {
		t.Fatalf("event of a return to the marketplace = %+v", ev)
	}
	e.wantStates(o.ID, storelink.StateAssigned, storelink.StateFulfilled, storelink.StateReturned, storelink.StateReturned)
	before = e.world()
	_, err = s.Orders.ReturnItems(ctx, o.ID, ret(ids[1], storelink.ReturnToStore))
	e.refused(before, err, storelink.EUNPROCESSABLE, "a return of an item returned to the marketplace")

	// To another store: the event carries that store.
	o = e.create(e.newOrder("T-2", eanA))
	_, err = s.Orders.FulfilOrder(ctx, o.ID, storelink.FulfilRequest{})
	must(t, err)
	got, err = s.Orders.ReturnItems(ctx, o.ID, storelink.ReturnRequest{StoreID: "S2", Items: ret(o.Items[0].ItemID, storelink.ReturnToStore).Items})
	must(t, err)
	if got.Items[0].ReturnStoreID != "S2" || got.StoreID != "S1" {
		t.Fatalf("order after a return to S2 = %+v", got)
	}
	if ev := e.lastEvent(o.ID); ev.StoreID != "S2" {
		t.Fatalf("event of a return to S2 names store %q", ev.StoreID)
	}
}

// testWarehouseOrders: orders of the marketplace warehouse have no store,
// hold no stock and name no store in their events; their items carry the
// article_location of the stock row their article data comes from (the
// lowest store id's), even where the request gives the article number and
// price, in the answer, the stored order and the event.
func testWarehouseOrders(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(storelink.StockRow{StoreID: "S2", EAN: eanA, ArticleNumber: "SKU-A", Quantity: 0, Price: 1999, ArticleLocation: "Dept 3"},
		storelink.StockRow{StoreID: "S1", EAN: eanB, ArticleNumber: "SKU-B1", Quantity: 0, Price: 700, ArticleLocation: "Front"},
		storelink.StockRow{StoreID: "S2", EAN: eanB, ArticleNumber: "SKU-B2", Quantity: 3, Price: 800, ArticleLocation: "Back"})
	n := e.newOrder("W-1", eanA, eanB)
	price := storelink.Money(500)
	n.Items[1].ArticleNumber, n.Items[1].Price = "OWN-B", &price
	n.CustomerBillingAddress = &storelink.Address{FirstName: "Ada", LastName: "L", AddressLine1: "Main 1", ZipCode: "10115", City: "Berlin", CountryCode: "DE"}
	o, err := s.Orders.CreateWarehouseOrder(ctx, n)
	must(t, err)
	e.sameAsStored(o)
	if o.State != storelink.StateWarehouseFulfilled || o.StoreID != "" || len(o.Items) != 2 ||
		o.Items[0].ArticleNumber != "SKU-A" || o.Items[0].Price != 1999 || o.Items[0].Status != storelink.ItemFulfilled ||
		o.Items[1].ArticleNumber != "OWN-B" || o.Items[1].Price != 500 || o.Items[1].Currency != "EUR" ||
		o.Items[0].ArticleLocation != "Dept 3" || o.Items[1].ArticleLocation != "Front" {
		t.Fatalf("warehouse order = %+v; want article locations Dept 3 (S2's row) and Front (S1's)", o)
	}
	e.wantStock("S2", eanA, 0, 0, 0)
	e.wantStock("S2", eanB, 3, 0, 3)
	wantNoStore := func(state storelink.OrderState) storelink.Event {
		t.Helper()
		recs, err := s.Orders.OrderEvents(ctx, o.ID)
		must(t, err)
		r := recs[len(recs)-1]
		var raw map[string]json.RawMessage
		must(t, json.Unmarshal(r.Payload, &raw))
		if _, ok := raw["store_id"]; ok || r.State != state {
			t.Fatalf("%s event %s: want no store_id", state, r.Payload)
		}
		return e.decodeEvent(r)
	}
	ev := wantNoStore(storelink.StateWarehouseFulfilled)
	if len(ev.Items) != 2 || ev.CustomerBillingAddress == nil || ev.CustomerBillingAddress.City != "Berlin" ||
		ev.Items[0].ArticleLocation != "Dept 3" || ev.Items[1].ArticleLocation != "Front" {
		t.Fatalf("warehouse event = %+v; want article locations Dept 3 and Front", ev)
	}

	before := e.world()
	for _, c := range []struct {
		name string
		edit func(n *storelink.NewOrder)
	}{
		{"a store id", func(n *storelink.NewOrder) { n.StoreID = "S1" }},
		{"an article nobody describes", func(n *storelink.NewOrder) { n.Items[0].EAN = eanE }},
		{"an unknown client", func(n *storelink.NewOrder) { n.ClientID = "nope" }},
	} {
		n := e.newOrder("W-2", eanA)
		c.edit(&n)
		_, err := s.Orders.CreateWarehouseOrder(ctx, n)
		e.refused(before, err, storelink.EUNPROCESSABLE, "a warehouse order with "+c.name)
	}

	ids := itemIDs(o)
	got, err := s.Orders.WarehouseReturn(ctx, o.ID, storelink.WarehouseReturnRequest{Items: []storelink.WarehouseReturnItem{{ItemID: ids[0], ReturnReasonCode: code(-1)}}})
	must(t, err)
	e.sameAsStored(got)
	if got.State != storelink.StateWarehouseReturned || got.Items[0].Status != storelink.ItemReturned || got.Items[1].Status != storelink.ItemFulfilled {
		t.Fatalf("after a warehouse return = %+v", got)
	}
	ev = wantNoStore(storelink.StateWarehouseReturned)
	if len(ev.Items) != 1 || ev.Items[0].ItemID != ids[0] || ev.Items[0].ReturnReasonCode == nil || *ev.Items[0].ReturnReasonCode != -1 ||
		ev.Items[0].ArticleLocation != "Dept 3" {
		t.Fatalf("warehouse return event = %+v", ev)
	}
	before = e.world()
	_, err = s.Orders.WarehouseReturn(ctx, o.ID, storelink.WarehouseReturnRequest{Items: []storelink.WarehouseReturnItem{{ItemID: ids[0]}}})
	e.refused(before, err, storelink.EUNPROCESSABLE, "a second warehouse return of an item")
	_, err = s.Orders.WarehouseReturn(ctx, o.ID, storelink.WarehouseReturnRequest{Items: []storelink.WarehouseReturnItem{{ItemID: ids[1], ReturnReasonCode: code(0)}}})
	e.refused(before, err, storelink.EUNPROCESSABLE, "a warehouse return with an unknown reason code")
	_, err = s.Orders.WarehouseReturn(ctx, o.ID, storelink.WarehouseReturnRequest{Items: []storelink.WarehouseReturnItem{{ItemID: ids[1]}}})
	must(t, err)
	wantNoStore(storelink.StateWarehouseReturned)
	e.wantStates(o.ID, storelink.StateWarehouseFulfilled, storelink.StateWarehouseReturned, storelink.StateWarehouseReturned)
}
