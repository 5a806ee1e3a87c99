package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"storelink"
	"storelink/webhook"
)

// keyCache holds the signing keys of the secrets seen, so that each is
// decoded once rather than for every event sent with it.
type keyCache struct {
	mu   sync.RWMutex
	keys map[string][]byte // nil: not a valid secret
}

// maxKeys bounds keyCache; past it, keys are decoded each time.
const maxKeys = 4096

// signingKeys returns the keys of secrets, skipping any that is not valid.
func (c *keyCache) signingKeys(secrets []string) [][]byte {
	keys := make([][]byte, 0, len(secrets))
	for _, s := range secrets {
		c.mu.RLock()
		k, ok := c.keys[s]
		c.mu.RUnlock()
		if !ok {
			k, _ = webhook.ParseSecret(s)
			c.mu.Lock()
			if c.keys == nil {
				c.keys = map[string][]byte{}
			}
			if len(c.keys) < maxKeys {
				c.keys[s] = k
			}
			c.mu.Unlock()
		}
		if k != nil {
			keys = append(keys, k)
		}
	}
	return keys
}

// send sends j. A panic while sending (in the HTTP client, on an answer
// it did not expect) is the attempt's failure, not the process's: the
// delivery is tried again on its schedule, and every other goes on.
func (d *Deliverer) send(j *storelink.DeliveryJob, keys [][]byte, start time.Time) (res webhook.Result) {
	defer func() {
		if p := recover(); p != nil {
			d.Logger.Error("webhook attempt panicked", "delivery_id", j.DeliveryID, "endpoint_id", j.EndpointID, "panic", fmt.Sprint(p))
			res = webhook.Result{Err: errors.New("internal error while sending"), Duration: time.Since(start)}
		}
	}()
	// Not the loop's context: a stop lets the attempt finish within the
	// webhook timeout rather than cutting it off and counting a failure.
	return d.Client.Send(context.Background(), webhook.Request{URL: j.URL, EventID: j.EventID, Body: j.Body, Keys: keys, APIKey: j.APIKey}, start)
}

// SendTest sends a test send's job at once, through the client that every
// attempt goes through, with webhook-test: true (storelink.EndpointTester).
// ctx ends it early (the caller went away); the client's timeout bounds it.
func (d *Deliverer) SendTest(ctx context.Context, j *storelink.DeliveryJob) *storelink.TestResult {
	if j.Unsealable != "" {
		return &storelink.TestResult{Error: j.Unsealable}
	}
	res := d.Client.Send(ctx, webhook.Request{URL: j.URL, EventID: j.EventID, Body: j.Body, Keys: d.keys.signingKeys(j.Secrets),
		APIKey: j.APIKey, Test: true}, time.Now())
	r := &storelink.TestResult{StatusCode: res.StatusCode, DurationMS: res.Duration.Milliseconds(), ResponseExcerpt: res.Excerpt}
	if res.Err != nil {
		r.Error = res.Err.Error()
	}
	return r
}

// attempt makes one delivery attempt and decides what it means.
func (d *Deliverer) attempt(j *storelink.DeliveryJob) storelink.AttemptResult {
	start := time.Now()
	var res webhook.Result
	if j.Unsealable != "" {
		// Nothing can be signed or sent: the attempt fails at once, and
		// the delivery follows the retry schedule, so that it goes out once
		// the endpoint's secret is rotated.
		res.Err = errors.New(j.Unsealable)
	} else {
		res = d.send(j, d.keys.signingKeys(j.Secrets), start)
	}
	a := storelink.Attempt{Number: j.Attempt, At: start.UTC(), DurationMS: res.Duration.Milliseconds(), StatusCode: res.StatusCode,
		Response: res.Excerpt, URL: webhook.Target(j.URL, j.EventID)}
	if res.Err != nil {
		a.Error = res.Err.Error()
	}
	r := storelink.AttemptResult{Job: j, Attempt: a}
	now := time.Now()
	switch {
	case res.Success():
		r.Outcome = storelink.OutcomeSucceeded
	case res.StatusCode == 410:
		r.Outcome = storelink.OutcomeGone
	default:
		var more bool
		if r.NextAt, more = d.Retry.Next(j.Try, res.RetryAfter, now); more {
			r.Outcome = storelink.OutcomeRetry
		} else {
			r.Outcome = storelink.OutcomeFailed
		}
	}
	d.metrics.latency.Observe(res.Duration.Seconds())
	d.metrics.byOutcome[r.Outcome].Inc()
	if r.Outcome != storelink.OutcomeSucceeded {
		d.Logger.Warn("webhook attempt failed", "delivery_id", j.DeliveryID, "event_id", j.EventID, "endpoint_id", j.EndpointID,
			"attempt", j.Attempt, "status", res.StatusCode, "error", a.Error, "outcome", r.Outcome)
	}
	return r
}
