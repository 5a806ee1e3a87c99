package drivertest

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"storelink"
	"storelink/service"
)

// round runs fn in a round of the deliverer's bookkeeping and commits it,
// unless fn's claim did.
func (e *env) round(fn func(tx service.RoundTx)) {
	e.t.Helper()
	tx, err := e.d.Webhooks.BeginRound(e.ctx)
	must(e.t, err)
	defer tx.Rollback(e.ctx)
	fn(tx)
	must(e.t, tx.Commit(e.ctx))
}

// claimDue locks the claims and claims in tx, with one cap for every
// endpoint.
func (e *env) claimDue(tx service.RoundTx, owner string, now time.Time, limit, perEndpoint int) []service.Claimed {
	e.t.Helper()
	return e.claimCaps(tx, owner, now, limit, storelink.ClaimCaps{Default: perEndpoint})
}

// claimCaps claims in tx with caps, with the database's secret key, and
// ends the round.
func (e *env) claimCaps(tx service.RoundTx, owner string, now time.Time, limit int, caps storelink.ClaimCaps) []service.Claimed {
	e.t.Helper()
	key, err := e.d.SecretKeys.SecretKeyCheck(e.ctx)
	must(e.t, err)
	r, err := tx.ClaimDue(e.ctx, service.ClaimDueParams{Pending: storelink.DeliveryPending, Owner: owner, KeyCheck: key, Now: now, Lease: time.Minute, Limit: limit, Caps: caps})
	must(e.t, err)
	got, check := r.Claimed, r.KeyCheck
	if check != "" && check != key {
		e.t.Fatalf("claim answered key check %q, the database has %q", check, key)
	}
	return got
}

// queue writes an event of o, made at at, and its delivery to endpoint.
func (e *env) queue(o *storelink.Order, endpoint string, at time.Time) *storelink.Event {
	e.t.Helper()
	ev := event(o)
	e.writeEvent(o, ev, at, endpoint)
	return ev
}

// events lists the event ids of claimed deliveries, in their order.
func events(claimed []service.Claimed) string {
	ids := make([]string, len(claimed))
	for i, c := range claimed {
		ids[i] = c.Job.EventID
	}
	return strings.Join(ids, " ")
}

// testBookkeeping: a claim leases what is due, one event per order and
// endpoint, the oldest first, with what the attempt needs and the
// endpoint's keys sealed; a rolled back round leases nothing; a record moves
// on only the deliveries whose lease the result holds, and the claim in the
// same round sees it; a park disables the endpoint, unless the endpoint
// changed after the parked attempt began.
func testBookkeeping(e *env) {
	t := e.t
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	ep, err := e.seed.Webhooks.CreateEndpoint(e.ctx, e.client.ID, storelink.NewEndpoint{URL: "https://a.test/", APIKey: "key-a"}, secret)
	must(t, err)
	o1, o2 := e.order("S1", eanA), e.order("S1", eanA)
	e.insert(o1)
	e.insert(o2)
	first := e.queue(o1, ep.ID, e.tick())
	other := e.queue(o2, ep.ID, e.tick())
	o1.State = storelink.StateFulfilled
	second := e.queue(o1, ep.ID, e.tick())
	now := e.tick()

	var claimed []service.Claimed
	e.round(func(tx service.RoundTx) { claimed = e.claimDue(tx, "w1", now, 10, 10) })
	if got, want := events(claimed), first.EventID+" "+other.EventID; got != want {
		t.Fatalf("claimed events %s, want %s: the oldest due first, one per order and endpoint", got, want)
	}
	for _, c := range claimed {
		j, k := c.Job, c.Keys
		var body storelink.Event
		if err := json.Unmarshal(j.Body, &body); err != nil || body.EventID != j.EventID {
			t.Fatalf("job body %s (%v), want the event %s", j.Body, err, j.EventID)
		}
		if j.EndpointID != ep.ID || j.URL != ep.URL || j.Attempt != 1 || j.Try != 1 || j.Owner != "w1" || j.DeliveryID == "" ||
			j.APIKey != "" || j.Secrets != nil {
			t.Fatalf("claimed job %+v", j)
		}
		if k.Secret == "" || strings.Contains(k.Secret, secret[6:]) || k.APIKey == "" || k.APIKey == "key-a" || k.Previous != "" {
			t.Fatalf("claimed keys %+v, want the endpoint's, sealed", k)
		}
	}
	e.round(func(tx service.RoundTx) {
		if got := e.claimDue(tx, "w2", now, 10, 10); len(got) != 0 {
			t.Fatalf("claimed %s while leased", events(got))
		}
	})

	// One success, one retry and a result of a lost lease in one record;
	// the claim of the same round sees the success.
	at := e.tick()
	retryAt := at.Add(time.Hour)
	result := func(c service.Claimed, attempt int) storelink.AttemptResult {
		j := c.Job
		j.Attempt = attempt
		return storelink.AttemptResult{Job: &j, Attempt: storelink.Attempt{Number: attempt, At: at, StatusCode: 200}}
	}
	var next []service.Claimed
	e.round(func(tx service.RoundTx) {
		results := []storelink.AttemptResult{result(claimed[0], 1), result(claimed[1], 1), result(claimed[1], 7)}
		moves := []service.Move{{Kind: service.MoveSucceeded, End: storelink.DeliverySucceeded}, {Kind: service.MoveRetry, NextAt: retryAt}, {Kind: service.MoveFailed, End: storelink.DeliveryFailed}}
		must(t, tx.RecordAttempts(e.ctx, service.RecordAttemptsParams{Results: results, Moves: moves, Now: at, Pending: storelink.DeliveryPending}))
		next = e.claimDue(tx, "w1", at, 10, 10)
	})
	if events(next) != second.EventID {
		t.Fatalf("the round's claim gave %s, want the order's second event %s", events(next), second.EventID)
	}
	byEvent := map[string]storelink.Delivery{}
	list, err := e.seed.Webhooks.Deliveries(e.ctx, storelink.DeliveryFilter{ClientID: e.client.ID, Limit: 10})
	must(t, err)
	for _, d := range list {
		byEvent[d.EventID] = d
	}
	if d := byEvent[first.EventID]; d.State != storelink.DeliverySucceeded || len(d.Attempts) != 1 {
		t.Fatalf("delivery of the success = %+v", d)
	}
	if d := byEvent[other.EventID]; d.State != storelink.DeliveryPending || d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(retryAt) ||
		len(d.Attempts) != 2 {
		t.Fatalf("delivery of the retry = %+v, want pending at %s with its attempt and the lost lease's", d, retryAt)
	}

	// A park of an attempt begun before the endpoint's last change (here
	// an operator enables it while the attempt is in flight) leaves the
	// endpoint as it is; its delivery is due at NextAt, its try not counted.
	on := true
	changed := e.tick()
	e.inTx(func(tx service.WebhookTx) {
		_, err := tx.UpdateEndpoint(e.ctx, ep.ID, service.EndpointChange{Enabled: &on, At: changed})
		must(t, err)
	})
	parkAt := e.tick()
	var again []service.Claimed
	e.round(func(tx service.RoundTx) {
		must(t, tx.RecordAttempts(e.ctx, service.RecordAttemptsParams{Results: []storelink.AttemptResult{result(next[0], 1)},
			Moves: []service.Move{{Kind: service.MovePark, NextAt: parkAt, Disable: "gone before the change", Since: at}}, Now: parkAt,
			Pending: storelink.DeliveryPending}))
		again = e.claimDue(tx, "w1", parkAt, 10, 10)
	})
	if events(again) != second.EventID || again[0].Job.Attempt != 2 || again[0].Job.Try != 1 {
		t.Fatalf("claimed %s after a park older than the endpoint's change, want %s as attempt 2, try 1", events(again), second.EventID)
	}
	eps, err := e.seed.Webhooks.Endpoints(e.ctx, e.client.ID)
	must(t, err)
	if len(eps) != 1 || !eps[0].Enabled || eps[0].DisabledReason != "" {
		t.Fatalf("endpoints after a park older than their change = %+v, want enabled, no reason", eps)
	}

	// A park of an attempt begun after the change disables the endpoint;
	// its delivery waits, its try not counted.
	parkAt = e.tick()
	e.round(func(tx service.RoundTx) {
		must(t, tx.RecordAttempts(e.ctx, service.RecordAttemptsParams{Results: []storelink.AttemptResult{result(again[0], 2)},
			Moves: []service.Move{{Kind: service.MovePark, NextAt: parkAt, Disable: "gone for the test", Since: parkAt}}, Now: parkAt,
			Pending: storelink.DeliveryPending}))
		if got := e.claimDue(tx, "w1", parkAt, 10, 10); len(got) != 0 {
			t.Fatalf("claimed %s from a disabled endpoint", events(got))
		}
	})
	eps, err = e.seed.Webhooks.Endpoints(e.ctx, e.client.ID)
	must(t, err)
	if len(eps) != 1 || eps[0].Enabled || eps[0].DisabledReason != "gone for the test" {
		t.Fatalf("endpoints after a park = %+v, want disabled for the reason given", eps)
	}
	_, err = e.seed.Webhooks.UpdateEndpoint(e.ctx, "", ep.ID, storelink.EndpointPatch{Enabled: &on})
	must(t, err)

	// A process whose secret key is no longer the database's claims
	// nothing, and is told the database's, where other processes can change
	// it; a driver that says nothing else can (SQLite) claims as ever.
	key, err := e.d.SecretKeys.RecordSecretKeyCheck(e.ctx, "check-of-the-database's-key")
	must(t, err)
	tx, err := e.d.Webhooks.BeginRound(e.ctx)
	must(t, err)
	r, err := tx.ClaimDue(e.ctx, service.ClaimDueParams{Pending: storelink.DeliveryPending, Owner: "w1", KeyCheck: "not-" + key, Now: parkAt, Lease: time.Minute, Limit: 10,
		Caps: storelink.ClaimCaps{Default: 10}})
	must(t, err)
	stale, check := r.Claimed, r.KeyCheck
	must(t, tx.Commit(e.ctx))
	if check == "" {
		if events(stale) != second.EventID {
			t.Fatalf("claimed %s after enabling, want %s", events(stale), second.EventID)
		}
		return
	}
	if len(stale) != 0 || check != key {
		t.Fatalf("claim with a stale key leased %s and answered key check %q, want nothing and %q", events(stale), check, key)
	}
	e.round(func(tx service.RoundTx) {
		got := e.claimDue(tx, "w1", parkAt, 10, 10)
		if events(got) != second.EventID || got[0].Job.Attempt != 3 || got[0].Job.Try != 1 {
			t.Fatalf("claimed %s after enabling, want %s as attempt 3, try 1", events(got), second.EventID)
		}
	})
}

// testClaimCaps: each endpoint's cap bounds what the owner has leased, the
// deliveries leased before counted: the cap listed for it, or the default
// for one not listed; All bounds what every owner has leased together.
func testClaimCaps(e *env) {
	t := e.t
	var eps [3]*storelink.Endpoint
	for i := range eps {
		ep, err := e.seed.Webhooks.CreateEndpoint(e.ctx, e.client.ID, storelink.NewEndpoint{URL: fmt.Sprintf("https://%c.test/", 'a'+i)},
			"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
		must(t, err)
		eps[i] = ep
	}
	// Four orders, each with an event to every endpoint.
	for range 4 {
		o := e.order("S1", eanA)
		e.insert(o)
		at := e.tick()
		for _, ep := range eps {
			e.queue(o, ep.ID, at)
		}
	}
	count := func(claimed []service.Claimed) map[string]int {
		n := map[string]int{}
		for _, c := range claimed {
			n[c.Job.EndpointID]++
		}
		return n
	}
	now := e.tick()
	caps := storelink.ClaimCaps{Default: 2, Of: map[string]int{eps[0].ID: 1, eps[1].ID: 3}}
	var first []service.Claimed
	e.round(func(tx service.RoundTx) { first = e.claimCaps(tx, "w1", now, 100, caps) })
	if n := count(first); n[eps[0].ID] != 1 || n[eps[1].ID] != 3 || n[eps[2].ID] != 2 {
		t.Fatalf("claimed per endpoint %v, want 1, 3 and 2 (listed, listed, default)", n)
	}
	// The caps count what the owner has leased already: raised by one
	// each, one more each.
	caps = storelink.ClaimCaps{Default: 3, Of: map[string]int{eps[0].ID: 2, eps[1].ID: 4}}
	var second []service.Claimed
	e.round(func(tx service.RoundTx) { second = e.claimCaps(tx, "w1", now, 100, caps) })
	if n := count(second); len(second) != 3 || n[eps[0].ID] != 1 || n[eps[1].ID] != 1 || n[eps[2].ID] != 1 {
		t.Fatalf("second claim per endpoint %v, want one more each", n)
	}
	// All bounds every owner's leases together: 2, 4 and 3 are leased.
	caps = storelink.ClaimCaps{Default: 10, All: 4}
	var third []service.Claimed
	e.round(func(tx service.RoundTx) { third = e.claimCaps(tx, "w2", now, 100, caps) })
	if n := count(third); len(third) != 3 || n[eps[0].ID] != 2 || n[eps[2].ID] != 1 {
		t.Fatalf("another owner's claim per endpoint %v, want 2, 0 and 1: up to 4 leased in all", n)
	}
}
