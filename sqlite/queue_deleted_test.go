package sqlite

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"storelink"
)

// A deleted endpoint costs the deliverer nothing: a partner that makes and
// deletes endpoints again and again (each deletion keeps its row, for the
// history) grows neither the queue every round walks nor what a round
// reads after an endpoint changed. The deliveries an endpoint had when it
// was deleted are never sent.
func TestQueueLeavesDeletedEndpointsOut(t *testing.T) {
	ctx := context.Background()
	db, ep := batchFixture(t, 2)
	w := db.Services().Webhooks
	const churn = 50
	for i := range churn {
		e, err := w.CreateEndpoint(ctx, ep.ClientID, storelink.NewEndpoint{URL: fmt.Sprintf("https://churn%d.test/", i)},
			"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
		if err != nil {
			t.Fatal(err)
		}
		if err := w.DeleteEndpoint(ctx, "", e.ID, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The queue is read with ep's two deliveries pending; then ep is
	// deleted, its deliveries with it.
	if err := w.RecordAttempts(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.DeleteEndpoint(ctx, "", ep.ID, nil); err != nil {
		t.Fatal(err)
	}
	jobs, err := w.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: "w", Lease: time.Minute, Limit: 10, Caps: storelink.EndpointCap(10)})
	if err != nil || len(jobs) != 0 {
		t.Fatalf("claim after the endpoint was deleted: %d jobs, %v; want none", len(jobs), err)
	}
	if n := len(db.queue.list); n > 1 {
		t.Errorf("after %d endpoints were made and deleted, each round walks %d endpoints, want at most 1 (the one whose deliveries were read)", churn, n)
	}
	// What the writes read of the endpoints, the deleted ones left out:
	// the queue's disabled endpoints, an order event's endpoints, the
	// count of the per-client bound.
	for _, c := range []struct {
		what, q, index string
		args           []any
	}{
		{"the disabled endpoints", disabledSQL, "endpoints_disabled", nil},
		{"an order event's endpoints", endpointStatesSQL, "endpoints_live", []any{ep.ClientID}},
		{"the count of a client's endpoints", insertEndpointSQL, "endpoints_live", []any{"e", ep.ClientID, "u", "", "", "", "", 0, 20}},
	} {
		plan, err := db.TestAccess().Query(ctx, "EXPLAIN QUERY PLAN "+c.q, c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		var steps []string
		whole := false // a step reads the whole table
		for _, r := range plan {
			steps = append(steps, r["detail"])
			whole = whole || r["detail"] == "SCAN endpoints"
		}
		if all := strings.Join(steps, "; "); !strings.Contains(all, "INDEX "+c.index) || whole {
			t.Errorf("%s are read by the plan %q, want the partial index %s", c.what, all, c.index)
		}
	}
	rows, err := db.TestAccess().Query(ctx, disabledSQL)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 0 {
		t.Errorf("a round that reads the disabled endpoints reads %d rows, want none: every disabled endpoint is deleted", len(rows))
	}
}
