package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"storelink"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// orderAtS1 creates an order of the client at S1, which queues a delivery
// of its event to every enabled endpoint of the client that wants it.
func orderAtS1(t *testing.T, db database, clientID, number string) {
	t.Helper()
	price := storelink.Money(100)
	_, err := db.svc.Orders.CreateOrder(context.Background(), storelink.NewOrder{OrderNumber: number, ClientID: clientID, StoreID: "S1",
		Items: []storelink.NewItem{{EAN: "4006381333931", MarketplaceArticleNumber: "M", ArticleNumber: "A", Price: &price}}})
	if err != nil {
		t.Fatal(err)
	}
}

// A delivery goes to one deliverer at a time: claimed, it is leased and
// no other claim takes it until its attempt is recorded; the attempt
// recorded as succeeded ends it, and the endpoint's stats count it.
func TestWebhookClaimLeasesAndStatsCount(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		ctx := context.Background()
		c := client(t, db)
		ep, err := db.svc.Webhooks.CreateEndpoint(ctx, c.ID, storelink.NewEndpoint{URL: "https://a.test/"}, testSecret)
		if err != nil {
			t.Fatal(err)
		}
		orderAtS1(t, db, c.ID, "N-1")
		db.clock.advance(3 * time.Second)
		n, age, err := db.svc.Webhooks.PendingDeliveries(ctx)
		if err != nil || n != 1 || age != 3*time.Second {
			t.Fatalf("PendingDeliveries = %d, %v, %v; want 1, 3s", n, age, err)
		}
		jobs, err := db.svc.Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w1", Lease: time.Minute, Limit: 10, Caps: storelink.EndpointCap(10)})
		if err != nil || len(jobs) != 1 || jobs[0].EndpointID != ep.ID || jobs[0].Try != 1 {
			t.Fatalf("first claim = %+v, %v; want the one delivery, its first try", jobs, err)
		}
		if again, err := db.svc.Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w2", Lease: time.Minute, Limit: 10, Caps: storelink.EndpointCap(10)}); err != nil || len(again) != 0 {
			t.Fatalf("second claim = %+v, %v; want nothing while the lease is live", again, err)
		}
		r := storelink.AttemptResult{Job: &jobs[0], Outcome: storelink.OutcomeSucceeded,
			Attempt: storelink.Attempt{Number: jobs[0].Attempt, At: db.clock.now(), DurationMS: 42, StatusCode: 204}}
		if err := db.svc.Webhooks.RecordAttempts(ctx, []storelink.AttemptResult{r}); err != nil {
			t.Fatal(err)
		}
		d, err := db.svc.Webhooks.Endpoint(ctx, c.ID, ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		st := d.Stats
		if st.Attempts != 1 || st.Succeeded != 1 || st.Pending != 0 || st.LatencyP50MS == nil || *st.LatencyP50MS != 42 {
			t.Fatalf("stats = %+v, want one attempt succeeded in 42 ms, nothing pending", st)
		}
		if n, _, err := db.svc.Webhooks.PendingDeliveries(ctx); err != nil || n != 0 {
			t.Fatalf("PendingDeliveries after the success = %d, %v; want 0", n, err)
		}
	})
}

// Deleting an endpoint cancels its pending deliveries: none is claimed
// after, it leaves the client's list, and it still reads as deleted.
func TestWebhookDeleteCancels(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		ctx := context.Background()
		c := client(t, db)
		ep, err := db.svc.Webhooks.CreateEndpoint(ctx, c.ID, storelink.NewEndpoint{URL: "https://a.test/"}, testSecret)
		if err != nil {
			t.Fatal(err)
		}
		orderAtS1(t, db, c.ID, "N-1")
		if err := db.svc.Webhooks.DeleteEndpoint(ctx, "", ep.ID, nil); err != nil {
			t.Fatal(err)
		}
		if jobs, err := db.svc.Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w1", Lease: time.Minute, Limit: 10, Caps: storelink.EndpointCap(10)}); err != nil || len(jobs) != 0 {
			t.Fatalf("claim after the deletion = %+v, %v; want nothing", jobs, err)
		}
		ds, err := db.svc.Webhooks.Deliveries(ctx, storelink.DeliveryFilter{ClientID: c.ID, Limit: 10})
		if err != nil || len(ds) != 1 || ds[0].State != storelink.DeliveryCancelled {
			t.Fatalf("deliveries = %+v, %v; want the one cancelled", ds, err)
		}
		if list, err := db.svc.Webhooks.Endpoints(ctx, c.ID); err != nil || len(list) != 0 {
			t.Fatalf("endpoints = %+v, %v; want none", list, err)
		}
		if d, err := db.svc.Webhooks.Endpoint(ctx, c.ID, ep.ID); err != nil || d.DeletedAt == nil || d.Enabled {
			t.Fatalf("deleted endpoint = %+v, %v; want it read as deleted, disabled", d, err)
		}
	})
}

const deliveryLease = time.Minute

// webhookClient makes a client with stock of one EAN in S1 and an endpoint
// of it for every state.
func webhookClient(t *testing.T, db database) (*storelink.NewClient, *storelink.Endpoint) {
	t.Helper()
	c := client(t, db)
	applyStockRows(t, db, c.ID, storelink.StockRow{StoreID: "S1", EAN: "4006381333931", ArticleNumber: "A-1", Quantity: 100, Price: 100})
	e, err := db.svc.Webhooks.CreateEndpoint(context.Background(), c.ID, storelink.NewEndpoint{URL: "https://a.test/"}, endpointSecret)
	if err != nil {
		t.Fatal(err)
	}
	return c, e
}

// webhookOrder creates an order of one unit for the client, which queues a
// delivery of its event to each of the client's endpoints.
func webhookOrder(t *testing.T, db database, clientID, number string) *storelink.Order {
	t.Helper()
	o, err := db.svc.Orders.CreateOrder(context.Background(), storelink.NewOrder{OrderNumber: number, ClientID: clientID,
		Items: []storelink.NewItem{{EAN: "4006381333931", MarketplaceArticleNumber: "M-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// claim leases up to limit due deliveries for owner.
func claim(t *testing.T, db database, owner string, limit int) []storelink.DeliveryJob {
	t.Helper()
	jobs, err := db.svc.Webhooks.ClaimDeliveries(context.Background(), storelink.ClaimRequest{Owner: owner, Lease: deliveryLease, Limit: limit, Caps: storelink.EndpointCap(limit)})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// record records that job's attempt went as o, taking ms, now.
func record(t *testing.T, db database, j storelink.DeliveryJob, o storelink.Outcome, ms int64) {
	t.Helper()
	r := storelink.AttemptResult{Job: &j, Outcome: o,
		Attempt: storelink.Attempt{Number: j.Attempt, At: db.clock.now(), DurationMS: ms, StatusCode: 200}}
	if o != storelink.OutcomeSucceeded {
		r.Attempt.StatusCode = 503
		r.NextAt = db.clock.now().Add(time.Minute)
	}
	if err := db.svc.Webhooks.RecordAttempts(context.Background(), []storelink.AttemptResult{r}); err != nil {
		t.Fatal(err)
	}
}

// deliveryState reads one delivery's state as listed.
func deliveryState(t *testing.T, db database, clientID, id string) storelink.DeliveryState {
	t.Helper()
	ds, err := db.svc.Webhooks.Deliveries(context.Background(), storelink.DeliveryFilter{ClientID: clientID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.ID == id {
			return d.State
		}
	}
	t.Fatalf("delivery %s is not listed", id)
	return ""
}

// A redelivery of a delivery whose lease is live is left to that attempt:
// nothing is claimable meanwhile. Once the attempt is recorded, a
// redelivery makes it pending and due again, its tries counted afresh.
func TestRedeliverLeavesALiveLeaseToItsAttempt(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		ctx := context.Background()
		c, _ := webhookClient(t, db)
		webhookOrder(t, db, c.ID, "R-1")
		jobs := claim(t, db, "w1", 10)
		if len(jobs) != 1 {
			t.Fatalf("claimed %d jobs, want the order's one delivery", len(jobs))
		}
		j := jobs[0]
		if err := db.svc.Webhooks.Redeliver(ctx, j.DeliveryID); err != nil {
			t.Fatalf("Redeliver of a delivery in flight = %v, want nil: left to its attempt", err)
		}
		if again := claim(t, db, "w2", 10); len(again) != 0 {
			t.Fatalf("claimed %d jobs while the lease is live, want none", len(again))
		}
		record(t, db, j, storelink.OutcomeSucceeded, 5)
		if s := deliveryState(t, db, c.ID, j.DeliveryID); s != storelink.DeliverySucceeded {
			t.Fatalf("delivery after its attempt = %s, want succeeded: the redelivery left it to the attempt", s)
		}

		if err := db.svc.Webhooks.Redeliver(ctx, j.DeliveryID); err != nil {
			t.Fatal(err)
		}
		if s := deliveryState(t, db, c.ID, j.DeliveryID); s != storelink.DeliveryPending {
			t.Fatalf("delivery after a redelivery = %s, want pending", s)
		}
		again := claim(t, db, "w2", 10)
		if len(again) != 1 || again[0].DeliveryID != j.DeliveryID || again[0].Try != 1 || again[0].Attempt != 2 {
			t.Fatalf("claim after the redelivery = %+v, want the delivery again, its second attempt and first try", again)
		}
	})
}

// Deleting an endpoint cancels its pending deliveries, those in flight
// too, which stay cancelled when their attempt is recorded; nothing of it
// is claimed, its stats count no pending delivery, and a redelivery to it
// is refused.
func TestDeleteEndpointCancelsItsPendingDeliveries(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		ctx := context.Background()
		c, e := webhookClient(t, db)
		webhookOrder(t, db, c.ID, "D-1")
		webhookOrder(t, db, c.ID, "D-2")
		flying := claim(t, db, "w1", 1)
		if len(flying) != 1 {
			t.Fatalf("claimed %d jobs, want 1", len(flying))
		}
		if err := db.svc.Webhooks.DeleteEndpoint(ctx, "", e.ID, nil); err != nil {
			t.Fatal(err)
		}
		record(t, db, flying[0], storelink.OutcomeSucceeded, 5)
		ds, err := db.svc.Webhooks.Deliveries(ctx, storelink.DeliveryFilter{ClientID: c.ID, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 2 {
			t.Fatalf("deliveries = %d, want 2", len(ds))
		}
		for _, d := range ds {
			if d.State != storelink.DeliveryCancelled {
				t.Fatalf("delivery %s of the deleted endpoint = %s, want cancelled", d.ID, d.State)
			}
		}
		if jobs := claim(t, db, "w2", 10); len(jobs) != 0 {
			t.Fatalf("claimed %d jobs of a deleted endpoint, want none", len(jobs))
		}
		d, err := db.svc.Webhooks.Endpoint(ctx, c.ID, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Stats.Pending != 0 || d.Stats.Attempts != 1 {
			t.Fatalf("stats of the deleted endpoint = %+v, want no pending delivery and its one attempt", d.Stats)
		}
		if err := db.svc.Webhooks.Redeliver(ctx, ds[0].ID); storelink.ErrorCode(err) == "" {
			t.Fatalf("Redeliver to a deleted endpoint = %v, want refused", err)
		}
	})
}

// An endpoint's stats count its attempts of the window, give the rate of
// success and the median and 95th percentile of their durations by
// nearest rank, and count its pending and failed deliveries now.
func TestEndpointStatsFigures(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db database) {
		ctx := context.Background()
		c, e := webhookClient(t, db)
		// Four deliveries: three attempts that fail and are retried (10,
		// 20, 30 ms), one that succeeds (40 ms); then one fails for good.
		for i := range 4 {
			webhookOrder(t, db, c.ID, fmt.Sprintf("S-%d", i))
		}
		for i, j := range claim(t, db, "w", 10) {
			o := storelink.OutcomeRetry
			if i == 3 {
				o = storelink.OutcomeSucceeded
			}
			record(t, db, j, o, int64(10*(i+1)))
		}
		webhookOrder(t, db, c.ID, "S-4")
		db.clock.advance(time.Hour) // the retries are due again too
		for _, j := range claim(t, db, "w", 10) {
			o := storelink.OutcomeRetry
			if j.Try == 1 {
				o = storelink.OutcomeFailed
			}
			record(t, db, j, o, 50)
		}

		d, err := db.svc.Webhooks.Endpoint(ctx, c.ID, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		st := d.Stats
		// Eight attempts: 10, 20, 30, 40 and four of 50 ms, one succeeded.
		if st.Attempts != 8 || st.Succeeded != 1 || st.Failed != 7 || st.SuccessRate == nil || *st.SuccessRate != 0.125 {
			t.Fatalf("stats = %+v, want 8 attempts, 1 succeeded, rate 0.125", st)
		}
		if st.LatencyP50MS == nil || *st.LatencyP50MS != 40 || st.LatencyP95MS == nil || *st.LatencyP95MS != 50 {
			t.Fatalf("latencies = %v, %v; want 40 and 50 ms", st.LatencyP50MS, st.LatencyP95MS)
		}
		if st.Pending != 3 || st.FailedDeliveries != 1 || st.LastSuccessAt == nil || st.LastFailureAt == nil {
			t.Fatalf("stats = %+v, want 3 pending deliveries, 1 failed, a last success and failure", st)
		}
		db.clock.advance(storelink.StatsWindow + time.Millisecond) // past the window of the last attempts
		if d, err = db.svc.Webhooks.Endpoint(ctx, c.ID, e.ID); err != nil {
			t.Fatal(err)
		}
		if st := d.Stats; st.Attempts != 0 || st.SuccessRate != nil || st.LatencyP50MS != nil || st.LastSuccessAt == nil || st.Pending != 3 {
			t.Fatalf("stats a window later = %+v, want no attempt in the window, the last success still, 3 pending", st)
		}
	})
}
