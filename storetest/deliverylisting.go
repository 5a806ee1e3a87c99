package storetest

import (
	"reflect"
	"time"

	"storelink"
)

// testDeliveryListing: deliveries newest first, by client, state, order,
// order number and event, a page at a time, each with its attempts in
// order.
func testDeliveryListing(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	e.feed(row("S1", eanA, 10, 100))
	e.endpoint("https://a.test", "")
	p, err := s.Partners.CreatePartner(ctx, "Other")
	must(t, err)
	other, err := s.Partners.CreateClient(ctx, p.ID, "FR", "EUR")
	must(t, err)
	_, _, err = s.Partners.PutStore(ctx, other.ID, "S1", "")
	must(t, err)
	_, err = s.Webhooks.CreateEndpoint(ctx, other.ID, storelink.NewEndpoint{URL: "https://other.test"}, newSecret())
	must(t, err)
	price := storelink.Money(100)

	var ids, orders, events []string // in the order the deliveries were made
	add := func(o *storelink.Order) {
		t.Helper()
		list, err := s.Webhooks.Deliveries(ctx, storelink.DeliveryFilter{Limit: 1})
		must(t, err)
		if len(list) != 1 || list[0].OrderID != o.ID {
			t.Fatalf("newest delivery = %+v, want order %s's", list, o.ID)
		}
		ids, orders, events = append(ids, list[0].ID), append(orders, o.ID), append(events, list[0].EventID)
		e.clock.Advance(time.Millisecond)
	}
	add(e.create(e.newOrder("L-1", eanA)))
	add(e.create(e.newOrder("L-2", eanA)))
	theirs, err := s.Orders.CreateOrder(ctx, storelink.NewOrder{OrderNumber: "X", ClientID: other.ID, StoreID: "S1",
		Items: []storelink.NewItem{{EAN: eanA, MarketplaceArticleNumber: "M", ArticleNumber: "X", Price: &price}}})
	must(t, err)
	add(theirs)
	add(e.create(e.newOrder("L-3", eanA)))
	add(e.create(e.newOrder("L-4", eanA)))
	d1, d2, dx, d3, d4 := ids[0], ids[1], ids[2], ids[3], ids[4]

	// d1 and dx succeed; d2 fails at its second attempt; d3 waits for a
	// retry; d4 stays leased.
	jobs := map[string]storelink.DeliveryJob{}
	for _, j := range e.claim("w", 100, 100) {
		jobs[j.DeliveryID] = j
	}
	r2, r3 := e.result(jobs[d2], storelink.OutcomeRetry, 500), e.result(jobs[d3], storelink.OutcomeRetry, 502)
	r2.NextAt, r3.NextAt = e.clock.Now().Add(time.Second), e.clock.Now().Add(time.Hour)
	e.record(e.result(jobs[d1], storelink.OutcomeSucceeded, 200), e.result(jobs[dx], storelink.OutcomeSucceeded, 200), r2, r3)
	e.clock.Advance(time.Second)
	j2 := e.claimOne("w")
	if j2.DeliveryID != d2 {
		t.Fatalf("claimed %s, want delivery %s", describe(j2), d2)
	}
	e.record(e.result(j2, storelink.OutcomeFailed, 500))

	for _, c := range []struct {
		f    storelink.DeliveryFilter
		want []string
	}{
		{storelink.DeliveryFilter{ClientID: id, Limit: 10}, []string{d4, d3, d2, d1}},
		{storelink.DeliveryFilter{Limit: 10}, []string{d4, d3, dx, d2, d1}},
		{storelink.DeliveryFilter{ClientID: id, Limit: 2}, []string{d4, d3}},
		{storelink.DeliveryFilter{ClientID: id, Limit: 10, Before: d3}, []string{d2, d1}},
		{storelink.DeliveryFilter{Limit: 1, Before: d3}, []string{dx}},
		{storelink.DeliveryFilter{ClientID: id, Limit: 10, Before: d1}, []string{}},
		{storelink.DeliveryFilter{ClientID: id, State: storelink.DeliveryPending, Limit: 10}, []string{d4, d3}},
		{storelink.DeliveryFilter{State: storelink.DeliverySucceeded, Limit: 10}, []string{dx, d1}},
		{storelink.DeliveryFilter{ClientID: id, State: storelink.DeliverySucceeded, Limit: 10}, []string{d1}},
		{storelink.DeliveryFilter{ClientID: id, State: storelink.DeliveryFailed, Limit: 10}, []string{d2}},
		{storelink.DeliveryFilter{ClientID: other.ID, State: storelink.DeliveryFailed, Limit: 10}, []string{}},
		{storelink.DeliveryFilter{ClientID: other.ID, Limit: 10}, []string{dx}},
		{storelink.DeliveryFilter{ClientID: id, OrderID: orders[1], Limit: 10}, []string{d2}},
		{storelink.DeliveryFilter{OrderID: orders[2], Limit: 10}, []string{dx}},
		{storelink.DeliveryFilter{ClientID: id, OrderID: orders[2], Limit: 10}, []string{}},
		{storelink.DeliveryFilter{ClientID: id, OrderID: orders[0], State: storelink.DeliverySucceeded, Limit: 10}, []string{d1}},
		{storelink.DeliveryFilter{ClientID: id, OrderID: orders[0], State: storelink.DeliveryFailed, Limit: 10}, []string{}},
		{storelink.DeliveryFilter{ClientID: id, OrderNumber: "L-3", Limit: 10}, []string{d3}},
		{storelink.DeliveryFilter{ClientID: id, OrderNumber: "X", Limit: 10}, []string{}},
		{storelink.DeliveryFilter{ClientID: other.ID, OrderNumber: "L-3", Limit: 10}, []string{}},
		{storelink.DeliveryFilter{OrderNumber: "X", Limit: 10}, []string{dx}},
		{storelink.DeliveryFilter{ClientID: id, OrderNumber: "L-4", State: storelink.DeliveryPending, Limit: 10}, []string{d4}},
		{storelink.DeliveryFilter{ClientID: id, EventID: events[4], Limit: 10}, []string{d4}},
		{storelink.DeliveryFilter{ClientID: other.ID, EventID: events[4], Limit: 10}, []string{}},
		{storelink.DeliveryFilter{ClientID: id, EventID: storelink.NewID(time.Now()), Limit: 10}, []string{}},
		{storelink.DeliveryFilter{ClientID: id, OrderID: orders[1], EventID: events[3], Limit: 10}, []string{}},
	} {
		list, err := s.Webhooks.Deliveries(ctx, c.f)
		must(t, err)
		got := []string{}
		for _, d := range list {
			got = append(got, d.ID)
			if d.Attempts == nil {
				t.Fatalf("delivery %s lists its attempts as nil, want a list", d.ID)
			}
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Fatalf("Deliveries(%+v) = %v, want %v", c.f, got, c.want)
		}
	}
	// A before that is no delivery is refused rather than read as the end.
	for _, before := range []string{"garbage", "-1", storelink.NewID(time.Now())} {
		_, err := s.Webhooks.Deliveries(ctx, storelink.DeliveryFilter{Limit: 10, Before: before})
		wantCode(t, err, storelink.EINVALID)
	}
	e.wantDelivery(d4, storelink.DeliveryPending, e.delivery(d4).NextAttemptAt)
	d := e.wantDelivery(d2, storelink.DeliveryFailed, nil, 1, 2)
	if d.Attempts[0].StatusCode != 500 || !d.Attempts[1].At.After(d.Attempts[0].At) {
		t.Fatalf("attempts of %s = %+v, want them in order", d2, d.Attempts)
	}
}

// testPendingDeliveries: the count of pending deliveries and the age of
// the oldest, by the store's clock.
func testPendingDeliveries(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	want := func(n int, age time.Duration) {
		t.Helper()
		gotN, gotAge, err := s.Webhooks.PendingDeliveries(ctx)
		must(t, err)
		if gotN != n || gotAge != age {
			t.Fatalf("pending deliveries = %d, oldest %s; want %d, %s", gotN, gotAge, n, age)
		}
	}
	want(0, 0)
	e.feed(row("S1", eanA, 10, 100))
	e.endpoint("https://a.test", "")
	e.create(e.newOrder("Q-1", eanA))
	e.clock.Advance(10 * time.Second)
	e.create(e.newOrder("Q-2", eanA))
	e.clock.Advance(5 * time.Second)
	want(2, 15*time.Second)
	jobs := e.claim("w", 100, 100)
	if len(jobs) != 2 {
		t.Fatalf("claimed %s, want 2", describe(jobs...))
	}
	want(2, 15*time.Second) // leased is still pending
	first, second := jobs[0], jobs[1]
	if e.delivery(first.DeliveryID).CreatedAt.After(e.delivery(second.DeliveryID).CreatedAt) {
		first, second = second, first
	}
	e.record(e.result(first, storelink.OutcomeSucceeded, 200))
	want(1, 5*time.Second)
	failed := func() int {
		t.Helper()
		n, err := s.Webhooks.FailedDeliveries(ctx)
		must(t, err)
		return n
	}
	if n := failed(); n != 0 {
		t.Fatalf("failed deliveries = %d before any failed, want 0", n)
	}
	e.record(e.result(second, storelink.OutcomeFailed, 500))
	want(0, 0)
	if n := failed(); n != 1 {
		t.Fatalf("failed deliveries = %d, want 1", n)
	}
	must(t, s.Webhooks.Redeliver(ctx, second.DeliveryID))
	if n := failed(); n != 0 {
		t.Fatalf("failed deliveries after a redelivery = %d, want 0", n)
	}
}
