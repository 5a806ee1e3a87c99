package storetest

import (
	"reflect"

	"storelink"
)

// testOrderRouting: without a store id, the stock in force decides.
func testOrderRouting(e *env) {
	t := e.t
	_, _, err := e.s.Partners.PutStore(e.ctx, e.client.ID, "S3", "Store S3")
	must(t, err)
	e.feed(
		row("S1", eanA, 3, 100), row("S1", eanB, 1, 100), row("S1", eanC, 1, 100), row("S1", eanD, 2, 100),
		row("S2", eanA, 5, 100), row("S2", eanB, 0, 100), row("S2", eanC, 4, 100), row("S2", eanD, 2, 100),
		row("S3", eanA, 1, 100), row("S3", eanB, 1, 100),
	)
	for _, c := range []struct {
		name  string
		eans  []string
		store string
	}{
		{"more stock wins over a lower store id", []string{eanC}, "S2"},
		{"equal stock goes to the lowest store id", []string{eanD}, "S1"},
		// S2 has the most of A but none of B (a row of quantity 0 is no
		// stock); S1 has 3+1 of the two articles, S3 1+1.
		{"only a store that covers every item, most stock of them first", []string{eanA, eanB}, "S1"},
		// S1's only B is now reserved.
		{"reserved units are not in force", []string{eanB}, "S3"},
	} {
		o := e.create(e.newOrder("R-"+c.name, c.eans...))
		if o.StoreID != c.store {
			t.Fatalf("%s: order went to %q, want %s", c.name, o.StoreID, c.store)
		}
		e.wantStates(o.ID, storelink.StateAssigned)
	}
	// Two units of one article must both be at the store.
	before := e.world()
	_, err = e.s.Orders.CreateOrder(e.ctx, e.newOrder("R-two", eanB, eanB))
	e.refused(before, err, storelink.ECONFLICT, "an order no store covers")
	_, err = e.s.Orders.CreateOrder(e.ctx, e.newOrder("R-none", eanE))
	e.refused(before, err, storelink.ECONFLICT, "an order for an article no store has")
	// A store that has all but one article is not chosen, however much it has.
	_, err = e.s.Orders.CreateOrder(e.ctx, e.newOrder("R-mixed", eanA, eanC, eanE))
	e.refused(before, err, storelink.ECONFLICT, "an order one article of which nobody has")
}

// testOrderExplicitStore: a given store id is used as given.
func testOrderExplicitStore(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 0, 100), row("S2", eanB, 9, 100))
	// Used even without stock in force: the store's row gives the article data.
	n := e.newOrder("E-1", eanA)
	n.StoreID = "S1"
	o := e.create(n)
	if o.StoreID != "S1" || o.Items[0].ArticleNumber != "A-"+eanA || o.Items[0].Price != 100 {
		t.Fatalf("order at a store without stock = %+v", o)
	}
	e.wantStock("S1", eanA, 0, 1, 0)

	before := e.world()
	// S2 has no row for A; another store's row does not count.
	n = e.newOrder("E-2", eanA)
	n.StoreID = "S2"
	_, err := s.Orders.CreateOrder(ctx, n)
	e.refused(before, err, storelink.EUNPROCESSABLE, "an order at a store without the article's data")
	n.Items[0].ArticleNumber = "OWN-A"
	_, err = s.Orders.CreateOrder(ctx, n)
	e.refused(before, err, storelink.EUNPROCESSABLE, "an order at a store without a price for the article")
	price := storelink.Money(1250)
	n.Items[0].Price = &price
	o = e.create(n)
	if it := o.Items[0]; o.StoreID != "S2" || it.ArticleNumber != "OWN-A" || it.Price != 1250 || it.ArticleLocation != "" || it.Currency != "EUR" {
		t.Fatalf("order with the article data given = %+v", o)
	}

	before = e.world()
	n = e.newOrder("E-3", eanB)
	n.StoreID = "S9"
	_, err = s.Orders.CreateOrder(ctx, n)
	e.refused(before, err, storelink.EUNPROCESSABLE, "an order at an unknown store")
	// A store of another client is not a store of this one.
	p, err := s.Partners.CreatePartner(ctx, "Other")
	must(t, err)
	other, err := s.Partners.CreateClient(ctx, p.ID, "FR", "EUR")
	must(t, err)
	_, _, err = s.Partners.PutStore(ctx, other.ID, "S7", "")
	must(t, err)
	n.StoreID = "S7"
	_, err = s.Orders.CreateOrder(ctx, n)
	e.refused(before, err, storelink.EUNPROCESSABLE, "an order at another client's store")
	n = e.newOrder("E-4", eanB)
	n.ClientID = "nope"
	_, err = s.Orders.CreateOrder(ctx, n)
	e.refused(before, err, storelink.EUNPROCESSABLE, "an order of an unknown client")
	if evs := e.clientEvents("nope"); len(evs) != 0 {
		t.Fatalf("an unknown client has events: %+v", evs)
	}
}

// testOrderArticleData: article number, location and price come from the
// chosen store's row unless given; the currency is the client's.
func testOrderArticleData(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(
		storelink.StockRow{StoreID: "S1", EAN: eanA, ArticleNumber: "SKU-1", Quantity: 5, Price: 1999, ArticleLocation: "Dept 3"},
		storelink.StockRow{StoreID: "S2", EAN: eanA, ArticleNumber: "SKU-2", Quantity: 1, Price: 2500, ArticleLocation: "Back"},
	)
	o := e.create(e.newOrder("D-1", eanA))
	it := o.Items[0]
	if o.StoreID != "S1" || it.ItemID == "" || it.EAN != eanA || it.ArticleNumber != "SKU-1" || it.ArticleLocation != "Dept 3" ||
		it.Price != 1999 || it.Currency != "EUR" || it.MarketplaceArticleNumber != "M-"+eanA+"-0" || it.Status != storelink.ItemAssigned {
		t.Fatalf("item from the stock row = %+v", it)
	}
	ev := e.lastEvent(o.ID)
	want := storelink.EventItem{ItemID: it.ItemID, EAN: eanA, Price: 1999, Currency: "EUR", ArticleNumber: "SKU-1",
		MarketplaceArticleNumber: it.MarketplaceArticleNumber, ArticleLocation: "Dept 3"}
	if len(ev.Items) != 1 || !reflect.DeepEqual(ev.Items[0], want) || ev.CancelledItems != nil {
		t.Fatalf("assigned event items = %+v, want %+v", ev.Items, want)
	}

	// Given values win; what is not given still comes from the row.
	n := e.newOrder("D-2", eanA)
	price := storelink.Money(1500)
	n.Items[0].Price, n.Items[0].ArticleNumber = &price, "OWN-1"
	o = e.create(n)
	if it := o.Items[0]; o.StoreID != "S1" || it.ArticleNumber != "OWN-1" || it.Price != 1500 || it.ArticleLocation != "Dept 3" {
		t.Fatalf("item with given price and article number = %+v", it)
	}
	// The row of the store chosen, not another one's.
	n = e.newOrder("D-3", eanA)
	n.StoreID = "S2"
	o = e.create(n)
	if it := o.Items[0]; it.ArticleNumber != "SKU-2" || it.ArticleLocation != "Back" || it.Price != 2500 {
		t.Fatalf("item at S2 = %+v, want S2's row", it)
	}
	// The currency is the client's.
	p, err := s.Partners.CreatePartner(ctx, "Swiss")
	must(t, err)
	ch, err := s.Partners.CreateClient(ctx, p.ID, "CH", "CHF")
	must(t, err)
	_, _, err = s.Partners.PutStore(ctx, ch.ID, "Z1", "")
	must(t, err)
	o, err = s.Orders.CreateOrder(ctx, storelink.NewOrder{OrderNumber: "D-4", ClientID: ch.ID, StoreID: "Z1",
		Items: []storelink.NewItem{{EAN: eanA, MarketplaceArticleNumber: "M", Price: &price, ArticleNumber: "X"}}})
	must(t, err)
	if o.Items[0].Currency != "CHF" || o.ClientID != ch.ID {
		t.Fatalf("order of a CHF client = %+v", o)
	}
}

// testOrderReservations: assigned units are reserved until cancelled.
func testOrderReservations(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 2, 100), row("S2", eanA, 1, 100))
	first := e.create(e.newOrder("V-1", eanA, eanA))
	if first.StoreID != "S1" {
		t.Fatalf("first order at %s, want S1", first.StoreID)
	}
	e.wantStock("S1", eanA, 2, 2, 0)
	second := e.create(e.newOrder("V-2", eanA))
	if second.StoreID != "S2" {
		t.Fatalf("second order at %s, want S2: S1's units are reserved", second.StoreID)
	}
	e.wantStock("S2", eanA, 1, 1, 0)
	before := e.world()
	_, err := s.Orders.CreateOrder(ctx, e.newOrder("V-3", eanA))
	e.refused(before, err, storelink.ECONFLICT, "an order when every unit is reserved")

	cancelled, err := s.Orders.CancelOrder(ctx, first.ID, storelink.CancelRequest{})
	must(t, err)
	e.sameAsStored(cancelled)
	e.wantStock("S1", eanA, 2, 0, 2)
	e.wantStock("S2", eanA, 1, 1, 0)
	again := e.create(e.newOrder("V-3", eanA))
	if again.StoreID != "S1" {
		t.Fatalf("order after the cancel at %s, want S1", again.StoreID)
	}
	e.wantStock("S1", eanA, 2, 1, 1)
}

// testOrderFulfilledReservation: fulfilled units stay reserved until a feed
// row for their store and EAN is applied after the fulfilment.
func testOrderFulfilledReservation(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 3, 100), row("S1", eanB, 5, 100), row("S2", eanA, 1, 100))
	o := e.create(e.newOrder("F-1", eanA, eanA, eanA))
	e.wantStock("S1", eanA, 3, 3, 0)
	// A feed applied while the order is assigned releases nothing.
	e.feed(row("S1", eanA, 3, 100))
	e.wantStock("S1", eanA, 3, 3, 0)
	ids := itemIDs(o)
	f, err := s.Orders.FulfilOrder(ctx, o.ID, storelink.FulfilRequest{PickedItemIDs: ids[:2],
		CancelledItems: []storelink.ItemReason{{ItemID: ids[2], CancellationReason: storelink.ReasonItemBroken}}})
	must(t, err)
	e.sameAsStored(f)
	// The picked units stay reserved; the cancelled one is free again.
	e.wantStock("S1", eanA, 3, 2, 1)
	// Rows for another EAN, or for the EAN at another store, release nothing.
	e.feed(row("S1", eanB, 4, 100), row("S2", eanA, 7, 100))
	e.wantStock("S1", eanA, 3, 2, 1)
	// The partner's count after the sale: the fulfilled units are in it.
	e.feed(row("S1", eanA, 1, 100))
	e.wantStock("S1", eanA, 1, 0, 1)
	// Returned later, the units stay released.
	_, err = s.Orders.ReturnItems(ctx, o.ID, storelink.ReturnRequest{Items: []storelink.ReturnItem{{ItemID: ids[0], ReturnLocation: storelink.ReturnToStore}}})
	must(t, err)
	e.wantStock("S1", eanA, 1, 0, 1)
}
