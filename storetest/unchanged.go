package storetest

import (
	"time"

	"storelink"
)

// feedUpload applies stock rows as feed does and returns the upload.
func (e *env) feedUpload(rs ...storelink.StockRow) *storelink.Upload {
	e.t.Helper()
	e.accept("feed.csv", 1)
	c, err := e.s.Uploads.Claim(e.ctx, "w", time.Minute)
	must(e.t, err)
	if c == nil {
		e.t.Fatal("no upload to claim for the feed")
	}
	u, err := e.s.Uploads.Apply(e.ctx, c, rows(rs...))
	must(e.t, err)
	if u.Status != storelink.UploadApplied {
		e.t.Fatalf("feed upload = %+v, want applied", u)
	}
	return u
}

// testApplyUnchanged: a pair whose stock row already holds what the file
// sets is left as it is (its upload_id and updated_at are the earlier
// upload's) and counted in rows_unchanged, which is part of rows_applied;
// any other difference, in any field, is written. A pair the file gives
// twice is written. A fulfilled unit is released by a file that sets its
// pair unchanged, and a rejected file counts nothing.
func testApplyUnchanged(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	retail := storelink.Money(150)
	full := storelink.StockRow{StoreID: "S1", EAN: eanA, ArticleNumber: "SKU-1", Quantity: 3, Price: 100, RetailPrice: &retail,
		ArticleLocation: "Aisle 1", ProductName: "Pen", ProductNumber: "P1", ArticleColor: "blue", ArticleSize: "M"}
	first := e.feedUpload(full, row("S1", eanB, 5, 100), row("S2", eanA, 1, 100), row("S2", eanC, 2, 100), row("S1", eanE, 2, 100))
	if first.RowsApplied != 5 || first.RowsUnchanged != 0 {
		t.Fatalf("first upload: %d applied, %d unchanged; want 5, 0", first.RowsApplied, first.RowsUnchanged)
	}
	at := e.stockOf("S1", eanA).UpdatedAt

	// Each of the fields in turn differs in one row of the next file.
	e.clock.Advance(time.Hour)
	var changed []storelink.StockRow
	for _, change := range []func(r *storelink.StockRow){
		func(r *storelink.StockRow) { r.ArticleNumber = "SKU-2" },
		func(r *storelink.StockRow) { r.Quantity = 4 },
		func(r *storelink.StockRow) { r.Price = 101 },
		func(r *storelink.StockRow) { r.RetailPrice = nil },
		func(r *storelink.StockRow) { r.ArticleLocation = "" },
		func(r *storelink.StockRow) { r.ProductName = "Pencil" },
		func(r *storelink.StockRow) { r.ProductNumber = "P2" },
		func(r *storelink.StockRow) { r.ArticleColor = "Blue" },
		func(r *storelink.StockRow) { r.ArticleSize = "M " },
	} {
		r := full
		r.EAN = eanD
		changed = append(changed, r)
		r2 := r
		change(&r2)
		changed = append(changed, r2)
	}
	for i := 0; i < len(changed); i += 2 {
		// eanD at S2 holds the full row, then the same with one field changed.
		base, next := changed[i], changed[i+1]
		base.StoreID, next.StoreID = "S2", "S2"
		e.feedUpload(base)
		u := e.feedUpload(next, row("S1", eanB, 5, 100))
		if u.RowsApplied != 2 || u.RowsUnchanged != 1 {
			t.Fatalf("a file changing one field of %+v to %+v: %d applied, %d unchanged; want 2, 1", base, next, u.RowsApplied, u.RowsUnchanged)
		}
		if got := e.stockOf("S2", eanD); got.UploadID != u.ID {
			t.Fatalf("the changed row %+v kept upload %s, want %s", next, got.UploadID, u.ID)
		}
	}
	if got := e.stockOf("S1", eanA); got.UploadID != first.ID || !got.UpdatedAt.Equal(at) {
		t.Fatalf("a row no later file set: upload %s at %v, want %s at %v", got.UploadID, got.UpdatedAt, first.ID, at)
	}

	// The full row again, unchanged, and the row of S1 eanB set twice with
	// the same values: the first keeps its upload, the second is written.
	e.clock.Advance(time.Hour)
	u := e.feedUpload(full, row("S1", eanB, 5, 100), row("S1", eanB, 5, 100))
	if u.RowsApplied != 2 || u.RowsUnchanged != 1 {
		t.Fatalf("an unchanged row and a repeated one: %d applied, %d unchanged; want 2, 1", u.RowsApplied, u.RowsUnchanged)
	}
	if got := e.stockOf("S1", eanA); got.UploadID != first.ID || !got.UpdatedAt.Equal(at) {
		t.Fatalf("the unchanged row: upload %s at %v, want %s at %v", got.UploadID, got.UpdatedAt, first.ID, at)
	}
	if got := e.stockOf("S1", eanB); got.UploadID != u.ID || got.UpdatedAt.Equal(at) {
		t.Fatalf("the repeated row: upload %s at %v, want %s, later", got.UploadID, got.UpdatedAt, u.ID)
	}

	// A sold unit is released by a file that sets its pair as it was.
	o := e.create(e.newOrder("U-1", eanE))
	if o.StoreID != "S1" {
		t.Fatalf("order routed to %s, want S1, the only store with %s", o.StoreID, eanE)
	}
	_, err := s.Orders.FulfilOrder(ctx, o.ID, storelink.FulfilRequest{})
	must(t, err)
	e.wantStock("S1", eanE, 2, 1, 1)
	u = e.feedUpload(row("S1", eanE, 2, 100))
	if u.RowsUnchanged != 1 {
		t.Fatalf("the sold pair's unchanged row: %d unchanged, want 1", u.RowsUnchanged)
	}
	e.wantStock("S1", eanE, 2, 0, 2)

	// A file rejected for a file-level problem counts nothing unchanged.
	e.accept("bad.csv", 1)
	c, err := s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	r, err := s.Uploads.Apply(ctx, c, func(_ map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
		must(t, put(full))
		return storelink.FeedReport{RowsTotal: 2, RowsValid: 1, RowsApplied: 1, FileError: true,
			Errors: []storelink.Problem{{Type: storelink.ProblemFile, Message: "bad", Count: 1, LineNumbers: []storelink.LineRef{{LineNumber: 3}}}}}, nil
	})
	must(t, err)
	if r.Status != storelink.UploadRejected || r.RowsApplied != 0 || r.RowsUnchanged != 0 {
		t.Fatalf("rejected upload = %s, %d applied, %d unchanged; want rejected, 0, 0", r.Status, r.RowsApplied, r.RowsUnchanged)
	}
	listed, err := s.Uploads.Uploads(ctx, id, storelink.UploadFilter{Limit: 3})
	must(t, err)
	if len(listed) < 2 || listed[1].ID != u.ID || listed[1].RowsUnchanged != 1 {
		t.Fatalf("upload listing = %+v, want the sold pair's upload second with 1 unchanged", listed)
	}
}
