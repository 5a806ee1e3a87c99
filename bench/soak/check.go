package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// invariant is one checked promise: held, or broken with its first
// counter-example.
type invariant struct {
	name    string
	note    string // what was checked, for the summary
	broken  int
	example string
}

func (v *invariant) fail(format string, args ...any) {
	if v.broken == 0 {
		v.example = fmt.Sprintf(format, args...)
	}
	v.broken++
}

// result is every invariant and the totals of a run.
type result struct {
	invs   []*invariant
	totals []string
}

func (r *result) add(name string) *invariant {
	v := &invariant{name: name}
	r.invs = append(r.invs, v)
	return v
}

// print writes one line per invariant and the totals; it tells whether
// every invariant held.
func (r *result) print(w io.Writer) bool {
	ok := true
	for _, v := range r.invs {
		if v.broken == 0 {
			fmt.Fprintf(w, "invariant %-28s held (%s)\n", v.name+":", v.note)
			continue
		}
		ok = false
		fmt.Fprintf(w, "invariant %-28s BROKEN %d time(s) (%s); first: %s\n", v.name+":", v.broken, v.note, v.example)
	}
	for _, t := range r.totals {
		fmt.Fprintf(w, "totals: %s\n", t)
	}
	return ok
}

// check reads back the service's state and checks the history against it.
func (s *soak) check(ctx context.Context, drainErr error) (*result, error) {
	rd := reader{s: s, ctx: ctx, rng: s.rngFor()}
	res := &result{}
	life := res.add("serves-lived-and-drained")
	ops, faults := s.hist.snapshot()

	uploadsOnce := res.add("uploads-applied-once")
	uploadsOrder := res.add("uploads-in-acceptance-order")
	stockInv := res.add("stock-in-force")
	changes := res.add("order-changes-with-events")
	delivered := res.add("events-delivered")
	inOrder := res.add("events-in-order-per-order")
	uploadEvents := res.add("upload-events-delivered")
	no5xx := res.add("no-5xx-outside-faults")
	answered := res.add("answered-outside-faults")

	// Lifecycle: serves that died by themselves, faults that could not be
	// healed, a drain that did not finish.
	for _, sv := range s.serves {
		for _, d := range sv.unexpectedDeaths() {
			life.fail("%s", d)
		}
	}
	serveLife.mu.Lock()
	for _, p := range serveLife.problems {
		life.fail("%s", p)
	}
	serveLife.mu.Unlock()
	if drainErr != nil {
		life.fail("%v", drainErr)
	}
	life.note = fmt.Sprintf("%d serve run(s), drained %s after the workload", s.runs(), s.drained.Sub(s.workloadEnd).Round(100*time.Millisecond))

	st := &stockState{applied: map[string]*appliedUpload{}}
	var n uploadCounts
	uploadLists := map[*clientModel][]uploadJSON{}
	for _, c := range s.clients {
		list, err := rd.uploads(c)
		if err != nil {
			return nil, err
		}
		uploadLists[c] = list
		s.checkUploads(c, list, uploadsOnce, uploadsOrder, st, &n)
	}
	uploadsOnce.note = fmt.Sprintf("%d acknowledged, %d applied, %d rejected as expected, %d unacknowledged found accepted; %d sent again, %d rows unchanged",
		n.acked, n.applied, n.rejected, n.maybeFound, n.resent, n.unchanged)
	uploadsOrder.note = fmt.Sprintf("%d uploads in %d clients' acceptance orders", n.listed, len(s.clients))

	events, err := s.checkOrders(rd, changes, st)
	if err != nil {
		return nil, err
	}
	var sn stockCounts
	for _, c := range s.clients {
		rows, err := rd.stock(c)
		if err != nil {
			return nil, err
		}
		s.checkStock(c, rows, st, stockInv, &sn)
	}
	stockInv.note = fmt.Sprintf("%d rows, %d units reserved, %d of them of uncertain release", sn.rows, sn.reserved, sn.uncertain)

	dn, err := s.checkDeliveries(rd, events, delivered, inOrder)
	if err != nil {
		return nil, err
	}
	if err := s.checkUploadEvents(rd, uploadLists, uploadEvents); err != nil {
		return nil, err
	}
	rn := checkRequests(ops, faults, no5xx, answered)

	// Totals.
	kinds := map[string]int{}
	for _, f := range faults {
		kinds[f.Kind]++
	}
	var fk []string
	for _, k := range []string{"kill", "term", "pg-restart", "receiver-down", "gone"} {
		if kinds[k] > 0 {
			fk = append(fk, fmt.Sprintf("%s %d", k, kinds[k]))
		}
	}
	res.totals = append(res.totals,
		fmt.Sprintf("requests %d (2xx %d, 4xx %d, 5xx %d, unanswered %d) in %s of workload", rn.total, rn.ok, rn.client, rn.server, rn.none, s.workloadEnd.Sub(s.started).Round(time.Second)),
		fmt.Sprintf("faults %d (%s)", len(faults), strings.Join(fk, ", ")),
		fmt.Sprintf("4xx answers: %s", rn.refusals()),
		fmt.Sprintf("uploads %d sent, %d acknowledged; order changes %d acknowledged, %d of unknown outcome; events %d", n.sent, n.acked, s.orders.count(func(c *call) bool { return c.acked }), s.orders.count(func(c *call) bool { return c.maybe }), countEvents(events)),
		fmt.Sprintf("deliveries %d expected, %d received (%d distinct), duplicates %d, %d excused while an endpoint was disabled by 410", dn.expected, dn.hits, dn.distinct, dn.hits-dn.distinct, dn.excused),
		fmt.Sprintf("lag from event to first successful receipt: median %s, p99 %s, max %s; max to the steady receivers %s",
			dn.lagQuantile(0.5).Round(time.Millisecond), dn.lagQuantile(0.99).Round(time.Millisecond), dn.maxLag.Round(time.Millisecond), dn.maxSteady.Round(time.Millisecond)),
		fmt.Sprintf("longest lag: %s", dn.worst),
	)
	return res, nil
}

func (s *soak) runs() int {
	n := 0
	for _, sv := range s.serves {
		sv.mu.Lock()
		n += sv.runs
		sv.mu.Unlock()
	}
	return n
}

func (b *orderBook) count(f func(*call) bool) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, o := range b.byID {
		for _, c := range o.calls {
			if c.kind != "reassigned" && f(c) {
				n++
			}
		}
	}
	return n
}

// requestCounts are the totals of the requests sent.
type requestCounts struct {
	total, ok, client, server, none int
	refused                         map[string]int // the 4xx, by kind and status
}

// refusals lists the 4xx by kind and status, most frequent first.
func (n requestCounts) refusals() string {
	var out []string
	for k, v := range n.refused {
		out = append(out, fmt.Sprintf("%s %d", k, v))
	}
	sort.Slice(out, func(i, j int) bool {
		return n.refused[strings.Fields(out[i])[0]] > n.refused[strings.Fields(out[j])[0]]
	})
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// checkRequests: a 5xx or a request without an answer only while its serve
// was being killed or stopped, or while the database was down.
func checkRequests(ops []op, faults []fault, no5xx, answered *invariant) requestCounts {
	n := requestCounts{refused: map[string]int{}}
	excused5xx, excusedNone := 0, 0
	covered := func(o op) bool {
		for _, f := range faults {
			if (f.Kind == "pg-restart" || ((f.Kind == "kill" || f.Kind == "term") && f.Serve == o.Serve)) &&
				!o.End.Before(f.Start) && !o.Start.After(f.End) {
				return true
			}
		}
		return false
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].Start.Before(ops[j].Start) })
	for _, o := range ops {
		n.total++
		switch {
		case o.Status == 0:
			n.none++
			if covered(o) {
				excusedNone++
			} else {
				answered.fail("%s %s to serve %d at %s: no answer (%s)", o.Method, o.Path, o.Serve, o.Start.Format("15:04:05.000"), o.Err)
			}
		case o.Status >= 500:
			n.server++
			if covered(o) {
				excused5xx++
			} else {
				no5xx.fail("%s %s to serve %d at %s answered %d", o.Method, o.Path, o.Serve, o.Start.Format("15:04:05.000"), o.Status)
			}
		case o.Status >= 400:
			n.client++
			n.refused[fmt.Sprintf("%s→%d", o.Kind, o.Status)]++
		default:
			n.ok++
		}
	}
	no5xx.note = fmt.Sprintf("%d 5xx, %d of them during a fault of their serve or the database", n.server, excused5xx)
	answered.note = fmt.Sprintf("%d unanswered, %d of them during a fault of their serve or the database", n.none, excusedNone)
	return n
}

func countEvents(all []clientEvents) int {
	n := 0
	for _, ce := range all {
		for _, evs := range ce.events {
			n += len(evs)
		}
	}
	return n
}
