package storetest

import (
	"time"

	"storelink"
)

// testRecordAttempts: a recorded attempt moves its delivery on by its
// outcome and is listed with it; a result whose lease was lost is recorded
// but moves nothing.
func testRecordAttempts(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 10, 100))
	ep, _ := e.endpoint("https://a.test", "")
	var events []string
	for _, n := range []string{"R-1", "R-2", "R-3"} {
		events = append(events, e.eventOf(e.create(e.newOrder(n, eanA)).ID, storelink.StateAssigned).EventID)
	}
	jobs := e.claim("w1", 100, 100)
	var ok, retry, failed storelink.DeliveryJob
	for _, j := range jobs {
		switch j.EventID {
		case events[0]:
			ok = j
		case events[1]:
			retry = j
		case events[2]:
			failed = j
		}
	}
	if len(jobs) != 3 || ok.DeliveryID == "" || retry.DeliveryID == "" || failed.DeliveryID == "" {
		t.Fatalf("claimed %s, want the three events", describe(jobs...))
	}

	// Three results in one call.
	e.clock.Advance(time.Second)
	rOK := e.result(ok, storelink.OutcomeSucceeded, 200)
	rOK.Attempt.DurationMS, rOK.Attempt.Response = 12, `{"ok":true}`
	rRetry := e.result(retry, storelink.OutcomeRetry, 500)
	rRetry.Attempt.Response, rRetry.NextAt = "boom", e.clock.Now().Add(5*time.Minute)
	rFailed := e.result(failed, storelink.OutcomeFailed, 0)
	rFailed.Attempt.Error = "dial tcp: connection refused"
	e.record(rOK, rRetry, rFailed)
	for _, c := range []struct {
		r     storelink.AttemptResult
		state storelink.DeliveryState
		next  *time.Time
	}{
		{rOK, storelink.DeliverySucceeded, nil},
		{rRetry, storelink.DeliveryPending, &rRetry.NextAt},
		{rFailed, storelink.DeliveryFailed, nil},
	} {
		d := e.wantDelivery(c.r.Job.DeliveryID, c.state, c.next, 1)
		if got, want := d.Attempts[0], c.r.Attempt; !got.At.Equal(want.At) || got.Number != want.Number || got.DurationMS != want.DurationMS ||
			got.StatusCode != want.StatusCode || got.Error != want.Error || got.Response != want.Response {
			t.Fatalf("attempt of delivery %s:\n got  %+v\n want %+v", d.ID, d.Attempts[0], c.r.Attempt)
		}
	}

	// A retry is due at NextAt, not before.
	e.clock.Advance(5*time.Minute - time.Millisecond)
	e.claimNone("before the retry is due")
	e.clock.Advance(time.Millisecond)
	j := e.claimOne("w1")
	if j.DeliveryID != retry.DeliveryID || j.Attempt != 2 || j.Try != 2 {
		t.Fatalf("retried job = %s, want delivery %s, attempt and try 2", describe(j), retry.DeliveryID)
	}

	// 410 Gone: the endpoint is disabled with a reason; the delivery is
	// parked, pending, and that try does not count.
	gone := e.result(j, storelink.OutcomeGone, 410)
	e.record(gone)
	list, err := s.Webhooks.Endpoints(ctx, e.client.ID)
	must(t, err)
	if len(list) != 1 || list[0].Enabled || list[0].DisabledReason == "" {
		t.Fatalf("endpoint after 410 = %+v, want disabled with a reason", list)
	}
	if d := e.delivery(retry.DeliveryID); d.State != storelink.DeliveryPending || d.NextAttemptAt == nil || len(d.Attempts) != 2 {
		t.Fatalf("parked delivery = %+v, want pending with a next attempt and 2 attempts", d)
	}
	e.claimNone("while the endpoint is gone")
	if ep := e.setEnabled(ep.ID, true); ep.DisabledReason != "" {
		t.Fatalf("endpoint enabled again = %+v, want no reason", ep)
	}
	lost := e.claimOne("w1")
	if lost.DeliveryID != retry.DeliveryID || lost.Attempt != 3 || lost.Try != 2 {
		t.Fatalf("job after enabling = %s, want attempt 3, try 2 (410 does not count)", describe(lost))
	}

	// w1's lease runs out and w2 claims the delivery: w1's result is an
	// attempt, nothing more; w2's decides.
	e.clock.Advance(lease + time.Millisecond)
	live := e.claimOne("w2")
	if live.DeliveryID != retry.DeliveryID || live.Attempt != 4 || live.Try != 3 {
		t.Fatalf("job after the lease ran out = %s, want attempt 4, try 3", describe(live))
	}
	before := e.delivery(retry.DeliveryID)
	e.record(e.result(lost, storelink.OutcomeSucceeded, 200))
	after := e.wantDelivery(retry.DeliveryID, storelink.DeliveryPending, before.NextAttemptAt, 1, 2, 3)
	if after.Attempts[2].StatusCode != 200 {
		t.Fatalf("attempt of the lost lease = %+v", after.Attempts[2])
	}
	e.claimNone("while w2 holds the lease")
	e.record(e.result(lost, storelink.OutcomeFailed, 500)) // again: recorded once
	e.wantDelivery(retry.DeliveryID, storelink.DeliveryPending, before.NextAttemptAt, 1, 2, 3)
	e.record(e.result(live, storelink.OutcomeFailed, 500))
	e.wantDelivery(retry.DeliveryID, storelink.DeliveryFailed, nil, 1, 2, 3, 4)
	must(t, s.Webhooks.RecordAttempts(ctx, nil))
}

// testGoneAfterEnable: a 410 disables the endpoint only if it came to an
// attempt that began after the endpoint's last change. Two attempts are in
// flight when the first 410 disables the endpoint, and the operator enables
// it again before the second's 410 is recorded: the endpoint stays enabled
// and that delivery goes again at once, its try not counted; a 410 to that
// next attempt, begun after the enable, disables the endpoint again.
func testGoneAfterEnable(e *env) {
	t := e.t
	e.feed(row("S1", eanA, 10, 100))
	ep, _ := e.endpoint("https://a.test", "")
	e.create(e.newOrder("G-1", eanA))
	e.create(e.newOrder("G-2", eanA))
	jobs := e.claim("w1", 100, 100)
	if len(jobs) != 2 {
		t.Fatalf("claimed %s, want the two orders' events", describe(jobs...))
	}
	first, second := e.result(jobs[0], storelink.OutcomeGone, 410), e.result(jobs[1], storelink.OutcomeGone, 410)
	wantEnabled := func(what string, on bool) {
		t.Helper()
		list, err := e.s.Webhooks.Endpoints(e.ctx, e.client.ID)
		must(t, err)
		if len(list) != 1 || list[0].Enabled != on || (list[0].DisabledReason == "") != on {
			t.Fatalf("endpoint %s = %+v, want enabled %v, a reason only when disabled", what, list, on)
		}
	}

	e.clock.Advance(time.Second)
	e.record(first)
	wantEnabled("after the first 410", false)
	e.clock.Advance(time.Second)
	e.setEnabled(ep.ID, true)
	e.clock.Advance(time.Second)
	e.record(second)
	wantEnabled("after a 410 to an attempt begun before it was enabled again", true)
	now := e.clock.Now()
	e.wantDelivery(jobs[1].DeliveryID, storelink.DeliveryPending, &now, 1)
	again, ok := jobFor(e.claim("w1", 100, 100), jobs[1].EventID, ep.ID)
	if !ok || again.Attempt != 2 || again.Try != 1 {
		t.Fatalf("claim after the late 410: job %s (found %v), want attempt 2, try 1", describe(again), ok)
	}

	e.clock.Advance(time.Second)
	e.record(e.result(again, storelink.OutcomeGone, 410))
	wantEnabled("after a 410 to an attempt begun after it was enabled again", false)
	e.claimNone("while the endpoint is gone")
}

// testRedeliver: a delivery is made pending again, due now, with a fresh
// retry schedule and its attempts kept.
func testRedeliver(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 10, 100))
	e.endpoint("https://a.test", "")
	e.create(e.newOrder("X-1", eanA))
	j := e.claimOne("w")
	r := e.result(j, storelink.OutcomeFailed, 0)
	r.Attempt.Error = "timeout"
	e.record(r)
	e.wantDelivery(j.DeliveryID, storelink.DeliveryFailed, nil, 1)
	e.claimNone("a failed delivery")

	e.clock.Advance(time.Hour)
	must(t, s.Webhooks.Redeliver(ctx, j.DeliveryID))
	now := e.clock.Now()
	d := e.wantDelivery(j.DeliveryID, storelink.DeliveryPending, &now, 1)
	if d.Attempts[0].Error != "timeout" {
		t.Fatalf("attempts after redelivery = %+v, want the first kept", d.Attempts)
	}
	again := e.claimOne("w")
	if again.DeliveryID != j.DeliveryID || again.Attempt != 2 || again.Try != 1 || string(again.Body) != string(j.Body) {
		t.Fatalf("redelivered job = %s, want attempt 2, try 1", describe(again))
	}
	e.record(e.result(again, storelink.OutcomeSucceeded, 200))
	e.wantDelivery(j.DeliveryID, storelink.DeliverySucceeded, nil, 1, 2)
	// A succeeded delivery can be sent again too.
	must(t, s.Webhooks.Redeliver(ctx, j.DeliveryID))
	if third := e.claimOne("w"); third.Attempt != 3 || third.Try != 1 {
		t.Fatalf("second redelivery = %s, want attempt 3, try 1", describe(third))
	}
	wantCode(t, s.Webhooks.Redeliver(ctx, "nope"), storelink.ENOTFOUND)
}

// testRedeliverInOrder: an earlier event of an order made pending again
// goes before the later ones still pending, which wait for it as they
// would have the first time.
func testRedeliverInOrder(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 10, 100))
	e.endpoint("https://a.test", "")
	o := e.create(e.newOrder("R-1", eanA))
	first := e.claimOne("w")
	e.record(e.result(first, storelink.OutcomeFailed, 500))
	_, err := s.Orders.FulfilOrder(ctx, o.ID, storelink.FulfilRequest{})
	must(t, err)
	// The fulfilment's delivery is pending; the failed one is made pending
	// again before it is claimed.
	must(t, s.Webhooks.Redeliver(ctx, first.DeliveryID))
	again := e.claim("w", 10, 10)
	if len(again) != 1 || again[0].DeliveryID != first.DeliveryID {
		t.Fatalf("claim after redelivering the first event:%s\nwant only it, the fulfilment waiting", describe(again...))
	}
	e.claimNone("while the redelivered first event is in flight")
	e.record(e.result(again[0], storelink.OutcomeSucceeded, 200))
	next := e.claimOne("w")
	if want := e.eventOf(o.ID, storelink.StateFulfilled).EventID; next.EventID != want {
		t.Fatalf("claim after the redelivery succeeded: %s, want the fulfilment %s", describe(next), want)
	}
}

// testDeliveryOrder: per order and endpoint, an event waits until the
// earlier ones succeeded or failed for good; other orders and endpoints do
// not wait.
func testDeliveryOrder(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 10, 100))
	a, _ := e.endpoint("https://a.test", "")
	b, _ := e.endpoint("https://b.test", "")
	o1 := e.create(e.newOrder("O-1", eanA))
	_, err := s.Orders.FulfilOrder(ctx, o1.ID, storelink.FulfilRequest{})
	must(t, err)
	o2 := e.create(e.newOrder("O-2", eanA))
	_, err = s.Orders.CancelOrder(ctx, o2.ID, storelink.CancelRequest{})
	must(t, err)
	o1a, o1f := e.eventOf(o1.ID, storelink.StateAssigned).EventID, e.eventOf(o1.ID, storelink.StateFulfilled).EventID
	o2a, o2c := e.eventOf(o2.ID, storelink.StateAssigned).EventID, e.eventOf(o2.ID, storelink.StateCancelled).EventID

	// wantJobs checks that jobs are exactly the given events to endpoints.
	wantJobs := func(what string, jobs []storelink.DeliveryJob, pairs ...string) map[string]storelink.DeliveryJob {
		t.Helper()
		got := map[string]storelink.DeliveryJob{}
		for i := 0; i < len(pairs); i += 2 {
			j, ok := jobFor(jobs, pairs[i], pairs[i+1])
			if !ok {
				t.Fatalf("%s: claimed%s\nmissing event %s to %s", what, describe(jobs...), pairs[i], pairs[i+1])
			}
			got[pairs[i]+" "+pairs[i+1]] = j
		}
		if len(jobs) != len(got) {
			t.Fatalf("%s: claimed %d jobs:%s\nwant %d", what, len(jobs), describe(jobs...), len(got))
		}
		return got
	}
	// The first event of each order, to each endpoint.
	jobs := wantJobs("first claim", e.claim("w", 100, 100), o1a, a.ID, o1a, b.ID, o2a, a.ID, o2a, b.ID)
	e.claimNone("while the first events are leased")
	// Retried: the next event still waits, even when the first is not due.
	r := e.result(jobs[o1a+" "+a.ID], storelink.OutcomeRetry, 503)
	r.NextAt = e.clock.Now().Add(time.Hour)
	e.record(r)
	e.claimNone("while O-1's first event to A waits for a retry")
	// Succeeded to A: O-1's next event to A goes; to B it still waits.
	e.record(e.result(jobs[o2a+" "+a.ID], storelink.OutcomeSucceeded, 200))
	next := wantJobs("after O-2's first event succeeded to A", e.claim("w", 100, 100), o2c, a.ID)
	// Failed for good counts as done too.
	e.record(e.result(jobs[o2a+" "+b.ID], storelink.OutcomeFailed, 500))
	last := wantJobs("after O-2's first event failed to B", e.claim("w", 100, 100), o2c, b.ID)
	e.record(e.result(jobs[o1a+" "+b.ID], storelink.OutcomeSucceeded, 204), e.result(next[o2c+" "+a.ID], storelink.OutcomeSucceeded, 200))
	fb := wantJobs("after O-1's first event succeeded to B", e.claim("w", 100, 100), o1f, b.ID)
	e.record(e.result(last[o2c+" "+b.ID], storelink.OutcomeSucceeded, 200), e.result(fb[o1f+" "+b.ID], storelink.OutcomeSucceeded, 200))
	e.clock.Advance(time.Hour - time.Millisecond)
	e.claimNone("a millisecond before the retry is due")
	e.clock.Advance(time.Millisecond)
	retried := wantJobs("when the retry is due", e.claim("w", 100, 100), o1a, a.ID)[o1a+" "+a.ID]
	if retried.Attempt != 2 || retried.Try != 2 {
		t.Fatalf("retried job = %s, want attempt and try 2", describe(retried))
	}
	e.record(e.result(retried, storelink.OutcomeSucceeded, 200))
	wantJobs("after the retry succeeded", e.claim("w", 100, 100), o1f, a.ID)
}

// testDeliveryCap: at most perEndpoint deliveries of one endpoint are in
// flight, counting those already leased; others are not held up.
func testDeliveryCap(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	e.feed(row("S1", eanA, 10, 100))
	busy, _ := e.endpoint("https://busy.test", "", storelink.StateAssigned)
	calm, _ := e.endpoint("https://calm.test", "", storelink.StateFulfilled)
	var orders []*storelink.Order
	for _, n := range []string{"P-1", "P-2", "P-3", "P-4", "P-5"} {
		orders = append(orders, e.create(e.newOrder(n, eanA)))
	}
	_, err := s.Orders.FulfilOrder(ctx, orders[0].ID, storelink.FulfilRequest{})
	must(t, err)
	count := func(jobs []storelink.DeliveryJob) map[string]int {
		n := map[string]int{}
		for _, j := range jobs {
			n[j.EndpointID]++
		}
		return n
	}
	jobs := e.claim("w", 10, 2)
	if n := count(jobs); len(jobs) != 3 || n[busy.ID] != 2 || n[calm.ID] != 1 {
		t.Fatalf("claim with 2 per endpoint = %v, want 2 to %s and 1 to %s", n, busy.ID, calm.ID)
	}
	if more := e.claim("w", 10, 2); len(more) != 0 {
		t.Fatalf("claim while 2 are in flight = %s, want nothing", describe(more...))
	}
	var first storelink.DeliveryJob
	for _, j := range jobs {
		if j.EndpointID == busy.ID {
			first = j
			break
		}
	}
	e.record(e.result(first, storelink.OutcomeSucceeded, 200))
	if more := e.claim("w", 10, 2); len(more) != 1 || more[0].EndpointID != busy.ID {
		t.Fatalf("claim after one of 2 finished = %s, want 1 to %s", describe(more...), busy.ID)
	}
	if more := e.claim("w", 1, 10); len(more) != 1 {
		t.Fatalf("claim of at most 1 = %s, want 1", describe(more...))
	}
	// Leases that ran out do not count as in flight.
	e.clock.Advance(lease + time.Millisecond)
	if n := count(e.claim("w", 10, 3)); n[busy.ID] != 3 || n[calm.ID] != 1 {
		t.Fatalf("claim after the leases ran out = %v, want 3 to %s and 1 to %s", n, busy.ID, calm.ID)
	}
}
