// Package drivertest is the conformance suite of the areas' drivers: every
// driver passes the same cases, row method by row method, so that the rules
// written once in package service stand on the same ground on every
// database. The behaviour of the services themselves is judged by
// storetest; here each case calls the driver directly.
package drivertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"storelink"
	"storelink/service"
)

// Opener opens a new, empty database and returns its drivers and the
// services over it, which make the rows that the order rows refer to
// (partners, clients, stores, stock, endpoints) and show the deliveries
// queued. The services can seal webhook secrets.
type Opener func(t *testing.T) (service.Drivers, *service.Services)

// env is one case's driver, seeder and a client with stores S1 and S2.
type env struct {
	t      *testing.T
	ctx    context.Context
	d      service.Drivers
	seed   *service.Services
	client *storelink.NewClient
	at     time.Time
	n      int
}

// Exercise runs every case of the suite against drivers made by open.
func Exercise(t *testing.T, open Opener) {
	cases := []struct {
		name string
		fn   func(e *env)
	}{
		{"Transactions: a rollback keeps nothing, a commit keeps all", testTransactions},
		{"Orders: every column reads back as written", testOrderRoundTrip},
		{"Orders: an update writes the order and only the items asked for", testOrderUpdate},
		{"Orders: listing filters and pages, newest first", testListOrders},
		{"Clients and stores are looked up", testClientsAndStores},
		{"Stock in force counts the units reserving items hold", testStockInForce},
		{"Events are numbered per client and read by number", testEvents},
		{"Endpoints and deliveries", testDeliveries},
		{"Bookkeeping: claim, record, park", testBookkeeping},
		{"Bookkeeping: each endpoint's claim cap", testClaimCaps},
		{"Idempotency keys: put, replace, sweep", testOrderKeys},
		{"Locks: a second routing, key or client events lock waits for the first", testLocks},
		{"Uploads: rows, bucket and queue read back as written", testUploadRows},
		{"Uploads: claims keep a client's order; releases and leases", testUploadClaims},
		{"Uploads: a file put in pieces reads back whole; unnamed files are removed", testUploadFilePieces},
		{"Uploads: an apply puts its rows in force, a rejection none", testUploadApply},
		{"Uploads: a claim takes a batch client by client, within its bounds", testUploadBatchClaims},
		{"Uploads: a batch's rows are locked at once, each upload undone alone", testUploadBatchApply},
		{"Uploads: a batch's small files are written in order, each compared with the ones before", testUploadBatchSmall},
		{"Uploads: an apply writes only the rows that differ, and counts the others", testUploadUnchanged},
		{"Uploads: a write's error is its call's, where a driver holds writes back too", testUploadWriteErrors},
		{"Stock: listing filters and pages by store and EAN", testStockListing},
		{"Partners and clients: inserted once per country, listed bytewise", testPartnerAndClientRows},
		{"API keys: listed, found within the partner, deleted", testKeyRows},
		{"Stores: put once, renamed, deleted with their stock", testStoreRows},
		{"Sessions: active until they expire, a partner's while its key lasts", testSessionRows},
		{"Clients: every client's figures in one read", testClientFigureRows},
		{"Sealed values: check value recorded once, resealed in a transaction", testSealedRows},
		{"Endpoints: insert, list, rotate and update read back as written", testEndpointRows},
		{"Deliveries: listing, attempts, pending counts and redelivery", testDeliveryListing},
		{"Endpoints: stats rows, recovery, cancellation, deletion", testEndpointOpRows},
		{"Partners and clients: listed by key, from a cursor, searched", testListingRows},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d, seed := open(t)
			e := &env{t: t, ctx: context.Background(), d: d, seed: seed, at: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)}
			p, err := seed.Partners.CreatePartner(e.ctx, "Acme")
			must(t, err)
			e.client, err = seed.Partners.CreateClient(e.ctx, p.ID, "DE", "EUR")
			must(t, err)
			for _, id := range []string{"S1", "S2"} {
				_, _, err := seed.Partners.PutStore(e.ctx, e.client.ID, id, "Store "+id)
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

// begin starts a transaction that is rolled back when the case ends, unless
// it ended before.
func (e *env) begin() service.WebhookTx {
	e.t.Helper()
	tx, err := e.d.Webhooks.Begin(e.ctx)
	must(e.t, err)
	e.t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// inTx runs fn in a transaction and commits it.
func (e *env) inTx(fn func(tx service.WebhookTx)) {
	e.t.Helper()
	tx := e.begin()
	fn(tx)
	must(e.t, tx.Commit(e.ctx))
}

// tick moves the case's clock on by a second and returns it.
func (e *env) tick() time.Time {
	e.at = e.at.Add(time.Second)
	return e.at
}

// order makes an assigned order of the env's client at store with one
// reserving item per EAN, not yet written.
func (e *env) order(store string, eans ...string) *storelink.Order {
	e.n++
	now := e.tick()
	o := &storelink.Order{ID: storelink.NewID(now), OrderNumber: fmt.Sprint("N-", e.n), ClientID: e.client.ID, StoreID: store,
		State: storelink.StateAssigned, Items: []storelink.Item{}, CreatedAt: now, UpdatedAt: now}
	for i, ean := range eans {
		o.Items = append(o.Items, storelink.Item{ItemID: storelink.NewID(now), EAN: ean, Price: storelink.Money(1999 + i),
			Currency: "EUR", ArticleNumber: "A-" + ean, MarketplaceArticleNumber: fmt.Sprint("M-", i), ArticleLocation: "shelf",
			Status: storelink.ItemAssigned, Reserving: true})
	}
	return o
}

// insert writes an order, without an event, in a transaction of its own.
func (e *env) insert(o *storelink.Order) {
	e.t.Helper()
	e.inOrderTx(func(tx service.OrderTx) { e.write(tx, service.WriteOrderParams{Order: o, New: true}) })
}

// event is an event of o in its state.
func event(o *storelink.Order) *storelink.Event {
	return &storelink.Event{EventID: storelink.NewID(o.UpdatedAt), OrderID: o.ID, OrderNumber: o.OrderNumber, State: o.State,
		StoreID: o.StoreID, Timestamp: o.UpdatedAt.Format(time.RFC3339), Items: []storelink.EventItem{}}
}

// sameOrder fails unless got is want: every field, the items' Reserving
// flags included.
func sameOrder(t *testing.T, what string, got, want *storelink.Order) {
	t.Helper()
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	if string(a) != string(b) {
		t.Fatalf("%s:\n got  %s\n want %s", what, a, b)
	}
	for i := range want.Items {
		if got.Items[i].Reserving != want.Items[i].Reserving {
			t.Fatalf("%s: item %d reserving = %v, want %v", what, i, got.Items[i].Reserving, want.Items[i].Reserving)
		}
	}
}

// wantNotFound fails unless err is service.ErrNotFound.
func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("%s: error = %v, want service.ErrNotFound", what, err)
	}
}

// feed makes stock rows the stock in force through an upload, as the worker
// applies one.
func (e *env) feed(rows ...storelink.StockRow) {
	e.t.Helper()
	_, _, err := e.seed.Uploads.Accept(e.ctx, storelink.NewUpload{ClientID: e.client.ID, FileName: "feed.csv", Body: storelink.ChunksOf([]byte("x")), SHA256: "00"},
		storelink.CapacityPolicy{Base: 1 << 30, Window: time.Hour})
	must(e.t, err)
	c, err := e.seed.Uploads.Claim(e.ctx, "drivertest", time.Minute)
	must(e.t, err)
	if c == nil {
		e.t.Fatal("no upload to claim for the feed")
	}
	u, err := e.seed.Uploads.Apply(e.ctx, c, func(_ map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
		for _, r := range rows {
			if err := put(r); err != nil {
				return storelink.FeedReport{}, err
			}
		}
		return storelink.FeedReport{RowsTotal: len(rows), RowsValid: len(rows), RowsApplied: len(rows)}, nil
	})
	must(e.t, err)
	if u.Status != storelink.UploadApplied {
		e.t.Fatalf("feed upload = %+v, want applied", u)
	}
}
