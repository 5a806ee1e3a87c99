package sqlite

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"storelink"
)

// BenchmarkRecordAndClaim is the deliverer's bookkeeping alone, as it runs
// when a backlog goes to a fast endpoint: each round records the results
// of the deliveries claimed in the round before (all succeeded) and claims
// as many again, in one transaction. It reports the time and the CPU per
// delivery, which bound the delivery rate on SQLite's one writer, and the
// pages each commit writes (checkpoints are off while it runs, so the WAL
// holds every frame written):
//
//	go test ./sqlite -run '^$' -bench RecordAndClaim -benchtime 1x
func BenchmarkRecordAndClaim(b *testing.B) {
	const backlog, round = 6000, 48
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		db, _ := batchFixture(b, backlog)
		b.StartTimer()
		if err := db.checkpoints.close(); err != nil { // the WAL keeps every frame written
			b.Fatal(err)
		}
		if err := db.TestAccess().Exec(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
			b.Fatal(err)
		}
		if err := db.TestAccess().Exec(ctx, "PRAGMA wal_autocheckpoint = 0"); err != nil {
			b.Fatal(err)
		}
		commits := 0
		q := db.Services()
		start, cpu0 := time.Now(), cpuTime()
		jobs, err := q.Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w1", Lease: time.Minute, Limit: round, Caps: storelink.EndpointCap(round)})
		done := 0
		for err == nil && len(jobs) > 0 {
			results := succeeded(jobs, len(jobs), 1, 204)
			done += len(jobs)
			commits++
			jobs, err = q.Webhooks.RecordAndClaim(ctx, results, storelink.ClaimRequest{Owner: "w1", Lease: time.Minute, Limit: round, Caps: storelink.ClaimCaps{Default: round}})
		}
		if err != nil {
			b.Fatal(err)
		}
		reportDeliveries(b, start, cpu0, done, backlog)
		list, _ := db.TestAccess().Query(ctx, "PRAGMA database_list")
		if fi, err := os.Stat(list[0]["file"] + "-wal"); err == nil {
			b.ReportMetric(float64(fi.Size())/walFrame/float64(commits), "pages/commit")
		}
		db.Close()
	}
}

// walFrame is the size of a WAL frame: a 4 KiB page and its 24-byte header.
const walFrame = 4096 + 24

// cpuTime is the CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// succeeded is the results of the first n jobs, each answered status after
// durationMS.
func succeeded(jobs []storelink.DeliveryJob, n int, durationMS int64, status int) []storelink.AttemptResult {
	results := make([]storelink.AttemptResult, n)
	now := time.Now().UTC()
	for i := range n {
		results[i] = storelink.AttemptResult{Job: &jobs[i], Outcome: storelink.OutcomeSucceeded,
			Attempt: storelink.Attempt{Number: jobs[i].Attempt, At: now, DurationMS: durationMS, StatusCode: status,
				URL: jobs[i].URL}}
	}
	return results
}

// reportDeliveries fails unless done is the backlog, and reports the time
// and this process's CPU per delivery since start and cpu0.
func reportDeliveries(b *testing.B, start time.Time, cpu0 time.Duration, done, backlog int) {
	b.Helper()
	if done != backlog {
		b.Fatalf("%d deliveries done, want %d", done, backlog)
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/float64(done), "µs/delivery")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(done), "cpu-µs/delivery")
}
