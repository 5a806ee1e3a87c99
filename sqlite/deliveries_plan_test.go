package sqlite

import (
	"context"
	"slices"
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

// The endpoints' stats read only the covering index of their attempts,
// never every attempt nor a row: each endpoint's range of it, from the
// start of the window (or its last entry of each outcome).
func TestEndpointStatsPlans(t *testing.T) {
	db, _ := batchFixture(t, 1)
	for _, c := range []struct {
		q    string
		args []any
	}{
		{endpointCountsSQL, []any{`["e","f"]`, 0}},
		{endpointDurationsSQL, []any{0, `[["e",0],["f",1]]`}},
	} {
		q := c.q
		rows, err := db.TestAccess().Query(context.Background(), "EXPLAIN QUERY PLAN "+q, c.args...)
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

// The deliverer's statements that take the pending state as a parameter
// keep their plans: the outcomes of attempts look each delivery up by its
// rowid, and the start-up's release of leases kept in rows reads the
// pending deliveries' partial index, which SQLite matches once the state
// is bound.
func TestDeliveryStatePlans(t *testing.T) {
	db, _ := batchFixture(t, 1)
	last := len(batchSizes) - 1 // the statements for one row
	for _, c := range []struct {
		name, q string
		args    []any
		want    string
	}{
		{"parked", goneSQL, []any{0, 1, 1, 0, 0, storelink.DeliveryPending}, "SEARCH deliveries USING INTEGER PRIMARY KEY (rowid=?)"},
		{"ended", endedSQL[last], []any{storelink.DeliveryPending, 0, storelink.DeliverySucceeded, 1, 1, 1},
			"SEARCH deliveries USING INTEGER PRIMARY KEY (rowid=?)"},
		{"retried", retrySQL[last], []any{storelink.DeliveryPending, 0, 1, 1, 1, 0}, "SEARCH deliveries USING INTEGER PRIMARY KEY (rowid=?)"},
		{"leases released", releaseLeasesSQL, []any{storelink.DeliveryPending}, "SCAN deliveries USING INDEX deliveries_pending"},
	} {
		rows, err := db.TestAccess().Query(context.Background(), "EXPLAIN QUERY PLAN "+c.q, c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var plan []string
		for _, r := range rows {
			plan = append(plan, r["detail"])
		}
		if !slices.Contains(plan, c.want) {
			t.Errorf("%s: plan %q, want %q", c.name, plan, c.want)
		}
	}
}
