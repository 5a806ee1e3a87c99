package storetest

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"

	"storelink"
)

// lease is how long the webhook cases hold a claimed delivery.
const lease = time.Minute

// newSecret returns a fresh signing secret, made as the service makes them:
// whsec_ and the base64 of 32 random bytes.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// endpoint registers an endpoint of the env's client and returns it with
// its secret. The clock moves on a millisecond, so that endpoints made one
// after the other are listed in that order.
func (e *env) endpoint(url, apiKey string, states ...storelink.OrderState) (*storelink.Endpoint, string) {
	e.t.Helper()
	secret := newSecret()
	ep, err := e.s.Webhooks.CreateEndpoint(e.ctx, e.client.ID, storelink.NewEndpoint{URL: url, APIKey: apiKey, States: states}, secret)
	must(e.t, err)
	e.clock.Advance(time.Millisecond)
	return ep, secret
}

// setEnabled enables or disables an endpoint.
func (e *env) setEnabled(id string, on bool) *storelink.Endpoint {
	e.t.Helper()
	ep, err := e.s.Webhooks.UpdateEndpoint(e.ctx, "", id, storelink.EndpointPatch{Enabled: &on})
	must(e.t, err)
	if ep.Enabled != on {
		e.t.Fatalf("endpoint after setting enabled to %v = %+v", on, ep)
	}
	return ep
}

// claim leases due deliveries for owner.
func (e *env) claim(owner string, limit, perEndpoint int) []storelink.DeliveryJob {
	e.t.Helper()
	jobs, err := e.s.Webhooks.ClaimDeliveries(e.ctx, storelink.ClaimRequest{Owner: owner, Lease: lease, Limit: limit, Caps: storelink.EndpointCap(perEndpoint)})
	must(e.t, err)
	for _, j := range jobs {
		if j.Owner != owner || j.DeliveryID == "" || j.EventID == "" || j.EndpointID == "" || j.Attempt < 1 || j.Try < 1 || j.Try > j.Attempt {
			e.t.Fatalf("claimed job %s for owner %s", describe(j), owner)
		}
	}
	return jobs
}

// describe lists jobs for a failure message, without their bodies.
func describe(jobs ...storelink.DeliveryJob) string {
	var b strings.Builder
	for _, j := range jobs {
		fmt.Fprintf(&b, "\n  delivery %s: event %s to %s, attempt %d, try %d, owner %s, %d secrets", j.DeliveryID, j.EventID, j.EndpointID, j.Attempt, j.Try, j.Owner, len(j.Secrets))
	}
	return b.String()
}

// claimNone fails unless nothing is claimable.
func (e *env) claimNone(what string) {
	e.t.Helper()
	if jobs := e.claim("idle", 100, 100); len(jobs) != 0 {
		e.t.Fatalf("%s: claimed%s\nwant nothing", what, describe(jobs...))
	}
}

// claimOne claims and fails unless exactly one job comes.
func (e *env) claimOne(owner string) storelink.DeliveryJob {
	e.t.Helper()
	jobs := e.claim(owner, 100, 100)
	if len(jobs) != 1 {
		e.t.Fatalf("claimed %d jobs:%s\nwant 1", len(jobs), describe(jobs...))
	}
	return jobs[0]
}

// result is the end of a claimed attempt, made now.
func (e *env) result(j storelink.DeliveryJob, o storelink.Outcome, status int) storelink.AttemptResult {
	return storelink.AttemptResult{Job: &j, Outcome: o,
		Attempt: storelink.Attempt{Number: j.Attempt, At: e.clock.Now(), DurationMS: 7, StatusCode: status}}
}

// record records results in one call.
func (e *env) record(rs ...storelink.AttemptResult) {
	e.t.Helper()
	must(e.t, e.s.Webhooks.RecordAttempts(e.ctx, rs))
}

// deliveries lists deliveries of the env's client, newest first.
func (e *env) deliveries() []storelink.Delivery {
	e.t.Helper()
	list, err := e.s.Webhooks.Deliveries(e.ctx, storelink.DeliveryFilter{ClientID: e.client.ID, Limit: 1000})
	must(e.t, err)
	return list
}

// delivery returns one delivery as listed.
func (e *env) delivery(id string) storelink.Delivery {
	e.t.Helper()
	for _, d := range e.deliveries() {
		if d.ID == id {
			return d
		}
	}
	e.t.Fatalf("delivery %s is not listed", id)
	return storelink.Delivery{}
}

// wantDelivery checks a delivery's state, when it is next due (nil: not
// due) and the numbers of its attempts.
func (e *env) wantDelivery(id string, state storelink.DeliveryState, next *time.Time, attempts ...int) storelink.Delivery {
	e.t.Helper()
	d := e.delivery(id)
	numbers := []int{}
	for _, a := range d.Attempts {
		numbers = append(numbers, a.Number)
	}
	if d.State != state || (next == nil) != (d.NextAttemptAt == nil) || (next != nil && !next.Equal(*d.NextAttemptAt)) ||
		!slices.Equal(numbers, attempts) {
		e.t.Fatalf("delivery %s = %s, next %v, attempts %v; want %s, next %v, attempts %v", id, d.State, d.NextAttemptAt, numbers, state, next, attempts)
	}
	return d
}

// eventOf returns the stored event of an order in a state.
func (e *env) eventOf(orderID string, state storelink.OrderState) storelink.EventRecord {
	e.t.Helper()
	recs, err := e.s.Orders.OrderEvents(e.ctx, orderID)
	must(e.t, err)
	for _, r := range recs {
		if r.State == state {
			return r
		}
	}
	e.t.Fatalf("order %s has no %s event", orderID, state)
	return storelink.EventRecord{}
}

// jobFor finds the job of an event to an endpoint among jobs.
func jobFor(jobs []storelink.DeliveryJob, eventID, endpointID string) (storelink.DeliveryJob, bool) {
	i := slices.IndexFunc(jobs, func(j storelink.DeliveryJob) bool { return j.EventID == eventID && j.EndpointID == endpointID })
	if i < 0 {
		return storelink.DeliveryJob{}, false
	}
	return jobs[i], true
}
