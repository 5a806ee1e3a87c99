package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"storelink"
)

// TestQueueRandomized drives the real store, the in-memory queue of
// pending deliveries and the lease book with it, through random steps:
// orders and their events, claims, results of every outcome, claims given
// back, redeliveries, endpoints disabled and enabled, a clock that moves
// past leases and retries, the queue dropped and read again, and the
// process restarted on the same file. After every claim it checks what a
// receiver relies on against the file:
//
//   - nothing is sent that should not go now: every claimed delivery is
//     pending, due, to an enabled endpoint (checkClaim, 1);
//   - never two attempts of one delivery at once: a delivery in flight is
//     not claimed again while its lease lasts (checkClaim, 1);
//   - no event sent out of order: a delivery is claimed only when no
//     earlier event of its order is pending to the same endpoint
//     (checkClaim, 2);
//   - an endpoint is never sent more than the deliverer asked for at once
//     (checkClaim, 3);
//   - nothing waits for no reason: a claim takes all that may go, as
//     far as its limits allow (checkClaim, liveness);
//   - nothing is lost: in the end, with every endpoint enabled, the queue
//     empties in a bounded number of rounds, and each delivery succeeded or
//     failed because a result said so (drain).
//
// It is deterministic in the test's choices (the store's ids and hash
// seeds are its own); a failure names its seed and step, and one seed runs
// alone with -run 'TestQueueRandomized/seed=N$'.
func TestQueueRandomized(t *testing.T) {
	// The race detector slows SQLite (Go translated from C) about tenfold:
	// under it, the first seeds only.
	seeds, steps := uint64(22), 300
	if raceEnabled() {
		seeds = 8
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			h := newQueueHarness(t, seed)
			for h.step = 1; h.step <= steps; h.step++ {
				h.randomStep()
			}
			h.drain()
		})
	}
}

// raceEnabled tells whether the test was built with -race.
func raceEnabled() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// queueLease is how long a claim leases its deliveries for.
const queueLease = 30 * time.Second

// queueHarness is a store driven by random steps, and what the test
// knows of it: its orders, and the jobs it claimed and has neither
// recorded nor given back (held).
type queueHarness struct {
	t    *testing.T
	ctx  context.Context
	seed uint64
	step int
	// phase is "step" while random steps run, "drain" at the end.
	phase string
	rng   *rand.Rand

	db  *Fixture
	now time.Time

	client    string
	endpoints []string // [0] takes every event; [1] only warehouse returns
	orders    []*queueOrder
	// held are the jobs claimed and neither recorded nor given back; one
	// is in flight while its lease lasts (live). One whose lease ran out
	// stays, for its late result to be recorded.
	held []heldJob
	// madeFailed are the deliveries a result of the test said failed.
	madeFailed map[string]bool
	// stats counts what the run did, logged with -v.
	stats map[string]int
}

// queueOrder is a warehouse order, its items, and how many were returned
// (each return is one more event).
type queueOrder struct {
	id       string
	items    []string
	returned int
}

// heldJob is a claimed job and the end of its lease.
type heldJob struct {
	job   storelink.DeliveryJob
	until time.Time
}

func newQueueHarness(t *testing.T, seed uint64) *queueHarness {
	h := &queueHarness{t: t, ctx: context.Background(), seed: seed, phase: "setup",
		rng:        rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
		madeFailed: map[string]bool{}, stats: map[string]int{},
		now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	h.db = OpenFixture(t, h.clock)
	p, err := h.db.Services().Partners.CreatePartner(h.ctx, "Acme")
	h.must(err, "create partner")
	c, err := h.db.Services().Partners.CreateClient(h.ctx, p.ID, "DE", "EUR")
	h.must(err, "create client")
	h.client = c.ID
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	all, err := h.db.Services().Webhooks.CreateEndpoint(h.ctx, c.ID, storelink.NewEndpoint{URL: "https://all.test/", APIKey: "k"}, secret)
	h.must(err, "create endpoint")
	returns, err := h.db.Services().Webhooks.CreateEndpoint(h.ctx, c.ID, storelink.NewEndpoint{URL: "https://returns.test/",
		States: []storelink.OrderState{storelink.StateWarehouseReturned}}, secret)
	h.must(err, "create endpoint")
	h.endpoints = []string{all.ID, returns.ID}
	h.phase = "step"
	return h
}

func (h *queueHarness) clock() time.Time { return h.now }

// fatalf fails the seed, naming it and the step.
func (h *queueHarness) fatalf(format string, args ...any) {
	h.t.Helper()
	h.t.Fatalf("seed %d, %s %d (clock +%s): %s", h.seed, h.phase, h.step,
		h.now.Sub(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)), fmt.Sprintf(format, args...))
}

func (h *queueHarness) must(err error, what string) {
	h.t.Helper()
	if err != nil {
		h.fatalf("%s: %v", what, err)
	}
}

// randomStep takes one random step.
func (h *queueHarness) randomStep() {
	switch r := h.rng.IntN(1000); {
	case r < 120:
		h.createOrder()
	case r < 220:
		h.returnItem()
	case r < 370:
		h.claim()
	case r < 550:
		h.recordAndClaim(true)
	case r < 600:
		h.recordAndClaim(false)
	case r < 660:
		h.releaseClaims()
	case r < 720:
		h.redeliver()
	case r < 770:
		h.toggleEndpoint()
	case r < 940:
		h.advance()
	case r < 997:
		// Drops the queue: the next round reads it from the file.
		h.must(h.db.TestAccess().Exec(h.ctx, "SELECT 1"), "TestAccess.Exec")
		h.stats["queue dropped"]++
	default:
		h.reopen()
	}
}

// createOrder records a warehouse order of one to three items: one event,
// delivered to the endpoint that takes every state.
func (h *queueHarness) createOrder() {
	price := storelink.Money(1999)
	n := storelink.NewOrder{OrderNumber: fmt.Sprintf("W-%d", len(h.orders)), ClientID: h.client}
	for range 1 + h.rng.IntN(3) {
		n.Items = append(n.Items, storelink.NewItem{EAN: "4006381333931", MarketplaceArticleNumber: "MP-1", ArticleNumber: "SKU-1", Price: &price})
	}
	o, err := h.db.Services().Orders.CreateWarehouseOrder(h.ctx, n)
	h.must(err, "create warehouse order")
	qo := &queueOrder{id: o.ID}
	for _, it := range o.Items {
		qo.items = append(qo.items, it.ItemID)
	}
	h.orders = append(h.orders, qo)
	h.stats["orders"]++
}

// returnItem returns the next item of a random order that has one left:
// a later event of that order, delivered to both endpoints.
func (h *queueHarness) returnItem() {
	var open []*queueOrder
	for _, o := range h.orders {
		if o.returned < len(o.items) {
			open = append(open, o)
		}
	}
	if len(open) == 0 {
		h.createOrder()
		return
	}
	o := open[h.rng.IntN(len(open))]
	_, err := h.db.Services().Orders.WarehouseReturn(h.ctx, o.id, storelink.WarehouseReturnRequest{
		Items: []storelink.WarehouseReturnItem{{ItemID: o.items[o.returned]}}})
	h.must(err, "warehouse return")
	o.returned++
	h.stats["returns"]++
}

// limits draws a claim's limits: ample (nothing held back by them) a
// third of the time, else small, to meet the caps.
func (h *queueHarness) limits() (limit, perEndpoint int) {
	if h.rng.IntN(3) == 0 {
		return 1000, 1000
	}
	return 1 + h.rng.IntN(5), 1 + h.rng.IntN(3)
}

func (h *queueHarness) owner() string { return []string{"w1", "w2"}[h.rng.IntN(2)] }

// claim claims due deliveries and checks what came.
func (h *queueHarness) claim() {
	limit, per := h.limits()
	jobs, err := h.db.Services().Webhooks.ClaimDeliveries(h.ctx, storelink.ClaimRequest{Owner: h.owner(), Lease: queueLease, Limit: limit, Caps: storelink.EndpointCap(per)})
	h.must(err, "ClaimDeliveries")
	h.checkClaim(jobs, limit, per)
}

// recordAndClaim records results for a random part of the held jobs,
// those whose lease ran out too (a late result), with random outcomes;
// and, if claim, claims in the same round.
func (h *queueHarness) recordAndClaim(claim bool) {
	var results []storelink.AttemptResult
	kept := h.held[:0:0]
	for _, hj := range h.held {
		if h.rng.IntN(2) == 0 {
			kept = append(kept, hj)
			continue
		}
		job := hj.job
		r := storelink.AttemptResult{Job: &job, Attempt: storelink.Attempt{Number: job.Attempt, At: h.now, DurationMS: 5}}
		switch o := h.rng.IntN(100); {
		case o < 50:
			r.Outcome, r.Attempt.StatusCode = storelink.OutcomeSucceeded, 204
		case o < 80:
			r.Outcome, r.Attempt.StatusCode = storelink.OutcomeRetry, 503
			r.NextAt = h.now.Add(time.Millisecond + time.Duration(h.rng.IntN(120_000))*time.Millisecond)
		case o < 95:
			r.Outcome, r.Attempt.StatusCode = storelink.OutcomeFailed, 500
			h.madeFailed[job.DeliveryID] = true
		default:
			// 410: the endpoint is disabled, its deliveries parked.
			r.Outcome, r.Attempt.StatusCode = storelink.OutcomeGone, 410
		}
		results = append(results, r)
		h.stats[fmt.Sprintf("results %d", r.Attempt.StatusCode)]++
	}
	h.held = kept
	if !claim {
		h.must(h.db.Services().Webhooks.RecordAttempts(h.ctx, results), "RecordAttempts")
		return
	}
	limit, per := h.limits()
	jobs, err := h.db.Services().Webhooks.RecordAndClaim(h.ctx, results, storelink.ClaimRequest{Owner: h.owner(), Lease: queueLease, Limit: limit, Caps: storelink.ClaimCaps{Default: per}})
	h.must(err, "RecordAndClaim")
	h.checkClaim(jobs, limit, per)
}

// releaseClaims gives back a random part of the held jobs unsent.
func (h *queueHarness) releaseClaims() {
	var back []storelink.DeliveryJob
	kept := h.held[:0:0]
	for _, hj := range h.held {
		if h.rng.IntN(3) == 0 {
			back = append(back, hj.job)
		} else {
			kept = append(kept, hj)
		}
	}
	h.held = kept
	h.must(h.db.Services().Webhooks.ReleaseClaims(h.ctx, back), "ReleaseClaims")
	h.stats["released"] += len(back)
}

// redeliver makes a random delivery pending again, whatever its state (the
// store leaves one in flight to its attempt).
func (h *queueHarness) redeliver() {
	rows, err := h.db.TestAccess().Query(h.ctx, `SELECT id FROM deliveries ORDER BY seq`)
	h.must(err, "list deliveries")
	if len(rows) == 0 {
		return
	}
	id := rows[h.rng.IntN(len(rows))]["id"]
	h.must(h.db.Services().Webhooks.Redeliver(h.ctx, id), "Redeliver "+id)
	h.stats["redelivered"]++
}

// toggleEndpoint enables or disables a random endpoint.
func (h *queueHarness) toggleEndpoint() {
	on := h.rng.IntN(4) > 0
	_, err := h.db.Services().Webhooks.UpdateEndpoint(h.ctx, "", h.endpoints[h.rng.IntN(len(h.endpoints))], storelink.EndpointPatch{Enabled: &on})
	h.must(err, "UpdateEndpoint")
	h.stats["endpoint toggles"]++
}

// advance moves the clock a little, or past leases and most retries.
func (h *queueHarness) advance() {
	if h.rng.IntN(4) == 0 {
		h.now = h.now.Add(queueLease + time.Duration(h.rng.IntN(270_000))*time.Millisecond)
	} else {
		h.now = h.now.Add(time.Duration(h.rng.IntN(20_000)) * time.Millisecond)
	}
}

// reopen closes the store and opens it again on the same file, as a
// restart: the held jobs' results never come.
func (h *queueHarness) reopen() {
	h.db.Reopen(h.t)
	h.must(h.db.ReleaseLeases(h.ctx), "ReleaseLeases")
	h.held = nil
	h.stats["reopened"]++
}

// live returns the held jobs in flight, by delivery.
func (h *queueHarness) live() map[string]storelink.DeliveryJob {
	out := map[string]storelink.DeliveryJob{}
	for _, hj := range h.held {
		if !hj.until.Before(h.now) { // a lease lasts up to its end, inclusive
			out[hj.job.DeliveryID] = hj.job
		}
	}
	return out
}

// pendingRow is a pending delivery as the file has it.
type pendingRow struct {
	id, endpoint, order, eventID string
	eventSeq, next               int64
}

// queueSnapshot is the pending deliveries and which endpoints are enabled,
// read from the file.
type queueSnapshot struct {
	pending []pendingRow
	byID    map[string]pendingRow
	enabled map[string]bool
	// first is the smallest event_seq pending per endpoint and order.
	first map[[2]string]int64
}

func (h *queueHarness) snapshot() queueSnapshot {
	h.t.Helper()
	s := queueSnapshot{byID: map[string]pendingRow{}, enabled: map[string]bool{}, first: map[[2]string]int64{}}
	rows, err := h.db.TestAccess().Query(h.ctx, `SELECT id, endpoint_id, order_id, event_id, event_seq, next_attempt_at
		FROM deliveries WHERE state = 'pending' ORDER BY seq`)
	h.must(err, "read pending deliveries")
	for _, r := range rows {
		p := pendingRow{id: r["id"], endpoint: r["endpoint_id"], order: r["order_id"], eventID: r["event_id"]}
		p.eventSeq, _ = strconv.ParseInt(r["event_seq"], 10, 64)
		if p.next, err = strconv.ParseInt(r["next_attempt_at"], 10, 64); err != nil {
			h.fatalf("pending delivery %s has next_attempt_at %q", p.id, r["next_attempt_at"])
		}
		s.pending = append(s.pending, p)
		s.byID[p.id] = p
		k := [2]string{p.endpoint, p.order}
		if f, ok := s.first[k]; !ok || p.eventSeq < f {
			s.first[k] = p.eventSeq
		}
	}
	eps, err := h.db.TestAccess().Query(h.ctx, `SELECT id, enabled FROM endpoints`)
	h.must(err, "read endpoints")
	for _, e := range eps {
		s.enabled[e["id"]] = e["enabled"] == "1"
	}
	return s
}

// checkClaim checks the jobs a claim returned, with the limits it was
// given, against the file and the jobs in flight before it; then holds
// them.
func (h *queueHarness) checkClaim(jobs []storelink.DeliveryJob, limit, perEndpoint int) {
	h.t.Helper()
	s := h.snapshot()
	live := h.live()
	nowMS := ms(h.now)
	if len(jobs) > limit {
		h.fatalf("claimed %d deliveries with limit %d", len(jobs), limit)
	}
	inFlight := map[string]int{}
	for _, j := range live {
		inFlight[j.EndpointID]++
	}
	claimedNow := map[string]int{}
	seen := map[string]bool{}
	for _, j := range jobs {
		p, pending := s.byID[j.DeliveryID]
		switch {
		// 1. Only what should go now is sent, and never twice at once: the
		// delivery is pending, due, its endpoint enabled, and no attempt
		// of it is in flight.
		case !pending:
			h.fatalf("claimed delivery %s (endpoint %s), which is not pending", j.DeliveryID, j.EndpointID)
		case p.next > nowMS:
			h.fatalf("claimed delivery %s, not due until +%dms", j.DeliveryID, p.next-nowMS)
		case p.endpoint != j.EndpointID || p.eventID != j.EventID:
			h.fatalf("claimed delivery %s as event %s to %s; the file says event %s to %s",
				j.DeliveryID, j.EventID, j.EndpointID, p.eventID, p.endpoint)
		case !s.enabled[p.endpoint]:
			h.fatalf("claimed delivery %s to disabled endpoint %s", j.DeliveryID, p.endpoint)
		case seen[j.DeliveryID]:
			h.fatalf("delivery %s claimed twice in one claim", j.DeliveryID)
		}
		if prev, ok := live[j.DeliveryID]; ok {
			h.fatalf("claimed delivery %s (attempt %d) while attempt %d by %s is in flight",
				j.DeliveryID, j.Attempt, prev.Attempt, prev.Owner)
		}
		// 2. No event is sent out of order: no earlier event of the order
		// is pending to the same endpoint.
		if first := s.first[[2]string{p.endpoint, p.order}]; first < p.eventSeq {
			h.fatalf("claimed delivery %s (event seq %d of order %s to %s) while event seq %d of that order is pending to it",
				j.DeliveryID, p.eventSeq, p.order, p.endpoint, first)
		}
		seen[j.DeliveryID] = true
		claimedNow[j.EndpointID]++
	}
	// 3. An endpoint gets no more deliveries at once than the deliverer
	// asked for (a cap lowered since may leave more in flight, but then
	// none is added).
	for ep, n := range claimedNow {
		if inFlight[ep]+n > perEndpoint {
			h.fatalf("endpoint %s: %d in flight and %d claimed, with at most %d per endpoint", ep, inFlight[ep], n, perEndpoint)
		}
	}
	// Liveness: a claim takes every delivery that may go (pending, due,
	// first of its order to its endpoint, that endpoint enabled, and not
	// in flight), as far as its limits allow: up to perEndpoint in flight
	// per endpoint, and up to limit in all. The queue follows every change
	// the store makes, so it never picks a delivery the file would turn
	// down, and the count is exact.
	var missed []string
	mayGo := map[string]int{}
	for _, p := range s.pending {
		if _, busy := live[p.id]; p.next > nowMS || !s.enabled[p.endpoint] || s.first[[2]string{p.endpoint, p.order}] != p.eventSeq || busy {
			continue
		}
		mayGo[p.endpoint]++
		if !seen[p.id] {
			missed = append(missed, fmt.Sprintf("%s (event seq %d to %s, due %dms ago)", p.id, p.eventSeq, p.endpoint, nowMS-p.next))
		}
	}
	want := 0
	for ep, n := range mayGo {
		want += min(n, max(perEndpoint-inFlight[ep], 0))
	}
	if want = min(want, limit); len(jobs) != want {
		h.fatalf("a claim (limit %d, %d per endpoint; in flight %v) took %d deliveries, want %d; not taken of those that may go: %v",
			limit, perEndpoint, inFlight, len(jobs), want, missed)
	}
	h.stats["claims"]++
	h.stats["claimed"] += len(jobs)
	if len(live) > 0 && len(jobs) > 0 {
		h.stats["claims beside jobs in flight"]++
	}
	until := h.now.Add(queueLease)
	for _, j := range jobs {
		h.held = append(h.held, heldJob{job: j, until: until})
	}
}

// drain enables every endpoint, moves the clock past every lease and
// retry, and delivers until nothing is pending, each attempt succeeding:
// nothing may be stuck, and nothing fail that no result failed.
func (h *queueHarness) drain() {
	h.phase, h.step = "drain", 0
	h.held = nil // their results never come
	on := true
	for _, id := range h.endpoints {
		_, err := h.db.Services().Webhooks.UpdateEndpoint(h.ctx, "", id, storelink.EndpointPatch{Enabled: &on})
		h.must(err, "enable endpoint")
	}
	h.now = h.now.Add(time.Hour)
	// Each round takes the first of every order's line to an endpoint;
	// every line is done within its length, and a round more to see it.
	longest := map[[2]string]int{}
	rounds := 2
	for _, p := range h.snapshot().pending {
		k := [2]string{p.endpoint, p.order}
		longest[k]++
		rounds = max(rounds, longest[k]+2)
	}
	var results []storelink.AttemptResult
	for h.step = 1; ; h.step++ {
		if h.step > rounds {
			h.fatalf("still %d pending after %d rounds of claims that all succeeded", len(h.snapshot().pending), rounds)
		}
		jobs, err := h.db.Services().Webhooks.RecordAndClaim(h.ctx, results, storelink.ClaimRequest{Owner: "drain", Lease: queueLease, Limit: 1000, Caps: storelink.ClaimCaps{Default: 1000}})
		h.must(err, "RecordAndClaim")
		h.checkClaim(jobs, 1000, 1000)
		if len(jobs) == 0 {
			break
		}
		results = results[:0]
		for i := range jobs {
			results = append(results, storelink.AttemptResult{Job: &jobs[i], Outcome: storelink.OutcomeSucceeded,
				Attempt: storelink.Attempt{Number: jobs[i].Attempt, At: h.now, StatusCode: 204}})
		}
		h.held = nil
	}
	if n := len(h.snapshot().pending); n > 0 {
		h.fatalf("a claim took nothing, with %d deliveries pending", n)
	}
	rows, err := h.db.TestAccess().Query(h.ctx, `SELECT id, state FROM deliveries ORDER BY seq`)
	h.must(err, "read deliveries")
	states := map[string]int{}
	for _, r := range rows {
		states[r["state"]]++
		switch r["state"] {
		case string(storelink.DeliverySucceeded):
		case string(storelink.DeliveryFailed):
			if !h.madeFailed[r["id"]] {
				h.fatalf("delivery %s failed, but no result of the test said so", r["id"])
			}
		default:
			h.fatalf("delivery %s is %s after the drain", r["id"], r["state"])
		}
	}
	if len(rows) == 0 {
		h.fatalf("the run made no deliveries: it tests nothing")
	}
	h.t.Logf("deliveries %v; %v", states, h.stats)
}
