package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"storelink"
	"storelink/postgres"
	"storelink/service"
)

// The tests in this file run two stores on one schema, as two processes on
// one database, and race them.
// TestClaimsAcrossProcesses: two processes claiming uploads at once never
// claim the same upload, and never one of a client before the client's
// earlier uploads are finished.
func TestClaimsAcrossProcesses(t *testing.T) {
	dbURL := newSchema(t)
	clock := fixedClock()
	a, b := openAt(t, dbURL, clock), openAt(t, dbURL, clock)
	ctx := context.Background()
	clients := setup(t, a, 4)
	const perClient = 6
	order := map[string][]string{} // client → upload ids in acceptance order
	for i := range perClient {
		for _, c := range clients {
			u, _, err := []*service.Services{a, b}[i%2].Uploads.Accept(ctx, storelink.NewUpload{ClientID: c, FileName: "f.csv", Body: storelink.ChunksOf([]byte("x"))}, unlimited)
			must(t, err)
			order[c] = append(order[c], u.ID)
		}
	}

	var mu sync.Mutex
	held := map[string]string{} // client → upload being applied
	next := map[string]int{}    // client → index of the upload due next
	claims := map[string]int{}  // upload → times claimed
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	var done atomic.Int32
	var wg sync.WaitGroup
	for w := range 6 {
		db := []*service.Services{a, b}[w%2]
		wg.Go(func() {
			for done.Load() < int32(len(clients)*perClient) {
				c, err := db.Uploads.Claim(ctx, fmt.Sprintf("w%d", w), time.Hour)
				if err != nil {
					mu.Lock()
					fail("claim: %v", err)
					mu.Unlock()
					return
				}
				if c == nil {
					time.Sleep(time.Millisecond) // nothing claimable now: poll again
					continue
				}
				mu.Lock()
				claims[c.ID]++
				if h := held[c.ClientID]; h != "" {
					fail("upload %s of client %s claimed while %s is being applied", c.ID, c.ClientID, h)
				}
				if i := next[c.ClientID]; i >= len(order[c.ClientID]) || c.ID != order[c.ClientID][i] {
					fail("claimed %s of client %s as its upload %d, out of acceptance order %v", c.ID, c.ClientID, i, order[c.ClientID])
				}
				held[c.ClientID] = c.ID
				next[c.ClientID]++
				mu.Unlock()
				_, err = db.Uploads.Apply(ctx, c, func(_ map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
					time.Sleep(2 * time.Millisecond) // let the other workers try to claim meanwhile
					mu.Lock()
					held[c.ClientID] = "" // before the commit: the next may be claimed from then on
					mu.Unlock()
					err := put(storelink.StockRow{StoreID: "S1", EAN: "4006381333931", ArticleNumber: c.ID, Quantity: 1, Price: 100})
					return storelink.FeedReport{RowsTotal: 1, RowsValid: 1, RowsApplied: 1}, err
				})
				if err != nil {
					mu.Lock()
					fail("apply %s: %v", c.ID, err)
					mu.Unlock()
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatal(strings.Join(failures, "\n"))
	}
	checkAppliedOnceInOrder(t, a, order, claims)
}

// checkAppliedOnceInOrder checks that every upload of order (client →
// upload ids in acceptance order) was claimed once, and that each client's
// stock row is its newest upload's, whose article number is the upload id.
func checkAppliedOnceInOrder(t *testing.T, db *service.Services, order map[string][]string, claimed map[string]int) {
	t.Helper()
	for c, ids := range order {
		for _, id := range ids {
			if claimed[id] != 1 {
				t.Fatalf("upload %s claimed %d times, want once", id, claimed[id])
			}
		}
		st, _, err := db.Uploads.Stock(context.Background(), c, storelink.StockFilter{Limit: 10})
		must(t, err)
		if len(st) != 1 || st[0].ArticleNumber != ids[len(ids)-1] {
			t.Fatalf("stock of client %s = %+v, want the last upload's row", c, st)
		}
	}
}

// TestSharedBucket: two processes accepting uploads of one client at once
// never take more than the bucket holds, together.
func TestSharedBucket(t *testing.T) {
	dbURL := newSchema(t)
	clock := fixedClock() // no refill while they race
	a, b := openAt(t, dbURL, clock), openAt(t, dbURL, clock)
	ctx := context.Background()
	client := setup(t, a, 1)[0]
	policy := storelink.CapacityPolicy{Base: 10_000, Window: time.Hour}
	var accepted, limited atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for w := range 8 {
		db := []*service.Services{a, b}[w%2]
		wg.Go(func() {
			for range 5 {
				_, _, err := db.Uploads.Accept(ctx, storelink.NewUpload{ClientID: client, FileName: "f.csv", Body: storelink.ChunksOf(make([]byte, 700))}, policy)
				switch storelink.ErrorCode(err) {
				case "":
					accepted.Add(1)
				case storelink.ERATELIMIT:
					limited.Add(1)
				default:
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// 10,000 bytes hold 14 uploads of 700.
	if accepted.Load() != 14 || limited.Load() != 40-14 {
		t.Fatalf("%d uploads accepted, %d refused; want 14 and %d", accepted.Load(), limited.Load(), 40-14)
	}
	list, err := a.Uploads.Uploads(ctx, client, storelink.UploadFilter{Limit: 100})
	must(t, err)
	c, err := b.Uploads.Capacity(ctx, client, policy)
	must(t, err)
	if len(list) != 14 || c.BytesLeft != 10_000-14*700 {
		t.Fatalf("%d uploads stored, capacity %+v; want 14 and %d bytes left", len(list), c, 10_000-14*700)
	}
}

// TestEventCursorAcrossProcesses: events written by two processes at once
// are numbered without gaps, and a reader paging while they are written
// sees every event once: the cursor follows commit order.
func TestEventCursorAcrossProcesses(t *testing.T) {
	dbURL := newSchema(t)
	a, b := openAt(t, dbURL, time.Now), openAt(t, dbURL, time.Now)
	ctx := context.Background()
	client := setup(t, a, 1)[0]
	price := storelink.Money(100)
	const writers, each = 6, 15
	var wg sync.WaitGroup
	var writing atomic.Int32
	writing.Store(writers)
	errs := make(chan error, writers+1)
	for w := range writers {
		db := []*service.Services{a, b}[w%2]
		wg.Go(func() {
			defer writing.Add(-1)
			for i := range each {
				_, err := db.Orders.CreateWarehouseOrder(ctx, storelink.NewOrder{OrderNumber: fmt.Sprintf("W%d-%d", w, i), ClientID: client,
					Items: []storelink.NewItem{{EAN: "4006381333931", MarketplaceArticleNumber: "M", ArticleNumber: "A", Price: &price}}})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	seen := map[string]int{}
	var cursors []int64
	read := func() {
		after := ""
		if len(cursors) > 0 {
			after = fmt.Sprint(cursors[len(cursors)-1])
		}
		page, _, err := b.Orders.Events(ctx, client, after, 7)
		if err != nil {
			errs <- err
			return
		}
		for _, r := range page {
			seen[r.EventID]++
			var n int64
			fmt.Sscan(r.Cursor, &n)
			cursors = append(cursors, n)
		}
	}
	for writing.Load() > 0 {
		read()
	}
	wg.Wait()
	for range writers * each {
		read()
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != writers*each || len(cursors) != writers*each {
		t.Fatalf("the reader saw %d events (%d reads), want %d once each", len(seen), len(cursors), writers*each)
	}
	for i, c := range cursors {
		if c != int64(i+1) {
			t.Fatalf("cursor %d is %d: the numbers have gaps or repeat", i, c)
		}
	}
}

// TestListenWakes: a process listening is woken by an upload accepted and
// by an event queued for delivery in another process.
func TestListenWakes(t *testing.T) {
	dbURL := newSchema(t)
	a, b := openAt(t, dbURL, time.Now), openAt(t, dbURL, time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	woke := make(chan string, 100)
	stopped := make(chan error, 1)
	go func() {
		stopped <- a.Listen(ctx, func() { woke <- postgres.ChannelUploads }, func() { woke <- postgres.ChannelDeliveries })
	}()
	wait := func(want string) {
		t.Helper()
		timeout := time.After(5 * time.Second)
		for {
			select {
			case ch := <-woke:
				if ch == want {
					return
				}
			case <-timeout:
				t.Fatalf("not woken on %s within 5s", want)
			}
		}
	}
	// Listening: the first wake-ups say so.
	wait(postgres.ChannelUploads)
	wait(postgres.ChannelDeliveries)
	client := setup(t, b, 1)[0]
	_, _, err := b.Uploads.Accept(context.Background(), storelink.NewUpload{ClientID: client, FileName: "f.csv", Body: storelink.ChunksOf([]byte("x"))}, unlimited)
	must(t, err)
	wait(postgres.ChannelUploads)

	_, err = b.Webhooks.CreateEndpoint(context.Background(), client, storelink.NewEndpoint{URL: "https://a.test"}, "whsec_AAAA")
	must(t, err)
	price := storelink.Money(100)
	_, err = b.Orders.CreateOrder(context.Background(), storelink.NewOrder{OrderNumber: "N-1", ClientID: client, StoreID: "S1",
		Items: []storelink.NewItem{{EAN: "4006381333931", MarketplaceArticleNumber: "M", ArticleNumber: "A", Price: &price}}})
	must(t, err)
	wait(postgres.ChannelDeliveries)

	cancel()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Listen after its context ended = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Listen did not return when its context ended")
	}
}

// TestDeliveryClaimsAcrossProcesses: two processes claiming deliveries at
// once never hold the same delivery together, keep each order's events to
// an endpoint in order, one at a time, and never have more than the cap in
// flight to one endpoint, together.
func TestDeliveryClaimsAcrossProcesses(t *testing.T) {
	dbURL := newSchema(t)
	clock := fixedClock()
	a, b := openAt(t, dbURL, clock), openAt(t, dbURL, clock)
	ctx := context.Background()
	client := setup(t, a, 1)[0]
	var endpoints []string
	for _, u := range []string{"https://a.test", "https://b.test"} {
		ep, err := a.Webhooks.CreateEndpoint(ctx, client, storelink.NewEndpoint{URL: u}, "whsec_AAAA")
		must(t, err)
		endpoints = append(endpoints, ep.ID)
	}
	price := storelink.Money(100)
	events := map[string][]string{} // order → its event ids, oldest first
	for i := range 24 {
		o, err := a.Orders.CreateOrder(ctx, storelink.NewOrder{OrderNumber: fmt.Sprint("O-", i), ClientID: client, StoreID: "S1",
			Items: []storelink.NewItem{{EAN: "4006381333931", MarketplaceArticleNumber: "M", ArticleNumber: "A", Price: &price}}})
		must(t, err)
		_, err = b.Orders.FulfilOrder(ctx, o.ID, storelink.FulfilRequest{})
		must(t, err)
		recs, err := a.Orders.OrderEvents(ctx, o.ID)
		must(t, err)
		for _, r := range recs {
			events[o.ID] = append(events[o.ID], r.EventID)
		}
	}
	eventOrder := map[string]string{} // event → order
	for o, evs := range events {
		for _, ev := range evs {
			eventOrder[ev] = o
		}
	}
	const perEndpoint = 3
	total := len(eventOrder) * len(endpoints)
	var mu sync.Mutex
	var failures []string
	inFlight := map[string]bool{} // delivery
	perEP := map[string]int{}     // endpoint → in flight
	busy := map[string]bool{}     // order + endpoint → in flight
	sent := map[string]int{}      // order + endpoint → events delivered
	var delivered atomic.Int32
	var wg sync.WaitGroup
	for w := range 8 {
		db := []*service.Services{a, b}[w%2]
		owner := fmt.Sprint("w", w)
		wg.Go(func() {
			for delivered.Load() < int32(total) {
				jobs, err := db.Webhooks.ClaimDeliveries(ctx, storelink.ClaimRequest{Owner: owner, Lease: time.Hour, Limit: 5, Caps: storelink.EndpointCap(perEndpoint)})
				if err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
					return
				}
				mu.Lock()
				for _, j := range jobs {
					key := eventOrder[j.EventID] + " " + j.EndpointID
					switch {
					case inFlight[j.DeliveryID]:
						failures = append(failures, "delivery "+j.DeliveryID+" claimed while in flight")
					case busy[key]:
						failures = append(failures, "two events of order and endpoint "+key+" in flight at once")
					case events[eventOrder[j.EventID]][sent[key]] != j.EventID:
						failures = append(failures, "event "+j.EventID+" claimed out of order for "+key)
					}
					inFlight[j.DeliveryID], busy[key] = true, true
					if perEP[j.EndpointID]++; perEP[j.EndpointID] > perEndpoint {
						failures = append(failures, fmt.Sprintf("%d in flight to endpoint %s, cap %d", perEP[j.EndpointID], j.EndpointID, perEndpoint))
					}
				}
				mu.Unlock()
				if len(jobs) == 0 {
					time.Sleep(time.Millisecond) // nothing claimable now: poll again
					continue
				}
				time.Sleep(2 * time.Millisecond) // the attempts
				var results []storelink.AttemptResult
				mu.Lock()
				for i, j := range jobs {
					key := eventOrder[j.EventID] + " " + j.EndpointID
					inFlight[j.DeliveryID], busy[key] = false, false
					perEP[j.EndpointID]--
					sent[key]++
					results = append(results, storelink.AttemptResult{Job: &jobs[i], Outcome: storelink.OutcomeSucceeded,
						Attempt: storelink.Attempt{Number: j.Attempt, At: clock(), StatusCode: 200}})
				}
				mu.Unlock()
				// Counted as done before the commit, so that the checks
				// above never see an attempt recorded but still counted.
				if err := db.Webhooks.RecordAttempts(ctx, results); err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
					return
				}
				delivered.Add(int32(len(jobs)))
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatal(strings.Join(failures, "\n"))
	}
	n, _, err := a.Webhooks.PendingDeliveries(ctx)
	must(t, err)
	if n != 0 || int(delivered.Load()) != total {
		t.Fatalf("%d delivered, %d pending; want %d and 0", delivered.Load(), n, total)
	}
}
