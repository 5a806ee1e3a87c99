package httpapi

import (
	"context"
	"math"
	"sync"
	"time"

	"storelink"
)

// A test send waits on a partner's endpoint, which may take its time to
// answer: each holds a request, a goroutine and an outbound connection for
// up to the webhook timeout. maxTestSends bounds them per process: far more
// than operators and partners press test buttons at once, and few beside
// the deliverer's connections. Two per partner let a partner test two
// endpoints at once, and leave twelve places when three partners (or the
// operator) are at their share.
const (
	maxTestSends           = 16
	maxTestSendsPerPartner = 2
	// DefaultTestSendTimeout bounds a test send when NewTestSends is not
	// told otherwise: serve's default --webhook-timeout.
	DefaultTestSendTimeout = 10 * time.Second
)

// TestSends are the places of the test sends of a process, the API's and
// the dashboard's and portal's, divided per partner; the operator's have a
// share of their own (OperatorShare).
type TestSends struct {
	places  *pool
	timeout time.Duration
}

// NewTestSends returns the places of test sends, each bounded by timeout
// (DefaultTestSendTimeout when 0): serve passes --webhook-timeout, which
// bounds a delivery attempt too.
func NewTestSends(timeout time.Duration) *TestSends {
	if timeout <= 0 {
		timeout = DefaultTestSendTimeout
	}
	return &TestSends{places: newPool(maxTestSends, maxTestSendsPerPartner), timeout: timeout}
}

// Take takes a place for a test send of partner's (OperatorShare for the
// operator) and returns ctx bounded by the test send timeout; release
// gives the place back and ends the context. Without a place it returns
// EBUSY (429) when the partner holds its share, EUNAVAILABLE (503) when
// all are taken, each with a Retry-After of the timeout, within which one
// of the sends that hold them has ended.
func (t *TestSends) Take(ctx context.Context, partner string) (context.Context, func(), error) {
	var e *storelink.Error
	switch t.places.take(partner, 1) {
	case granted:
	case overShare:
		e = storelink.Errorf(storelink.EBUSY, "%d test sends of yours are waiting for their endpoints right now, as many as one partner may have at once; "+
			"try again when one has been answered.", t.places.share)
	default:
		e = storelink.Errorf(storelink.EUNAVAILABLE, "%d test sends are waiting for their endpoints right now, as many as are sent at once; try again later.", t.places.total)
	}
	if e != nil {
		e.RetryAfter = int(math.Ceil(t.timeout.Seconds()))
		return ctx, func() {}, e
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			cancel()
			t.places.give(partner, 1)
		})
	}, nil
}
