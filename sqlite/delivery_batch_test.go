package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"storelink"
)

// batchFixture is a database with one endpoint and n events queued to it.
func batchFixture(t testing.TB, n int) (*Fixture, *storelink.Endpoint) {
	t.Helper()
	ctx := context.Background()
	db := OpenFixture(t, nil)
	p, err := db.Services().Partners.CreatePartner(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.Services().Partners.CreateClient(ctx, p.ID, "DE", "EUR")
	if err != nil {
		t.Fatal(err)
	}
	ep, err := db.Services().Webhooks.CreateEndpoint(ctx, c.ID, storelink.NewEndpoint{URL: "https://a.test/", APIKey: "key"}, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	price := storelink.Money(1999)
	for i := range n {
		if _, err := db.Services().Orders.CreateWarehouseOrder(ctx, storelink.NewOrder{
			OrderNumber: fmt.Sprintf("W-%d", i), ClientID: c.ID,
			Items: []storelink.NewItem{{EAN: "4006381333931", MarketplaceArticleNumber: "MP-1", ArticleNumber: "SKU-1", Price: &price}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	return db, ep
}

// A batch is recorded in statements of several sizes: every outcome lands
// on its own delivery, and a result whose lease was lost is recorded as an
// attempt but moves nothing.
func TestRecordAttemptsBatches(t *testing.T) {
	ctx := context.Background()
	db, ep := batchFixture(t, 43)
	jobs, err := db.Services().Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w1", Lease: time.Minute, Limit: 100, Caps: storelink.EndpointCap(100)})
	if err != nil || len(jobs) != 43 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	next := now.Add(time.Hour)
	results := make([]storelink.AttemptResult, len(jobs))
	want := map[string]storelink.DeliveryState{}
	for i := range jobs {
		j := &jobs[i]
		r := storelink.AttemptResult{Job: j, Attempt: storelink.Attempt{Number: j.Attempt, At: now, DurationMS: int64(i),
			StatusCode: 200 + i, Error: fmt.Sprintf("e\"%d\n\x00é", i), Response: "ok"}}
		switch i % 4 {
		case 0:
			r.Outcome, want[j.DeliveryID] = storelink.OutcomeSucceeded, storelink.DeliverySucceeded
		case 1:
			r.Outcome, r.NextAt, want[j.DeliveryID] = storelink.OutcomeRetry, next, storelink.DeliveryPending
		case 2:
			r.Outcome, want[j.DeliveryID] = storelink.OutcomeFailed, storelink.DeliveryFailed
		case 3:
			// The lease was lost: another attempt holds the delivery.
			lost := *j
			lost.Attempt++
			r.Job, r.Outcome, want[j.DeliveryID] = &lost, storelink.OutcomeSucceeded, storelink.DeliveryPending
		}
		results[i] = r
	}
	if err := db.Services().Webhooks.RecordAttempts(ctx, results); err != nil {
		t.Fatal(err)
	}
	list, err := db.Services().Webhooks.Deliveries(ctx, storelink.DeliveryFilter{ClientID: ep.ClientID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]storelink.Delivery{}
	for _, d := range list {
		byID[d.ID] = d
	}
	for i, r := range results {
		d := byID[jobs[i].DeliveryID]
		if d.State != want[d.ID] {
			t.Errorf("delivery %d (%v): state %s, want %s", i, r.Outcome, d.State, want[d.ID])
		}
		if len(d.Attempts) != 1 || d.Attempts[0] != r.Attempt {
			t.Errorf("delivery %d: attempts %+v, want %+v", i, d.Attempts, r.Attempt)
		}
		switch {
		case i%4 == 1 && (d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(next)):
			t.Errorf("retried delivery %d: next attempt %v, want %v", i, d.NextAttemptAt, next)
		case (i%4 == 0 || i%4 == 2) && d.NextAttemptAt != nil:
			t.Errorf("delivery %d done: next attempt %v", i, d.NextAttemptAt)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote\\back`, "ctl\x00\x1f\n\t", "é€😀", "bad\xffutf8\xc3", "<html>&"} {
		var got string
		if err := json.Unmarshal(appendJSONString(nil, s), &got); err != nil {
			t.Fatalf("%q: %s: %v", s, appendJSONString(nil, s), err)
		}
		want, _ := json.Marshal(s)
		var wantS string
		_ = json.Unmarshal(want, &wantS)
		if got != wantS {
			t.Errorf("%q: decoded %q, want %q", s, got, wantS)
		}
	}
}

// Delivery bookkeeping keeps its statement journals in memory, and the
// write connection is set back after it, as for synchronous.
func TestBookkeepingRestoresTempStore(t *testing.T) {
	ctx := context.Background()
	db, _ := batchFixture(t, 1)
	level := func() int {
		t.Helper()
		var n int
		if err := db.write.QueryRowContext(ctx, `PRAGMA temp_store`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := level()
	tx, err := db.beginUnsynced(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var inside int
	if err := tx.QueryRowContext(ctx, `PRAGMA temp_store`).Scan(&inside); err != nil {
		t.Fatal(err)
	}
	if inside != 2 {
		t.Errorf("temp_store = %d inside bookkeeping, want 2 (MEMORY)", inside)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if after := level(); after != before {
		t.Errorf("temp_store = %d after bookkeeping, want %d as before", after, before)
	}
}
