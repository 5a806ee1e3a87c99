package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// orderJSON is an order as the API answers it.
type orderJSON struct {
	ID                string     `json:"order_id"`
	OrderNumber       string     `json:"order_number"`
	ClientID          string     `json:"client_id"`
	StoreID           string     `json:"store_id"`
	State             string     `json:"state"`
	Items             []itemJSON `json:"items"`
	ReassignedFrom    string     `json:"reassigned_from"`
	ReassignedOrderID string     `json:"reassigned_order_id"`
}

type itemJSON struct {
	ItemID string `json:"item_id"`
	EAN    string `json:"ean"`
	Status string `json:"status"`
}

// call is one order change as its client saw it, with the event it must
// have written.
type call struct {
	kind     string // create, warehouse-create, reassigned, cancel, fulfil, return, warehouse-return
	sent     time.Time
	answered time.Time // the answer, or the read that told whether it took effect
	status   int       // the answer's status; 0: none
	acked    bool      // answered 2xx: its event must be there, once
	maybe    bool      // no answer or 5xx: its event may be there, once
	refused  string    // a 4xx to a change the model allows: a counter-example
	// The event it writes: its state, and the ids of its items and
	// cancelled items (nil: not known, for a create without an answer).
	state     string
	items     []string
	cancelled []string
}

// orderRec is one order and the changes sent to it, in order.
type orderRec struct {
	client    *clientModel
	id        string
	number    string
	warehouse bool
	mu        sync.Mutex
	calls     []*call
	last      orderJSON // as last read
}

// orderBook is every order the workload made or tried to make.
type orderBook struct {
	mu     sync.Mutex
	byID   map[string]*orderRec
	lost   []lostCreate // creates never answered: the order may exist
	number int
}

// lostCreate is a create whose every try went unanswered.
type lostCreate struct {
	client *clientModel
	number string
	call   *call
}

func newOrderBook() *orderBook { return &orderBook{byID: map[string]*orderRec{}} }

func (b *orderBook) add(o *orderRec) {
	b.mu.Lock()
	b.byID[o.id] = o
	b.mu.Unlock()
}

func (b *orderBook) nextNumber(c *clientModel) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.number++
	return fmt.Sprintf("SOAK-%d-%06d", c.idx, b.number)
}

func ids(items []itemJSON, keep func(itemJSON) bool) []string {
	var out []string
	for _, it := range items {
		if keep == nil || keep(it) {
			out = append(out, it.ItemID)
		}
	}
	slices.Sort(out)
	return out
}

func randomKey(rng *rand.Rand) string {
	b := make([]byte, 16)
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	return hex.EncodeToString(b)
}

// orderWorker takes orders through their lives until ctx is done.
func (s *soak) orderWorker(ctx context.Context, rng *rand.Rand) {
	for ctx.Err() == nil {
		c := s.clients[rng.IntN(len(s.clients))]
		if rng.IntN(7) == 0 {
			if o := s.createOrder(ctx, c, rng, true); o != nil {
				for range rng.IntN(3) {
					if !s.change(ctx, o, rng, "warehouse-return") {
						break
					}
				}
			}
		} else if o := s.createOrder(ctx, c, rng, false); o != nil {
			s.storeOrderLife(ctx, o, rng)
		}
		sleep(ctx, jitter(rng, 10*time.Millisecond, 200*time.Millisecond))
	}
}

// storeOrderLife fulfils (then returns some items), cancels (perhaps with
// reassignment, and then the new order lives on) or leaves an order
// assigned, so that reservations stay open.
func (s *soak) storeOrderLife(ctx context.Context, o *orderRec, rng *rand.Rand) {
	for hop := 0; o != nil && hop < 3 && ctx.Err() == nil; hop++ {
		sleep(ctx, jitter(rng, 0, 150*time.Millisecond))
		switch r := rng.IntN(10); {
		case r < 5:
			if s.change(ctx, o, rng, "fulfil") {
				for range rng.IntN(3) {
					if !s.change(ctx, o, rng, "return") {
						break
					}
				}
			}
			return
		case r < 8:
			if !s.change(ctx, o, rng, "cancel") {
				return
			}
			o.mu.Lock()
			next := o.last.ReassignedOrderID
			o.mu.Unlock()
			o = s.orders.get(next)
		default:
			return
		}
	}
}

func (b *orderBook) get(id string) *orderRec {
	if id == "" {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byID[id]
}

// createOrder creates an order with an idempotency key, sending it again
// with the same key after no answer or a 5xx (30 s at most). nil when no
// store could take it, or when every try went unanswered.
func (s *soak) createOrder(ctx context.Context, c *clientModel, rng *rand.Rand, warehouse bool) *orderRec {
	number := s.orders.nextNumber(c)
	var items []map[string]any
	for range 1 + rng.IntN(3) {
		ean := c.hot[rng.IntN(len(c.hot))]
		it := map[string]any{"ean": ean, "marketplace_article_number": "MP-" + ean[8:]}
		if warehouse {
			it["price"] = "12.50"
			it["article_number"] = "WH-" + ean[8:]
		}
		items = append(items, it)
	}
	body := map[string]any{"order_number": number, "client_id": c.id, "items": items,
		"customer_billing_address": map[string]string{"first_name": "Ada", "last_name": "Lovelace",
			"address_line_1": "Main St 1", "zip_code": "10115", "city": "Berlin", "country_code": "DE"}}
	kind, path, state := "create", "/orders", "assigned"
	if warehouse {
		kind, path, state = "warehouse-create", "/warehouse-orders", "marketplace_warehouse_fulfilled"
	}
	key := randomKey(rng)
	cl := &call{kind: kind, state: state}
	var a answer
	for deadline := time.Now().Add(30 * time.Second); ; {
		a = s.api.do(context.Background(), kind, s.api.pick(rng), "POST", path, body, "Idempotency-Key", key)
		if cl.sent.IsZero() {
			cl.sent = a.Start
		}
		if !a.unknown() || time.Now().After(deadline) {
			break
		}
		sleep(context.Background(), jitter(rng, 100*time.Millisecond, 500*time.Millisecond))
	}
	cl.answered, cl.status = a.End, a.Status
	switch {
	case a.Status == 201:
		var o orderJSON
		if err := a.decode(&o); err != nil {
			cl.refused = err.Error()
			return nil
		}
		cl.acked, cl.items = true, ids(o.Items, nil)
		rec := &orderRec{client: c, id: o.ID, number: number, warehouse: warehouse, calls: []*call{cl}, last: o}
		s.orders.add(rec)
		return rec
	case a.unknown():
		cl.maybe = true
		s.orders.mu.Lock()
		s.orders.lost = append(s.orders.lost, lostCreate{client: c, number: number, call: cl})
		s.orders.mu.Unlock()
	case a.Status == 409 && !warehouse:
		// No store's stock covers it: nothing written, nothing to check.
	default:
		s.orders.mu.Lock()
		s.orders.lost = append(s.orders.lost, lostCreate{client: c, number: number, call: &call{kind: kind, refused: a.String()}})
		s.orders.mu.Unlock()
	}
	return nil
}

// change sends one change of the given kind, built from what the order
// last looked like, and records it with the event it must write. After no
// answer or a 5xx it reads the order back (60 s at most) to learn whether
// the change took effect. It tells whether the order changed.
func (s *soak) change(ctx context.Context, o *orderRec, rng *rand.Rand, kind string) bool {
	if ctx.Err() != nil {
		return false
	}
	o.mu.Lock()
	last := o.last
	o.mu.Unlock()
	cl := &call{kind: kind}
	var body map[string]any
	path := "/orders/" + o.id + "/"
	reasons := []string{"OUT_OF_STOCK", "ITEM_MISSING", "ITEM_BROKEN", "UNKNOWN_REASON"}
	switch kind {
	case "fulfil":
		path += "fulfil"
		cl.state = "fulfilled"
		body = map[string]any{"delivery_details": map[string]string{"delivery_tracking_number": "TRK-" + o.number, "delivery_carrier_name": "DHL"}}
		var cancelled []map[string]string
		for i, it := range last.Items {
			if len(last.Items) > 1 && i > 0 && rng.IntN(4) == 0 {
				cancelled = append(cancelled, map[string]string{"item_id": it.ItemID, "cancellation_reason": reasons[rng.IntN(4)]})
				cl.cancelled = append(cl.cancelled, it.ItemID)
			} else {
				cl.items = append(cl.items, it.ItemID)
			}
		}
		if cancelled != nil {
			body["cancelled_items"] = cancelled
		}
	case "cancel":
		path += "cancel"
		cl.state = "cancelled"
		var list []map[string]string
		for _, it := range last.Items {
			if rng.IntN(3) > 0 {
				list = append(list, map[string]string{"item_id": it.ItemID, "cancellation_reason": reasons[rng.IntN(4)]})
			}
		}
		body = map[string]any{"items": list, "reassign": rng.IntN(5) < 3}
		cl.items = ids(last.Items, nil)
	case "return", "warehouse-return":
		want := "fulfilled"
		cl.state, path = "returned", path+"returns"
		if kind == "warehouse-return" {
			want, cl.state, path = "", "marketplace_warehouse_returned", "/orders/"+o.id+"/warehouse-returns"
		}
		var list []map[string]any
		for _, it := range last.Items {
			if (want != "" && it.Status != want) || (want == "" && it.Status == "returned") || rng.IntN(2) == 0 {
				continue
			}
			ri := map[string]any{"item_id": it.ItemID, "return_reason_code": 1 + rng.IntN(10)}
			if kind == "return" {
				ri["return_location"] = []string{"STORE", "MARKETPLACE"}[rng.IntN(2)]
			}
			list = append(list, ri)
			cl.items = append(cl.items, it.ItemID)
		}
		if len(list) == 0 {
			return false
		}
		body = map[string]any{"items": list}
	}
	slices.Sort(cl.items)
	slices.Sort(cl.cancelled)
	a := s.api.do(context.Background(), kind, s.api.pick(rng), "POST", path, body)
	cl.sent, cl.answered, cl.status = a.Start, a.End, a.Status
	o.mu.Lock()
	o.calls = append(o.calls, cl)
	o.mu.Unlock()
	var now orderJSON
	switch {
	case a.ok():
		if err := a.decode(&now); err != nil {
			cl.refused = err.Error()
			return false
		}
		cl.acked = true
	case a.unknown():
		cl.maybe = true
		r, err := s.api.admin(context.Background(), rng, "order-read", "GET", "/orders/"+o.id, nil, 60*time.Second)
		if err != nil || r.decode(&now) != nil {
			return false
		}
		cl.answered = r.End
	default:
		cl.refused = a.String()
		return false
	}
	o.mu.Lock()
	o.last = now
	o.mu.Unlock()
	if now.ReassignedOrderID != "" && last.ReassignedOrderID == "" {
		s.reassigned(now.ReassignedOrderID, o, cl, rng)
	}
	return now.State == cl.state
}

// reassigned files the order that a cancel made for the cancelled items:
// its assigned event belongs to the cancel call.
func (s *soak) reassigned(id string, parent *orderRec, cancel *call, rng *rand.Rand) {
	r, err := s.api.admin(context.Background(), rng, "order-read", "GET", "/orders/"+id, nil, 60*time.Second)
	var o orderJSON
	if err != nil || r.decode(&o) != nil {
		return
	}
	cl := &call{kind: "reassigned", sent: cancel.sent, answered: cancel.answered, status: cancel.status,
		acked: cancel.acked, maybe: cancel.maybe, state: "assigned", items: ids(o.Items, nil)}
	s.orders.add(&orderRec{client: parent.client, id: id, number: parent.number, calls: []*call{cl}, last: o})
}
