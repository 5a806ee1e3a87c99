package storetest

import (
	"slices"
	"time"

	"storelink"
)

// testRecordAndClaim: one round records its results and, in the same
// transaction, claims: the places the results free under an endpoint's cap,
// and the next event of an order whose delivery succeeded, are claimed at
// once; a round with nothing to record claims as ClaimDeliveries does.
func testRecordAndClaim(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 10, 100))
	e.endpoint("https://a.test", "key-a")
	var orders []string
	for _, n := range []string{"RC-1", "RC-2", "RC-3"} {
		orders = append(orders, e.create(e.newOrder(n, eanA)).ID)
	}
	// A second event of the first order waits behind its first.
	_, err := s.Orders.FulfilOrder(ctx, orders[0], storelink.FulfilRequest{})
	must(t, err)
	jobs, err := s.Webhooks.RecordAndClaim(ctx, nil, storelink.ClaimRequest{Owner: "w1", Lease: lease, Limit: 10, Caps: storelink.ClaimCaps{Default: 2}})
	must(t, err)
	if len(jobs) != 2 {
		t.Fatalf("first round claimed %s\nwant 2, the cap", describe(jobs...))
	}
	if more, err := s.Webhooks.RecordAndClaim(ctx, nil, storelink.ClaimRequest{Owner: "w1", Lease: lease, Limit: 10, Caps: storelink.ClaimCaps{Default: 2}}); err != nil || len(more) != 0 {
		t.Fatalf("a round at the cap claimed %s, %v; want nothing", describe(more...), err)
	}
	var results []storelink.AttemptResult
	for _, j := range jobs {
		results = append(results, e.result(j, storelink.OutcomeSucceeded, 204))
	}
	next, err := s.Webhooks.RecordAndClaim(ctx, results, storelink.ClaimRequest{Owner: "w1", Lease: lease, Limit: 10, Caps: storelink.ClaimCaps{Default: 2}})
	must(t, err)
	if len(next) != 2 {
		t.Fatalf("the round that recorded 2 successes claimed %s\nwant the 2 places freed", describe(next...))
	}
	for _, j := range append(jobs, next...) {
		if j.Attempt != 1 || j.Try != 1 || j.APIKey != "key-a" || len(j.Secrets) != 1 || len(j.Body) == 0 {
			t.Fatalf("claimed %s, key %q, want a first attempt with its key, secret and body", describe(j), j.APIKey)
		}
	}
	for _, r := range results {
		e.wantDelivery(r.Job.DeliveryID, storelink.DeliverySucceeded, nil, 1)
	}
	// Of the three orders' four events, the two left are claimed now: the
	// third order's, and the first order's second, whose first succeeded
	// in this round, or the two of the orders that went first.
	claimed := map[string]bool{}
	for _, j := range append(jobs, next...) {
		if claimed[j.DeliveryID] {
			t.Fatalf("delivery %s claimed twice", j.DeliveryID)
		}
		claimed[j.DeliveryID] = true
	}
	if len(claimed) != 4 {
		t.Fatalf("%d deliveries claimed in all, want 4", len(claimed))
	}
	// Nothing to record and nothing to claim is nothing at all.
	if none, err := s.Webhooks.RecordAndClaim(ctx, nil, storelink.ClaimRequest{Owner: "w1", Lease: lease, Limit: 0, Caps: storelink.ClaimCaps{Default: 2}}); err != nil || len(none) != 0 {
		t.Fatalf("an empty round = %s, %v", describe(none...), err)
	}
}

// testReleaseClaims: claimed deliveries given back are claimed again at
// once as they were before their claim, their attempt and try not counted;
// a job whose lease is not its own (another attempt's, or one that ran out
// and was claimed again) changes nothing.
func testReleaseClaims(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 10, 100))
	e.endpoint("https://a.test", "")
	for _, n := range []string{"RL-1", "RL-2", "RL-3"} {
		e.create(e.newOrder(n, eanA))
	}
	jobs := e.claim("w1", 10, 10)
	if len(jobs) != 3 {
		t.Fatalf("claimed %s\nwant 3", describe(jobs...))
	}
	stale := jobs[2]
	stale.Attempt++ // not the attempt that holds the lease
	must(t, s.Webhooks.ReleaseClaims(ctx, []storelink.DeliveryJob{jobs[0], jobs[1], stale}))
	again := e.claim("w2", 10, 10)
	if len(again) != 2 {
		t.Fatalf("claimed after the release %s\nwant the 2 released", describe(again...))
	}
	for _, j := range again {
		if j.DeliveryID == jobs[2].DeliveryID || j.Attempt != 1 || j.Try != 1 {
			t.Fatalf("claimed after the release %s\nwant the released ones as first attempts", describe(j))
		}
	}
	// A lease that ran out and was claimed again is the new holder's.
	e.clock.Advance(lease + time.Millisecond)
	taken := e.claim("w3", 10, 10)
	i := slices.IndexFunc(taken, func(j storelink.DeliveryJob) bool { return j.DeliveryID == jobs[2].DeliveryID })
	if len(taken) != 3 || i < 0 || slices.ContainsFunc(taken, func(j storelink.DeliveryJob) bool { return j.Attempt != 2 }) {
		t.Fatalf("claimed after the leases ran out %s\nwant all 3 as attempt 2", describe(taken...))
	}
	must(t, s.Webhooks.ReleaseClaims(ctx, []storelink.DeliveryJob{jobs[2]}))
	e.claimNone("after giving back a lease that was taken over")
	must(t, s.Webhooks.ReleaseClaims(ctx, taken))
	back := e.claim("w4", 10, 10)
	if len(back) != 3 {
		t.Fatalf("claimed after giving back the new leases %s\nwant all 3", describe(back...))
	}
	for _, j := range back {
		if j.Attempt != 2 || j.Try != 2 {
			t.Fatalf("claimed %s\nwant attempt and try 2: the leases that ran out count, those given back do not", describe(j))
		}
	}
	must(t, s.Webhooks.ReleaseClaims(ctx, nil))
}
