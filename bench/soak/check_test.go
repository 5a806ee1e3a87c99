package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// The checker's rules on made-up histories: each catches what it is for
// and lets through what the service may do. The soak itself runs against
// real processes (`go run ./bench/soak`, in .ci/run).

var t0 = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func ev(id, order, state string, ms int, items ...string) eventJSON {
	e := eventJSON{EventID: id, OrderID: order, State: state, Timestamp: at(ms).Format("2006-01-02T15:04:05.000Z")}
	for _, it := range items {
		e.Items = append(e.Items, struct {
			ItemID string `json:"item_id"`
		}{it})
	}
	e.raw, _ = json.Marshal(map[string]any{"event_id": id, "order_id": order, "state": state})
	return e
}

func TestMatchCalls(t *testing.T) {
	create := func() *call {
		return &call{kind: "create", acked: true, state: "assigned", items: []string{"i1", "i2"}}
	}
	fulfil := func(acked bool) *call {
		return &call{kind: "fulfil", acked: acked, maybe: !acked, state: "fulfilled", items: []string{"i1"}, cancelled: []string{"i2"}}
	}
	fulfilled := ev("e2", "o1", "fulfilled", 2, "i1")
	fulfilled.CancelledItems = append(fulfilled.CancelledItems, struct {
		ItemID string `json:"item_id"`
	}{"i2"})
	for _, tc := range []struct {
		name   string
		calls  []*call
		events []eventJSON
		state  string
		broken bool
	}{
		{"each change its event", []*call{create(), fulfil(true)}, []eventJSON{ev("e1", "o1", "assigned", 1, "i1", "i2"), fulfilled}, "fulfilled", false},
		{"an acknowledged change without its event", []*call{create(), fulfil(true)}, []eventJSON{ev("e1", "o1", "assigned", 1, "i1", "i2")}, "assigned", true},
		{"a change of unknown outcome that did not happen", []*call{create(), fulfil(false)}, []eventJSON{ev("e1", "o1", "assigned", 1, "i1", "i2")}, "assigned", false},
		{"a change of unknown outcome that happened", []*call{create(), fulfil(false)}, []eventJSON{ev("e1", "o1", "assigned", 1, "i1", "i2"), fulfilled}, "fulfilled", false},
		{"an event no call wrote", []*call{create()}, []eventJSON{ev("e1", "o1", "assigned", 1, "i1", "i2"), fulfilled}, "fulfilled", true},
		{"an event twice", []*call{create(), fulfil(true)}, []eventJSON{ev("e1", "o1", "assigned", 1, "i1", "i2"), fulfilled, fulfilled}, "fulfilled", true},
		{"an event with other items", []*call{create()}, []eventJSON{ev("e1", "o1", "assigned", 1, "i1")}, "assigned", true},
		{"a state that is not the last event's", []*call{create(), fulfil(true)}, []eventJSON{ev("e1", "o1", "assigned", 1, "i1", "i2"), fulfilled}, "cancelled", true},
		{"a change refused that the order allowed", []*call{create(), {kind: "fulfil", refused: "409 …", state: "fulfilled"}}, []eventJSON{ev("e1", "o1", "assigned", 1, "i1", "i2")}, "assigned", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := &invariant{}
			matchCalls(&orderRec{id: "o1", calls: tc.calls}, orderJSON{ID: "o1", State: tc.state}, tc.events, inv)
			if (inv.broken > 0) != tc.broken {
				t.Errorf("broken %d times (%s), want broken: %v", inv.broken, inv.example, tc.broken)
			}
		})
	}
}

// uploadsCase is a client's uploads with their answers and the listing.
func uploadsCase(t *testing.T, mutate func(c *clientModel, list []uploadJSON) []uploadJSON) *invariant {
	t.Helper()
	c := &clientModel{idx: 0}
	var list []uploadJSON
	for i := range 3 {
		f := &feed{rows: map[stockKey]feedRow{{"S1", "E"}: {quantity: i, price: "1.00", article: "A"}}, total: 1}
		r := &uploadRec{name: fmt.Sprintf("u%d.csv", i), feed: f, sent: at(100 * i), answered: at(100*i + 50), status: 200,
			id: fmt.Sprintf("id%d", i), sha: "x"}
		c.uploads = append(c.uploads, r)
		started, finished := at(100*i+60), at(100*i+70)
		list = append(list, uploadJSON{ID: r.id, FileName: r.name, SHA256: "x", Status: "applied", StartedAt: &started,
			FinishedAt: &finished, RowsTotal: 1, RowsApplied: 1})
	}
	list = mutate(c, list)
	once, order := &invariant{}, &invariant{}
	st := &stockState{applied: map[string]*appliedUpload{}}
	(&soak{}).checkUploads(c, list, once, order, st, &uploadCounts{})
	if once.broken > 0 {
		return once
	}
	return order
}

func TestCheckUploads(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(c *clientModel, list []uploadJSON) []uploadJSON
		broken string
	}{
		{"as sent", func(_ *clientModel, l []uploadJSON) []uploadJSON { return l }, ""},
		{"an acknowledged upload missing", func(_ *clientModel, l []uploadJSON) []uploadJSON { return l[:2] }, "is not listed"},
		{"listed twice", func(_ *clientModel, l []uploadJSON) []uploadJSON { return append(l, l[2]) }, "listed twice"},
		{"accepted before one acknowledged before it was sent", func(_ *clientModel, l []uploadJSON) []uploadJSON {
			l[0], l[1] = l[1], l[0]
			return l
		}, "yet accepted before it"},
		{"finished out of acceptance order", func(_ *clientModel, l []uploadJSON) []uploadJSON {
			early := at(10)
			l[2].FinishedAt = &early
			return l
		}, "finished at"},
		{"started before the one before finished (the stamp precedes the claim)", func(_ *clientModel, l []uploadJSON) []uploadJSON {
			early := at(1)
			l[2].StartedAt = &early
			return l
		}, ""},
		{"an upload answered 503 found applied", func(c *clientModel, l []uploadJSON) []uploadJSON {
			c.uploads[2].status, c.uploads[2].id = 503, ""
			return l
		}, ""},
		{"an upload answered 413 listed", func(c *clientModel, l []uploadJSON) []uploadJSON {
			c.uploads[2].status, c.uploads[2].id = 413, ""
			return l
		}, "leaves nothing behind"},
		{"rows counted otherwise", func(_ *clientModel, l []uploadJSON) []uploadJSON {
			l[1].RowsApplied = 0
			return l
		}, "rows total/applied/rejected"},
		{"a feed sent again: its row unchanged", func(c *clientModel, l []uploadJSON) []uploadJSON {
			c.uploads[2].feed = c.uploads[1].feed
			l[2].RowsUnchanged = 1
			return l
		}, ""},
		{"a feed sent again, its row counted as changed", func(c *clientModel, l []uploadJSON) []uploadJSON {
			c.uploads[2].feed = c.uploads[1].feed
			return l
		}, "rows unchanged"},
		{"a changed row counted as unchanged", func(_ *clientModel, l []uploadJSON) []uploadJSON {
			l[2].RowsUnchanged = 1
			return l
		}, "rows unchanged"},
		{"an upload no client sent", func(_ *clientModel, l []uploadJSON) []uploadJSON {
			return append(l, uploadJSON{ID: "ghost", FileName: "ghost.csv", Status: "applied"})
		}, "which no client sent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := uploadsCase(t, tc.mutate)
			if tc.broken == "" && inv.broken > 0 || tc.broken != "" && !strings.Contains(inv.example, tc.broken) {
				t.Errorf("broken %d times (%s), want %q", inv.broken, inv.example, tc.broken)
			}
		})
	}
}

func TestReserve(t *testing.T) {
	c := &clientModel{idx: 0}
	fulfil := &call{kind: "fulfil", sent: at(1000), answered: at(1100)}
	k := stockKey{"S1", "E"}
	for _, tc := range []struct {
		name    string
		status  string
		uploads []*appliedUpload
		lo, hi  int
	}{
		{"assigned", "assigned", nil, 1, 1},
		{"cancelled", "cancelled", nil, 0, 0},
		{"fulfilled, no feed since", "fulfilled", nil, 1, 1},
		{"fulfilled, a feed applied before it was sent", "fulfilled", []*appliedUpload{{started: at(500), final: at(900)}}, 1, 1},
		{"returned, a feed begun after its answer", "returned", []*appliedUpload{{started: at(1200), final: at(1300)}}, 0, 0},
		{"fulfilled, a feed committed meanwhile", "fulfilled", []*appliedUpload{{started: at(900), final: at(1050)}}, 0, 1},
		{"fulfilled, a feed never seen final", "fulfilled", []*appliedUpload{{started: at(900)}}, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &stockState{}
			st.key(c)
			st.byKey[0][k] = tc.uploads
			st.reserve(c, "S1", itemJSON{ItemID: "i", EAN: "E", Status: tc.status}, fulfil)
			if st.lo[0][k] != tc.lo || st.hi[0][k] != tc.hi {
				t.Errorf("reserved %d to %d, want %d to %d", st.lo[0][k], st.hi[0][k], tc.lo, tc.hi)
			}
		})
	}
}

func TestCheckEndpoint(t *testing.T) {
	events := []eventJSON{ev("e1", "o1", "assigned", 0), ev("e2", "o1", "fulfilled", 10)}
	ce := clientEvents{orders: []string{"o1"}, events: map[string][]eventJSON{"o1": events}}
	dels := []deliveryJSON{{ID: "d1", EventID: "e1", State: "succeeded"}, {ID: "d2", EventID: "e2", State: "succeeded"}}
	h := func(e eventJSON, arrived, answered, status int) hit {
		return hit{id: e.EventID, state: e.State, body: e.raw, arrived: at(arrived), answered: at(answered), status: status}
	}
	for _, tc := range []struct {
		name      string
		hits      []hit
		dels      []deliveryJSON
		gone      []window
		delivered bool // broken
		inOrder   bool // broken
	}{
		{"in order, with a retry", []hit{h(events[0], 100, 110, 503), h(events[0], 300, 310, 204), h(events[1], 400, 410, 204)}, dels, nil, false, false},
		{"the next before the first succeeded", []hit{h(events[0], 100, 110, 503), h(events[1], 200, 210, 204), h(events[0], 300, 310, 204)}, dels, nil, false, true},
		{"a success that took longer than the timeout", []hit{h(events[0], 100, 3000, 204), h(events[1], 3100, 3110, 204)}, dels, nil, true, false},
		{"never received", []hit{h(events[0], 100, 110, 204)}, dels, nil, true, false},
		{"a delivery not succeeded", []hit{h(events[0], 100, 110, 204), h(events[1], 200, 210, 204)},
			[]deliveryJSON{dels[0], {ID: "d2", EventID: "e2", State: "failed"}}, nil, true, false},
		{"no delivery", []hit{h(events[0], 100, 110, 204)}, dels[:1], nil, true, false},
		{"no delivery while disabled by a 410", []hit{h(events[0], 100, 110, 204)}, dels[:1], []window{{at(5), at(50)}}, false, false},
		{"other bytes than the event's", []hit{h(events[0], 100, 110, 204), {id: "e2", body: []byte(`{}`), arrived: at(200), answered: at(210), status: 204}}, dels, nil, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &receiver{name: "r", gone: tc.gone}
			delivered, inOrder := &invariant{}, &invariant{}
			n := &deliveryCounts{}
			checkEndpoint(r, tc.hits, ce, tc.dels, n, delivered, inOrder)
			if !tc.delivered && (n.expected == 0 || len(n.lags) != n.expected || n.maxLag <= 0) {
				t.Errorf("%d lags of %d deliveries, max %s", len(n.lags), n.expected, n.maxLag)
			}
			if (delivered.broken > 0) != tc.delivered || (inOrder.broken > 0) != tc.inOrder {
				t.Errorf("delivered broken %d (%s), in order broken %d (%s); want %v, %v",
					delivered.broken, delivered.example, inOrder.broken, inOrder.example, tc.delivered, tc.inOrder)
			}
		})
	}
}

func TestCheckRequests(t *testing.T) {
	faults := []fault{{Kind: "kill", Serve: 1, Start: at(1000), End: at(2000)}, {Kind: "pg-restart", Serve: -1, Start: at(5000), End: at(6000)}}
	for _, tc := range []struct {
		name   string
		o      op
		broken bool
	}{
		{"a 503 while its serve was killed", op{Serve: 1, Start: at(1500), End: at(1600), Status: 503}, false},
		{"no answer while its serve was killed", op{Serve: 1, Start: at(900), End: at(1001)}, false},
		{"a 500 from another serve meanwhile", op{Serve: 0, Start: at(1500), End: at(1600), Status: 500}, true},
		{"a 503 while the database was down", op{Serve: 2, Start: at(5500), End: at(5600), Status: 503}, false},
		{"no answer outside any fault", op{Serve: 0, Start: at(3000), End: at(3100)}, true},
		{"a 409", op{Serve: 0, Start: at(3000), End: at(3100), Status: 409}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			no5xx, answered := &invariant{}, &invariant{}
			checkRequests([]op{tc.o}, faults, no5xx, answered)
			if got := no5xx.broken+answered.broken > 0; got != tc.broken {
				t.Errorf("broken: %v (%s%s), want %v", got, no5xx.example, answered.example, tc.broken)
			}
		})
	}
}

func TestMakeFeed(t *testing.T) {
	c := newClientModel(1)
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 200 {
		f := c.makeFeed(rng, i, i == 0)
		lines := strings.Count(string(f.body), "\n") - 1
		if lines != f.total {
			t.Fatalf("feed %d: %d data lines, model says %d", i, lines, f.total)
		}
		if !f.rejected && len(f.rows)+f.duplicates+f.badRows != f.total {
			t.Fatalf("feed %d: %d rows + %d duplicates + %d bad != %d", i, len(f.rows), f.duplicates, f.badRows, f.total)
		}
	}
	if got := ean13("400638133393"); got != "4006381333931" {
		t.Errorf("ean13 = %s, want the README's 4006381333931", got)
	}
}
