package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"time"
)

// goneMargin widens an endpoint's disabled window: an event's timestamp is
// taken when its transaction begins, a moment before it commits.
const goneMargin = 2 * time.Second

type deliveryCounts struct {
	expected, hits, distinct, excused int
	maxLag, maxSteady                 time.Duration
	lags                              []time.Duration
	worst                             string // the delivery of the longest lag
}

// lagQuantile is the q-quantile (nearest rank) of the lags.
func (n *deliveryCounts) lagQuantile(q float64) time.Duration {
	if len(n.lags) == 0 {
		return 0
	}
	slices.Sort(n.lags)
	return n.lags[min(len(n.lags)-1, int(q*float64(len(n.lags))))]
}

// received is what a receiver got of one event.
type received struct {
	first   time.Time // first arrival
	success time.Time // first successful answer
	bodies  [][]byte
}

func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// checkDeliveries: every event an endpoint subscribes to has one delivery
// to it (unless it was written while the endpoint was disabled by a 410),
// which succeeded; the receiver got it, signed, at its URL, with the
// event's bytes, and answered 2xx at least once; and, per order, no event
// arrived before the one before it had succeeded.
func (s *soak) checkDeliveries(rd reader, all []clientEvents, delivered, inOrder *invariant) (deliveryCounts, error) {
	var n deliveryCounts
	byClient := map[*clientModel]clientEvents{}
	for _, ce := range all {
		byClient[ce.client] = ce
	}
	for _, r := range s.receivers {
		if r.profile == profileLate { // checkUploadEvents
			continue
		}
		dels, err := rd.deliveries(r.endpointID)
		if err != nil {
			return n, err
		}
		checkEndpoint(r, r.snapshot(), byClient[r.client], dels, &n, delivered, inOrder)
	}
	delivered.note = fmt.Sprintf("%d deliveries checked against the receivers", n.expected)
	inOrder.note = "each event after its order's previous one succeeded, per endpoint"
	return n, nil
}

func hitsOf(g *received) [][]byte {
	if g == nil {
		return nil
	}
	return g.bodies
}

// inWindow tells whether an event timestamp falls in a disabled window.
func inWindow(ts string, ws []window) bool {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return false
	}
	for _, w := range ws {
		if !t.Before(w.start.Add(-goneMargin)) && !t.After(w.end.Add(goneMargin)) {
			return true
		}
	}
	return false
}

// checkEndpoint checks one receiver's hits against its endpoint's
// deliveries and its client's events (see checkDeliveries).
func checkEndpoint(r *receiver, hits []hit, ce clientEvents, dels []deliveryJSON, n *deliveryCounts, delivered, inOrder *invariant) {
	n.hits += len(hits)
	got := map[string]*received{}
	for _, h := range hits {
		if h.bad != "" {
			delivered.fail("receiver %s: webhook-id %s: %s", r.name, h.id, h.bad)
		}
		g := got[h.id]
		if g == nil {
			g = &received{first: h.arrived}
			got[h.id] = g
		}
		g.bodies = append(g.bodies, h.body)
		if h.success() && (g.success.IsZero() || h.answered.Before(g.success)) {
			g.success = h.answered
		}
	}
	n.distinct += len(got)
	byEvent := map[string]deliveryJSON{}
	for _, d := range dels {
		if _, dup := byEvent[d.EventID]; dup {
			delivered.fail("receiver %s: event %s has two deliveries", r.name, d.EventID)
		}
		byEvent[d.EventID] = d
		if d.UploadID != "" {
			delivered.fail("receiver %s: delivery %s is of upload %s's event, which the endpoint does not ask for", r.name, d.ID, d.UploadID)
		}
		if d.State != "succeeded" {
			delivered.fail("receiver %s: delivery %s of event %s (order %s) is %s after the drain", r.name, d.ID, d.EventID, d.OrderID, d.State)
		}
	}
	r.mu.Lock()
	gone := append([]window(nil), r.gone...)
	r.mu.Unlock()
	known := map[string]bool{}
	for _, id := range ce.orders {
		var chain []eventJSON
		for _, ev := range ce.events[id] {
			known[ev.EventID] = true
			if !r.wants(ev.State) {
				if _, ok := byEvent[ev.EventID]; ok {
					delivered.fail("receiver %s: event %s is %s, which the endpoint does not take, yet has a delivery", r.name, ev.EventID, ev.State)
				}
				continue
			}
			if _, ok := byEvent[ev.EventID]; !ok {
				if inWindow(ev.Timestamp, gone) {
					n.excused++
					continue
				}
				delivered.fail("receiver %s: event %s (%s of order %s at %s) has no delivery", r.name, ev.EventID, ev.State, id, ev.Timestamp)
				continue
			}
			n.expected++
			g := got[ev.EventID]
			if g == nil || g.success.IsZero() {
				delivered.fail("receiver %s: event %s (%s of order %s) never answered 2xx in time (%d arrivals)", r.name, ev.EventID, ev.State, id, len(hitsOf(g)))
				continue
			}
			for _, b := range g.bodies {
				if !sameJSON(b, ev.raw) {
					delivered.fail("receiver %s: event %s arrived as %.200s, the service lists %.200s", r.name, ev.EventID, b, ev.raw)
					break
				}
			}
			if ts, err := time.Parse(time.RFC3339Nano, ev.Timestamp); err == nil {
				lag := g.success.Sub(ts)
				if lag > n.maxLag {
					n.maxLag, n.worst = lag, fmt.Sprintf("event %s (%s of order %s) to %s", ev.EventID, ev.State, id, r.name)
				}
				n.lags = append(n.lags, lag)
				if r.profile == profileSteady {
					n.maxSteady = max(n.maxSteady, lag)
				}
			}
			chain = append(chain, ev)
		}
		for k := 1; k < len(chain); k++ {
			prev, cur := got[chain[k-1].EventID], got[chain[k].EventID]
			if !prev.success.Before(cur.first) {
				inOrder.fail("receiver %s: event %s (%s) of order %s arrived at %s, before event %s (%s) had succeeded (at %s)",
					r.name, chain[k].EventID, chain[k].State, id, cur.first.Format("15:04:05.000"),
					chain[k-1].EventID, chain[k-1].State, prev.success.Format("15:04:05.000"))
			}
		}
	}
	for id := range got {
		if !known[id] {
			delivered.fail("receiver %s: got webhook-id %s, which no order of its client lists", r.name, id)
			break
		}
	}
}
