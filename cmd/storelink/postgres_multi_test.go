package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"storelink/webhook"
)

// The promise ("several serve processes may share one PostgreSQL database;
// each does every kind of work"), with uploads processed, orders routed and
// events delivered by more than one process: the tests of this file run two `storelink serve` processes on
// one fresh schema each (startPair, in postgres_test.go), send work to both,
// kill one of them with SIGKILL while it holds a lease, and check that the
// other finishes the work, nothing lost and nothing applied twice.

// sizedFeed is a valid one-row feed of exactly n bytes (n ≥ 120): the row's
// location is padded to fill.
func sizedFeed(n, seed int) []byte {
	row := feedRow{Store: "S1", EAN: ean13(seed), Article: "SKU-" + strconv.Itoa(seed), Quantity: seed % 100, Price: "9.99", Retail: "19.99"}
	row.Location = strings.Repeat("x", n-len(makeFeed([]feedRow{row}).body))
	return makeFeed([]feedRow{row}).body
}

// TestPostgresCapacityShared: the capacity bucket of a client is one across
// processes. A sequence of uploads sent alternately to two processes gets
// its 200s and 429s exactly where one process gives them for the same
// sequence, and where the token bucket says; equal uploads sent all at once
// to both are accepted exactly as often as the bucket holds them.
func TestPostgresCapacityShared(t *testing.T) {
	t.Parallel()
	const base = 10_000
	// A window so long that the refill during the test is a fraction of a
	// byte: the bucket is what decides, not the clock.
	// The limits of uploads in flight and waiting are raised so that the
	// burst below meets only the bucket.
	capArgs := []string{"--capacity-base", strconv.Itoa(base) + "B", "--capacity-per-store", "0", "--capacity-window", "100000h",
		"--capacity-min-upload", "0B", "--max-uploads-in-flight", "100", "--max-waiting-uploads", "100"}
	sizes := make([]int, 30)
	for i := range sizes {
		sizes[i] = 400 + (i*337)%1100
		if i%4 == 3 {
			sizes[i] = 150 + (i*7)%60 // small files still fit once large ones no longer do
		}
	}
	// What the bucket admits: it starts full and takes what fits.
	var want []int
	tokens := base
	for _, n := range sizes {
		code := http.StatusTooManyRequests
		if n <= tokens {
			tokens, code = tokens-n, http.StatusOK
		}
		want = append(want, code)
	}

	send := func(t *testing.T, procs ...*proc) (codes []int, accepted, files int) {
		t.Helper()
		for i, n := range sizes {
			p := procs[i%len(procs)]
			code, u := p.upload(t, fmt.Sprintf("cap-%02d.csv", i), sizedFeed(n, i))
			switch code {
			case http.StatusOK:
				accepted, files = accepted+n, files+1
			case http.StatusTooManyRequests:
			default:
				t.Fatalf("upload %d (%d bytes): %d %v", i, n, code, u)
			}
			codes = append(codes, code)
		}
		return codes, accepted, files
	}

	dbOne, _ := pgSchemaURL(t)
	one := startServe(t, t.TempDir(), pgArgs(dbOne, append([]string{"--demo"}, capArgs...)...)...)
	single, singleBytes, _ := send(t, one)

	dbURL, _ := pgSchemaURL(t)
	a, b := startPair(t, dbURL, capArgs...)
	split, splitBytes, splitFiles := send(t, a, b)

	if !slices.Equal(single, want) {
		t.Errorf("one process answered %v, the bucket says %v", single, want)
	}
	if !slices.Equal(split, single) {
		t.Errorf("two processes answered %v, one process %v", split, single)
	}
	if splitBytes != singleBytes || splitBytes > base {
		t.Errorf("two processes accepted %d bytes, one process %d, bucket %d", splitBytes, singleBytes, base)
	}
	t.Logf("sequence: %d of %d uploads accepted (%d of %d bytes) by one process and by two",
		splitFiles, len(sizes), splitBytes, base)

	// All at once, to both processes: a second client of the demo partner,
	// with a fresh bucket, sends 24 uploads of 900 bytes; 11 fit in 10 000.
	var cl struct {
		ID     string `json:"client_id"`
		APIKey string `json:"api_key"`
	}
	crashAdmin(t, a, "POST", "/admin/partners/"+a.PartnerID+"/clients", map[string]string{"country_code": "AT", "currency": "EUR"}, 201, &cl)
	crashAdmin(t, b, "PUT", "/admin/clients/"+cl.ID+"/stores/S1", map[string]string{"name": "Wien"}, 201, nil)
	const size, count = 900, 24
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		counts = map[int]int{}
	)
	for i := range count {
		p := *[]*proc{a, b}[i%2]
		p.ClientID, p.APIKey = cl.ID, cl.APIKey
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPut, p.URL+"/stock/"+p.ClientID+"/burst.csv", strings.NewReader(string(sizedFeed(size, 1000+i))))
			req.Header.Set("x-api-key", p.APIKey)
			code := 0
			if resp, err := http.DefaultClient.Do(req); err == nil {
				code = resp.StatusCode
				resp.Body.Close()
			}
			mu.Lock()
			counts[code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if counts[200] != base/size || counts[429] != count-base/size {
		t.Errorf("%d uploads of %d bytes at once to two processes: answers %v, want %d×200 and %d×429",
			count, size, counts, base/size, count-base/size)
	}
}

// TestPostgresDeliveriesScaleOut: orders changed through one process make
// events that both processes deliver; each event reaches the receiver,
// signed with the endpoint's secret, in order per order, and each delivery
// succeeds exactly once.
func TestPostgresDeliveriesScaleOut(t *testing.T) {
	t.Parallel()
	dbURL, _ := pgSchemaURL(t)
	a, b := startPair(t, dbURL, "--webhook-allow-private", "--webhook-timeout", "2s",
		"--webhook-retry-schedule", "50ms,100ms,200ms,400ms,800ms,1s,1s,1s")
	rec := newCrashReceiver(t, a.WebhookSecret)
	const orders = 60
	fulfilOrders(t, a, b, rec.URL, orders)

	events := crashEventIDs(t, b)
	if len(events) != 2*orders {
		t.Fatalf("GET /events lists %d events, want %d", len(events), 2*orders)
	}
	waitDelivered(t, b, 2*orders, 20*time.Second)
	hits, _ := rec.snapshot()
	checkCrashHits(t, hits, events)
	checkSignatures(t, rec)
	const ok = `storelink_webhook_attempts_total{outcome="succeeded"}`
	na, nb := metric(t, a, ok), metric(t, b, ok)
	if na+nb != 2*orders {
		t.Errorf("succeeded attempts: %v by one process and %v by the other, want %d in all", na, nb, 2*orders)
	}
	if na == 0 || nb == 0 {
		t.Errorf("succeeded attempts: %v by the process that took the orders, %v by the other; want both to deliver", na, nb)
	}
	t.Logf("%d deliveries: %v made by the process that took the orders, %v by the other", 2*orders, na, nb)
}

// waitDelivered waits until no delivery of p's client is pending, none
// failed, and want succeeded.
func waitDelivered(t *testing.T, p *proc, want int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if failed := crashDeliveries(t, p, "failed"); len(failed) > 0 {
			t.Fatalf("deliveries failed: %+v", failed)
		}
		left := crashDeliveries(t, p, "pending")
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries still pending after %s", len(left), timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if all := crashDeliveries(t, p, "succeeded"); len(all) != want {
		t.Errorf("%d deliveries succeeded, want %d", len(all), want)
	}
}

func checkSignatures(t *testing.T, rec *crashReceiver) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.badSig) > 0 {
		t.Errorf("%d requests not signed with the endpoint's secret or at a wrong URL, e.g. %s", len(rec.badSig), rec.badSig[0])
	}
}

// TestPostgresKillWhileDelivering kills (SIGKILL) one of two processes while
// it has delivery attempts in flight to a receiver that takes its time. The
// other process delivers everything else at once and, when the dead one's
// leases run out (3 × --webhook-timeout + 30 s), what the dead one held: every
// event reaches the receiver at least once, exactly once after
// deduplication by webhook-id, in order per order.
func TestPostgresKillWhileDelivering(t *testing.T) {
	t.Parallel()
	dbURL, _ := pgSchemaURL(t)
	a, b := startPair(t, dbURL, "--webhook-allow-private", "--webhook-timeout", "1s",
		"--webhook-retry-schedule", "50ms,100ms,200ms,400ms,800ms,1s,1s,1s")
	// The receiver of webhook_crash_test.go, 150 ms slower an answer.
	key, err := webhook.ParseSecret(a.WebhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	rec := &crashReceiver{keys: [][]byte{key}, seen: map[string]int{}}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(150 * time.Millisecond) // a slow receiver: attempts overlap across the processes
		rec.serve(w, r)
	}))
	t.Cleanup(rec.Close)
	const orders = 60
	fulfilOrders(t, a, b, rec.URL, orders)

	// Kill a the moment it holds a delivery lease; then, a being dead, its
	// leases are what the database says.
	conn := pgConn(t, dbURL)
	ctx := context.Background()
	type held struct {
		id       string
		attempts int
		until    time.Time
	}
	leases := func() ([]held, error) {
		rows, err := conn.Query(ctx, `SELECT id, attempts, lease_until, lease_owner FROM deliveries
			WHERE state = 'pending' AND lease_owner IS NOT NULL`)
		if err != nil {
			return nil, err
		}
		var out []held
		for rows.Next() {
			var h held
			var owner string
			if err := rows.Scan(&h.id, &h.attempts, &h.until, &owner); err != nil {
				return nil, err
			}
			if owns(a, owner) {
				out = append(out, h)
			}
		}
		return out, rows.Err()
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		h, err := leases()
		if err != nil {
			t.Fatal(err)
		}
		if len(h) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the process that took the orders never held a delivery lease")
		}
	}
	a.Kill()
	killed := time.Now()
	orphans, err := leases()
	if err != nil {
		t.Fatal(err)
	}
	if len(orphans) == 0 {
		t.Fatal("the killed process held no lease any more when it died: the kill tested nothing")
	}
	pending := len(crashDeliveries(t, b, "pending"))
	t.Logf("killed with %d deliveries leased by the killed process, %d of %d pending", len(orphans), pending, 2*orders)

	events := crashEventIDs(t, b)
	if len(events) != 2*orders {
		t.Fatalf("GET /events lists %d events, want %d", len(events), 2*orders)
	}
	waitDelivered(t, b, 2*orders, 60*time.Second)
	t.Logf("all delivered %s after the kill", time.Since(killed).Round(time.Millisecond))
	hits, _ := rec.snapshot()
	checkCrashHits(t, hits, events)
	checkSignatures(t, rec)

	// What the dead process held was attempted again only once its lease
	// had run out, by the survivor. An attempt that started before the
	// kill is the dead process's own, recorded by a COMMIT it sent just
	// before it died.
	for _, h := range orphans {
		var first *time.Time
		if err := conn.QueryRow(ctx, `SELECT min(at) FROM delivery_attempts WHERE delivery_id = $1 AND number > $2 AND at > $3`,
			h.id, h.attempts, killed).Scan(&first); err != nil {
			t.Fatal(err)
		}
		switch {
		case first == nil:
			// PostgreSQL may still finish a COMMIT the dead process sent
			// just before it died, after the leases above were read: then
			// the delivery was recorded by the dead process's own attempt,
			// which is correct. Anything else is a lost delivery.
			var state string
			if err := conn.QueryRow(ctx, `SELECT state FROM deliveries WHERE id = $1`, h.id).Scan(&state); err != nil {
				t.Fatal(err)
			}
			if state != "succeeded" {
				t.Errorf("delivery %s, leased by the killed process, was never attempted again (state %s)", h.id, state)
			}
		case first.Before(h.until):
			// Likewise a COMMIT the dead process sent just before it died
			// may have recorded its attempt (a retry, the receiver having
			// answered 500), which ends the lease: the survivor may then
			// take the delivery at once. Without that record, the lease
			// was broken.
			var recorded bool
			if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM delivery_attempts WHERE delivery_id = $1 AND number = $2)`,
				h.id, h.attempts).Scan(&recorded); err != nil {
				t.Fatal(err)
			}
			if !recorded {
				t.Errorf("delivery %s attempted again at %s, before the dead process's lease ran out at %s", h.id, first, h.until)
			}
		}
	}
}

// TestPostgresKillWhileProcessing kills (SIGKILL) the process that holds the
// lease of a large upload while it applies it: the other process applies
// the upload once the lease (--upload-lease) runs out, exactly once, with
// exactly the file's stock.
func TestPostgresKillWhileProcessing(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second
	f := bigFeed(170_000, 200, 7)
	for attempt := 1; ; attempt++ {
		dbURL, _ := pgSchemaURL(t)
		a, b := startPair(t, dbURL, "--upload-lease", lease.String())
		conn := pgConn(t, dbURL)
		id := mustUpload(t, a, "big.csv", f.body)
		if !waitProcessing(t, b, id) {
			t.Logf("attempt %d: upload applied before it was seen processing; trying again", attempt)
			a.Kill()
			b.Kill()
			continue
		}
		var owner string
		var until time.Time
		if err := conn.QueryRow(context.Background(), `SELECT lease_owner, lease_until FROM uploads WHERE id = $1`, id).
			Scan(&owner, &until); err != nil {
			t.Logf("attempt %d: no lease to read (%v); trying again", attempt, err)
			a.Kill()
			b.Kill()
			continue
		}
		victim, survivor := a, b
		if owns(b, owner) {
			victim, survivor = b, a
		} else if !owns(a, owner) {
			t.Fatalf("upload %s leased by %q, neither process (pids %d, %d)", id, owner, a.PID(), b.PID())
		}
		victim.Kill()
		killed := time.Now()

		u := survivor.waitUpload(t, id, 40*time.Second)
		rec := checkAppliedOnce(t, survivor, id, len(f.want))
		if rec.StartedAt.Before(killed.Truncate(time.Millisecond)) {
			// The apply committed between the read of the lease and the
			// kill: nothing was interrupted. Try again.
			if attempt == 3 {
				t.Fatalf("the kill never interrupted the apply in %d attempts", attempt)
			}
			t.Logf("attempt %d: applied before the kill landed; trying again", attempt)
			survivor.Kill()
			continue
		}
		if rec.StartedAt.Before(until) {
			t.Errorf("the survivor claimed the upload at %s, before the dead process's lease ran out at %s", rec.StartedAt, until)
		}
		if u["rows_total"].(float64) != float64(170_200) {
			t.Errorf("rows_total = %v, want 170200", u["rows_total"])
		}
		var attempts int
		if err := conn.QueryRow(context.Background(), `SELECT attempts FROM uploads WHERE id = $1`, id).Scan(&attempts); err != nil {
			t.Fatal(err)
		}
		if attempts != 2 {
			t.Errorf("upload claimed %d times, want 2 (the killed process, then the survivor)", attempts)
		}
		if n := appliedBy(t, 1, survivor); n[0] != 1 {
			t.Errorf("the survivor applied %v uploads, want 1", n[0])
		}
		checkStock(t, survivor, f.want)
		t.Logf("attempt %d: applied by the survivor %s after the kill", attempt, rec.FinishedAt.Sub(killed).Round(time.Millisecond))
		return
	}
}
