package storetest

import (
	"fmt"
	"sync"

	"storelink"
)

// testOrderAtomicity: when the event cannot be written, the state change
// it belongs with is not written either.
func testOrderAtomicity(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 5, 100), row("S2", eanA, 5, 100))
	failed := func(before world, err error, what string) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s succeeded though its event could not be written", what)
		}
		e.refused(before, err, storelink.EINTERNAL, what)
	}

	before := e.world()
	heal := e.failEvents(t, "")
	_, err := s.Orders.CreateOrder(ctx, e.newOrder("A-1", eanA, eanA))
	failed(before, err, "a create")
	_, err = s.Orders.CreateWarehouseOrder(ctx, e.newOrder("A-1", eanA))
	failed(before, err, "a warehouse order")
	heal()

	o := e.create(e.newOrder("A-1", eanA, eanA))
	e.wantStock(o.StoreID, eanA, 5, 2, 3)
	w, err := s.Orders.CreateWarehouseOrder(ctx, e.newOrder("A-2", eanA))
	must(t, err)
	before = e.world()
	heal = e.failEvents(t, "")
	_, err = s.Orders.CancelOrder(ctx, o.ID, storelink.CancelRequest{})
	failed(before, err, "a cancel")
	_, err = s.Orders.FulfilOrder(ctx, o.ID, storelink.FulfilRequest{PickedItemIDs: itemIDs(o)[:1]})
	failed(before, err, "a fulfil")
	_, err = s.Orders.WarehouseReturn(ctx, w.ID, storelink.WarehouseReturnRequest{Items: []storelink.WarehouseReturnItem{{ItemID: w.Items[0].ItemID}}})
	failed(before, err, "a warehouse return")
	heal()

	// The cancelled event is written, the reassigned order's is not: the
	// cancel, its event and the new order all go.
	heal = e.failEvents(t, storelink.StateAssigned)
	reassign := storelink.CancelRequest{Reassign: true, Items: []storelink.ItemReason{
		{ItemID: o.Items[0].ItemID, CancellationReason: storelink.ReasonOutOfStock},
		{ItemID: o.Items[1].ItemID, CancellationReason: storelink.ReasonOutOfStock},
	}}
	_, err = s.Orders.CancelOrder(ctx, o.ID, reassign)
	failed(before, err, "a cancel with reassign")
	heal()
	got, err := s.Orders.CancelOrder(ctx, o.ID, reassign)
	must(t, err)
	if got.ReassignedOrderID == "" {
		t.Fatalf("cancel with reassign after healing = %+v, want a new order", got)
	}
	n, err := s.Orders.Order(ctx, got.ReassignedOrderID)
	must(t, err)

	_, err = s.Orders.FulfilOrder(ctx, n.ID, storelink.FulfilRequest{})
	must(t, err)
	before = e.world()
	heal = e.failEvents(t, storelink.StateReturned)
	_, err = s.Orders.ReturnItems(ctx, n.ID, storelink.ReturnRequest{Items: []storelink.ReturnItem{{ItemID: n.Items[0].ItemID, ReturnLocation: storelink.ReturnToStore}}})
	failed(before, err, "a return")
	heal()
	_, err = s.Orders.ReturnItems(ctx, n.ID, storelink.ReturnRequest{Items: []storelink.ReturnItem{{ItemID: n.Items[0].ItemID, ReturnLocation: storelink.ReturnToStore}}})
	must(t, err)
	_, err = s.Orders.WarehouseReturn(ctx, w.ID, storelink.WarehouseReturnRequest{Items: []storelink.WarehouseReturnItem{{ItemID: w.Items[0].ItemID}}})
	must(t, err)
	e.wantStates(o.ID, storelink.StateAssigned, storelink.StateCancelled)
	e.wantStates(n.ID, storelink.StateAssigned, storelink.StateFulfilled, storelink.StateReturned)
	e.wantStates(w.ID, storelink.StateWarehouseFulfilled, storelink.StateWarehouseReturned)
}

// testOrderConcurrency: changes that race for the same units or the same
// order are decided one at a time; the losers are refused, not doubled.
func testOrderConcurrency(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 1, 100))
	const racers = 8
	race := func(fn func(i int) error) (won int, codes map[string]int) {
		errs := make([]error, racers)
		all(racers, func(i int) { errs[i] = fn(i) })
		codes = map[string]int{}
		for _, err := range errs {
			if err == nil {
				won++
			} else {
				codes[storelink.ErrorCode(err)]++
			}
		}
		return won, codes
	}
	// One unit in force: one order gets it.
	won, codes := race(func(int) error {
		_, err := s.Orders.CreateOrder(ctx, e.newOrder("Q-1", eanA))
		return err
	})
	if won != 1 || codes[storelink.ECONFLICT] != racers-1 {
		t.Fatalf("%d orders for the one unit succeeded, refusals %v; want 1 and %d conflicts", won, codes, racers-1)
	}
	e.wantStock("S1", eanA, 1, 1, 0)
	list, err := s.Orders.Orders(ctx, storelink.OrderFilter{ClientID: e.client.ID, Limit: 100})
	must(t, err)
	if len(list) != 1 || len(e.clientEvents(e.client.ID)) != 1 {
		t.Fatalf("%d orders after the race, want 1 with 1 event", len(list))
	}
	// One assigned order: one cancel or fulfil wins.
	o := &list[0]
	won, codes = race(func(i int) error {
		var err error
		if i%2 == 0 {
			_, err = s.Orders.CancelOrder(ctx, o.ID, storelink.CancelRequest{})
		} else {
			_, err = s.Orders.FulfilOrder(ctx, o.ID, storelink.FulfilRequest{})
		}
		return err
	})
	if won != 1 || codes[storelink.ECONFLICT] != racers-1 {
		t.Fatalf("%d changes of one assigned order succeeded, refusals %v; want 1 and %d conflicts", won, codes, racers-1)
	}
	if evs := e.orderEvents(o.ID); len(evs) != 2 {
		t.Fatalf("order %s has %d events after the race, want 2", o.ID, len(evs))
	}
}

// testRoutingOverlap: orders that race for units of EANs they share, each
// with another EAN that some racers share and some do not, are routed one
// at a time where they overlap: no unit is reserved twice, and every order
// refused is refused for want of stock, with nothing of it written.
func testRoutingOverlap(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	eans := []string{eanA, eanB, eanC}
	e.feed(row("S1", eanA, 2, 100), row("S1", eanB, 2, 100), row("S1", eanC, 2, 100))
	const racers = 12
	won := make([][]string, racers) // the EANs of each order made
	errs := make([]error, racers)
	all(racers, func(i int) {
		// Pairs in a ring (A B, B C, C A), so that the racers' needs
		// overlap in every order.
		pair := []string{eans[i%3], eans[(i+1)%3]}
		if _, errs[i] = s.Orders.CreateOrder(ctx, e.newOrder(fmt.Sprintf("R-%d", i), pair...)); errs[i] == nil {
			won[i] = pair
		}
	})
	orders, reserved := 0, map[string]int{}
	for i, err := range errs {
		if err != nil {
			if storelink.ErrorCode(err) != storelink.ECONFLICT {
				t.Fatalf("order %d: %v; want made or refused for stock", i, err)
			}
			continue
		}
		orders++
		for _, ean := range won[i] {
			reserved[ean]++
		}
	}
	// Six units in pairs: two orders (A B twice leaves only C) to three.
	if orders < 2 || orders > 3 {
		t.Fatalf("%d orders of %d made from 2 units of each of 3 EANs in pairs; want 2 or 3", orders, racers)
	}
	for _, ean := range eans {
		if reserved[ean] > 2 {
			t.Fatalf("%d units of %s reserved by the orders made; 2 were in force", reserved[ean], ean)
		}
		e.wantStock("S1", ean, 2, reserved[ean], 2-reserved[ean])
	}
	// Stock only went down: an order refused had an EAN with none left.
	for i, err := range errs {
		if pair := []string{eans[i%3], eans[(i+1)%3]}; err != nil && reserved[pair[0]] < 2 && reserved[pair[1]] < 2 {
			t.Fatalf("order %d of %v was refused (%v) while both had units free at the end", i, pair, err)
		}
	}
	list, err := s.Orders.Orders(ctx, storelink.OrderFilter{ClientID: e.client.ID, Limit: 100})
	must(t, err)
	if len(list) != orders || len(e.clientEvents(e.client.ID)) != orders {
		t.Fatalf("%d orders and %d events after the race, want %d of each", len(list), len(e.clientEvents(e.client.ID)), orders)
	}
}

// all runs fn(0) … fn(n-1) at once and waits for them.
func all(n int, fn func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(i)
		}()
	}
	wg.Wait()
}
