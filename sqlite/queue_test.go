package sqlite

import (
	"context"
	"fmt"
	"hash/maphash"
	"runtime"
	"sync"
	"testing"
	"time"

	"storelink"
)

// A round that fails after the queue gave out its deliveries loses none of
// them: the queue is read again from the file, and the next claim hands
// out what the failed one could not, while what the round recorded stays
// recorded.
func TestFailedRoundLosesNothing(t *testing.T) {
	ctx := context.Background()
	db, _ := batchFixture(t, 3)
	first := claimOneOf(t, db, 1)
	// The endpoint's row cannot be read (a value of the wrong type): the
	// claim fails after it took the other two deliveries out of the queue.
	breakEndpointRow(t, db, true)
	res := []storelink.AttemptResult{{Job: &first, Outcome: storelink.OutcomeSucceeded,
		Attempt: storelink.Attempt{Number: 1, At: time.Now(), StatusCode: 204}}}
	if jobs, err := db.Services().Webhooks.RecordAndClaim(ctx, res, storelink.ClaimRequest{Owner: "w", Lease: time.Minute, Limit: 10, Caps: storelink.ClaimCaps{Default: 10}}); err == nil || len(jobs) != 0 {
		t.Fatalf("round with a claim that cannot read the endpoint: %d jobs, %v; want an error", len(jobs), err)
	}
	breakEndpointRow(t, db, false)
	if d := deliveryByID(t, db, first.DeliveryID); d.State != storelink.DeliverySucceeded {
		t.Fatalf("the round's result after its claim failed: %s, want succeeded", d.State)
	}
	jobs, err := db.Services().Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w", Lease: time.Minute, Limit: 10, Caps: storelink.EndpointCap(10)})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("claim after the failed round: %d jobs, %v; want the other two", len(jobs), err)
	}
	for _, j := range jobs {
		if j.DeliveryID == first.DeliveryID {
			t.Errorf("claimed the delivery that succeeded again")
		}
	}
}

// What the queue holds is checked against the file when claimed: a
// delivery that is no longer pending there is not sent, and one due later
// than the queue thought waits.
func TestQueueCheckedAgainstTheFile(t *testing.T) {
	ctx := context.Background()
	db, _ := batchFixture(t, 4)
	now := time.Now().UTC().Truncate(time.Millisecond)
	db.Now = func() time.Time { return now }
	// The queue is read; leases last longer than the test.
	first, err := db.Services().Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w", Lease: 24 * time.Hour, Limit: 1, Caps: storelink.EndpointCap(10)})
	if err != nil || len(first) != 1 {
		t.Fatalf("claim: %d jobs, %v", len(first), err)
	}
	claimed := first[0]
	all, err := db.Services().Webhooks.Deliveries(ctx, storelink.DeliveryFilter{Limit: 10})
	if err != nil || len(all) != 4 {
		t.Fatalf("deliveries: %d, %v", len(all), err)
	}
	var ds []storelink.Delivery
	for _, d := range all {
		if d.ID != claimed.DeliveryID {
			ds = append(ds, d)
		}
	}
	// Behind the queue's back (not through TestAccess.Exec, which drops it).
	if _, err := db.write.ExecContext(ctx, `UPDATE deliveries SET state = 'failed', next_attempt_at = NULL WHERE id = ?`, ds[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.write.ExecContext(ctx, `UPDATE deliveries SET next_attempt_at = ? WHERE id = ?`, ms(now.Add(time.Hour)), ds[1].ID); err != nil {
		t.Fatal(err)
	}
	jobs, err := db.Services().Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w", Lease: 24 * time.Hour, Limit: 10, Caps: storelink.EndpointCap(10)})
	if err != nil || len(jobs) != 1 || jobs[0].DeliveryID != ds[2].ID {
		t.Fatalf("claim: %s, %v; want only %s", ids(jobs), err, ds[2].ID)
	}
	now = now.Add(time.Hour)
	jobs, err = db.Services().Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w", Lease: 24 * time.Hour, Limit: 10, Caps: storelink.EndpointCap(10)})
	if err != nil || len(jobs) != 1 || jobs[0].DeliveryID != ds[1].ID {
		t.Fatalf("claim an hour later: %s, %v; want only %s", ids(jobs), err, ds[1].ID)
	}
}

// The queue is read from the file at start-up: opened again, the pending
// deliveries are claimed in their order, the retry when it is due.
func TestQueueReadAtStartUp(t *testing.T) {
	ctx := context.Background()
	db, _ := batchFixture(t, 3)
	now := time.Now().UTC().Truncate(time.Millisecond)
	db.Now = func() time.Time { return now }
	first := claimOneOf(t, db, 1)
	res := []storelink.AttemptResult{{Job: &first, Outcome: storelink.OutcomeRetry, NextAt: now.Add(time.Minute),
		Attempt: storelink.Attempt{Number: 1, At: now, StatusCode: 503}}}
	if err := db.Services().Webhooks.RecordAttempts(ctx, res); err != nil {
		t.Fatal(err)
	}
	second := claimOneOf(t, db, 1) // in flight when the process goes
	db.Reopen(t)
	if err := db.ReleaseLeases(ctx); err != nil {
		t.Fatal(err)
	}
	jobs, err := db.Services().Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w", Lease: time.Minute, Limit: 10, Caps: storelink.EndpointCap(10)})
	if err != nil || len(jobs) != 2 || jobs[0].DeliveryID != second.DeliveryID || jobs[1].DeliveryID == first.DeliveryID {
		t.Fatalf("claim after reopening: %s, %v; want the one in flight first, then the third, not the retry", ids(jobs), err)
	}
	now = now.Add(time.Minute)
	if retry := claimOneOf(t, db, 10); retry.DeliveryID != first.DeliveryID || retry.Attempt != 2 {
		t.Fatalf("claim when the retry is due: %s attempt %d, want %s attempt 2", retry.DeliveryID, retry.Attempt, first.DeliveryID)
	}
}

// claimOneOf is claimOne by "w" of at most limit.
func claimOneOf(t *testing.T, db *Fixture, limit int) storelink.DeliveryJob {
	t.Helper()
	return claimUpTo(t, db, "w", limit)
}

func deliveryByID(t *testing.T, db *Fixture, id string) storelink.Delivery {
	t.Helper()
	ds, err := db.Services().Webhooks.Deliveries(context.Background(), storelink.DeliveryFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.ID == id {
			return d
		}
	}
	t.Fatalf("no delivery %s", id)
	return storelink.Delivery{}
}

// ids lists the deliveries of jobs.
func ids(jobs []storelink.DeliveryJob) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.DeliveryID
	}
	return out
}

// BenchmarkQueueMemory reports the memory the queue holds per pending
// delivery, for a backlog of 100,000 orders of three events each to one
// endpoint, against the same deliveries as a bare slice of their seqs
// (8 bytes each):
//
//	go test ./sqlite -run '^$' -bench QueueMemory
func BenchmarkQueueMemory(b *testing.B) {
	const orders, events = 100_000, 3
	heapNow := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	ids := make([]string, orders)
	for i := range ids {
		ids[i] = fmt.Sprintf("01a1fe69-8b92-7f1c-9003-%012d", i)
	}
	var perDelivery float64
	for b.Loop() {
		before := heapNow()
		q := &deliveryQueue{}
		q.seed = maphash.MakeSeed()
		q.endpoints, q.lines, q.loaded = map[string]*endpointQueue{}, map[lineKey]*queueLine{}, true
		e := q.endpoint("ep")
		seq := int64(0)
		for k := range events {
			for i := range orders {
				seq++
				q.add(lineKey{e, q.orderHash(ids[i])}, queued{seq: seq, eventSeq: seq, next: int64(k)})
			}
		}
		perDelivery = float64(heapNow()-before) / float64(orders*events)
		runtime.KeepAlive(q)
	}
	b.ReportMetric(perDelivery, "bytes/pending")
	b.ReportMetric(8, "baseline-bytes/pending")
	b.ReportMetric(perDelivery/8, "ratio")
}

// breakEndpointRow makes the endpoints' rows unreadable by a claim, which
// then fails after it picked its deliveries (a secret that cannot be
// opened fails only its own jobs, not the claim), or readable again.
func breakEndpointRow(t *testing.T, db *Fixture, broken bool) {
	t.Helper()
	value := "NULL"
	if broken {
		value = "'not a time'"
	}
	if err := db.TestAccess().Exec(context.Background(), `UPDATE endpoints SET previous_secret_until = `+value); err != nil {
		t.Fatal(err)
	}
}

// Claims that fail, racing each other, leave the queue to whoever holds
// the write connection: a failed round drops it before the connection
// goes back, never after (run with -race).
func TestFailedClaimsRacing(t *testing.T) {
	ctx := context.Background()
	db, _ := batchFixture(t, 3)
	breakEndpointRow(t, db, true) // every claim fails reading the endpoint
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for range 20 {
				if _, err := db.Services().Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w", Lease: time.Minute, Limit: 10, Caps: storelink.EndpointCap(10)}); err == nil {
					t.Error("a claim that cannot read the endpoint succeeded")
					return
				}
			}
		})
	}
	wg.Wait()
	breakEndpointRow(t, db, false)
	if jobs, err := db.Services().Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w", Lease: time.Minute, Limit: 10, Caps: storelink.EndpointCap(10)}); err != nil || len(jobs) != 3 {
		t.Fatalf("claim after the failed ones: %d jobs, %v; want 3", len(jobs), err)
	}
}

// A redelivery of a delivery the queue has not read yet, or of a done one
// above the last pending one, is queued once: the claim's places are not
// taken by a copy of it.
func TestRedeliverQueuedOnce(t *testing.T) {
	ctx := context.Background()
	db, ep := batchFixture(t, 1)
	first := claimOne(t, db, "w") // the queue is read
	order := func(n string) {
		t.Helper()
		price := storelink.Money(1999)
		if _, err := db.Services().Orders.CreateWarehouseOrder(ctx, storelink.NewOrder{OrderNumber: n, ClientID: ep.ClientID,
			Items: []storelink.NewItem{{EAN: "4006381333931", MarketplaceArticleNumber: "MP-1", ArticleNumber: "SKU-1", Price: &price}}}); err != nil {
			t.Fatal(err)
		}
	}
	recordOne(t, db, first, storelink.OutcomeSucceeded, 204, time.Now())
	order("W-x") // queued, not read yet
	ds, err := db.Services().Webhooks.Deliveries(ctx, storelink.DeliveryFilter{Limit: 1})
	if err != nil || len(ds) != 1 {
		t.Fatalf("deliveries: %v %v", ds, err)
	}
	if err := db.Services().Webhooks.Redeliver(ctx, ds[0].ID); err != nil {
		t.Fatal(err)
	}
	second := claimOne(t, db, "w")
	recordOne(t, db, second, storelink.OutcomeSucceeded, 204, time.Now())
	// Read whole again, then the last delivery, done, is redelivered.
	if err := db.TestAccess().Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if jobs, err := db.Services().Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w", Lease: time.Minute, Limit: 10, Caps: storelink.EndpointCap(10)}); err != nil || len(jobs) != 0 {
		t.Fatalf("claim with nothing pending: %d jobs, %v", len(jobs), err)
	}
	if err := db.Services().Webhooks.Redeliver(ctx, second.DeliveryID); err != nil {
		t.Fatal(err)
	}
	third := claimOne(t, db, "w")
	recordOne(t, db, third, storelink.OutcomeSucceeded, 204, time.Now())
	order("W-y")
	jobs, err := db.Services().Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w", Lease: time.Minute, Limit: 1, Caps: storelink.EndpointCap(10)})
	if err != nil || len(jobs) != 1 || jobs[0].DeliveryID == second.DeliveryID {
		t.Fatalf("claim of one with W-y's delivery due: %s, %v; want W-y's", ids(jobs), err)
	}
	if l := db.queue.lines; len(l) != 1 {
		t.Errorf("queue lines after every delivery but W-y's succeeded: %d, want 1 (W-y's, in flight)", len(l))
	}
}

// BenchmarkQueueRead reports how long the first round after start-up holds
// the write connection to read the queue of a backlog of 150,000 pending
// deliveries (50,000 orders of three events), against a bare read of the
// same rows' seqs from the same index in the same run:
//
//	go test ./sqlite -run '^$' -bench QueueRead -benchtime 3x
func BenchmarkQueueRead(b *testing.B) {
	const orders = 50_000
	ctx := context.Background()
	var read, bare time.Duration
	var n int
	for b.Loop() {
		b.StopTimer()
		db, backlog := pipelineFixture(b, orders)
		n = backlog
		t0 := time.Now()
		rows, err := db.write.QueryContext(ctx, `SELECT seq FROM deliveries INDEXED BY deliveries_pending WHERE state = 'pending' AND seq > 0`)
		if err != nil {
			b.Fatal(err)
		}
		count := 0
		for rows.Next() {
			var seq int64
			if err := rows.Scan(&seq); err != nil {
				b.Fatal(err)
			}
			count++
		}
		rows.Close()
		bare += time.Since(t0)
		if count != backlog {
			b.Fatalf("bare read %d rows, want %d", count, backlog)
		}
		b.StartTimer()
		t1 := time.Now()
		if _, err := db.Services().Webhooks.RecordAndClaim(ctx, nil, storelink.ClaimRequest{Owner: "w", Lease: time.Minute, Limit: 1, Caps: storelink.ClaimCaps{Default: 32}}); err != nil {
			b.Fatal(err)
		}
		read += time.Since(t1)
		b.StopTimer()
		db.Close()
		b.StartTimer()
	}
	runs := time.Duration(b.N)
	b.ReportMetric(float64((read / runs).Milliseconds()), "ms-first-round")
	b.ReportMetric(float64((read/runs).Microseconds())/float64(n), "µs/pending")
	b.ReportMetric(float64((bare / runs).Milliseconds()), "ms-bare-read")
	b.ReportMetric(float64(read)/float64(bare), "ratio")
}
