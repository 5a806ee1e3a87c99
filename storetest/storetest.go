// Package storetest is the behaviour suite of storelink's services: the
// same cases run through service.Services over SQLite's drivers and over
// PostgreSQL's, so a rule written once holds on both.
package storetest

import (
	"context"
	"errors"
	"iter"
	"sync"
	"testing"
	"time"

	"storelink"
	"storelink/service"
)

// Opener opens a new, empty database whose clock is now, for one case.
type Opener func(t *testing.T, now func() time.Time) Fixture

// Fixture is an opened database as the suite uses it: its services, and
// the ways into it that only a test has.
type Fixture struct {
	// Services returns the services over the database that seal webhook
	// secrets with sealer, as serve makes them once the key is checked.
	// The suite calls it again to move to another key.
	Services func(sealer *storelink.Sealer) *service.Services
	// FailEvents is the database's way to make its event writes fail.
	FailEvents FailEvents
	// Exec runs a statement on the database: the suite writes with it what
	// a fault, or a process with another key, leaves behind.
	Exec func(ctx context.Context, query string) error
	// FillStock writes stock rows of a client straight into the database,
	// as the benchmarks fill grown tables (package dbtest's FillStock).
	FillStock func(ctx context.Context, clientID, uploadID string, rows iter.Seq[storelink.StockRow]) (int, error)
	// OneWriter tells that the database has one writer: a write
	// transaction waits for the one that holds it (SQLite), so an accept
	// or a cancel cannot answer while an apply's transaction is open.
	OneWriter bool
}

// FailEvents makes every later write of an event in the given state ("" for
// any state) fail inside the transaction that writes it, after the order
// change it belongs with, until heal is called. The suite uses it to show
// that a state change and its event are never one without the other.
type FailEvents func(t *testing.T, state storelink.OrderState) (heal func())

// Clock is a settable clock for the suite.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock starts a clock at a fixed moment.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set sets the clock.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Advance moves the clock on.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// env is one case's store, clock and a client with stores S1 and S2.
type env struct {
	t      *testing.T
	ctx    context.Context
	clock  *Clock
	s      *service.Services
	client *storelink.NewClient
	// fixture is the database s runs over.
	fixture Fixture
}

// failEvents injects a failure of the store's event writes.
func (e *env) failEvents(t *testing.T, state storelink.OrderState) (heal func()) {
	return e.fixture.FailEvents(t, state)
}

// Exercise runs every case of the suite against stores made by open.
func Exercise(t *testing.T, open Opener) {
	cases := []struct {
		name string
		fn   func(e *env)
	}{
		{"Partners and clients", testPartnersAndClients},
		{"Partners and clients listing", testPartnerAndClientListing},
		{"API keys and authentication", testAuthentication},
		{"Another partner's key is as good as none", testAuthenticationAcrossPartners},
		{"API keys: racing creations stop at the limit", testAPIKeyRace},
		{"Webhook endpoints: racing registrations stop at the limit", testEndpointLimit},
		{"API keys: last use written by the flush, never backwards", testKeyLastUsed},
		{"Sessions of the operator and of partners", testSessions},
		{"Client summaries for the overview", testClientSummaries},
		{"Stores", testStores},
		{"Capacity bucket", testCapacity},
		{"Capacity refuses the impossible", testCapacityTooLarge},
		{"Waiting uploads are limited per client", testBacklog},
		{"Claim order per client", testClaimOrder},
		{"Lease expiry and lost leases", testLeaseExpiry},
		{"Apply writes rows, later row wins", testApply},
		{"Apply leaves rows held as they are, and counts them", testApplyUnchanged},
		{"File error applies nothing", testApplyFileError},
		{"Apply error rolls back", testApplyCallbackError},
		{"Fail sets an upload aside", testFail},
		{"Release gives a claim back uncounted", testRelease},
		{"An interrupted upload is claimed again after a backoff, uncounted as a failure", testInterruptions},
		{"Batch: a rejected file among applied ones writes nothing", testBatchRejected},
		{"Batch: a lost lease holds back its client's later uploads alone", testBatchLostLease},
		{"Batch: a failing upload fails alone", testBatchFailure},
		{"Batch: a crash leaves nothing, and the uploads are claimed again", testBatchCrash},
		{"Cancel a waiting upload", testCancelUpload},
		{"Upload events: stock_upload.finished to the endpoints that ask, once", testUploadEvents},
		{"Cancel and accept while another upload applies", testCancelDuringApply},
		{"Upload files kept for the retention", testUploadFiles},
		{"Upload listing", testUploadListing},
		{"Upload listing of every client, for the operator", testAllUploads},
		{"Upload listing by status and time", testUploadListingFilters},
		{"Upload listing by has_errors", testUploadListingHasErrors},
		{"Stock listing and paging", testStockListing},
		{"Stock listing by article number", testStockListingByArticle},
		{"Stock listing of one EAN in every store", testStockListingByEAN},
		{"Store deletion removes its stock", testDeleteStoreStock},
		{"Stock filled straight in is stock as an apply writes it", testFillStock},
		{"Orders: routing by stock in force", testOrderRouting},
		{"Orders: an explicit store is used as given", testOrderExplicitStore},
		{"Orders: article data from the chosen store's row", testOrderArticleData},
		{"Orders: assigned units are reserved until cancelled", testOrderReservations},
		{"Orders: fulfilled units are reserved until the next feed row", testOrderFulfilledReservation},
		{"Orders: cancel with reassign", testOrderCancelReassign},
		{"Orders: fulfil with picked and cancelled items", testOrderFulfil},
		{"Orders: returns", testOrderReturns},
		{"Orders: warehouse orders and returns", testWarehouseOrders},
		{"Orders: events, one per change, paged by client", testOrderEvents},
		{"Orders: listing", testOrderListing},
		{"Orders: forbidden transitions write nothing", testOrderTransitions},
		{"Orders: a failed event write undoes the change", testOrderAtomicity},
		{"Orders: racing changes are decided one at a time", testOrderConcurrency},
		{"Orders: racers for EANs that overlap never reserve a unit twice", testRoutingOverlap},
		{"Orders: a retry with the idempotency key writes nothing", testOrderKeyReplay},
		{"Orders: an idempotency key stands for one request", testOrderKeyMismatch},
		{"Orders: idempotency keys are per client", testOrderKeyScope},
		{"Orders: racing calls with one key make one order", testOrderKeyRace},
		{"Orders: idempotency keys expire", testOrderKeyExpiry},
		{"Orders: a failed call leaves its key unused", testOrderKeyFailures},
		{"Webhooks: endpoints and secret rotation", testEndpoints},
		{"Webhooks: an endpoint's description", testEndpointDescription},
		{"Webhooks: deliveries are written with their event", testDeliveriesWithEvents},
		{"Webhooks: claim and lease", testClaimDeliveries},
		{"Webhooks: per order and endpoint, in order", testDeliveryOrder},
		{"Webhooks: in flight per endpoint is capped", testDeliveryCap},
		{"Webhooks: recording attempts", testRecordAttempts},
		{"Webhooks: a 410 recorded after the endpoint was enabled again leaves it enabled", testGoneAfterEnable},
		{"Webhooks: one round records and claims", testRecordAndClaim},
		{"Webhooks: claims given back", testReleaseClaims},
		{"Webhooks: redeliver", testRedeliver},
		{"Webhooks: a redelivered event goes before later ones", testRedeliverInOrder},
		{"Webhooks: delivery listing", testDeliveryListing},
		{"Webhooks: pending count and age, failed count", testPendingDeliveries},
		{"Webhooks: an endpoint whose secret cannot be opened fails alone", testUnsealableEndpoint},
		{"Webhooks: endpoint stats of the last 24 hours", testEndpointStats},
		{"Webhooks: a deleted endpoint gets nothing more and stays readable", testDeleteEndpoint},
		{"Webhooks: failed deliveries recovered go in event order", testRecoverDeliveries},
		{"Webhooks: test sends are example events stored nowhere", testTestDelivery},
		{"Webhooks: a partner sees only its own client's", testPartnerScope},
		{"Webhooks: a client's endpoints, a page at a time", testClientEndpointPages},
		{"Partners and clients: paged lists and search", testPartnerAndClientPages},
		{"Secret key: checked, recorded once, rotated in one transaction", testSecretKeyCheck},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clock := NewClock()
			f := open(t, clock.Now)
			e := &env{t: t, ctx: context.Background(), clock: clock, fixture: f}
			e.useSealer(newSealer(e))
			p, err := e.s.Partners.CreatePartner(e.ctx, "Acme")
			must(t, err)
			e.client, err = e.s.Partners.CreateClient(e.ctx, p.ID, "DE", "EUR")
			must(t, err)
			for _, id := range []string{"S1", "S2"} {
				_, _, err := e.s.Partners.PutStore(e.ctx, e.client.ID, id, "Store "+id)
				must(t, err)
			}
			c.fn(e)
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantCode fails unless err carries the domain error code.
func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := storelink.ErrorCode(err); got != code {
		t.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
}

func asError(err error) *storelink.Error {
	var e *storelink.Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}
