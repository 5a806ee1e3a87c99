package storetest

import (
	"strings"
	"time"

	"storelink"
)

// keyed is n with an idempotency key.
func keyed(n storelink.NewOrder, key string) storelink.NewOrder {
	n.IdempotencyKey = key
	return n
}

// wantReplay fails unless o is the answer to a retry: the order first made,
// marked as replayed, and as it is stored now.
func (e *env) wantReplay(o *storelink.Order, err error, first *storelink.Order) {
	e.t.Helper()
	must(e.t, err)
	if o.ID != first.ID || !o.Replayed {
		e.t.Fatalf("retry with the key answered order %s (replayed %v), want %s replayed", o.ID, o.Replayed, first.ID)
	}
	e.sameAsStored(o)
}

// testOrderKeyReplay: a retry with the key and the same request answers
// with the order the first call made and writes nothing: no order, no
// event, no delivery. Later changes of the order show in the answer.
func testOrderKeyReplay(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 5, 100))
	e.endpoint("https://all.test", "")
	n := keyed(e.newOrder("K-1", eanA, eanA), "key-1")
	first, err := s.Orders.CreateOrder(ctx, n)
	must(t, err)
	if first.Replayed {
		t.Fatalf("the first call with a key is marked replayed: %+v", first)
	}
	e.sameAsStored(first)
	before := e.world()
	deliveries := len(e.deliveries())
	e.clock.Advance(time.Hour)
	// The same request, built again.
	again, err := s.Orders.CreateOrder(ctx, keyed(e.newOrder("K-1", eanA, eanA), "key-1"))
	e.wantReplay(again, err, first)
	e.unchanged(before, "a retry")
	if got := len(e.deliveries()); got != deliveries {
		t.Fatalf("a retry made deliveries: %d before, %d after", deliveries, got)
	}
	e.wantStock("S1", eanA, 5, 2, 3)

	// The answer is the order as it now stands.
	_, err = s.Orders.FulfilOrder(ctx, first.ID, storelink.FulfilRequest{})
	must(t, err)
	again, err = s.Orders.CreateOrder(ctx, n)
	e.wantReplay(again, err, first)
	if again.State != storelink.StateFulfilled {
		t.Fatalf("retry after fulfilment answered state %s, want fulfilled", again.State)
	}

	// Warehouse orders the same way; the key is another one.
	w := keyed(e.newOrder("K-2", eanA), "key-2")
	wFirst, err := s.Orders.CreateWarehouseOrder(ctx, w)
	must(t, err)
	before = e.world()
	again, err = s.Orders.CreateWarehouseOrder(ctx, w)
	e.wantReplay(again, err, wFirst)
	e.unchanged(before, "a warehouse retry")

	// Without a key, the same request twice is two orders.
	plain := e.newOrder("K-3", eanA)
	a, b := e.create(plain), e.create(plain)
	if a.ID == b.ID {
		t.Fatal("two calls without a key made one order")
	}
}

// testOrderKeyMismatch: a key stands for one request; another body, or the
// same body to the other create call, is refused and writes nothing. A
// malformed key is refused before anything is read.
func testOrderKeyMismatch(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 5, 100), row("S2", eanB, 5, 100))
	first, err := s.Orders.CreateOrder(ctx, keyed(e.newOrder("M-1", eanA), "key-1"))
	must(t, err)
	before := e.world()
	for what, call := range map[string]func() error{
		"another item": func() error {
			_, err := s.Orders.CreateOrder(ctx, keyed(e.newOrder("M-1", eanB), "key-1"))
			return err
		},
		"another order number": func() error {
			_, err := s.Orders.CreateOrder(ctx, keyed(e.newOrder("M-2", eanA), "key-1"))
			return err
		},
		"a store given": func() error {
			n := keyed(e.newOrder("M-1", eanA), "key-1")
			n.StoreID = "S1"
			_, err := s.Orders.CreateOrder(ctx, n)
			return err
		},
		"the warehouse call": func() error {
			_, err := s.Orders.CreateWarehouseOrder(ctx, keyed(e.newOrder("M-1", eanA), "key-1"))
			return err
		},
	} {
		err := call()
		e.refused(before, err, storelink.EUNPROCESSABLE, "the key with "+what)
		if msg := storelink.ErrorMessage(err); !strings.Contains(msg, `"key-1"`) || !strings.Contains(msg, "different request") {
			t.Fatalf("the key with %s: message %q does not say the key was used for a different request", what, msg)
		}
	}
	// The key still answers its own request.
	again, err := s.Orders.CreateOrder(ctx, keyed(e.newOrder("M-1", eanA), "key-1"))
	e.wantReplay(again, err, first)

	for _, bad := range []string{string(make([]byte, storelink.MaxIdempotencyKey+1)), "tab\there", "ümlaut", "nul\x00"} {
		_, err := s.Orders.CreateOrder(ctx, keyed(e.newOrder("M-3", eanA), bad))
		e.refused(before, err, storelink.EINVALID, "a malformed key")
	}
	// The longest key, and one with a space and a tilde, are fine.
	_, err = s.Orders.CreateOrder(ctx, keyed(e.newOrder("M-3", eanA), strings.Repeat("k", storelink.MaxIdempotencyKey)))
	must(t, err)
	_, err = s.Orders.CreateOrder(ctx, keyed(e.newOrder("M-4", eanA), "a key ~1"))
	must(t, err)
}

// testOrderKeyScope: keys are per client; the same key of two clients is
// two orders.
func testOrderKeyScope(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 5, 100))
	p, err := s.Partners.CreatePartner(ctx, "Other")
	must(t, err)
	other, err := s.Partners.CreateClient(ctx, p.ID, "FR", "EUR")
	must(t, err)
	_, _, err = s.Partners.PutStore(ctx, other.ID, "S1", "")
	must(t, err)
	price := storelink.Money(100)
	mine, err := s.Orders.CreateOrder(ctx, keyed(e.newOrder("C-1", eanA), "shared"))
	must(t, err)
	theirs, err := s.Orders.CreateOrder(ctx, storelink.NewOrder{OrderNumber: "C-1", ClientID: other.ID, StoreID: "S1", IdempotencyKey: "shared",
		Items: []storelink.NewItem{{EAN: eanA, MarketplaceArticleNumber: "M", ArticleNumber: "X", Price: &price}}})
	must(t, err)
	if theirs.ID == mine.ID || theirs.Replayed || theirs.ClientID != other.ID {
		t.Fatalf("the other client's order with the same key = %+v, want a new order of its own", theirs)
	}
	if n := len(e.clientEvents(other.ID)); n != 1 {
		t.Fatalf("the other client has %d events, want 1", n)
	}
	again, err := s.Orders.CreateOrder(ctx, keyed(e.newOrder("C-1", eanA), "shared"))
	e.wantReplay(again, err, mine)
}

// testOrderKeyRace: identical calls with one key at once make one order;
// every call answers with it.
func testOrderKeyRace(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 50, 100))
	const racers = 8
	for _, c := range []struct {
		name   string
		create func(storelink.NewOrder) (*storelink.Order, error)
	}{
		{"orders", func(n storelink.NewOrder) (*storelink.Order, error) { return s.Orders.CreateOrder(ctx, n) }},
		{"warehouse orders", func(n storelink.NewOrder) (*storelink.Order, error) { return s.Orders.CreateWarehouseOrder(ctx, n) }},
	} {
		n := keyed(e.newOrder("R-"+c.name, eanA), "race "+c.name)
		answers := make([]*storelink.Order, racers)
		errs := make([]error, racers)
		all(racers, func(i int) { answers[i], errs[i] = c.create(n) })
		made := 0
		for i := range racers {
			must(t, errs[i])
			if answers[i].ID != answers[0].ID {
				t.Fatalf("%s: racing calls with one key answered orders %s and %s", c.name, answers[0].ID, answers[i].ID)
			}
			if !answers[i].Replayed {
				made++
			}
		}
		if made != 1 {
			t.Fatalf("%s: %d of %d racing calls say they made the order, want 1", c.name, made, racers)
		}
		list, err := s.Orders.Orders(ctx, storelink.OrderFilter{ClientID: e.client.ID, OrderNumber: n.OrderNumber, Limit: 100})
		must(t, err)
		if len(list) != 1 || len(e.orderEvents(list[0].ID)) != 1 {
			t.Fatalf("%s: %d orders after the race, want 1 with 1 event", c.name, len(list))
		}
	}
	e.wantStock("S1", eanA, 50, 1, 49)
}

// testOrderKeyExpiry: a key is remembered for IdempotencyKeyTTL; after that
// the same key, with any request, makes a new order, which the key then
// stands for.
func testOrderKeyExpiry(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 10, 100), row("S1", eanB, 10, 100))
	n := keyed(e.newOrder("E-1", eanA), "key-1")
	first, err := s.Orders.CreateOrder(ctx, n)
	must(t, err)
	// Other keys, expiring a little later, for the sweep to find.
	for _, k := range []string{"old-1", "old-2", "old-3", "old-4", "old-5", "old-6"} {
		e.clock.Advance(time.Millisecond)
		_, err := s.Orders.CreateWarehouseOrder(ctx, keyed(e.newOrder("E-"+k, eanA), k))
		must(t, err)
	}
	e.clock.Advance(storelink.IdempotencyKeyTTL - 7*time.Millisecond)
	again, err := s.Orders.CreateOrder(ctx, n)
	e.wantReplay(again, err, first)

	e.clock.Advance(time.Millisecond) // exactly IdempotencyKeyTTL after the first call
	second, err := s.Orders.CreateOrder(ctx, n)
	must(t, err)
	if second.ID == first.ID || second.Replayed {
		t.Fatalf("the key after %s answered %s (replayed %v), want a new order", storelink.IdempotencyKeyTTL, second.ID, second.Replayed)
	}
	again, err = s.Orders.CreateOrder(ctx, n)
	e.wantReplay(again, err, second)
	// An expired key may come with any request; a swept one too.
	e.clock.Advance(time.Hour)
	for _, k := range []string{"old-1", "old-6"} {
		o, err := s.Orders.CreateOrder(ctx, keyed(e.newOrder("E-new-"+k, eanB), k))
		must(t, err)
		if o.Replayed {
			t.Fatalf("expired key %s was replayed", k)
		}
	}
}

// testOrderKeyFailures: a call that fails leaves its key unused, so that a
// retry may succeed once the cause is gone; a failed write of the event
// takes the key with it.
func testOrderKeyFailures(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	n := keyed(e.newOrder("F-1", eanA), "key-1")
	before := e.world()
	_, err := s.Orders.CreateOrder(ctx, n)
	e.refused(before, err, storelink.ECONFLICT, "an order no store can take")
	e.feed(row("S1", eanA, 5, 100))

	heal := e.failEvents(t, "")
	before = e.world()
	_, err = s.Orders.CreateOrder(ctx, n)
	e.refused(before, err, storelink.EINTERNAL, "an order whose event could not be written")
	heal()

	o, err := s.Orders.CreateOrder(ctx, n)
	must(t, err)
	if o.Replayed {
		t.Fatalf("after failed calls the key answered a replay: %+v", o)
	}
	again, err := s.Orders.CreateOrder(ctx, n)
	e.wantReplay(again, err, o)
	if got := len(e.clientEvents(e.client.ID)); got != 1 {
		t.Fatalf("%d events after failed calls and a retry, want 1", got)
	}
}
