package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"storelink"
)

// The batches of small uploads: claimed together (ClaimBatch) and applied
// in one transaction (ApplyBatch), each upload all or nothing, a client's
// in acceptance order.

var batchOf10 = storelink.BatchLimit{Uploads: 10, Bytes: 1 << 20}

// batchClient makes another client with stores S1 and S2.
func (e *env) batchClient(name string) string {
	e.t.Helper()
	p, err := e.s.Partners.CreatePartner(e.ctx, name)
	must(e.t, err)
	c, err := e.s.Partners.CreateClient(e.ctx, p.ID, "DE", "EUR")
	must(e.t, err)
	for _, id := range []string{"S1", "S2"} {
		_, _, err := e.s.Partners.PutStore(e.ctx, c.ID, id, "Store "+id)
		must(e.t, err)
	}
	return c.ID
}

// acceptFor stores an upload of a client, named name.
func (e *env) acceptFor(clientID, name string) *storelink.Upload {
	e.t.Helper()
	u, _, err := e.s.Uploads.Accept(e.ctx, storelink.NewUpload{ClientID: clientID, FileName: name, Body: storelink.ChunksOf([]byte(name)), SHA256: "00"},
		storelink.CapacityPolicy{Base: 1 << 30, Window: time.Hour})
	must(e.t, err)
	return u
}

// claimBatch claims a batch for owner, failing unless it is of want.
func (e *env) claimBatch(owner string, want ...*storelink.Upload) []*storelink.Claim {
	e.t.Helper()
	claims, err := e.s.Uploads.ClaimBatch(e.ctx, owner, time.Minute, batchOf10)
	must(e.t, err)
	var got, wanted []string
	for _, c := range claims {
		got = append(got, c.FileName)
	}
	for _, u := range want {
		wanted = append(wanted, u.FileName)
	}
	if strings.Join(got, " ") != strings.Join(wanted, " ") {
		e.t.Fatalf("%s claimed %v, want %v", owner, got, wanted)
	}
	return claims
}

// feeds returns ApplyBatch's fn: each claim's FeedApply by file name.
func feeds(by map[string]storelink.FeedApply) func(*storelink.Claim) storelink.FeedApply {
	return func(c *storelink.Claim) storelink.FeedApply { return by[c.FileName] }
}

// withErrorFile is apply with its report's error file set.
func withErrorFile(apply storelink.FeedApply, file string) storelink.FeedApply {
	return func(stores map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
		rep, err := apply(stores, put)
		rep.ErrorFile = []byte(file)
		return rep, err
	}
}

// wantStatus fails unless the client's upload is in status.
func (e *env) wantStatus(clientID string, u *storelink.Upload, status storelink.UploadStatus) *storelink.Upload {
	e.t.Helper()
	got, err := e.s.Uploads.Upload(e.ctx, clientID, u.ID)
	must(e.t, err)
	if got.Status != status {
		e.t.Fatalf("upload %s is %s, want %s", u.FileName, got.Status, status)
	}
	return got
}

// wantStockOf fails unless the client's stock is exactly want, as
// "STORE/EAN=QUANTITY@FILE" in store and EAN order.
func (e *env) wantStockOf(clientID string, files map[string]string, want ...string) {
	e.t.Helper()
	st, _, err := e.s.Uploads.Stock(e.ctx, clientID, storelink.StockFilter{Limit: 100})
	must(e.t, err)
	got := []string{}
	for _, r := range st {
		got = append(got, fmt.Sprintf("%s/%s=%d@%s", r.StoreID, r.EAN, r.Quantity, files[r.UploadID]))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		e.t.Fatalf("stock of client %s = %v, want %v", clientID, got, want)
	}
}

func fileNames(uploads ...*storelink.Upload) map[string]string {
	m := map[string]string{}
	for _, u := range uploads {
		m[u.ID] = u.FileName
	}
	return m
}

const (
	eanX = "4006381333931"
	eanY = "96385074"
)

// testBatchRejected: a file rejected in the middle of a batch, after its
// rows were put, writes none of them; the uploads before and after it are
// applied, a client's two in their order, each with its report, its count
// of rows left unchanged and its error file.
func testBatchRejected(e *env) {
	t, ctx, s, a := e.t, e.ctx, e.s, e.client.ID
	b := e.batchClient("B")
	a1, b1, a2 := e.acceptFor(a, "a1.csv"), e.acceptFor(b, "b1.csv"), e.acceptFor(a, "a2.csv")
	claims := e.claimBatch("w", a1, b1, a2)
	results := s.Uploads.ApplyBatch(ctx, claims, feeds(map[string]storelink.FeedApply{
		"a1.csv": withErrorFile(rows(row("S1", eanX, 1, 100), row("S1", eanY, 1, 100), row("S9", eanX, 1, 100)), "a1 errors"),
		"b1.csv": func(_ map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
			for i := range 300 { // more than one of SQLite's batches: written as they are put
				if err := put(row("S1", fmt.Sprintf("%013d", i), 7, 100)); err != nil {
					return storelink.FeedReport{}, err
				}
			}
			return storelink.FeedReport{RowsTotal: 301, RowsValid: 300, RowsApplied: 300, FileError: true, ErrorFile: []byte("b1 errors"),
				Errors: []storelink.Problem{{Type: storelink.ProblemEncoding, Message: "bad byte", Count: 1, LineNumbers: []storelink.LineRef{{LineNumber: 302}}}}}, nil
		},
		"a2.csv": rows(row("S1", eanX, 2, 100), row("S1", eanY, 1, 100)),
	}))
	for i, r := range results {
		if r.Err != nil || r.Upload == nil || r.Upload.ID != claims[i].ID {
			t.Fatalf("result %d = %+v, want upload %s finished", i, r, claims[i].FileName)
		}
	}
	if r := results[0].Upload; r.Status != storelink.UploadApplied || r.RowsApplied != 2 || r.RowsRejected != 1 || r.RowsUnchanged != 0 {
		t.Fatalf("a1 = %+v, want applied, 2 rows, 1 rejected", r)
	}
	if r := results[1].Upload; r.Status != storelink.UploadRejected || r.RowsApplied != 0 || len(r.Errors) != 1 || r.Errors[0].Type != storelink.ProblemEncoding {
		t.Fatalf("b1 = %+v, want rejected with its problem", r)
	}
	if r := results[2].Upload; r.Status != storelink.UploadApplied || r.RowsApplied != 2 || r.RowsUnchanged != 1 {
		t.Fatalf("a2 = %+v, want applied, 2 rows, 1 of them unchanged", r)
	}
	for _, u := range []*storelink.Upload{a1, b1} {
		got, err := s.Uploads.UploadErrorFile(ctx, u.ClientID, u.ID)
		must(t, err)
		if want := strings.TrimSuffix(u.FileName, ".csv") + " errors"; !bytes.Equal(got, []byte(want)) {
			t.Fatalf("error file of %s = %q, want %q", u.FileName, got, want)
		}
	}
	names := fileNames(a1, b1, a2)
	e.wantStockOf(a, names, "S1/"+eanX+"=2@a2.csv", "S1/"+eanY+"=1@a1.csv")
	e.wantStockOf(b, names)
	if d, _ := s.Uploads.QueueDepth(ctx); d != 0 {
		t.Fatalf("queue depth = %d after the batch", d)
	}
}

// testBatchLostLease: a claim of a batch whose lease another processor took
// over is not applied, nor are its client's later claims in the batch,
// which are given back uncounted and applied after it; the other uploads of
// the batch are applied.
func testBatchLostLease(e *env) {
	t, ctx, s, a := e.t, e.ctx, e.s, e.client.ID
	b, c := e.batchClient("B"), e.batchClient("C")
	a1, b1, b2, c1 := e.acceptFor(a, "a1.csv"), e.acceptFor(b, "b1.csv"), e.acceptFor(b, "b2.csv"), e.acceptFor(c, "c1.csv")
	claims := e.claimBatch("w1", a1, b1, b2, c1)
	// b1's lease is lost: given back (as a processor does after a fault),
	// and claimed by another processor, alone, b2 being w1's.
	must(t, s.Uploads.Release(ctx, claims[1], 0))
	e.clock.Advance(time.Second)
	taken := e.claimBatch("w2", b1)

	set := func(qty int) storelink.FeedApply { return rows(row("S1", eanX, qty, 100)) }
	results := s.Uploads.ApplyBatch(ctx, claims, feeds(map[string]storelink.FeedApply{
		"a1.csv": set(1), "b1.csv": set(2), "b2.csv": set(3), "c1.csv": set(4),
	}))
	if results[0].Err != nil || results[3].Err != nil {
		t.Fatalf("a1, c1: %v, %v; want applied", results[0].Err, results[3].Err)
	}
	wantCode(t, results[1].Err, storelink.ECONFLICT)
	wantCode(t, results[2].Err, storelink.ECONFLICT)
	e.wantStatus(b, b2, storelink.UploadProcessing)
	names := fileNames(a1, b1, b2, c1)
	e.wantStockOf(a, names, "S1/"+eanX+"=1@a1.csv")
	e.wantStockOf(b, names)
	e.wantStockOf(c, names, "S1/"+eanX+"=4@c1.csv")

	e.claimBatch("w3") // b2 waits behind b1, which w2 holds
	_, err := s.Uploads.Apply(ctx, taken[0], set(2))
	must(t, err)
	e.clock.Advance(time.Second)
	again := e.claimBatch("w3", b2)
	if again[0].Attempts != 1 {
		t.Fatalf("b2 claimed again at attempt %d, want 1: held back, it was given back uncounted", again[0].Attempts)
	}
	_, err = s.Uploads.Apply(ctx, again[0], set(3))
	must(t, err)
	e.wantStockOf(b, names, "S1/"+eanX+"=3@b2.csv")
}

// testBatchFailure: a failure of one upload's apply that is not a rejection
// ends the batch's transaction, and the uploads are applied one at a time:
// the failing one is left processing, its client's later one held back and
// given back, the others applied.
func testBatchFailure(e *env) {
	t, ctx, s, a := e.t, e.ctx, e.s, e.client.ID
	b := e.batchClient("B")
	a1, b1, b2, a2 := e.acceptFor(a, "a1.csv"), e.acceptFor(b, "b1.csv"), e.acceptFor(b, "b2.csv"), e.acceptFor(a, "a2.csv")
	claims := e.claimBatch("w", a1, b1, b2, a2)
	boom := errors.New("the reader failed")
	calls := map[string]int{}
	results := s.Uploads.ApplyBatch(ctx, claims, func(c *storelink.Claim) storelink.FeedApply {
		calls[c.FileName]++
		if c.FileName == "b1.csv" {
			return func(_ map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
				must(t, put(row("S1", eanX, 9, 100)))
				return storelink.FeedReport{}, boom
			}
		}
		return rows(row("S1", eanX, len(c.FileName)+calls[c.FileName], 100))
	})
	if results[0].Err != nil || results[3].Err != nil {
		t.Fatalf("a1, a2: %v, %v; want applied", results[0].Err, results[3].Err)
	}
	if !errors.Is(results[1].Err, boom) {
		t.Fatalf("b1: %v, want its failure", results[1].Err)
	}
	wantCode(t, results[2].Err, storelink.ECONFLICT)
	if calls["a1.csv"] != 2 || calls["b1.csv"] != 2 || calls["b2.csv"] != 0 || calls["a2.csv"] != 1 {
		t.Fatalf("fn called %v: want a1 and b1 twice (together, then alone), b2 never (held back), a2 once (alone)", calls)
	}
	e.wantStatus(b, b1, storelink.UploadProcessing)
	e.wantStatus(b, b2, storelink.UploadProcessing)
	names := fileNames(a1, b1, b2, a2)
	e.wantStockOf(a, names, "S1/"+eanX+"=7@a2.csv")
	e.wantStockOf(b, names)
}

// testBatchCrash: a batch whose transaction never commits (its processor
// stopped in the middle) leaves nothing of it to be seen, meanwhile or
// after; once the lease has run out its uploads are claimed again, each
// alone, since each was claimed before, and applied.
func testBatchCrash(e *env) {
	t, ctx, s, a := e.t, e.ctx, e.s, e.client.ID
	b := e.batchClient("B")
	a1, b1, a2 := e.acceptFor(a, "a1.csv"), e.acceptFor(b, "b1.csv"), e.acceptFor(a, "a2.csv")
	claims := e.claimBatch("w", a1, b1, a2)
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	names := fileNames(a1, b1, a2)
	results := s.Uploads.ApplyBatch(stop, claims, func(c *storelink.Claim) storelink.FeedApply {
		if c.FileName != "a2.csv" {
			return rows(row("S1", eanX, 1, 100))
		}
		return func(map[string]bool, func(storelink.StockRow) error) (storelink.FeedReport, error) {
			// a1 and b1 are applied in the transaction: nothing shows.
			e.wantStockOf(a, names)
			e.wantStockOf(b, names)
			e.wantStatus(a, a1, storelink.UploadProcessing)
			cancel()
			return storelink.FeedReport{}, stop.Err()
		}
	})
	for i, r := range results {
		if r.Err == nil || r.Upload != nil {
			t.Fatalf("result %d of a batch stopped in the middle = %+v, want an error", i, r)
		}
	}
	e.wantStockOf(a, names)
	e.wantStockOf(b, names)
	for _, u := range []*storelink.Upload{a1, b1, a2} {
		e.wantStatus(u.ClientID, u, storelink.UploadProcessing)
	}
	e.claimBatch("w2")
	e.clock.Advance(61 * time.Second)
	// The stopped transaction's row locks (PostgreSQL) go with its
	// connection, which the server may take a moment to see closed.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if claims, err := s.Uploads.ClaimBatch(ctx, "probe", time.Minute, storelink.BatchLimit{Uploads: 1}); err != nil || len(claims) > 0 {
			must(t, err)
			must(t, s.Uploads.Release(ctx, claims[0], 0)) // uncounted: attempts stay at 1
			e.clock.Advance(time.Second)
			break
		}
	}
	for _, u := range []*storelink.Upload{a1, b1, a2} {
		again := e.claimBatch("w2", u)
		if again[0].Attempts != 2 {
			t.Fatalf("%s claimed again at attempt %d, want 2", u.FileName, again[0].Attempts)
		}
		qty := map[string]int{"a1.csv": 2, "b1.csv": 2, "a2.csv": 3}[u.FileName]
		if r := s.Uploads.ApplyBatch(ctx, again, feeds(map[string]storelink.FeedApply{u.FileName: rows(row("S1", eanX, qty, 100))})); r[0].Err != nil {
			t.Fatalf("apply %s again: %v", u.FileName, r[0].Err)
		}
	}
	e.wantStockOf(a, names, "S1/"+eanX+"=3@a2.csv")
	e.wantStockOf(b, names, "S1/"+eanX+"=2@b1.csv")
}
