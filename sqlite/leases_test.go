package sqlite

import (
	"context"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"storelink"
)

// A claim only reads: the leases are held in memory, so claiming a
// backlog writes nothing to the file.
func TestClaimWritesNothing(t *testing.T) {
	ctx := context.Background()
	db, _ := batchFixture(t, 5)
	if err := db.TestAccess().Exec(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	list, err := db.TestAccess().Query(ctx, "PRAGMA database_list")
	if err != nil {
		t.Fatal(err)
	}
	wal := list[0]["file"] + "-wal"
	jobs, err := db.Services().Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w1", Lease: time.Minute, Limit: 10, Caps: storelink.EndpointCap(10)})
	if err != nil || len(jobs) != 5 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	if fi, err := os.Stat(wal); err != nil || fi.Size() != 0 {
		t.Fatalf("the WAL after a claim: %v, %v; want it empty", fi, err)
	}
	if again, err := db.Services().Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w2", Lease: time.Minute, Limit: 10, Caps: storelink.EndpointCap(10)}); err != nil || len(again) != 0 {
		t.Fatalf("claim while leased: %d jobs, %v; want none", len(again), err)
	}
}

// Leases do not outlive the process that holds the file: opened again,
// the deliveries a closed (or killed) process had claimed are claimed at
// once, their first attempt still the first, since none was recorded.
func TestLeasesEndWithTheProcess(t *testing.T) {
	ctx := context.Background()
	db, _ := batchFixture(t, 2)
	if jobs, err := db.Services().Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "gone", Lease: time.Hour, Limit: 10, Caps: storelink.EndpointCap(10)}); err != nil || len(jobs) != 2 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	db.Reopen(t)
	jobs, err := db.Services().Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "next", Lease: time.Hour, Limit: 10, Caps: storelink.EndpointCap(10)})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("claim after reopening: %d jobs, %v; want both", len(jobs), err)
	}
	for _, j := range jobs {
		if j.Attempt != 1 || j.Try != 1 || j.Owner != "next" {
			t.Errorf("claimed after reopening: %+v, want attempt and try 1", j)
		}
	}
}

// Redeliver leaves a delivery in flight to its attempt; once the lease
// has run out it makes it pending again with a fresh schedule, and the
// next attempt's number follows on from the lost one.
func TestRedeliverInFlight(t *testing.T) {
	ctx := context.Background()
	db, _ := batchFixture(t, 1)
	now := time.Now().UTC().Truncate(time.Millisecond)
	db.Now = func() time.Time { return now }
	jobs, err := db.Services().Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w1", Lease: time.Minute, Limit: 10, Caps: storelink.EndpointCap(10)})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	// Retried once: attempt 1 recorded, try 1 counted; attempt 2 in flight.
	if err := db.Services().Webhooks.RecordAttempts(ctx, []storelink.AttemptResult{{Job: &jobs[0], Outcome: storelink.OutcomeRetry, NextAt: now,
		Attempt: storelink.Attempt{Number: 1, At: now, StatusCode: 503}}}); err != nil {
		t.Fatal(err)
	}
	second, err := db.Services().Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w1", Lease: time.Minute, Limit: 10, Caps: storelink.EndpointCap(10)})
	if err != nil || len(second) != 1 || second[0].Attempt != 2 || second[0].Try != 2 {
		t.Fatalf("second claim: %+v, %v; want attempt 2, try 2", second, err)
	}
	if err := db.Services().Webhooks.Redeliver(ctx, jobs[0].DeliveryID); err != nil {
		t.Fatal(err)
	}
	if again, err := db.Services().Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w2", Lease: time.Minute, Limit: 10, Caps: storelink.EndpointCap(10)}); err != nil || len(again) != 0 {
		t.Fatalf("claim after redelivering a delivery in flight: %+v, %v; want none", again, err)
	}
	now = now.Add(time.Minute + time.Millisecond)
	if err := db.Services().Webhooks.Redeliver(ctx, jobs[0].DeliveryID); err != nil {
		t.Fatal(err)
	}
	third, err := db.Services().Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w2", Lease: time.Minute, Limit: 10, Caps: storelink.EndpointCap(10)})
	if err != nil || len(third) != 1 || third[0].Attempt != 3 || third[0].Try != 1 {
		t.Fatalf("claim after the lease ran out and a redelivery: %+v, %v; want attempt 3, try 1", third, err)
	}
	// The lost attempt's result comes in late: recorded, and it moves
	// nothing; the live one's does.
	if err := db.Services().Webhooks.RecordAttempts(ctx, []storelink.AttemptResult{
		{Job: &second[0], Outcome: storelink.OutcomeFailed, Attempt: storelink.Attempt{Number: 2, At: now, StatusCode: 500}},
		{Job: &third[0], Outcome: storelink.OutcomeSucceeded, Attempt: storelink.Attempt{Number: 3, At: now, StatusCode: 204}},
	}); err != nil {
		t.Fatal(err)
	}
	ds, err := db.Services().Webhooks.Deliveries(ctx, storelink.DeliveryFilter{Limit: 10})
	if err != nil || len(ds) != 1 {
		t.Fatalf("deliveries: %+v, %v", ds, err)
	}
	if d := ds[0]; d.State != storelink.DeliverySucceeded || len(d.Attempts) != 3 || d.Attempts[1].StatusCode != 500 {
		t.Fatalf("delivery = %+v, want succeeded with 3 attempts", d)
	}
}

// claimOne claims with a one-minute lease and fails unless one job comes.
func claimOne(t *testing.T, db *Fixture, owner string) storelink.DeliveryJob {
	t.Helper()
	return claimUpTo(t, db, owner, 10)
}

// claimUpTo claims at most limit with a one-minute lease and fails unless
// exactly one job comes.
func claimUpTo(t *testing.T, db *Fixture, owner string, limit int) storelink.DeliveryJob {
	t.Helper()
	jobs, err := db.Services().Webhooks.ClaimDeliveries(context.Background(), storelink.ClaimRequest{Owner: owner, Lease: time.Minute, Limit: limit, Caps: storelink.EndpointCap(10)})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim by %s: %d jobs, %v; want one", owner, len(jobs), err)
	}
	return jobs[0]
}

// onlyDelivery returns the one delivery of a fixture.
func onlyDelivery(t *testing.T, db *Fixture) storelink.Delivery {
	t.Helper()
	ds, err := db.Services().Webhooks.Deliveries(context.Background(), storelink.DeliveryFilter{Limit: 10})
	if err != nil || len(ds) != 1 {
		t.Fatalf("deliveries: %+v, %v", ds, err)
	}
	return ds[0]
}

func recordOne(t *testing.T, db *Fixture, j storelink.DeliveryJob, o storelink.Outcome, status int, at time.Time) {
	t.Helper()
	if err := db.Services().Webhooks.RecordAttempts(context.Background(), []storelink.AttemptResult{{Job: &j, Outcome: o,
		Attempt: storelink.Attempt{Number: j.Attempt, At: at, StatusCode: status}}}); err != nil {
		t.Fatal(err)
	}
}

// A claim that took over from a lease that ran out, given back unsent,
// leaves the lost attempt counted: the next claim is attempt 2, try 2,
// and the lost attempt's late result moves nothing.
func TestReleaseAfterLostLease(t *testing.T) {
	ctx := context.Background()
	db, _ := batchFixture(t, 1)
	now := time.Now().UTC().Truncate(time.Millisecond)
	db.Now = func() time.Time { return now }
	lost := claimOne(t, db, "w1")
	now = now.Add(time.Minute + time.Millisecond)
	second := claimOne(t, db, "w1")
	if err := db.Services().Webhooks.ReleaseClaims(ctx, []storelink.DeliveryJob{second}); err != nil {
		t.Fatal(err)
	}
	third := claimOne(t, db, "w1")
	if third.Attempt != 2 || third.Try != 2 {
		t.Fatalf("claim after giving back the one that took over: attempt %d, try %d; want 2 and 2", third.Attempt, third.Try)
	}
	recordOne(t, db, lost, storelink.OutcomeFailed, 500, now)
	if d := onlyDelivery(t, db); d.State != storelink.DeliveryPending {
		t.Fatalf("after the lost attempt's late 500: %s, want pending (its lease was lost)", d.State)
	}
	recordOne(t, db, third, storelink.OutcomeSucceeded, 204, now)
	if d := onlyDelivery(t, db); d.State != storelink.DeliverySucceeded || len(d.Attempts) != 2 || d.Attempts[1].StatusCode != 204 {
		t.Fatalf("after the live attempt's 204: %+v, want succeeded with attempts 1 (500) and 2 (204)", d)
	}
}

// Redeliver after a lease ran out: the lost attempt's late result, failed
// or 410, undoes nothing, and the schedule starts again at try 1.
func TestRedeliverThenLostResult(t *testing.T) {
	ctx := context.Background()
	for _, outcome := range []storelink.Outcome{storelink.OutcomeFailed, storelink.OutcomeGone} {
		db, _ := batchFixture(t, 1)
		now := time.Now().UTC().Truncate(time.Millisecond)
		db.Now = func() time.Time { return now }
		lost := claimOne(t, db, "w1")
		now = now.Add(time.Minute + time.Millisecond)
		if err := db.Services().Webhooks.Redeliver(ctx, lost.DeliveryID); err != nil {
			t.Fatal(err)
		}
		recordOne(t, db, lost, outcome, 500, now)
		if d := onlyDelivery(t, db); d.State != storelink.DeliveryPending || len(d.Attempts) != 1 {
			t.Fatalf("outcome %d: after the lost attempt's late result: %+v, want pending with it recorded", outcome, d)
		}
		if j := claimOne(t, db, "w2"); j.Attempt != 2 || j.Try != 1 {
			t.Fatalf("outcome %d: claim after the redelivery: attempt %d, try %d; want 2 and 1", outcome, j.Attempt, j.Try)
		}
	}
}

// Claims at once from several goroutines (a claim racing another, or
// Redeliver) never hand out a delivery whose lease is live.
func TestConcurrentClaims(t *testing.T) {
	ctx := context.Background()
	db, _ := batchFixture(t, 200)
	var mu sync.Mutex
	seen := map[string]string{}
	var wg sync.WaitGroup
	for _, owner := range []string{"a", "b", "c", "d"} {
		wg.Go(func() {
			for range 100 {
				jobs, err := db.Services().Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: owner, Lease: time.Hour, Limit: 1, Caps: storelink.EndpointCap(1000)})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, j := range jobs {
					if o, ok := seen[j.DeliveryID]; ok {
						t.Errorf("delivery %s claimed by %s and again by %s while leased", j.DeliveryID, o, owner)
					}
					seen[j.DeliveryID] = owner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != 200 {
		t.Fatalf("%d deliveries claimed, want all 200", len(seen))
	}
}

// expired finds a lease once it has run out, and one held by no one (given
// back after it took over from a lost one, or redelivered) at once,
// whenever the leases before them ran out; before the first runs out it
// finds none, and those ending in the round are never among them.
func TestLeaseBookExpired(t *testing.T) {
	var b leaseBook
	a := &deliveryLease{id: "a", owner: "w1", until: 100, attempt: 1, try: 1}
	c := &deliveryLease{id: "c", owner: "w1", until: 200, attempt: 2, try: 2, lostAttempt: 1, lostTry: 1}
	b.settle(nil, map[string]*deliveryLease{"a": a, "c": c})
	ids := func(ls []*deliveryLease) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l.id)
		}
		slices.Sort(out)
		return out
	}
	check := func(now int64, ending []*deliveryLease, want ...string) {
		t.Helper()
		if got := ids(b.expired(now, ending)); !slices.Equal(got, want) {
			t.Errorf("expired at %d: %v, want %v", now, got, want)
		}
	}
	check(50, nil)
	check(100, nil)
	check(101, nil, "a")
	check(101, []*deliveryLease{a})
	check(150, nil, "a")
	// c is given back: the lease it took over from stays, held by no one.
	b.release([]storelink.DeliveryJob{{DeliveryID: "c", Owner: "w1", Attempt: 2}})
	check(50, nil, "c")
	b.settle([]*deliveryLease{a}, nil)
	check(50, nil, "c")
	// Taken again: nothing runs out before the new lease.
	c2 := &deliveryLease{id: "c", owner: "w2", until: 300, attempt: 2, try: 2}
	b.settle(nil, map[string]*deliveryLease{"c": c2})
	check(50, nil)
	check(301, nil, "c")
	b.settle(nil, map[string]*deliveryLease{"d": {id: "d", owner: "w2", until: 400}})
	// Redelivered after its lease ran out: held by no one, found at once.
	if !b.redeliverable("c", 350) {
		t.Fatal("c not redeliverable after its lease ran out")
	}
	check(50, nil, "c")
}
