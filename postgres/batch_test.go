package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
	"storelink/service"
)

// TestBatchClaimBehindALockedUpload: an upload whose row another process
// has locked, claiming it right now, is passed over, and so is every later
// upload of its client: the claim, which reads the queue as it was when it
// began, takes a client's upload only with every earlier unfinished one of
// the client in the same claim. Another client's uploads are claimed.
func TestBatchClaimBehindALockedUpload(t *testing.T) {
	dbURL := newSchema(t)
	db := openAt(t, dbURL, fixedClock())
	ctx := context.Background()
	clients := setup(t, db, 2)
	accept := func(client string) *storelink.Upload {
		u, _, err := db.Uploads.Accept(ctx, storelink.NewUpload{ClientID: client, FileName: "f.csv", Body: storelink.ChunksOf([]byte("x"))}, unlimited)
		must(t, err)
		return u
	}
	a1, b1, a2, b2 := accept(clients[0]), accept(clients[1]), accept(clients[0]), accept(clients[1])

	other, err := pgx.Connect(ctx, dbURL)
	must(t, err)
	defer other.Close(ctx)
	tx, err := other.Begin(ctx)
	must(t, err)
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM uploads WHERE id = $1 FOR UPDATE`, a1.ID); err != nil {
		t.Fatal(err)
	}
	claims, err := db.Uploads.ClaimBatch(ctx, "w1", time.Minute, storelink.BatchLimit{Uploads: 10, Bytes: 1 << 20})
	must(t, err)
	if got := claimIDs(claims); got != b1.ID+" "+b2.ID {
		t.Fatalf("claimed %q while a1 is locked, want b1 and b2 (%s %s), not a2 (%s)", got, b1.ID, b2.ID, a2.ID)
	}
	must(t, tx.Rollback(ctx))
	claims, err = db.Uploads.ClaimBatch(ctx, "w2", time.Minute, storelink.BatchLimit{Uploads: 10, Bytes: 1 << 20})
	must(t, err)
	if got := claimIDs(claims); got != a1.ID+" "+a2.ID {
		t.Fatalf("claimed %q once a1 is free, want a1 and a2 (%s %s)", got, a1.ID, a2.ID)
	}
}

func claimIDs(claims []*storelink.Claim) string {
	var ids []string
	for _, c := range claims {
		ids = append(ids, c.ID)
	}
	return strings.Join(ids, " ")
}

// TestBatchesAcrossProcesses: workers of two processes claiming and
// applying batches at once never hold uploads of one client at the same
// time, claim each upload once and apply a client's uploads in acceptance
// order.
func TestBatchesAcrossProcesses(t *testing.T) {
	dbURL := newSchema(t)
	clock := fixedClock()
	a, b := openAt(t, dbURL, clock), openAt(t, dbURL, clock)
	ctx := context.Background()
	clients := setup(t, a, 4)
	const perClient = 12
	order := map[string][]string{} // client → upload ids in acceptance order
	for i := range perClient {
		for _, c := range clients {
			u, _, err := []*service.Services{a, b}[i%2].Uploads.Accept(ctx, storelink.NewUpload{ClientID: c, FileName: "f.csv", Body: storelink.ChunksOf([]byte("x"))}, unlimited)
			must(t, err)
			order[c] = append(order[c], u.ID)
		}
	}

	var mu sync.Mutex
	held := map[string]string{} // client → worker holding its uploads
	next := map[string]int{}    // client → index of the upload due next
	claimed := map[string]int{} // upload → times claimed
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	var done atomic.Int32
	var wg sync.WaitGroup
	for w := range 6 {
		db, owner := []*service.Services{a, b}[w%2], fmt.Sprintf("w%d", w)
		wg.Go(func() {
			for done.Load() < int32(len(clients)*perClient) {
				claims, err := db.Uploads.ClaimBatch(ctx, owner, time.Hour, storelink.BatchLimit{Uploads: 5, Bytes: 1 << 20})
				if err != nil {
					mu.Lock()
					fail("claim: %v", err)
					mu.Unlock()
					return
				}
				if len(claims) == 0 {
					time.Sleep(time.Millisecond) // nothing claimable now: poll again
					continue
				}
				last := map[string]string{} // client → its last upload in the batch
				mu.Lock()
				for _, c := range claims {
					claimed[c.ID]++
					if h := held[c.ClientID]; h != "" && h != owner {
						fail("upload %s of client %s claimed by %s while %s holds the client's uploads", c.ID, c.ClientID, owner, h)
					}
					if i := next[c.ClientID]; i >= len(order[c.ClientID]) || c.ID != order[c.ClientID][i] {
						fail("claimed %s of client %s as its upload %d, out of acceptance order %v", c.ID, c.ClientID, i, order[c.ClientID])
					}
					held[c.ClientID] = owner
					next[c.ClientID]++
					last[c.ClientID] = c.ID
				}
				mu.Unlock()
				results := db.Uploads.ApplyBatch(ctx, claims, func(c *storelink.Claim) storelink.FeedApply {
					return func(_ map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
						time.Sleep(time.Millisecond) // let the other workers try to claim meanwhile
						if last[c.ClientID] == c.ID {
							mu.Lock()
							held[c.ClientID] = "" // before the commit: the next may be claimed from then on
							mu.Unlock()
						}
						err := put(storelink.StockRow{StoreID: "S1", EAN: "4006381333931", ArticleNumber: c.ID, Quantity: 1, Price: 100})
						return storelink.FeedReport{RowsTotal: 1, RowsValid: 1, RowsApplied: 1}, err
					}
				})
				for i, r := range results {
					if r.Err != nil || r.Upload == nil || r.Upload.Status != storelink.UploadApplied {
						mu.Lock()
						fail("apply %s: %+v", claims[i].ID, r)
						mu.Unlock()
						return
					}
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatal(strings.Join(failures, "\n"))
	}
	checkAppliedOnceInOrder(t, a, order, claimed)
}

// TestApplyWritesUnderItsLocks: an apply's stock rows and finish are
// written in its transaction, with its upload's row locked: while its
// commit waits (on a stock row another session holds), a process past the
// lease cannot claim the upload again and apply it a second time.
func TestApplyWritesUnderItsLocks(t *testing.T) {
	dbURL := newSchema(t)
	var skew atomic.Int64
	base := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return base.Add(time.Duration(skew.Load())) }
	a, b := openAt(t, dbURL, clock), openAt(t, dbURL, clock)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := setup(t, a, 1)[0]
	const ean = "4006381333931"
	putQty := func(q int) func(*storelink.Claim) storelink.FeedApply {
		return func(*storelink.Claim) storelink.FeedApply {
			return func(_ map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
				err := put(storelink.StockRow{StoreID: "S1", EAN: ean, ArticleNumber: "A", Quantity: q, Price: 100})
				return storelink.FeedReport{RowsTotal: 1, RowsValid: 1, RowsApplied: 1}, err
			}
		}
	}
	accept := func() {
		_, _, err := a.Uploads.Accept(ctx, storelink.NewUpload{ClientID: client, FileName: "f.csv", Body: storelink.ChunksOf([]byte("x"))}, unlimited)
		must(t, err)
	}
	limit := storelink.BatchLimit{Uploads: 10, Bytes: 1 << 20}
	accept() // a first upload makes the stock row
	c0, err := a.Uploads.ClaimBatch(ctx, "w0", time.Minute, limit)
	must(t, err)
	if r := a.Uploads.ApplyBatch(ctx, c0, putQty(1)); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	accept()
	c1, err := a.Uploads.ClaimBatch(ctx, "w1", time.Minute, limit)
	must(t, err)
	blocker, err := pgx.Connect(ctx, dbURL)
	must(t, err)
	defer blocker.Close(ctx)
	btx, err := blocker.Begin(ctx)
	must(t, err)
	defer btx.Rollback(ctx)
	_, err = btx.Exec(ctx, `SELECT 1 FROM stock WHERE ean = $1 FOR UPDATE`, ean)
	must(t, err)
	waiters := func(n int) { waitLockWaiters(t, blocker, n) }
	r1 := make(chan error, 1)
	go func() { r1 <- a.Uploads.ApplyBatch(ctx, c1, putQty(2))[0].Err }()
	waiters(1)                         // w1's write waits for the stock row
	skew.Store(int64(2 * time.Minute)) // w1's lease runs out meanwhile
	c2, err := b.Uploads.ClaimBatch(ctx, "w2", time.Minute, limit)
	must(t, err)
	r2 := make(chan error, 1)
	if len(c2) > 0 {
		go func() { r2 <- b.Uploads.ApplyBatch(ctx, c2, putQty(3))[0].Err }()
		waiters(2)
	} else {
		r2 <- nil
	}
	must(t, btx.Rollback(ctx))
	e1, e2 := <-r1, <-r2
	if len(c2) > 0 {
		t.Fatalf("upload %s claimed again by w2 while w1's apply held it (w1: %v, w2: %v)", c2[0].ID, e1, e2)
	}
	must(t, e1)
}
