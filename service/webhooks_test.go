package service_test

import (
	"context"
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
		jobs, err := db.svc.Webhooks.ClaimDeliveries(ctx, "w1", time.Minute, 10, 10)
		if err != nil || len(jobs) != 1 || jobs[0].EndpointID != ep.ID || jobs[0].Try != 1 {
			t.Fatalf("first claim = %+v, %v; want the one delivery, its first try", jobs, err)
		}
		if again, err := db.svc.Webhooks.ClaimDeliveries(ctx, "w2", time.Minute, 10, 10); err != nil || len(again) != 0 {
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
		if err := db.svc.Webhooks.DeleteEndpoint(ctx, ep.ID); err != nil {
			t.Fatal(err)
		}
		if jobs, err := db.svc.Webhooks.ClaimDeliveries(ctx, "w1", time.Minute, 10, 10); err != nil || len(jobs) != 0 {
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
