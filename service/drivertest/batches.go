package drivertest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"storelink"
	"storelink/service"
)

// acceptFor writes a waiting upload of a client, as accept does for the
// env's client.
func (e *env) acceptFor(clientID, body string) *storelink.Upload {
	e.t.Helper()
	now := e.tick()
	u := &storelink.Upload{ID: storelink.NewID(now), ClientID: clientID, FileName: "f.csv", SizeBytes: int64(len(body)),
		SHA256: "00", Status: storelink.UploadAccepted, ReceivedAt: now, Errors: []storelink.Problem{}, Warnings: []storelink.Problem{}}
	tx := e.beginUpload()
	_, err := tx.LockBucket(e.ctx, service.LockBucketParams{ClientID: clientID})
	must(e.t, err)
	must(e.t, tx.InsertUpload(e.ctx, u, service.NewFile{ID: storelink.NewID(now), Chunks: storelink.ChunksOf([]byte(body))}, storelink.Bucket{Tokens: 100, UpdatedAt: now}))
	must(e.t, tx.Commit(e.ctx))
	return u
}

// otherClient makes a second client, with stores S1 and S2.
func (e *env) otherClient() string {
	e.t.Helper()
	p, err := e.seed.Partners.CreatePartner(e.ctx, "Other")
	must(e.t, err)
	c, err := e.seed.Partners.CreateClient(e.ctx, p.ID, "FR", "EUR")
	must(e.t, err)
	for _, id := range []string{"S1", "S2"} {
		_, _, err = e.seed.Partners.PutStore(e.ctx, c.ID, id, "Store "+id)
		must(e.t, err)
	}
	return c.ID
}

// claimBatch claims for owner within limit, failing unless the claims are
// of want, in that order, each with its body, attempt and start.
func (e *env) claimBatch(owner string, limit storelink.BatchLimit, attempts int, want ...*storelink.Upload) []*storelink.Claim {
	e.t.Helper()
	now := e.tick()
	claims, err := e.claims(func() time.Time { return now }).ClaimBatch(e.ctx, owner, time.Minute, limit)
	must(e.t, err)
	var got, wanted []string
	for _, c := range claims {
		got = append(got, c.ID)
	}
	for _, u := range want {
		wanted = append(wanted, u.ID)
	}
	if !reflect.DeepEqual(got, wanted) {
		e.t.Fatalf("%s claimed %v within %+v, want %v", owner, got, limit, wanted)
	}
	for i, c := range claims {
		if c.ClientID != want[i].ClientID || c.SizeBytes != want[i].SizeBytes || c.Body.Len() != c.SizeBytes ||
			c.Attempts != attempts || c.StartedAt == nil || !c.StartedAt.Equal(now) {
			e.t.Fatalf("claim %d = %+v with a body of %d bytes, want upload %s, attempt %d, started at %v",
				i, c.Upload, c.Body.Len(), want[i].ID, attempts, now)
		}
		c.Owner = owner
	}
	return claims
}

var anyBatch = storelink.BatchLimit{Uploads: 100, Bytes: 1 << 20}

// testUploadBatchClaims: a claim takes the oldest upload that can be
// claimed and, client by client (the clients in the order of their oldest
// such upload, each client's in acceptance order), the next ones that can
// go with it (a client's later upload with its earlier one), within the
// count and the bytes of its limit (the first whatever its size); never an
// upload behind its client's upload under a live lease; an upload claimed
// before alone.
func testUploadBatchClaims(e *env) {
	b := e.otherClient()
	a1, b1, a2, b2 := e.accept("a1-x"), e.acceptFor(b, "b1-x"), e.accept("a2-x"), e.acceptFor(b, "b2-x")
	first := e.claimBatch("w1", storelink.BatchLimit{Uploads: 3, Bytes: 1 << 20}, 1, a1, b1, a2)
	e.claimBatch("w2", anyBatch, 0) // b2 waits behind b1, held by w1

	// Given back, the three are claimed again, within 10 bytes: two, client
	// by client (a's two before b's first).
	for _, c := range first {
		must(e.t, e.release(c, e.at, false))
	}
	e.claimBatch("w2", storelink.BatchLimit{Uploads: 10, Bytes: 10}, 1, a1, a2)
	// Their lease runs out: each was claimed before, and is claimed alone.
	e.at = e.at.Add(2 * time.Minute)
	c := e.claimBatch("w3", anyBatch, 2, a1)
	e.apply(c[0], storelink.UploadApplied)
	// b1's head is now the oldest: b1, given back uncounted, is claimed as
	// if never before, with b2; a2, claimed before, not with them, but
	// alone.
	c = e.claimBatch("w4", anyBatch, 1, b1, b2)
	c = append(c, e.claimBatch("w3", anyBatch, 2, a2)...)
	e.apply(c[0], storelink.UploadRejected)
	e.apply(c[1], storelink.UploadApplied)
	e.apply(c[2], storelink.UploadApplied)
	// The first is claimed whatever its size.
	a3 := e.accept("a3-x")
	c = e.claimBatch("w5", storelink.BatchLimit{Uploads: 10, Bytes: 3}, 1, a3)
	e.apply(c[0], storelink.UploadApplied)
	e.claimBatch("w6", anyBatch, 0)
}

// testUploadBatchApply: LockUploads reads the lease owners of a batch and
// its clients' stores; rolled back to its savepoint, an upload's rows,
// written already or not, are undone and those of the uploads before and
// after it in the transaction are kept, the later of two uploads winning
// where both set a store and EAN. The files are large enough to be written
// as they are put.
func testUploadBatchApply(e *env) {
	const n = 10_050 // more than a SQLite batch (256 rows) and a PostgreSQL COPY (10,000)
	rowsOf := func(qty, from int) []storelink.StockRow {
		rows := make([]storelink.StockRow, n)
		for i := range rows {
			rows[i] = storelink.StockRow{StoreID: "S1", EAN: fmt.Sprintf("%013d", from+i), ArticleNumber: "A", Quantity: qty, Price: 100}
		}
		return rows
	}
	kept, rejected, later := e.accept("kept"), e.accept("rejected"), e.accept("later")
	claims := e.claimBatch("w1", anyBatch, 1, kept, rejected, later)
	done := e.accept("done")
	e.at = e.at.Add(time.Second)

	tx := e.beginUpload()
	locked, err := tx.LockUploads(e.ctx, service.LockUploadsParams{IDs: []string{kept.ID, rejected.ID, done.ID, later.ID},
		ClientIDs: []string{e.client.ID, e.client.ID, e.client.ID, e.client.ID}, Processing: storelink.UploadProcessing})
	must(e.t, err)
	owners, stores := locked.Owners, locked.Stores
	if !reflect.DeepEqual(owners, []string{"w1", "w1", "", "w1"}) || !reflect.DeepEqual(stores, map[string]map[string]bool{e.client.ID: {"S1": true, "S2": true}}) {
		e.t.Fatalf("LockUploads = %q, %v; want w1, w1, none (not processing), w1, and the client's stores S1, S2", owners, stores)
	}
	apply := func(c *storelink.Claim, rows []storelink.StockRow, status storelink.UploadStatus) {
		e.t.Helper()
		must(e.t, tx.Savepoint(e.ctx))
		put := tx.StockWriter(e.ctx, e.writer(c))
		for _, r := range rows {
			must(e.t, put(r))
		}
		if status == storelink.UploadRejected {
			must(e.t, tx.RollbackToSavepoint(e.ctx))
		}
		must(e.t, tx.ReleaseSavepoint(e.ctx))
		if status == storelink.UploadApplied {
			must(e.t, tx.ApplyStock(e.ctx))
			must(e.t, tx.ReleaseFulfilled(e.ctx))
		}
		var finished *storelink.Upload
		must(e.t, finish(e, tx, c.ID, status, storelink.FeedReport{RowsTotal: n, RowsValid: n, RowsApplied: n,
			Errors: []storelink.Problem{}, Warnings: []storelink.Problem{}}, e.tick(), &finished))
	}
	apply(claims[0], rowsOf(1, 0), storelink.UploadApplied)
	apply(claims[1], rowsOf(2, 0), storelink.UploadRejected)
	apply(claims[2], rowsOf(3, n/2), storelink.UploadApplied)
	must(e.t, tx.Commit(e.ctx))

	for _, w := range []struct {
		u      *storelink.Upload
		status storelink.UploadStatus
	}{{kept, storelink.UploadApplied}, {rejected, storelink.UploadRejected}, {later, storelink.UploadApplied}} {
		got, err := e.d.Uploads.GetUpload(e.ctx, e.client.ID, w.u.ID)
		must(e.t, err)
		if got.Status != w.status || got.RowsApplied != n {
			e.t.Fatalf("upload %s = %s with %d rows applied, want %s, %d", w.u.FileName, got.Status, got.RowsApplied, w.status, n)
		}
	}
	byQty := map[int]int{}
	for after := (*service.StockKey)(nil); ; {
		page := e.stock(service.StockQuery{ClientID: e.client.ID, After: after, Limit: 5000})
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			want := storelink.Upload{ID: kept.ID}
			if r.Quantity == 3 {
				want.ID = later.ID
			}
			if r.UploadID != want.ID {
				e.t.Fatalf("stock row %s of quantity %d is of upload %s, want %s", r.EAN, r.Quantity, r.UploadID, want.ID)
			}
			byQty[r.Quantity]++
		}
		last := page[len(page)-1]
		after = &service.StockKey{StoreID: last.StoreID, EAN: last.EAN}
	}
	if !reflect.DeepEqual(byQty, map[int]int{1: n / 2, 3: n}) {
		e.t.Fatalf("stock rows by quantity = %v, want %d of the first upload, %d of the later, none of the rejected", byQty, n/2, n)
	}
}

// testUploadBatchSmall: in one transaction, small files of two clients,
// two of the first on the same pairs: each file's rows are written after
// the earlier files' (the later file wins), and compared with them, so that
// each counts as unchanged the pairs that already held what it sets after
// the files before it; each finish reads its upload back as finished; a
// rejected file between them writes nothing.
func testUploadBatchSmall(e *env) {
	b := e.otherClient()
	row := func(ean string, qty int) storelink.StockRow {
		return storelink.StockRow{StoreID: "S1", EAN: ean, ArticleNumber: "A", Quantity: qty, Price: 100}
	}
	a1, b1, a2, a3 := e.accept("a1"), e.acceptFor(b, "b1"), e.accept("a2"), e.accept("a3")
	claims := e.claimBatch("w1", anyBatch, 1, a1, b1, a2, a3)
	files := [][]storelink.StockRow{
		{row("4006381333931", 1), row("4006381333948", 5)},
		{row("4006381333931", 7)},
		{row("4006381333931", 2), row("4006381333948", 5)}, // the second pair as a1 left it
		{row("4006381333931", 9)},                          // rejected
	}
	status := []storelink.UploadStatus{storelink.UploadApplied, storelink.UploadApplied, storelink.UploadApplied, storelink.UploadRejected}
	tx := e.beginUpload()
	defer tx.Rollback(e.ctx)
	ids, clients := make([]string, len(claims)), make([]string, len(claims))
	for i, c := range claims {
		ids[i], clients[i] = c.ID, c.ClientID
	}
	_, err := tx.LockUploads(e.ctx, service.LockUploadsParams{IDs: ids, ClientIDs: clients, Processing: storelink.UploadProcessing})
	must(e.t, err)
	finished := make([]*storelink.Upload, len(claims))
	for i, c := range claims {
		must(e.t, tx.Savepoint(e.ctx))
		put := tx.StockWriter(e.ctx, e.writer(c))
		for _, r := range files[i] {
			must(e.t, put(r))
		}
		if status[i] == storelink.UploadRejected {
			must(e.t, tx.RollbackToSavepoint(e.ctx))
		}
		must(e.t, tx.ReleaseSavepoint(e.ctx))
		if status[i] == storelink.UploadApplied {
			must(e.t, tx.ApplyStock(e.ctx))
			must(e.t, tx.ReleaseFulfilled(e.ctx))
		}
		n := len(files[i])
		must(e.t, finish(e, tx, c.ID, status[i], storelink.FeedReport{RowsTotal: n, RowsValid: n, RowsApplied: n,
			Errors: []storelink.Problem{}, Warnings: []storelink.Problem{}}, e.tick(), &finished[i]))
	}
	must(e.t, tx.Commit(e.ctx))
	for i, c := range claims {
		got, err := e.d.Uploads.GetUpload(e.ctx, c.ClientID, c.ID)
		must(e.t, err)
		wantUnchanged := 0
		if i == 2 {
			wantUnchanged = 1
		}
		if got.Status != status[i] || got.RowsUnchanged != wantUnchanged || got.FinishedAt == nil {
			e.t.Fatalf("upload %d = %s, %d rows unchanged, finished at %v; want %s, %d", i, got.Status, got.RowsUnchanged, got.FinishedAt, status[i], wantUnchanged)
		}
		if finished[i] != nil && (finished[i].Status != got.Status || finished[i].RowsUnchanged != got.RowsUnchanged) {
			e.t.Fatalf("upload %d read as finished %+v, read back %+v", i, finished[i], got)
		}
	}
	want := map[string][2]any{
		e.client.ID + " 4006381333931": {2, a2.ID}, e.client.ID + " 4006381333948": {5, a1.ID},
		b + " 4006381333931": {7, b1.ID},
	}
	got := map[string][2]any{}
	for _, client := range []string{e.client.ID, b} {
		for _, r := range e.stock(service.StockQuery{ClientID: client, Limit: 100}) {
			got[client+" "+r.EAN] = [2]any{r.Quantity, r.UploadID}
		}
	}
	if !reflect.DeepEqual(got, want) {
		e.t.Fatalf("stock = %v, want %v", got, want)
	}
}

// testUploadWriteErrors: the error of a write is its call's. A finish with a
// status the database refuses fails FinishUpload itself or, where the driver
// held the write back, the later call that sent it (here the rows of the
// batch's next file, more than a PostgreSQL COPY batch, or Commit), as a
// *service.HeldError that names FinishUpload and the upload; nothing of the
// transaction is kept.
func testUploadWriteErrors(e *env) {
	first, second := e.accept("first"), e.accept("second")
	claims := e.claimBatch("w1", anyBatch, 1, first, second)
	tx := e.beginUpload()
	_, err := tx.LockUploads(e.ctx, service.LockUploadsParams{IDs: []string{first.ID, second.ID},
		ClientIDs: []string{e.client.ID, e.client.ID}, Processing: storelink.UploadProcessing})
	must(e.t, err)

	var failed string // the call whose error came first
	call := func(name string, fn func() error) {
		if failed == "" {
			if err = fn(); err != nil {
				failed = name
			}
		}
	}
	var finished *storelink.Upload
	call("FinishUpload", func() error {
		return finish(e, tx, first.ID, "bogus", storelink.FeedReport{RowsTotal: 1, Errors: []storelink.Problem{},
			Warnings: []storelink.Problem{}}, e.tick(), &finished)
	})
	call("Savepoint", func() error { return tx.Savepoint(e.ctx) })
	put := tx.StockWriter(e.ctx, e.writer(claims[1]))
	call("the second file's rows", func() error {
		for i := range 10_050 {
			if err := put(storelink.StockRow{StoreID: "S1", EAN: fmt.Sprintf("%013d", i), ArticleNumber: "A", Quantity: 1, Price: 100}); err != nil {
				return err
			}
		}
		return nil
	})
	call("ReleaseSavepoint", func() error { return tx.ReleaseSavepoint(e.ctx) })
	call("ApplyStock", func() error { return tx.ApplyStock(e.ctx) })
	call("Commit", func() error { return tx.Commit(e.ctx) })

	if failed == "" {
		e.t.Fatal("a finish with status bogus was written and committed; want the database's refusal")
	}
	e.t.Logf("%s failed: %v", failed, err)
	if failed != "FinishUpload" {
		var held *service.HeldError
		if !errors.As(err, &held) || held.Call != "FinishUpload" || held.For != "upload "+first.ID {
			e.t.Fatalf("%s failed with %v (%T); want the refused finish's error as a *service.HeldError of FinishUpload for upload %s",
				failed, err, err, first.ID)
		}
		if !strings.Contains(err.Error(), "FinishUpload of upload "+first.ID+": ") {
			e.t.Fatalf("error %q does not name the call and the upload", err)
		}
	}
	must(e.t, tx.Rollback(e.ctx))
	for _, u := range []*storelink.Upload{first, second} {
		got, err := e.d.Uploads.GetUpload(e.ctx, e.client.ID, u.ID)
		must(e.t, err)
		if got.Status != storelink.UploadProcessing {
			e.t.Fatalf("upload %s is %s after the rollback, want still processing", u.ID, got.Status)
		}
	}
	if rows := e.stock(service.StockQuery{ClientID: e.client.ID, Limit: 10}); len(rows) != 0 {
		e.t.Fatalf("%d stock rows after the rollback, want none", len(rows))
	}
}
