package main

import (
	"fmt"
	"slices"
)

// clientEvents is a client's orders, each with its events oldest first.
type clientEvents struct {
	client *clientModel
	orders []string
	events map[string][]eventJSON
}

// checkOrders: every order the service lists was made by a call (answered
// or not), and every acknowledged order is listed; each order's events are
// exactly its changes, one event for each acknowledged change and at most
// one for each change of unknown outcome, in order; no change the model
// allows was refused; the order's state is its last change's; the pull
// feed holds each event once, in each order's order. It also counts the
// reservations of the orders' items into st.
func (s *soak) checkOrders(rd reader, inv *invariant, st *stockState) ([]clientEvents, error) {
	var out []clientEvents
	var checked, maybeFound int
	s.orders.mu.Lock()
	lost := append([]lostCreate(nil), s.orders.lost...)
	s.orders.mu.Unlock()
	for _, lc := range lost {
		if lc.call.refused != "" {
			inv.fail("client %d: %s of order %s refused: %s", lc.client.idx, lc.call.kind, lc.number, lc.call.refused)
		}
	}
	for _, c := range s.clients {
		st.key(c)
		list, err := rd.orders(c)
		if err != nil {
			return nil, err
		}
		ce := clientEvents{client: c, events: map[string][]eventJSON{}}
		listed := map[string]bool{}
		for _, o := range list {
			listed[o.ID] = true
			rec := s.orders.get(o.ID)
			if rec == nil {
				rec = s.adopt(c, o, lost)
				if rec == nil {
					inv.fail("client %d: order %s (%s, %s) exists, which no call made", c.idx, o.ID, o.OrderNumber, o.State)
					continue
				}
				maybeFound++
			}
			evs, err := rd.orderEvents(o.ID)
			if err != nil {
				return nil, err
			}
			ce.orders = append(ce.orders, o.ID)
			ce.events[o.ID] = evs
			matchCalls(rec, o, evs, inv)
			checked++
			var fulfil *call
			for _, cl := range rec.calls {
				if cl.kind == "fulfil" && (cl.acked || cl.maybe) {
					fulfil = cl
				}
			}
			if o.StoreID != "" {
				for _, it := range o.Items {
					if p := st.reserve(c, o.StoreID, it, fulfil); p != "" {
						inv.fail("order %s: %s", o.ID, p)
					}
				}
			}
		}
		s.orders.mu.Lock()
		for id, rec := range s.orders.byID {
			if rec.client == c && !listed[id] {
				inv.fail("client %d: order %s (%s), acknowledged by %s, is not listed", c.idx, id, rec.number, rec.calls[0].kind)
			}
		}
		s.orders.mu.Unlock()
		if err := checkFeed(rd, ce, inv); err != nil {
			return nil, err
		}
		out = append(out, ce)
	}
	inv.note = fmt.Sprintf("%d orders, %d of them made by a create that was never answered", checked, maybeFound)
	return out, nil
}

// adopt files an order the workload has no record of: one made by a create
// whose every try went unanswered, or one a cancel made for its items when
// the soak could not read it back.
func (s *soak) adopt(c *clientModel, o orderJSON, lost []lostCreate) *orderRec {
	for _, lc := range lost {
		if lc.client == c && lc.number == o.OrderNumber && lc.call.maybe {
			rec := &orderRec{client: c, id: o.ID, number: o.OrderNumber, calls: []*call{lc.call}, last: o}
			s.orders.add(rec)
			return rec
		}
	}
	if parent := s.orders.get(o.ReassignedFrom); parent != nil {
		for _, cl := range parent.calls {
			if cl.kind == "cancel" && (cl.acked || cl.maybe) {
				rec := &orderRec{client: c, id: o.ID, number: o.OrderNumber, last: o,
					calls: []*call{{kind: "reassigned", sent: cl.sent, answered: cl.answered, acked: cl.acked, maybe: cl.maybe, state: "assigned"}}}
				s.orders.add(rec)
				return rec
			}
		}
	}
	return nil
}

func eventItems(ev eventJSON) (items, cancelled []string) {
	for _, it := range ev.Items {
		items = append(items, it.ItemID)
	}
	for _, it := range ev.CancelledItems {
		cancelled = append(cancelled, it.ItemID)
	}
	slices.Sort(items)
	slices.Sort(cancelled)
	return items, cancelled
}

func (cl *call) matches(ev eventJSON) bool {
	if ev.State != cl.state {
		return false
	}
	if cl.items == nil && cl.kind != "return" && cl.kind != "warehouse-return" {
		return true // a create never answered: its items are not known
	}
	items, cancelled := eventItems(ev)
	return slices.Equal(items, cl.items) && slices.Equal(cancelled, cl.cancelled)
}

// matchCalls walks the order's events against its calls in order.
func matchCalls(rec *orderRec, o orderJSON, evs []eventJSON, inv *invariant) {
	rec.mu.Lock()
	calls := append([]*call(nil), rec.calls...)
	rec.mu.Unlock()
	for _, cl := range calls {
		if cl.refused != "" {
			inv.fail("order %s: %s refused though the order allowed it: %s", rec.id, cl.kind, cl.refused)
		}
	}
	seen := map[string]bool{}
	j, state := 0, ""
	for _, ev := range evs {
		if seen[ev.EventID] || ev.OrderID != rec.id {
			inv.fail("order %s: event %s listed twice or of order %s", rec.id, ev.EventID, ev.OrderID)
		}
		seen[ev.EventID] = true
		k := j
		for k < len(calls) && !calls[k].matches(ev) && !calls[k].acked {
			k++
		}
		if k == len(calls) || !calls[k].matches(ev) {
			what := "no call"
			if k < len(calls) {
				what = fmt.Sprintf("the acknowledged %s (answered %d at %s) wants %s of items %v, cancelled %v",
					calls[k].kind, calls[k].status, calls[k].answered.Format("15:04:05.000"), calls[k].state, calls[k].items, calls[k].cancelled)
			}
			items, cancelled := eventItems(ev)
			inv.fail("order %s: event %s (%s of items %v, cancelled %v) matches %s", rec.id, ev.EventID, ev.State, items, cancelled, what)
			continue
		}
		j, state = k+1, ev.State
	}
	for _, cl := range calls[min(j, len(calls)):] {
		if cl.acked {
			inv.fail("order %s: the acknowledged %s (%d at %s) has no event %s", rec.id, cl.kind, cl.status, cl.answered.Format("15:04:05.000"), cl.state)
			break
		}
	}
	if state != o.State && len(evs) > 0 {
		inv.fail("order %s is %s, but its last event is %s", rec.id, o.State, state)
	}
}

// checkFeed: the client's pull feed holds every event of its orders once,
// and each order's events in their order.
func checkFeed(rd reader, ce clientEvents, inv *invariant) error {
	feed, err := rd.feed(ce.client)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, evs := range ce.events {
		for _, ev := range evs {
			want[ev.EventID] = true
		}
	}
	next := map[string]int{} // order → index of its next event
	seen := map[string]bool{}
	for _, ev := range feed {
		switch {
		case seen[ev.EventID]:
			inv.fail("client %d: the pull feed lists event %s twice", ce.client.idx, ev.EventID)
		case !want[ev.EventID]:
			inv.fail("client %d: the pull feed lists event %s (%s of order %s), which its order does not", ce.client.idx, ev.EventID, ev.State, ev.OrderID)
		default:
			evs := ce.events[ev.OrderID]
			if i := next[ev.OrderID]; i >= len(evs) || evs[i].EventID != ev.EventID {
				inv.fail("client %d: the pull feed lists event %s of order %s out of the order's order", ce.client.idx, ev.EventID, ev.OrderID)
			}
			next[ev.OrderID]++
		}
		seen[ev.EventID] = true
	}
	for id := range want {
		if !seen[id] {
			inv.fail("client %d: event %s is missing from the pull feed", ce.client.idx, id)
			break
		}
	}
	return nil
}
