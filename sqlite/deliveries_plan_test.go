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
		rows, err := db.QueryForTest(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
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
