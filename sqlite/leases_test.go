package sqlite

import (
	"context"
	"os"
	"testing"
	"time"

	"storelink"
)

// A claim only reads: the leases are held in memory, so claiming a
// backlog writes nothing to the file.
func TestClaimWritesNothing(t *testing.T) {
	ctx := context.Background()
	db, _ := batchFixture(t, 5)
	if err := db.ExecForTest(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	list, err := db.QueryForTest(ctx, "PRAGMA database_list")
	if err != nil {
		t.Fatal(err)
	}
	wal := list[0]["file"] + "-wal"
	jobs, err := db.ClaimDeliveries(ctx, "w1", time.Minute, 10, 10)
	if err != nil || len(jobs) != 5 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	if fi, err := os.Stat(wal); err != nil || fi.Size() != 0 {
		t.Fatalf("the WAL after a claim: %v, %v; want it empty", fi, err)
	}
	if again, err := db.ClaimDeliveries(ctx, "w2", time.Minute, 10, 10); err != nil || len(again) != 0 {
		t.Fatalf("claim while leased: %d jobs, %v; want none", len(again), err)
	}
}

// Leases do not outlive the process that holds the file: opened again,
// the deliveries a closed (or killed) process had claimed are claimed at
// once, their first attempt still the first, since none was recorded.
func TestLeasesEndWithTheProcess(t *testing.T) {
	ctx := context.Background()
	db, _ := batchFixture(t, 2)
	if jobs, err := db.ClaimDeliveries(ctx, "gone", time.Hour, 10, 10); err != nil || len(jobs) != 2 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	list, err := db.QueryForTest(ctx, "PRAGMA database_list")
	if err != nil {
		t.Fatal(err)
	}
	path, sealer := list[0]["file"], db.Sealer
	db.Close()
	db, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.Sealer = sealer
	jobs, err := db.ClaimDeliveries(ctx, "next", time.Hour, 10, 10)
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
	jobs, err := db.ClaimDeliveries(ctx, "w1", time.Minute, 10, 10)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	// Retried once: attempt 1 recorded, try 1 counted; attempt 2 in flight.
	if err := db.RecordAttempts(ctx, []storelink.AttemptResult{{Job: &jobs[0], Outcome: storelink.OutcomeRetry, NextAt: now,
		Attempt: storelink.Attempt{Number: 1, At: now, StatusCode: 503}}}); err != nil {
		t.Fatal(err)
	}
	second, err := db.ClaimDeliveries(ctx, "w1", time.Minute, 10, 10)
	if err != nil || len(second) != 1 || second[0].Attempt != 2 || second[0].Try != 2 {
		t.Fatalf("second claim: %+v, %v; want attempt 2, try 2", second, err)
	}
	if err := db.Redeliver(ctx, jobs[0].DeliveryID); err != nil {
		t.Fatal(err)
	}
	if again, err := db.ClaimDeliveries(ctx, "w2", time.Minute, 10, 10); err != nil || len(again) != 0 {
		t.Fatalf("claim after redelivering a delivery in flight: %+v, %v; want none", again, err)
	}
	now = now.Add(time.Minute + time.Millisecond)
	if err := db.Redeliver(ctx, jobs[0].DeliveryID); err != nil {
		t.Fatal(err)
	}
	third, err := db.ClaimDeliveries(ctx, "w2", time.Minute, 10, 10)
	if err != nil || len(third) != 1 || third[0].Attempt != 3 || third[0].Try != 1 {
		t.Fatalf("claim after the lease ran out and a redelivery: %+v, %v; want attempt 3, try 1", third, err)
	}
	// The lost attempt's result comes in late: recorded, and it moves
	// nothing; the live one's does.
	if err := db.RecordAttempts(ctx, []storelink.AttemptResult{
		{Job: &second[0], Outcome: storelink.OutcomeFailed, Attempt: storelink.Attempt{Number: 2, At: now, StatusCode: 500}},
		{Job: &third[0], Outcome: storelink.OutcomeSucceeded, Attempt: storelink.Attempt{Number: 3, At: now, StatusCode: 204}},
	}); err != nil {
		t.Fatal(err)
	}
	ds, err := db.Deliveries(ctx, storelink.DeliveryFilter{Limit: 10})
	if err != nil || len(ds) != 1 {
		t.Fatalf("deliveries: %+v, %v", ds, err)
	}
	if d := ds[0]; d.State != storelink.DeliverySucceeded || len(d.Attempts) != 3 || d.Attempts[1].StatusCode != 500 {
		t.Fatalf("delivery = %+v, want succeeded with 3 attempts", d)
	}
}
