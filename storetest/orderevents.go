package storetest

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"storelink"
)

// testOrderEvents: every change writes one event; a client pages through
// its own events in the order they happened.
func testOrderEvents(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	list, next, err := s.Orders.Events(ctx, id, "", 10)
	must(t, err)
	if len(list) != 0 || next != "" {
		t.Fatalf("events of a new client = %+v, %q; want none and the same cursor", list, next)
	}
	if list, next, err := s.Orders.Events(ctx, id, "0", 10); err != nil || len(list) != 0 || next != "0" {
		t.Fatalf("events of a new client after 0 = %+v, %q, %v; want none and the same cursor", list, next, err)
	}
	// A cursor given out before a restore, to a feed that has none yet.
	_, _, err = s.Orders.Events(ctx, id, "3", 10)
	if e := asError(err); e == nil || e.Code != storelink.ECURSORAHEAD || e.Cursor != "0" || !strings.Contains(e.Message, "after=0") {
		t.Fatalf("events of a new client after 3: %v; want cursor_ahead naming 0", err)
	}
	e.feed(row("S1", eanA, 10, 1999), row("S2", eanB, 10, 100))
	// Another client's events are never listed with this client's.
	p, err := s.Partners.CreatePartner(ctx, "Other")
	must(t, err)
	other, err := s.Partners.CreateClient(ctx, p.ID, "FR", "EUR")
	must(t, err)
	_, _, err = s.Partners.PutStore(ctx, other.ID, "S1", "")
	must(t, err)
	price := storelink.Money(100)
	foreign := func() *storelink.Order {
		t.Helper()
		o, err := s.Orders.CreateOrder(ctx, storelink.NewOrder{OrderNumber: "X", ClientID: other.ID, StoreID: "S1",
			Items: []storelink.NewItem{{EAN: eanA, MarketplaceArticleNumber: "M", ArticleNumber: "X", Price: &price}}})
		must(t, err)
		return o
	}

	type step struct {
		order *storelink.Order
		state storelink.OrderState
		store string
		at    time.Time
	}
	var steps []step
	// did records a change that should have written one event.
	did := func(state storelink.OrderState, store string) func(*storelink.Order, error) *storelink.Order {
		return func(o *storelink.Order, err error) *storelink.Order {
			t.Helper()
			must(t, err)
			steps = append(steps, step{o, state, store, e.clock.Now()})
			if got := len(e.clientEvents(id)); got != len(steps) {
				t.Fatalf("after %s of order %s: %d events, want %d (one per change)", state, o.ID, got, len(steps))
			}
			e.clock.Advance(1500 * time.Microsecond)
			return o
		}
	}
	n := e.newOrder("EV-1", eanA)
	n.CustomerBillingAddress = &storelink.Address{FirstName: "Ada", LastName: "L", AddressLine1: "Main 1", ZipCode: "10115", City: "Berlin", CountryCode: "DE"}
	n.DeliveryDetails = &storelink.DeliveryDetails{DeliveryCarrierName: "DHL"}
	o1 := did(storelink.StateAssigned, "S1")(s.Orders.CreateOrder(ctx, n))
	foreign()
	o2 := did(storelink.StateAssigned, "S2")(s.Orders.CreateOrder(ctx, e.newOrder("EV-2", eanB)))
	did(storelink.StateFulfilled, "S1")(s.Orders.FulfilOrder(ctx, o1.ID, storelink.FulfilRequest{}))
	did(storelink.StateCancelled, "S2")(s.Orders.CancelOrder(ctx, o2.ID, storelink.CancelRequest{}))
	foreign()
	did(storelink.StateReturned, "S1")(s.Orders.ReturnItems(ctx, o1.ID, storelink.ReturnRequest{Items: []storelink.ReturnItem{{ItemID: o1.Items[0].ItemID, ReturnLocation: storelink.ReturnToStore}}}))
	w := did(storelink.StateWarehouseFulfilled, "")(s.Orders.CreateWarehouseOrder(ctx, e.newOrder("EV-3", eanA)))

	// Paging two at a time gives every event once, in order.
	var paged []storelink.EventRecord
	after := ""
	for range len(steps) {
		page, next, err := s.Orders.Events(ctx, id, after, 2)
		must(t, err)
		if len(page) == 0 || len(page) > 2 || next == after {
			t.Fatalf("page after %q = %d events, next %q", after, len(page), next)
		}
		if next != page[len(page)-1].Cursor {
			t.Fatalf("next cursor %q, want the last event's %q", next, page[len(page)-1].Cursor)
		}
		paged, after = append(paged, page...), next
		if len(paged) == len(steps) {
			break
		}
	}
	if len(paged) != len(steps) {
		t.Fatalf("paging gave %d events, want %d", len(paged), len(steps))
	}
	for i, r := range paged {
		ev, want := e.decodeEvent(r), steps[i]
		if r.ClientID != id || r.OrderID != want.order.ID || ev.State != want.state || ev.StoreID != want.store ||
			ev.OrderNumber != want.order.OrderNumber || ev.Timestamp != want.at.UTC().Format(storelink.EventTimeLayout) {
			t.Fatalf("event %d = %+v (%s), want %s of order %s at %s", i, r, r.Payload, want.state, want.order.ID, want.at)
		}
	}
	if all := e.clientEvents(id); !reflect.DeepEqual(all, paged) {
		t.Fatal("reading the events again gave other events")
	}
	// Nothing new: no events, the same cursor.
	page, next, err := s.Orders.Events(ctx, id, after, 2)
	must(t, err)
	if len(page) != 0 || next != after {
		t.Fatalf("after the last event: %d events, next %q; want none and %q", len(page), next, after)
	}
	// A new event shows up after the cursor.
	did(storelink.StateWarehouseReturned, "")(s.Orders.WarehouseReturn(ctx, w.ID, storelink.WarehouseReturnRequest{Items: []storelink.WarehouseReturnItem{{ItemID: w.Items[0].ItemID}}}))
	page, next, err = s.Orders.Events(ctx, id, after, 2)
	must(t, err)
	if len(page) != 1 || page[0].OrderID != w.ID || page[0].State != storelink.StateWarehouseReturned || next != page[0].Cursor {
		t.Fatalf("events after the cursor = %+v, next %q", page, next)
	}
	theirs := e.clientEvents(other.ID)
	if len(theirs) != 2 {
		t.Fatalf("the other client has %d events, want its 2", len(theirs))
	}
	for _, r := range theirs {
		if r.ClientID != other.ID {
			t.Fatalf("event %+v listed for client %s", r, other.ID)
		}
	}
	for _, bad := range []string{"x", "-1", "1.5", "01", "1.ABCDEF01", "1.abcdef0", "1.abcdef012", "1.abcdefgh", "+1"} {
		_, _, err = s.Orders.Events(ctx, id, bad, 2)
		wantCode(t, err, storelink.EINVALID)
	}
	// A cursor past the newest event, as a consumer holds after the
	// database was restored from an older backup, is refused naming the
	// newest; the newest itself is an empty page.
	newest := next
	last, tag, ok := storelink.ParseEventCursor(newest)
	if !ok || tag == "" || !storelink.TagOf(tag, page[len(page)-1].EventID) {
		t.Fatalf("cursor %q: want the event's number and a tag of its id %s", newest, page[len(page)-1].EventID)
	}
	for _, ahead := range []string{strconv.FormatInt(last+1, 10), strconv.FormatInt(last+1000, 10), "9223372036854775807",
		storelink.EventCursor(last+1, page[len(page)-1].EventID)} {
		page, _, err := s.Orders.Events(ctx, id, ahead, 2)
		if e := asError(err); e == nil || e.Code != storelink.ECURSORAHEAD || e.Cursor != newest || page != nil {
			t.Fatalf("events after %s (newest %s) = %+v, %v; want cursor_ahead naming %s", ahead, newest, page, err, newest)
		}
	}
	if page, next, err := s.Orders.Events(ctx, id, newest, 2); err != nil || len(page) != 0 || next != newest {
		t.Fatalf("events after the newest = %+v, %q, %v; want none and the same cursor", page, next, err)
	}
	// A cursor this feed did not give out, though its number is one of the
	// client's events: the tag of another event (as after a restore, when
	// the number went to a new event), or of another client's event (on a
	// database that numbers all clients' events together, its number may
	// not even be the client's). Refused naming the newest, not read on
	// from, which would skip or repeat events.
	first := e.clientEvents(id)[0]
	firstNumber, _, _ := storelink.ParseEventCursor(first.Cursor)
	for _, foreign := range []string{
		storelink.EventCursor(firstNumber, storelink.NewID(time.Now())),
		storelink.EventCursor(firstNumber, theirs[0].EventID),
		theirs[0].Cursor,
	} {
		page, _, err := s.Orders.Events(ctx, id, foreign, 2)
		if e := asError(err); e == nil || e.Code != storelink.ECURSORAHEAD || e.Cursor != newest || page != nil {
			t.Fatalf("events after %s, a cursor not given out for this feed = %+v, %v; want cursor_ahead naming %s", foreign, page, err, newest)
		}
	}
	// The bare number of an event, as cursors were before they had a tag,
	// still reads on from it.
	if page, _, err := s.Orders.Events(ctx, id, strconv.FormatInt(firstNumber, 10), 1); err != nil || len(page) != 1 ||
		page[0].EventID == first.EventID {
		t.Fatalf("events after the bare number of the first = %+v, %v; want the one after it", page, err)
	}

	// An order's events, oldest first; the payload is the whole event.
	evs := e.orderEvents(o1.ID)
	if got := eventStates(evs); !reflect.DeepEqual(got, []storelink.OrderState{storelink.StateAssigned, storelink.StateFulfilled, storelink.StateReturned}) {
		t.Fatalf("events of order %s: %v", o1.ID, got)
	}
	a := evs[0]
	if a.OrderID != o1.ID || a.OrderNumber != "EV-1" || a.StoreID != "S1" || a.CustomerBillingAddress == nil ||
		*a.CustomerBillingAddress != *n.CustomerBillingAddress || a.DeliveryDetails == nil || a.DeliveryDetails.DeliveryCarrierName != "DHL" ||
		len(a.Items) != 1 || a.Items[0].ItemID != o1.Items[0].ItemID || a.Items[0].Price != 1999 || a.Items[0].ArticleNumber != "A-"+eanA {
		t.Fatalf("assigned event = %+v", a)
	}
	if evs[0].EventID == evs[1].EventID || evs[1].EventID == evs[2].EventID {
		t.Fatal("events share an id")
	}
	_, err = s.Orders.OrderEvents(ctx, "nope")
	wantCode(t, err, storelink.ENOTFOUND)
}

// testOrderListing: orders newest first, filtered, a page at a time.
func testOrderListing(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	e.feed(row("S1", eanA, 100, 100))
	var ids []string
	for _, number := range []string{"L-1", "L-2", "L-1", "L-3"} {
		ids = append(ids, e.create(e.newOrder(number, eanA, eanA)).ID)
		e.clock.Advance(time.Millisecond)
	}
	_, err := s.Orders.CancelOrder(ctx, ids[1], storelink.CancelRequest{})
	must(t, err)
	p, err := s.Partners.CreatePartner(ctx, "Other")
	must(t, err)
	other, err := s.Partners.CreateClient(ctx, p.ID, "FR", "EUR")
	must(t, err)
	_, _, err = s.Partners.PutStore(ctx, other.ID, "S1", "")
	must(t, err)
	price := storelink.Money(100)
	theirs, err := s.Orders.CreateOrder(ctx, storelink.NewOrder{OrderNumber: "L-1", ClientID: other.ID, StoreID: "S1",
		Items: []storelink.NewItem{{EAN: eanA, MarketplaceArticleNumber: "M", ArticleNumber: "X", Price: &price}}})
	must(t, err)

	for _, c := range []struct {
		f    storelink.OrderFilter
		want []string
	}{
		{storelink.OrderFilter{ClientID: id, Limit: 10}, []string{ids[3], ids[2], ids[1], ids[0]}},
		{storelink.OrderFilter{ClientID: id, Limit: 2}, []string{ids[3], ids[2]}},
		{storelink.OrderFilter{ClientID: id, Limit: 10, Before: ids[2]}, []string{ids[1], ids[0]}},
		{storelink.OrderFilter{ClientID: id, Limit: 1, Before: ids[1]}, []string{ids[0]}},
		{storelink.OrderFilter{ClientID: id, Limit: 10, Before: ids[0]}, []string{}},
		{storelink.OrderFilter{ClientID: id, OrderNumber: "L-1", Limit: 10}, []string{ids[2], ids[0]}},
		{storelink.OrderFilter{ClientID: id, State: storelink.StateCancelled, Limit: 10}, []string{ids[1]}},
		{storelink.OrderFilter{ClientID: id, State: storelink.StateAssigned, OrderNumber: "L-1", Limit: 10}, []string{ids[2], ids[0]}},
		{storelink.OrderFilter{ClientID: id, State: storelink.StateFulfilled, Limit: 10}, []string{}},
		{storelink.OrderFilter{ClientID: other.ID, Limit: 10}, []string{theirs.ID}},
		{storelink.OrderFilter{OrderNumber: "L-1", Limit: 10}, []string{theirs.ID, ids[2], ids[0]}},
	} {
		list, err := s.Orders.Orders(ctx, c.f)
		must(t, err)
		got := []string{}
		for _, o := range list {
			got = append(got, o.ID)
			e.sameAsStored(&o)
			if len(o.Items) != 2 && o.ID != theirs.ID {
				t.Fatalf("listed order %s has %d items, want 2", o.ID, len(o.Items))
			}
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Fatalf("Orders(%+v) = %v, want %v", c.f, got, c.want)
		}
	}
	// A before that is no order is refused rather than read as the end.
	for _, before := range []string{"garbage", "0", storelink.NewID(time.Now())} {
		_, err = s.Orders.Orders(ctx, storelink.OrderFilter{ClientID: id, Limit: 10, Before: before})
		wantCode(t, err, storelink.EINVALID)
	}
	_, err = s.Orders.Order(ctx, "nope")
	wantCode(t, err, storelink.ENOTFOUND)
}

// testOrderTransitions: every change the transition table forbids is
// ECONFLICT naming the current state, and writes nothing.
func testOrderTransitions(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 100, 100))
	two := e.newOrder("X", eanA, eanA)
	retFirst := storelink.ReturnRequest{Items: []storelink.ReturnItem{{ReturnLocation: storelink.ReturnToStore}}}
	orders := map[storelink.OrderState]*storelink.Order{}
	var err error
	o := e.create(two)
	orders[storelink.StateAssigned] = o
	o = e.create(two)
	orders[storelink.StateCancelled], err = s.Orders.CancelOrder(ctx, o.ID, storelink.CancelRequest{})
	must(t, err)
	o = e.create(two)
	orders[storelink.StateFulfilled], err = s.Orders.FulfilOrder(ctx, o.ID, storelink.FulfilRequest{})
	must(t, err)
	o = e.create(two)
	_, err = s.Orders.FulfilOrder(ctx, o.ID, storelink.FulfilRequest{})
	must(t, err)
	retFirst.Items[0].ItemID = o.Items[0].ItemID
	orders[storelink.StateReturned], err = s.Orders.ReturnItems(ctx, o.ID, retFirst)
	must(t, err)
	orders[storelink.StateWarehouseFulfilled], err = s.Orders.CreateWarehouseOrder(ctx, two)
	must(t, err)
	o, err = s.Orders.CreateWarehouseOrder(ctx, two)
	must(t, err)
	orders[storelink.StateWarehouseReturned], err = s.Orders.WarehouseReturn(ctx, o.ID,
		storelink.WarehouseReturnRequest{Items: []storelink.WarehouseReturnItem{{ItemID: o.Items[0].ItemID}}})
	must(t, err)

	// Each change names the last item, which every order still has in the
	// state the change needs, so that only the transition can refuse it.
	changes := []struct {
		name string
		to   storelink.OrderState
		do   func(o *storelink.Order) error
	}{
		{"cancel", storelink.StateCancelled, func(o *storelink.Order) error {
			_, err := s.Orders.CancelOrder(ctx, o.ID, storelink.CancelRequest{Reassign: true,
				Items: []storelink.ItemReason{{ItemID: o.Items[1].ItemID, CancellationReason: storelink.ReasonOutOfStock}}})
			return err
		}},
		{"fulfil", storelink.StateFulfilled, func(o *storelink.Order) error {
			_, err := s.Orders.FulfilOrder(ctx, o.ID, storelink.FulfilRequest{PickedItemIDs: []string{o.Items[1].ItemID}})
			return err
		}},
		{"return", storelink.StateReturned, func(o *storelink.Order) error {
			_, err := s.Orders.ReturnItems(ctx, o.ID, storelink.ReturnRequest{Items: []storelink.ReturnItem{{ItemID: o.Items[1].ItemID, ReturnLocation: storelink.ReturnToStore}}})
			return err
		}},
		{"warehouse return", storelink.StateWarehouseReturned, func(o *storelink.Order) error {
			_, err := s.Orders.WarehouseReturn(ctx, o.ID, storelink.WarehouseReturnRequest{Items: []storelink.WarehouseReturnItem{{ItemID: o.Items[1].ItemID}}})
			return err
		}},
	}
	refusedCount := 0
	for _, from := range storelink.OrderStates {
		for _, c := range changes {
			if storelink.CanTransition(from, c.to) {
				continue
			}
			refusedCount++
			before := e.world()
			err := c.do(orders[from])
			e.refused(before, err, storelink.ECONFLICT, fmt.Sprintf("a %s of a %s order", c.name, from))
			if msg := storelink.ErrorMessage(err); !strings.Contains(msg, string(from)) {
				t.Fatalf("a %s of a %s order: %q does not name the current state", c.name, from, msg)
			}
		}
	}
	if refusedCount != 18 {
		t.Fatalf("%d forbidden changes tried, want 18 (6 states × 4 changes − 6 allowed)", refusedCount)
	}
}
