package drivertest

import (
	"context"
	"slices"
	"strconv"
	"time"

	"storelink"
	"storelink/service"
)

// EANs with valid GS1 check digits.
const (
	eanA = "4006381333931"
	eanB = "5901234123457"
	eanC = "8712345678906"
)

// beginOrders starts an order transaction that is rolled back when the case
// ends, unless it ended before.
func (e *env) beginOrders() service.OrderTx {
	e.t.Helper()
	tx, err := e.d.Orders.Begin(e.ctx)
	must(e.t, err)
	e.t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// inOrderTx runs fn in an order transaction and commits it.
func (e *env) inOrderTx(fn func(tx service.OrderTx)) {
	e.t.Helper()
	tx := e.beginOrders()
	fn(tx)
	must(e.t, tx.Commit(e.ctx))
}

// write writes an order (and its event, if p has one) and returns the
// enabled endpoints WriteOrder read.
func (e *env) write(tx service.OrderTx, p service.WriteOrderParams) []storelink.Endpoint {
	e.t.Helper()
	eps, err := tx.WriteOrder(e.ctx, p)
	must(e.t, err)
	return eps
}

// writeEvent writes an event of the stored order o, made at at, and its
// deliveries to endpoints, in a transaction of its own.
func (e *env) writeEvent(o *storelink.Order, ev *storelink.Event, at time.Time, endpoints ...string) {
	e.t.Helper()
	e.inOrderTx(func(tx service.OrderTx) {
		e.write(tx, service.WriteOrderParams{Order: o, Event: ev, At: at})
		var ds []service.NewDelivery
		for _, id := range endpoints {
			ds = append(ds, service.NewDelivery{ID: storelink.NewID(at), EndpointID: id})
		}
		if len(ds) > 0 {
			must(e.t, tx.InsertDeliveries(e.ctx, service.InsertDeliveriesParams{ClientID: o.ClientID, Event: service.OrderEvent(ev), At: at,
				State: storelink.DeliveryPending, Deliveries: ds}))
		}
	})
}

// stockInForce reads the client's stock in force of the EANs at every
// store, in a transaction of its own.
func (e *env) stockInForce(eans ...string) storelink.StoreStock {
	e.t.Helper()
	tx := e.beginOrders()
	defer tx.Rollback(e.ctx)
	stock, err := tx.StockInForce(e.ctx, service.StockInForceParams{ClientID: e.client.ID, EANs: eans})
	must(e.t, err)
	return stock
}

func testTransactions(e *env) {
	cancelledBeginFails(e, "Orders", func(ctx context.Context) error {
		tx, err := e.d.Orders.Begin(ctx)
		if err == nil {
			_ = tx.Rollback(context.Background())
		}
		return err
	})
	cancelledBeginFails(e, "Uploads", func(ctx context.Context) error {
		tx, err := e.d.Uploads.Begin(ctx)
		if err == nil {
			_ = tx.Rollback(context.Background())
		}
		return err
	})
	cancelledBeginFails(e, "Webhooks", func(ctx context.Context) error {
		tx, err := e.d.Webhooks.Begin(ctx)
		if err == nil {
			_ = tx.Rollback(context.Background())
		}
		return err
	})
	cancelledBeginFails(e, "Webhooks' BeginRound", func(ctx context.Context) error {
		tx, err := e.d.Webhooks.BeginRound(ctx)
		if err == nil {
			_ = tx.Rollback(context.Background())
		}
		return err
	})
	kept, dropped := e.order("S1", eanA), e.order("S1", eanB)
	tx := e.beginOrders()
	e.write(tx, service.WriteOrderParams{Order: dropped, New: true})
	got, err := tx.GetOrder(e.ctx, service.GetOrderParams{ID: dropped.ID})
	must(e.t, err)
	sameOrder(e.t, "order read in its own transaction", got, dropped)
	must(e.t, tx.Rollback(e.ctx))
	_, err = e.d.Orders.GetOrder(e.ctx, dropped.ID)
	wantNotFound(e.t, "order of a rolled back transaction", err)

	tx = e.beginOrders()
	e.write(tx, service.WriteOrderParams{Order: kept, New: true})
	must(e.t, tx.Commit(e.ctx))
	if err := tx.Rollback(e.ctx); err != nil {
		e.t.Fatalf("Rollback after Commit = %v, want nothing done", err)
	}
	got, err = e.d.Orders.GetOrder(e.ctx, kept.ID)
	must(e.t, err)
	sameOrder(e.t, "order of a committed transaction", got, kept)
}

func testOrderRoundTrip(e *env) {
	o := e.order("S2", eanA, eanB, eanC)
	o.CustomerBillingAddress = &storelink.Address{FirstName: "Eva", LastName: "Muster", AddressLine1: "Hauptstr. 1",
		AddressLine2: "c/o Müller", ZipCode: "10115", City: "Berlin", CountryCode: "DE"}
	o.DeliveryDetails = &storelink.DeliveryDetails{DeliveryTrackingNumber: "T-1", DeliveryCarrierName: "DHL"}
	o.ReassignedFrom = storelink.NewID(e.at)
	code := storelink.ReturnReasonCode(-1)
	o.Items[1].Status, o.Items[1].CancellationReason, o.Items[1].Reserving = storelink.ItemCancelled, storelink.ReasonOutOfStock, false
	o.Items[2].Status, o.Items[2].ReturnReasonCode, o.Items[2].ReturnLocation, o.Items[2].ReturnStoreID =
		storelink.ItemReturned, &code, storelink.ReturnToStore, "S1"
	bare := e.order("", eanA) // a warehouse order: no store, no addresses
	bare.State, bare.Items[0].Reserving = storelink.StateWarehouseFulfilled, false
	e.insert(o)
	e.insert(bare)
	for _, want := range []*storelink.Order{o, bare} {
		got, err := e.d.Orders.GetOrder(e.ctx, want.ID)
		must(e.t, err)
		sameOrder(e.t, "order read back", got, want)
		tx := e.beginOrders()
		got, err = tx.GetOrder(e.ctx, service.GetOrderParams{ID: want.ID, ForUpdate: true})
		must(e.t, err)
		sameOrder(e.t, "order read back for update", got, want)
		must(e.t, tx.Rollback(e.ctx))
	}
	_, err := e.d.Orders.GetOrder(e.ctx, "no-such-order")
	wantNotFound(e.t, "GetOrder of an unknown id", err)
	tx := e.beginOrders()
	_, err = tx.GetOrder(e.ctx, service.GetOrderParams{ID: "no-such-order", ForUpdate: true})
	wantNotFound(e.t, "GetOrder for update of an unknown id", err)
}

func testOrderUpdate(e *env) {
	o := e.order("S1", eanA, eanB)
	e.insert(o)
	stored := *o
	stored.Items = slices.Clone(o.Items)

	now := e.tick()
	o.State, o.UpdatedAt, o.ReassignedOrderID = storelink.StateCancelled, now, storelink.NewID(now)
	o.DeliveryDetails = &storelink.DeliveryDetails{ReturnTrackingNumber: "R-1"}
	o.Items[0].Status, o.Items[0].CancellationReason, o.Items[0].Reserving = storelink.ItemCancelled, storelink.ReasonItemBroken, false
	o.Items[1].Status = storelink.ItemFulfilled // changed in memory, not asked to be written
	o.Items = append(o.Items, storelink.Item{ItemID: storelink.NewID(now), EAN: eanC, Price: 5, Currency: "EUR",
		ArticleNumber: "A-C", MarketplaceArticleNumber: "M-C", Status: storelink.ItemAssigned, Reserving: true})
	e.inOrderTx(func(tx service.OrderTx) {
		e.write(tx, service.WriteOrderParams{Order: o, Inserted: []int{2}, Updated: []int{0}})
	})

	want := *o
	want.Items = slices.Clone(o.Items)
	want.Items[1] = stored.Items[1]
	got, err := e.d.Orders.GetOrder(e.ctx, o.ID)
	must(e.t, err)
	sameOrder(e.t, "order after WriteOrder", got, &want)
}

func testListOrders(e *env) {
	var made []*storelink.Order
	for i := range 3 {
		o := e.order("S1", eanA)
		if i == 1 {
			o.State = storelink.StateWarehouseFulfilled
		}
		e.insert(o)
		made = append(made, o)
	}
	ids := func(list []storelink.Order) []string {
		out := []string{}
		for _, o := range list {
			out = append(out, o.ID)
		}
		return out
	}
	for _, c := range []struct {
		name string
		f    storelink.OrderFilter
		want []*storelink.Order
	}{
		{"all", storelink.OrderFilter{Limit: 10}, []*storelink.Order{made[2], made[1], made[0]}},
		{"by client", storelink.OrderFilter{ClientID: e.client.ID, Limit: 10}, []*storelink.Order{made[2], made[1], made[0]}},
		{"another client", storelink.OrderFilter{ClientID: "other", Limit: 10}, nil},
		{"by number", storelink.OrderFilter{OrderNumber: made[1].OrderNumber, Limit: 10}, []*storelink.Order{made[1]}},
		{"by state", storelink.OrderFilter{State: storelink.StateAssigned, Limit: 10}, []*storelink.Order{made[2], made[0]}},
		{"first page", storelink.OrderFilter{Limit: 2}, []*storelink.Order{made[2], made[1]}},
		{"next page", storelink.OrderFilter{Before: made[1].ID, Limit: 2}, []*storelink.Order{made[0]}},
	} {
		list, err := e.d.Orders.ListOrders(e.ctx, c.f)
		must(e.t, err)
		if list == nil {
			e.t.Fatalf("%s: ListOrders = nil, want a list", c.name)
		}
		want := []string{}
		for _, o := range c.want {
			want = append(want, o.ID)
		}
		if got := ids(list); !slices.Equal(got, want) {
			e.t.Fatalf("%s: ListOrders = %v, want %v", c.name, got, want)
		}
		for i := range list {
			sameOrder(e.t, c.name+": listed order", &list[i], c.want[i])
		}
	}
}

func testClientsAndStores(e *env) {
	p, err := e.seed.Partners.CreatePartner(e.ctx, "Other")
	must(e.t, err)
	other, err := e.seed.Partners.CreateClient(e.ctx, p.ID, "AT", "EUR")
	must(e.t, err)
	_, _, err = e.seed.Partners.PutStore(e.ctx, other.ID, "X1", "Elsewhere")
	must(e.t, err)
	tx := e.beginOrders()
	c, err := tx.GetClient(e.ctx, e.client.ID)
	must(e.t, err)
	if c.ID != e.client.ID || c.PartnerID != e.client.PartnerID || c.CountryCode != "DE" || c.Currency != "EUR" ||
		!c.CreatedAt.Equal(e.client.CreatedAt) {
		e.t.Fatalf("GetClient = %+v, want %+v", c, e.client.Client)
	}
	_, err = tx.GetClient(e.ctx, "no-such-client")
	wantNotFound(e.t, "GetClient of an unknown id", err)
	for _, c := range []struct {
		client, store string
		want          bool
	}{{e.client.ID, "S1", true}, {e.client.ID, "S2", true}, {e.client.ID, "X1", false}, {other.ID, "X1", true}, {other.ID, "S1", false}} {
		ok, err := tx.StoreExists(e.ctx, c.client, c.store)
		must(e.t, err)
		if ok != c.want {
			e.t.Fatalf("StoreExists(%s, %s) = %v, want %v", c.client, c.store, ok, c.want)
		}
	}
}

func testStockInForce(e *env) {
	e.feed(storelink.StockRow{StoreID: "S1", EAN: eanA, ArticleNumber: "A-1", Quantity: 5, Price: 1999, ArticleLocation: "L1"},
		storelink.StockRow{StoreID: "S2", EAN: eanA, ArticleNumber: "A-2", Quantity: 1, Price: 2999},
		storelink.StockRow{StoreID: "S2", EAN: eanB, ArticleNumber: "B-2", Quantity: 3, Price: 999})
	held := e.order("S1", eanA, eanA)
	released := e.order("S1", eanA)
	released.Items[0].Reserving = false
	e.insert(held)
	e.insert(released)

	tx := e.beginOrders()
	all, err := tx.StockInForce(e.ctx, service.StockInForceParams{ClientID: e.client.ID, EANs: []string{eanA, eanC}})
	must(e.t, err)
	for _, c := range []struct {
		store, ean                  string
		quantity, reserved, present int
	}{{"S1", eanA, 5, 2, 1}, {"S2", eanA, 1, 0, 1}, {"S2", eanB, 0, 0, 0}, {"S1", eanC, 0, 0, 0}} {
		s := all[c.store][c.ean]
		if c.present == 0 {
			if s != nil {
				e.t.Fatalf("StockInForce has %s at %s, which was not asked for or is not stocked", c.ean, c.store)
			}
			continue
		}
		if s == nil || s.Quantity != c.quantity || s.Reserved != c.reserved || s.Available != c.quantity-c.reserved {
			e.t.Fatalf("StockInForce %s at %s = %+v, want quantity %d, reserved %d", c.ean, c.store, s, c.quantity, c.reserved)
		}
	}
	if s := all["S1"][eanA]; s.ArticleNumber != "A-1" || s.Price != 1999 || s.ArticleLocation != "L1" {
		e.t.Fatalf("StockInForce row = %+v, want the feed's article data", s)
	}
	at, err := tx.StockInForce(e.ctx, service.StockInForceParams{ClientID: e.client.ID, StoreID: "S2", EANs: []string{eanA, eanB}})
	must(e.t, err)
	if len(at) != 1 || len(at["S2"]) != 2 {
		e.t.Fatalf("StockInForce at S2 = %v, want S2's two rows only", at)
	}
}

func testEvents(e *env) {
	p, err := e.seed.Partners.CreatePartner(e.ctx, "Other")
	must(e.t, err)
	other, err := e.seed.Partners.CreateClient(e.ctx, p.ID, "AT", "EUR")
	must(e.t, err)
	o, elsewhere := e.order("S1", eanA), e.order("", eanA)
	elsewhere.ClientID, elsewhere.State = other.ID, storelink.StateWarehouseFulfilled
	e.insert(o)
	e.insert(elsewhere)
	var evs []*storelink.Event
	for i := range 3 {
		ev := event(o)
		e.writeEvent(o, ev, e.tick())
		evs = append(evs, ev)
		if i == 0 { // another client's event between them
			e.writeEvent(elsewhere, event(elsewhere), e.at)
		}
	}
	list, err := e.d.Orders.ListEvents(e.ctx, e.client.ID, 0, 10)
	must(e.t, err)
	if len(list) != 3 {
		e.t.Fatalf("ListEvents = %d events, want the client's 3", len(list))
	}
	var seqs []int64
	for i, r := range list {
		seq, err := strconv.ParseInt(r.Cursor, 10, 64)
		if err != nil || r.EventID != evs[i].EventID || r.ClientID != e.client.ID || r.OrderID != o.ID || r.State != o.State ||
			string(r.Payload) != string(evs[i].Marshal()) {
			e.t.Fatalf("event %d = %+v, want %+v with a number for its cursor", i, r, evs[i])
		}
		seqs = append(seqs, seq)
	}
	if !slices.IsSorted(seqs) || seqs[0] == seqs[1] || seqs[1] == seqs[2] {
		e.t.Fatalf("event numbers %v, want rising in the order the events were written", seqs)
	}
	if page, err := e.d.Orders.ListEvents(e.ctx, e.client.ID, seqs[0], 1); err != nil || len(page) != 1 || page[0].EventID != evs[1].EventID {
		e.t.Fatalf("ListEvents after the first, limit 1 = %+v, %v; want the second", page, err)
	}
	if page, err := e.d.Orders.ListEvents(e.ctx, e.client.ID, seqs[2], 10); err != nil || page == nil || len(page) != 0 {
		e.t.Fatalf("ListEvents after the last = %+v, %v; want an empty list", page, err)
	}
	if n, err := e.d.Orders.NewestEvent(e.ctx, e.client.ID); err != nil || n == nil || n.Cursor != strconv.FormatInt(seqs[2], 10) ||
		n.EventID != evs[2].EventID {
		e.t.Fatalf("NewestEvent = %+v, %v; want the last event, number %d", n, err, seqs[2])
	}
	p2, err := e.seed.Partners.CreatePartner(e.ctx, "Quiet")
	must(e.t, err)
	quiet, err := e.seed.Partners.CreateClient(e.ctx, p2.ID, "AT", "EUR")
	must(e.t, err)
	if n, err := e.d.Orders.NewestEvent(e.ctx, quiet.ID); err != nil || n != nil {
		e.t.Fatalf("NewestEvent of a client without events = %+v, %v; want none", n, err)
	}
	byOrder, err := e.d.Orders.ListOrderEvents(e.ctx, o.ID)
	must(e.t, err)
	if len(byOrder) != 3 || byOrder[0].EventID != evs[0].EventID || byOrder[2].EventID != evs[2].EventID {
		e.t.Fatalf("ListOrderEvents = %+v, want the order's 3, oldest first", byOrder)
	}
	for id, want := range map[string]bool{o.ID: true, "no-such-order": false} {
		if ok, err := e.d.Orders.OrderExists(e.ctx, id); err != nil || ok != want {
			e.t.Fatalf("OrderExists(%s) = %v, %v; want %v", id, ok, err, want)
		}
	}
}
