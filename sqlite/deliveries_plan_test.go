package sqlite

import (
	"context"
	"strings"
	"testing"

	"storelink"
)

// A listing of pending or failed deliveries reads that state's partial
// index, with or without a client, not every delivery (or every delivery
// of the client): the planner has no statistics to tell it that few rows
// are pending or failed.
func TestDeliveriesListingPlans(t *testing.T) {
	db, _ := batchFixture(t, 3)
	for _, c := range []struct {
		f    storelink.DeliveryFilter
		want string
	}{
		{storelink.DeliveryFilter{State: storelink.DeliveryPending, Limit: 10}, "deliveries_pending"},
		{storelink.DeliveryFilter{State: storelink.DeliveryPending, ClientID: "c", Limit: 10}, "deliveries_pending"},
		{storelink.DeliveryFilter{State: storelink.DeliveryPending, ClientID: "c", Before: "d", Limit: 10}, "deliveries_pending"},
		{storelink.DeliveryFilter{State: storelink.DeliveryFailed, Limit: 10}, "deliveries_failed"},
		{storelink.DeliveryFilter{State: storelink.DeliveryFailed, ClientID: "c", Limit: 10}, "deliveries_failed"},
		{storelink.DeliveryFilter{ClientID: "c", Limit: 10}, "deliveries_client"},
	} {
		q, args := deliveriesQuery(c.f)
		rows, err := db.TestAccess().Query(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatalf("%+v: %v", c.f, err)
		}
		var plan []string
		for _, r := range rows {
			plan = append(plan, r["detail"])
		}
		// The first step is the scan of deliveries; a cursor's subquery
		// looks its row up by id.
		if len(plan) == 0 || !strings.Contains(plan[0], c.want) && !strings.Contains(strings.Join(plan, "; "), "USING INDEX "+c.want) {
			t.Errorf("%+v: plan %q, want it to read %s", c.f, plan, c.want)
		}
	}
}

// An endpoint's stats read only the covering index of its attempts, never
// every attempt nor a row: the endpoint's range of it, from the start of
// the window (or its last entry of each outcome).
func TestEndpointStatsPlans(t *testing.T) {
	db, _ := batchFixture(t, 1)
	for _, q := range []string{attemptCountsSQL, attemptDurationsSQL} {
		rows, err := db.TestAccess().Query(context.Background(), "EXPLAIN QUERY PLAN "+q, "e", 0, "[0]")
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var steps []string
		for _, r := range rows {
			if d := r["detail"]; strings.Contains(d, "delivery_attempts") {
				steps = append(steps, d)
				if !strings.Contains(d, "USING COVERING INDEX delivery_attempts_endpoint (endpoint_id=?") {
					t.Errorf("a step reads the attempts otherwise than by the endpoint's range of the index: %q", d)
				}
			}
		}
		if len(steps) == 0 {
			t.Errorf("plan %v reads no attempts", rows)
		}
	}
}
