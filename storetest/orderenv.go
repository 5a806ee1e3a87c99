package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"storelink"
)

// EANs with valid GS1 check digits.
const (
	eanA = "4006381333931"
	eanB = "5901234123457"
	eanC = "8712345678906"
	eanD = "5012345678900"
	eanE = "96385074"
)

// feed applies stock rows for the env's client through an upload, as the
// worker does, so that they are the stock in force.
func (e *env) feed(rs ...storelink.StockRow) {
	e.t.Helper()
	e.accept("feed.csv", 1)
	c, err := e.s.Uploads.Claim(e.ctx, "w", time.Minute)
	must(e.t, err)
	if c == nil {
		e.t.Fatal("no upload to claim for the feed")
	}
	u, err := e.s.Uploads.Apply(e.ctx, c, rows(rs...))
	must(e.t, err)
	if u.Status != storelink.UploadApplied {
		e.t.Fatalf("feed upload = %+v, want applied", u)
	}
}

// newOrder is an order of the env's client with one unit per EAN given.
func (e *env) newOrder(number string, eans ...string) storelink.NewOrder {
	n := storelink.NewOrder{OrderNumber: number, ClientID: e.client.ID}
	for i, ean := range eans {
		n.Items = append(n.Items, storelink.NewItem{EAN: ean, MarketplaceArticleNumber: fmt.Sprintf("M-%s-%d", ean, i)})
	}
	return n
}

// create makes an assigned order and checks that the answer is the order as
// it now stands.
func (e *env) create(n storelink.NewOrder) *storelink.Order {
	e.t.Helper()
	o, err := e.s.Orders.CreateOrder(e.ctx, n)
	must(e.t, err)
	if o.ID == "" || o.State != storelink.StateAssigned || o.OrderNumber != n.OrderNumber || o.ClientID != n.ClientID ||
		len(o.Items) != len(n.Items) {
		e.t.Fatalf("new order = %+v", o)
	}
	e.sameAsStored(o)
	return o
}

// sameAsStored fails unless an answer equals the order read back.
func (e *env) sameAsStored(o *storelink.Order) {
	e.t.Helper()
	got, err := e.s.Orders.Order(e.ctx, o.ID)
	must(e.t, err)
	a, _ := json.Marshal(o)
	b, _ := json.Marshal(got)
	if string(a) != string(b) {
		e.t.Fatalf("answer and stored order differ:\n answer %s\n stored %s", a, b)
	}
}

// itemIDs lists the ids of an order's items.
func itemIDs(o *storelink.Order) []string {
	var ids []string
	for _, it := range o.Items {
		ids = append(ids, it.ItemID)
	}
	return ids
}

// stockOf returns the stock row of a store and EAN.
func (e *env) stockOf(store, ean string) storelink.Stock {
	e.t.Helper()
	st, _, err := e.s.Uploads.Stock(e.ctx, e.client.ID, storelink.StockFilter{StoreID: store, EAN: ean, Limit: 10})
	must(e.t, err)
	if len(st) != 1 {
		e.t.Fatalf("stock of %s %s = %+v, want one row", store, ean, st)
	}
	return st[0]
}

// wantStock checks a row's quantity and the units reserved and available.
func (e *env) wantStock(store, ean string, quantity, reserved, available int) {
	e.t.Helper()
	s := e.stockOf(store, ean)
	if s.Quantity != quantity || s.Reserved != reserved || s.Available != available {
		e.t.Fatalf("stock of %s %s: quantity %d, reserved %d, available %d; want %d, %d, %d",
			store, ean, s.Quantity, s.Reserved, s.Available, quantity, reserved, available)
	}
}

// clientEvents pages through all events of a client.
func (e *env) clientEvents(clientID string) []storelink.EventRecord {
	e.t.Helper()
	var all []storelink.EventRecord
	after := ""
	for range 1000 {
		page, next, err := e.s.Orders.Events(e.ctx, clientID, after, 50)
		must(e.t, err)
		if len(page) == 0 {
			if next != after {
				e.t.Fatalf("an empty page moved the cursor from %q to %q", after, next)
			}
			return all
		}
		all = append(all, page...)
		after = next
	}
	e.t.Fatal("event paging does not end")
	return nil
}

// decodeEvent decodes a stored event's payload and checks it against the
// record it came with.
func (e *env) decodeEvent(r storelink.EventRecord) storelink.Event {
	e.t.Helper()
	var ev storelink.Event
	if err := json.Unmarshal(r.Payload, &ev); err != nil {
		e.t.Fatalf("event payload %s: %v", r.Payload, err)
	}
	if ev.EventID != r.EventID || ev.OrderID != r.OrderID || ev.State != r.State || r.ClientID == "" || r.Cursor == "" {
		e.t.Fatalf("event record %+v does not match its payload %s", r, r.Payload)
	}
	if _, err := time.Parse(storelink.EventTimeLayout, ev.Timestamp); err != nil || !strings.HasSuffix(ev.Timestamp, "Z") {
		e.t.Fatalf("event timestamp %q is not UTC with milliseconds", ev.Timestamp)
	}
	return ev
}

// orderEvents returns an order's events, oldest first, decoded.
func (e *env) orderEvents(orderID string) []storelink.Event {
	e.t.Helper()
	recs, err := e.s.Orders.OrderEvents(e.ctx, orderID)
	must(e.t, err)
	out := make([]storelink.Event, len(recs))
	for i, r := range recs {
		out[i] = e.decodeEvent(r)
		if r.OrderID != orderID {
			e.t.Fatalf("event %+v listed for order %s", r, orderID)
		}
	}
	return out
}

// lastEvent returns an order's newest event, decoded.
func (e *env) lastEvent(orderID string) storelink.Event {
	e.t.Helper()
	evs := e.orderEvents(orderID)
	if len(evs) == 0 {
		e.t.Fatalf("order %s has no event", orderID)
	}
	return evs[len(evs)-1]
}

func eventStates(evs []storelink.Event) []storelink.OrderState {
	out := make([]storelink.OrderState, len(evs))
	for i, ev := range evs {
		out[i] = ev.State
	}
	return out
}

// wantStates checks the states of an order's events, oldest first.
func (e *env) wantStates(orderID string, want ...storelink.OrderState) {
	e.t.Helper()
	if got := eventStates(e.orderEvents(orderID)); !reflect.DeepEqual(got, want) {
		e.t.Fatalf("events of order %s: %v, want %v", orderID, got, want)
	}
}

func eventItemIDs(items []storelink.EventItem) []string {
	var ids []string
	for _, it := range items {
		ids = append(ids, it.ItemID)
	}
	return ids
}

// world is what a refused or failed call must leave as it was: the client's
// orders with their items, its events, and its stock with the reservations.
type world struct {
	orders []storelink.Order
	events []storelink.EventRecord
	stock  []storelink.Stock
}

func (e *env) world() world {
	e.t.Helper()
	orders, err := e.s.Orders.Orders(e.ctx, storelink.OrderFilter{ClientID: e.client.ID, Limit: 1000})
	must(e.t, err)
	stock, _, err := e.s.Uploads.Stock(e.ctx, e.client.ID, storelink.StockFilter{Limit: 1000})
	must(e.t, err)
	return world{orders: orders, events: e.clientEvents(e.client.ID), stock: stock}
}

// unchanged fails unless nothing of the world changed since before.
func (e *env) unchanged(before world, what string) {
	e.t.Helper()
	now := e.world()
	switch {
	case !reflect.DeepEqual(before.orders, now.orders):
		e.t.Fatalf("%s changed the orders:\n before %+v\n after  %+v", what, before.orders, now.orders)
	case !reflect.DeepEqual(before.events, now.events):
		e.t.Fatalf("%s changed the events: %d before, %d after", what, len(before.events), len(now.events))
	case !reflect.DeepEqual(before.stock, now.stock):
		e.t.Fatalf("%s changed the stock:\n before %+v\n after  %+v", what, before.stock, now.stock)
	}
}

// refused checks that a call failed with code and wrote nothing.
func (e *env) refused(before world, err error, code, what string) {
	e.t.Helper()
	wantCode(e.t, err, code)
	e.unchanged(before, what)
}
