package drivertest

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"storelink"
	"storelink/service"
)

// beginUpload starts an upload transaction that is rolled back when the
// case ends, unless it ended before.
func (e *env) beginUpload() service.UploadTx {
	e.t.Helper()
	tx, err := e.d.Uploads.Begin(e.ctx)
	must(e.t, err)
	e.t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// accept writes a waiting upload of the env's client, with its bytes, as
// Accept does, and returns it.
func (e *env) accept(body string) *storelink.Upload {
	e.t.Helper()
	now := e.tick()
	u := &storelink.Upload{ID: storelink.NewID(now), ClientID: e.client.ID, FileName: "f.csv", SizeBytes: int64(len(body)),
		SHA256: "00", Status: storelink.UploadAccepted, ReceivedAt: now, Errors: []storelink.Problem{}, Warnings: []storelink.Problem{}}
	tx := e.beginUpload()
	_, err := tx.LockBucket(e.ctx, service.LockBucketParams{ClientID: e.client.ID})
	must(e.t, err)
	must(e.t, tx.InsertUpload(e.ctx, u, service.NewFile{ID: storelink.NewID(now), Chunks: storelink.ChunksOf([]byte(body))}, storelink.Bucket{Tokens: 100, UpdatedAt: now}))
	must(e.t, tx.Commit(e.ctx))
	return u
}

// claim claims the next upload for owner, failing unless it is want.
func (e *env) claim(owner string, want *storelink.Upload) *storelink.Claim {
	e.t.Helper()
	now := e.tick()
	claims, err := e.claims(func() time.Time { return now }).ClaimBatch(e.ctx, owner, time.Minute, storelink.BatchLimit{Uploads: 1})
	must(e.t, err)
	if len(claims) != 1 {
		e.t.Fatalf("claimed %d uploads, want upload %s", len(claims), want.ID)
	}
	c := claims[0]
	if c.ID != want.ID || c.ClientID != want.ClientID || c.FileName != want.FileName || c.SizeBytes != want.SizeBytes ||
		!c.ReceivedAt.Equal(want.ReceivedAt) || c.StartedAt == nil || !c.StartedAt.Equal(now) {
		e.t.Fatalf("claimed %+v, want upload %s started at %v", c.Upload, want.ID, now)
	}
	c.Owner = owner
	return c
}

// claimNone claims for owner, failing unless nothing is claimed.
func (e *env) claimNone(owner, what string) {
	e.t.Helper()
	claims, err := e.claims(e.tick).ClaimBatch(e.ctx, owner, time.Minute, storelink.BatchLimit{Uploads: 10, Bytes: 1 << 20})
	if err != nil || len(claims) != 0 {
		e.t.Fatalf("%s: claimed %d uploads, %v; want none", what, len(claims), err)
	}
}

// claims are the upload calls over the driver with the clock now: the
// rule of which uploads a claim takes together is the service's, over the
// driver's ClaimableUploads and LeaseUploads.
func (e *env) claims(now func() time.Time) *service.Uploads {
	return service.New(service.Drivers{Uploads: e.d.Uploads}, service.WithClock(now)).Uploads
}

// lockUpload locks c's upload as Apply does and returns its lease owner
// and its client's stores.
func (e *env) lockUpload(tx service.UploadTx, c *storelink.Claim) (string, map[string]bool, error) {
	l, err := tx.LockUploads(e.ctx, service.LockUploadsParams{IDs: []string{c.ID}, ClientIDs: []string{c.ClientID},
		Processing: storelink.UploadProcessing})
	if err != nil {
		return "", nil, err
	}
	return l.Owners[0], l.Stores[c.ClientID], nil
}

// writer is what the stock writer of c's upload is made with, as the
// service makes it: the rows stamped with the env's clock, the reservations
// of fulfilled and returned units ended.
func (e *env) writer(c *storelink.Claim) service.StockWriterParams {
	return service.StockWriterParams{ClientID: c.ClientID, UploadID: c.ID, Now: e.tick,
		Sold: []storelink.ItemStatus{storelink.ItemFulfilled, storelink.ItemReturned}}
}

// release gives c back, claimable at until.
func (e *env) release(c *storelink.Claim, until time.Time, failed bool) error {
	return e.d.Uploads.ReleaseUpload(e.ctx, service.ReleaseParams{ID: c.ID, Owner: c.Owner, StartedAt: *c.StartedAt,
		Processing: storelink.UploadProcessing, Until: until, Failed: failed})
}

// finish finishes an upload in tx.
func finish(e *env, tx service.UploadTx, id string, status storelink.UploadStatus, r storelink.FeedReport, at time.Time, into **storelink.Upload) error {
	return tx.FinishUpload(e.ctx, service.FinishParams{ID: id, Status: status, Report: r, At: at, Into: into})
}

// apply runs an apply of c's upload that puts rows and finishes it with
// status, and returns the upload as stored afterwards.
func (e *env) apply(c *storelink.Claim, status storelink.UploadStatus, rows ...storelink.StockRow) *storelink.Upload {
	e.t.Helper()
	tx := e.beginUpload()
	owner, stores, err := e.lockUpload(tx, c)
	must(e.t, err)
	if owner != c.Owner || !reflect.DeepEqual(stores, map[string]bool{"S1": true, "S2": true}) {
		e.t.Fatalf("LockUploads = %q, %v; want %q and the stores S1, S2", owner, stores, c.Owner)
	}
	put := tx.StockWriter(e.ctx, e.writer(c))
	for _, r := range rows {
		must(e.t, put(r))
	}
	if status == storelink.UploadApplied {
		must(e.t, tx.ApplyStock(e.ctx))
		must(e.t, tx.ReleaseFulfilled(e.ctx))
	} else if owner, err := tx.DiscardStock(e.ctx, c.ID, storelink.UploadProcessing); err != nil || owner != c.Owner {
		e.t.Fatalf("DiscardStock = %q, %v; want %q", owner, err, c.Owner)
	}
	r := storelink.FeedReport{RowsTotal: len(rows) + 1, RowsRejected: 1, RowsApplied: len(rows),
		Errors:   []storelink.Problem{{Type: "bad_ean", Message: "EAN check digit.", LineNumbers: []storelink.LineRef{}, Count: 1}},
		Warnings: []storelink.Problem{}}
	at := e.tick()
	var finished *storelink.Upload
	must(e.t, finish(e, tx, c.ID, status, r, at, &finished))
	must(e.t, tx.Commit(e.ctx))
	got, err := e.d.Uploads.GetUpload(e.ctx, c.ClientID, c.ID)
	must(e.t, err)
	if finished != nil {
		sameUpload(e.t, "upload as finished, and as read back", finished, got)
	}
	if got.Status != status || got.FinishedAt == nil || !got.FinishedAt.Equal(at) || got.RowsTotal != r.RowsTotal ||
		got.RowsApplied != r.RowsApplied || got.RowsRejected != 1 || !reflect.DeepEqual(got.Errors, r.Errors) ||
		got.Warnings == nil || len(got.Warnings) != 0 {
		e.t.Fatalf("finished upload %+v, want %s at %v with the report %+v", got, status, at, r)
	}
	return got
}

func testUploadRows(e *env) {
	tx := e.beginUpload()
	_, err := tx.LockBucket(e.ctx, service.LockBucketParams{ClientID: "no-such-client", Waiting: storelink.UploadAccepted})
	wantNotFound(e.t, "LockBucket of no client", err)
	must(e.t, tx.Rollback(e.ctx))
	_, err = e.d.Uploads.GetBucket(e.ctx, "no-such-client")
	wantNotFound(e.t, "GetBucket of no client", err)
	if b, err := e.d.Uploads.GetBucket(e.ctx, e.client.ID); err != nil || b.Bucket != nil || b.Stores != 2 {
		e.t.Fatalf("GetBucket of a new client = %v, %d, %v; want no bucket and 2 stores", b.Bucket, b.Stores, err)
	}

	u := e.accept("a;b\n1;2\n")
	tx = e.beginUpload()
	locked, err := tx.LockBucket(e.ctx, service.LockBucketParams{ClientID: e.client.ID, Waiting: storelink.UploadAccepted})
	must(e.t, err)
	if b := locked.Bucket; b == nil || b.Tokens != 100 || !b.UpdatedAt.Equal(u.ReceivedAt) || locked.Stores != 2 || locked.Waiting != 1 {
		e.t.Fatalf("LockBucket = %v, %d, %d; want 100 tokens at %v, 2 stores, 1 waiting", b, locked.Stores, locked.Waiting, u.ReceivedAt)
	}
	must(e.t, tx.Rollback(e.ctx))
	got, err := e.d.Uploads.GetUpload(e.ctx, e.client.ID, u.ID)
	must(e.t, err)
	sameUpload(e.t, "upload read back", got, u)
	_, err = e.d.Uploads.GetUpload(e.ctx, "other-client", u.ID)
	wantNotFound(e.t, "upload of another client", err)
	if ok, err := e.d.Uploads.UploadExists(e.ctx, e.client.ID, u.ID); err != nil || !ok {
		e.t.Fatalf("UploadExists = %v, %v; want true", ok, err)
	}
	if ok, err := e.d.Uploads.UploadExists(e.ctx, "other-client", u.ID); err != nil || ok {
		e.t.Fatalf("UploadExists of another client = %v, %v; want false", ok, err)
	}

	// The queue: one waiting upload, then a second behind it.
	second := e.accept("x")
	for _, client := range []string{e.client.ID, ""} {
		w, err := e.d.Uploads.CountUnfinished(e.ctx, service.UnfinishedQuery{ClientID: client, Status: storelink.UploadAccepted})
		must(e.t, err)
		if w.N != 2 || w.First <= 0 || !w.Oldest.Equal(u.ReceivedAt) {
			e.t.Fatalf("CountUnfinished(%q, accepted) = %d, %d, %v; want 2 from %v", client, w.N, w.First, w.Oldest, u.ReceivedAt)
		}
		if ahead, err := e.d.Uploads.CountUnfinished(e.ctx, service.UnfinishedQuery{UpTo: w.First}); err != nil || ahead.N != 1 {
			e.t.Fatalf("CountUnfinished up to the first = %d, %v; want 1", ahead.N, err)
		}
	}
	if w, err := e.d.Uploads.CountUnfinished(e.ctx, service.UnfinishedQuery{ClientID: "other-client", Status: storelink.UploadAccepted}); err != nil || w.N != 0 || !w.Oldest.IsZero() {
		e.t.Fatalf("CountUnfinished of a client without uploads = %d, %v, %v", w.N, w.Oldest, err)
	}
	if n, err := e.d.Uploads.CountUnfinished(e.ctx, service.UnfinishedQuery{}); err != nil || n.N != 2 {
		e.t.Fatalf("CountUnfinished = %d, %v; want 2", n.N, err)
	}
	list, err := e.d.Uploads.ListUploads(e.ctx, service.UploadQuery{ClientID: e.client.ID, Limit: 10})
	must(e.t, err)
	if len(list) != 2 || list[0].ID != second.ID || list[1].ID != u.ID {
		e.t.Fatalf("ListUploads = %v, want the second upload, then the first", ids(list))
	}
	if list, err = e.d.Uploads.ListUploads(e.ctx, service.UploadQuery{ClientID: e.client.ID, Before: second.ID, Limit: 10}); err != nil || len(list) != 1 || list[0].ID != u.ID {
		e.t.Fatalf("ListUploads before the second = %v, %v; want the first", ids(list), err)
	}
	if list, err = e.d.Uploads.ListUploads(e.ctx, service.UploadQuery{ClientID: "other-client", Limit: 10}); err != nil || list == nil || len(list) != 0 {
		e.t.Fatalf("ListUploads of a client without uploads = %#v, %v; want an empty list", list, err)
	}
}

func testUploadClaims(e *env) {
	first, second := e.accept("first"), e.accept("second")
	c := e.claim("w1", first)
	if string(c.Body.Bytes()) != "first" || c.Attempts != 1 {
		e.t.Fatalf("claim body %q, attempts %d; want first, 1", c.Body, c.Attempts)
	}
	// The client's second upload waits for its first to be finished.
	e.claimNone("w2", "claim behind the client's unfinished upload")

	// Released, the claim no longer counts and the upload is claimable at
	// the time given; a second release of the same claim changes nothing.
	must(e.t, e.release(c, e.at, false))
	must(e.t, e.release(c, e.at.Add(time.Hour), false))
	again := e.claim("w2", first)
	if again.Attempts != 1 {
		e.t.Fatalf("attempts after a release = %d, want 1", again.Attempts)
	}
	// Handed back at a stop, the owner's uploads are claimable at once.
	must(e.t, e.d.Uploads.ReleaseUploadLeases(e.ctx, "w2", storelink.UploadProcessing))
	c = e.claim("w3", first)
	if c.Attempts != 1 {
		e.t.Fatalf("attempts after the leases were handed back = %d, want 1", c.Attempts)
	}
	// A lease that runs out makes the upload claimable again, counted.
	e.at = e.at.Add(2 * time.Minute)
	if c = e.claim("w4", first); c.Attempts != 2 {
		e.t.Fatalf("attempts after a lease ran out = %d, want 2", c.Attempts)
	}
	e.apply(c, storelink.UploadRejected)
	e.claim("w5", second)
	e.claimNone("w6", "claim with nothing waiting")
}

func testUploadApply(e *env) {
	sold := e.order("S1", eanA)
	sold.State, sold.Items[0].Status = storelink.StateFulfilled, storelink.ItemFulfilled
	e.insert(sold)

	// An upload of the same store and EAN makes its row the stock in force
	// (the later of two rows for it), and ends the sold unit's reservation.
	u := e.accept("x")
	tx := e.beginUpload()
	if owner, _, err := e.lockUpload(tx, &storelink.Claim{Upload: storelink.Upload{ID: "no-such-upload", ClientID: e.client.ID}}); err != nil || owner != "" {
		e.t.Fatalf("LockUploads of no upload = %q, %v; want no owner", owner, err)
	}
	must(e.t, tx.Rollback(e.ctx))
	c := e.claim("w1", u)
	retail := storelink.Money(2499)
	want := storelink.StockRow{StoreID: "S1", EAN: eanA, ArticleNumber: "A-2", Quantity: 3, Price: 1999, RetailPrice: &retail,
		ArticleLocation: "shelf", ProductName: "New", ProductNumber: "P", ArticleColor: "red", ArticleSize: "M"}
	other := storelink.StockRow{StoreID: "S2", EAN: eanB, ArticleNumber: "B", Quantity: 1, Price: 500, ProductName: "B"}
	before := want
	before.Quantity = 99
	e.apply(c, storelink.UploadApplied, before, other, want)
	rows := e.stock(service.StockQuery{ClientID: e.client.ID, Limit: 10})
	if len(rows) != 2 || !reflect.DeepEqual(rows[0].StockRow, want) || rows[0].Reserved != 0 || rows[0].UploadID != u.ID ||
		!reflect.DeepEqual(rows[1].StockRow, other) {
		e.t.Fatalf("stock after the apply = %+v, want %+v unreserved, then %+v", rows, want, other)
	}
	got, err := e.d.Orders.GetOrder(e.ctx, sold.ID)
	must(e.t, err)
	if got.Items[0].Reserving {
		e.t.Fatal("the sold unit still reserves stock after an upload set its store and EAN")
	}

	// A rejected upload puts none of its rows in force.
	r := e.accept("y")
	c = e.claim("w1", r)
	changed := want
	changed.Quantity = 0
	e.apply(c, storelink.UploadRejected, changed)
	if after := e.stock(service.StockQuery{ClientID: e.client.ID, Limit: 10}); !reflect.DeepEqual(after, rows) {
		e.t.Fatalf("stock after a rejected upload = %+v, want it as before %+v", after, rows)
	}
}

func testStockListing(e *env) {
	if ok, err := e.d.Uploads.ClientExists(e.ctx, e.client.ID); err != nil || !ok {
		e.t.Fatalf("ClientExists = %v, %v; want true", ok, err)
	}
	if ok, err := e.d.Uploads.ClientExists(e.ctx, "no-such-client"); err != nil || ok {
		e.t.Fatalf("ClientExists of no client = %v, %v; want false", ok, err)
	}
	var rows []storelink.StockRow
	for _, store := range []string{"S2", "S1"} {
		for _, ean := range []string{eanC, eanA, eanB} {
			rows = append(rows, storelink.StockRow{StoreID: store, EAN: ean, ArticleNumber: "A", Quantity: 2, Price: 100, ProductName: "P"})
		}
	}
	e.feed(rows...)
	reserved := e.order("S1", eanB)
	e.insert(reserved)
	all := e.stock(service.StockQuery{ClientID: e.client.ID, Limit: 10})
	want := []string{"S1/" + eanA, "S1/" + eanB, "S1/" + eanC, "S2/" + eanA, "S2/" + eanB, "S2/" + eanC}
	if got := keys(all); !reflect.DeepEqual(got, want) {
		e.t.Fatalf("stock = %v, want %v", got, want)
	}
	if all[1].Reserved != 1 || all[0].Reserved != 0 {
		e.t.Fatalf("reserved = %d, %d; want 0, 1", all[0].Reserved, all[1].Reserved)
	}
	for _, c := range []struct {
		q    service.StockQuery
		want []string
	}{
		{service.StockQuery{Limit: 2}, want[:2]},
		{service.StockQuery{After: &service.StockKey{StoreID: "S1", EAN: eanC}, Limit: 2}, want[3:5]},
		{service.StockQuery{StoreID: "S1", After: &service.StockKey{StoreID: "S1", EAN: eanA}, Limit: 10}, want[1:3]},
		{service.StockQuery{StoreID: "S2", After: &service.StockKey{StoreID: "S1", EAN: eanC}, Limit: 10}, want[3:]},
		{service.StockQuery{EAN: eanB, Limit: 10}, []string{want[1], want[4]}},
		{service.StockQuery{StoreID: "S2", EAN: eanA, Limit: 10}, want[3:4]},
		{service.StockQuery{StoreID: "S3", Limit: 10}, []string{}},
	} {
		c.q.ClientID = e.client.ID
		if got := keys(e.stock(c.q)); !reflect.DeepEqual(got, c.want) {
			e.t.Errorf("ListStock(%+v) = %v, want %v", c.q, got, c.want)
		}
	}
}

// stock lists stock rows, failing on an error or a nil list.
func (e *env) stock(q service.StockQuery) []storelink.Stock {
	e.t.Helper()
	rows, err := e.d.Uploads.ListStock(e.ctx, q)
	must(e.t, err)
	if rows == nil {
		e.t.Fatal("ListStock returned nil")
	}
	return rows
}

func keys(rows []storelink.Stock) []string {
	out := []string{}
	for _, r := range rows {
		out = append(out, r.StoreID+"/"+r.EAN)
	}
	return out
}

func ids(list []storelink.Upload) []string {
	out := []string{}
	for _, u := range list {
		out = append(out, u.ID)
	}
	return out
}

// sameUpload fails unless got is want, field by field as JSON shows them
// (so a time in another location of the same instant is the same).
func sameUpload(t *testing.T, what string, got, want *storelink.Upload) {
	t.Helper()
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	if string(a) != string(b) {
		t.Fatalf("%s:\n got  %s\n want %s", what, a, b)
	}
}

// testUploadFilePieces: a file put in pieces before its accept
// (PutChunks) and finished by it reads back whole, in order, by the claim
// and as the upload's file; a file no upload names is removed by DropFile
// or, once its id is before the cutoff, by DropOrphanFiles, which leaves
// named files alone; and a file goes with its upload when the upload's
// row of files is dropped (a cancel).
func testUploadFilePieces(e *env) {
	piece := func(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }
	file := storelink.Chunks{piece('a', storelink.ChunkSize), piece('b', storelink.ChunkSize), piece('c', 10)}
	now := e.tick()
	f := service.NewFile{ID: storelink.NewID(now), First: 2, Chunks: file[2:]}
	must(e.t, e.d.Uploads.PutChunks(e.ctx, f.ID, 0, file[:2]))
	u := &storelink.Upload{ID: storelink.NewID(now), ClientID: e.client.ID, FileName: "f.csv", SizeBytes: file.Len(),
		SHA256: "00", Status: storelink.UploadAccepted, ReceivedAt: now, Errors: []storelink.Problem{}, Warnings: []storelink.Problem{}}
	tx := e.beginUpload()
	_, err := tx.LockBucket(e.ctx, service.LockBucketParams{ClientID: e.client.ID})
	must(e.t, err)
	must(e.t, tx.InsertUpload(e.ctx, u, f, storelink.Bucket{Tokens: 100, UpdatedAt: now}))
	must(e.t, tx.Commit(e.ctx))

	c := e.claim("w1", u)
	if len(c.Body) != 3 || !bytes.Equal(c.Body.Bytes(), file.Bytes()) {
		e.t.Fatalf("claimed file of %d pieces, %d bytes; want the 3 pieces put, %d bytes, in order", len(c.Body), c.Body.Len(), file.Len())
	}
	read, err := e.d.Uploads.UploadFile(e.ctx, e.client.ID, u.ID, false)
	must(e.t, err)
	if !read.Kept || !bytes.Equal(read.Data.Bytes(), file.Bytes()) {
		e.t.Fatalf("upload file: kept %v, %d bytes; want the file of %d bytes", read.Kept, read.Data.Len(), file.Len())
	}
	// DropFile leaves a file an upload names.
	must(e.t, e.d.Uploads.DropFile(e.ctx, f.ID))
	if again, err := e.d.Uploads.UploadBodies(e.ctx, []string{u.ID}); err != nil || again[u.ID].Len() != file.Len() {
		e.t.Fatalf("file after DropFile of a named file: %d bytes, %v; want all %d", again[u.ID].Len(), err, file.Len())
	}

	// Two files no upload names, one older than the other.
	old, young := storelink.NewID(e.tick()), ""
	must(e.t, e.d.Uploads.PutChunks(e.ctx, old, 0, file[:2]))
	cutoff := storelink.NewID(e.tick())
	young = storelink.NewID(e.tick())
	must(e.t, e.d.Uploads.PutChunks(e.ctx, young, 0, file[:1]))
	if n, err := e.d.Uploads.DropOrphanFiles(e.ctx, cutoff, 10); err != nil || n != 1 {
		e.t.Fatalf("DropOrphanFiles before the cutoff = %d, %v; want the older file alone", n, err)
	}
	must(e.t, e.d.Uploads.DropFile(e.ctx, young))
	future := storelink.NewID(e.tick().Add(time.Hour))
	if n, err := e.d.Uploads.DropOrphanFiles(e.ctx, future, 10); err != nil || n != 0 {
		e.t.Fatalf("DropOrphanFiles after DropFile = %d, %v; want nothing left to remove", n, err)
	}

	// A waiting upload's file goes with it when it is cancelled: nothing
	// is left that no upload names.
	second := e.accept("store;ean\n")
	tx = e.beginUpload()
	res, err := tx.CancelUpload(e.ctx, service.CancelParams{ClientID: e.client.ID, ID: second.ID, At: e.tick(),
		From: storelink.UploadAccepted, To: storelink.UploadCancelled})
	must(e.t, err)
	must(e.t, tx.Commit(e.ctx))
	if !res.Cancelled {
		e.t.Fatalf("cancel of a waiting upload: %+v", res)
	}
	if n, err := e.d.Uploads.DropOrphanFiles(e.ctx, future, 10); err != nil || n != 0 {
		e.t.Fatalf("DropOrphanFiles after a cancel = %d, %v; want 0: the file went with its upload", n, err)
	}
	if b, err := e.d.Uploads.UploadBodies(e.ctx, []string{second.ID}); err != nil || len(b) != 0 {
		e.t.Fatalf("files of a cancelled upload = %v, %v; want none", b, err)
	}
}
