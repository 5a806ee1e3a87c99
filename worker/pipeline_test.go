package worker

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"storelink"
	"storelink/webhook"
)

// A backlog to one endpoint goes out round after round, each claimed as the
// one before is recorded, not when the loop polls; never more than
// PerEndpoint at once, each event once.
func TestDelivererRoundsWithoutPolling(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rec := newCounter(t, nil, time.Millisecond)
	ep := f.endpoint(rec.URL)
	var ids []string
	for range 60 {
		ids = append(ids, f.event())
	}
	d := NewDeliverer(f.service.Webhooks, webhook.NewClient(5*time.Second, true), storelink.RetryPolicy{Schedule: []time.Duration{time.Hour}},
		5*time.Second, nil, "test", prometheus.NewRegistry())
	d.Workers, d.PerEndpoint, d.Interval = 4, 2, time.Hour
	run(t, d)
	waitFor(t, 10*time.Second, "every event delivered", func() bool {
		_, _, total := rec.state()
		return total >= len(ids)
	})
	if _, peak, _ := rec.state(); peak > 2 {
		t.Errorf("%d requests at once, want at most 2 (PerEndpoint)", peak)
	}
	for _, id := range ids {
		if n := rec.count(id); n != 1 {
			t.Errorf("event %s received %d times, want once", id, n)
		}
	}
	waitFor(t, 5*time.Second, "every delivery recorded as succeeded", func() bool {
		for _, id := range ids {
			if f.delivery(id, ep.ID).State != storelink.DeliverySucceeded {
				return false
			}
		}
		return true
	})
}

// A stop gives back what was claimed ahead and records what was sent: no
// delivery is left leased, nor counted as attempted without its attempt.
func TestDelivererStopClaimedAhead(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rec := newCounter(t, nil, 100*time.Millisecond)
	ep := f.endpoint(rec.URL)
	var ids []string
	for range 8 {
		ids = append(ids, f.event())
	}
	d := NewDeliverer(f.service.Webhooks, webhook.NewClient(5*time.Second, true), storelink.RetryPolicy{Schedule: []time.Duration{time.Hour}},
		5*time.Second, nil, "test", prometheus.NewRegistry())
	d.Workers, d.PerEndpoint = 4, 1
	stop := run(t, d)
	waitFor(t, 5*time.Second, "sending", func() bool { inflight, _, _ := rec.state(); return inflight == 1 })
	stop()
	if _, peak, _ := rec.state(); peak > 1 {
		t.Errorf("%d requests at once, want at most 1 (PerEndpoint)", peak)
	}
	sent := 0
	for _, id := range ids {
		dl := f.delivery(id, ep.ID)
		switch n := rec.count(id); {
		case n > 1:
			t.Errorf("event %s received %d times", id, n)
		case n == 1:
			sent++
			if dl.State != storelink.DeliverySucceeded || len(dl.Attempts) != 1 {
				t.Errorf("delivery of sent event %s = %+v, want succeeded with its attempt", id, dl)
			}
		case dl.State != storelink.DeliveryPending || len(dl.Attempts) != 0:
			t.Errorf("delivery of unsent event %s = %+v, want pending without attempts", id, dl)
		}
	}
	if sent > 2 {
		t.Errorf("%d events sent after the stop began, want the one in flight (and perhaps the next)", sent)
	}
	// Nothing is left leased: the rest goes out at once on the next
	// run, as its first attempt.
	jobs, err := f.service.Webhooks.ClaimDeliveries(context.Background(), storelink.ClaimRequest{Owner: "next", Lease: time.Minute, Limit: 100, Caps: storelink.EndpointCap(100)})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != len(ids)-sent {
		t.Errorf("after the stop, %d deliveries claimable, want the %d unsent", len(jobs), len(ids)-sent)
	}
	for _, j := range jobs {
		if j.Attempt != 1 || j.Try != 1 {
			t.Errorf("unsent delivery %s claimed as attempt %d, try %d, want 1 and 1", j.DeliveryID, j.Attempt, j.Try)
		}
	}
}
