package storetest

import (
	"errors"
	"fmt"
	"time"

	"storelink"
)

var policy = storelink.CapacityPolicy{Base: 1000, PerStore: 100, Window: time.Hour}

// accept stores an upload of n bytes for the env's client.
func (e *env) accept(name string, n int) *storelink.Upload {
	e.t.Helper()
	u, _, err := e.s.Uploads.Accept(e.ctx, storelink.NewUpload{ClientID: e.client.ID, FileName: name, Body: storelink.ChunksOf(make([]byte, n)), SHA256: "00"}, storelink.CapacityPolicy{Base: 1 << 30, Window: time.Hour})
	must(e.t, err)
	return u
}

// rows returns a FeedApply that puts the given rows and reports them valid;
// as the feed checker does, it marks a row whose pair an earlier row had.
func rows(rs ...storelink.StockRow) storelink.FeedApply {
	return func(stores map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
		rep := storelink.FeedReport{RowsTotal: len(rs)}
		seen := map[string]bool{}
		for _, r := range rs {
			if !stores[r.StoreID] {
				rep.RowsRejected++
				continue
			}
			r.Repeats = seen[r.StoreID+"\x00"+r.EAN]
			if err := put(r); err != nil {
				return rep, err
			}
			rep.RowsValid++
			seen[r.StoreID+"\x00"+r.EAN] = true
		}
		rep.RowsApplied = len(seen)
		return rep, nil
	}
}

func row(store, ean string, qty int, price storelink.Money) storelink.StockRow {
	return storelink.StockRow{StoreID: store, EAN: ean, ArticleNumber: "A-" + ean, Quantity: qty, Price: price}
}

func testClaimOrder(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	p, err := s.Partners.CreatePartner(ctx, "Other")
	must(t, err)
	other, err := s.Partners.CreateClient(ctx, p.ID, "FR", "EUR")
	must(t, err)
	a1 := e.accept("a1.csv", 10)
	a2 := e.accept("a2.csv", 10)
	b1, _, err := s.Uploads.Accept(ctx, storelink.NewUpload{ClientID: other.ID, FileName: "b1.csv", Body: storelink.ChunksOf([]byte("x"))}, policy)
	must(t, err)
	depth, err := s.Uploads.QueueDepth(ctx)
	must(t, err)
	if depth != 3 {
		t.Fatalf("queue depth = %d, want 3", depth)
	}

	c1, err := s.Uploads.Claim(ctx, "w1", time.Minute)
	must(t, err)
	if c1 == nil || c1.ID != a1.ID || c1.Attempts != 1 || c1.Body.Len() != 10 {
		t.Fatalf("first claim = %+v, want a1 with its body", c1)
	}
	// a2 waits for a1; the other client's upload does not.
	c2, err := s.Uploads.Claim(ctx, "w2", time.Minute)
	must(t, err)
	if c2 == nil || c2.ID != b1.ID {
		t.Fatalf("second claim = %v, want b1", c2)
	}
	c3, err := s.Uploads.Claim(ctx, "w3", time.Minute)
	must(t, err)
	if c3 != nil {
		t.Fatalf("third claim = %s, want none while a1 is processing", c3.ID)
	}
	_, err = s.Uploads.Apply(ctx, c1, rows(row("S1", "4006381333931", 1, 100)))
	must(t, err)
	c3, err = s.Uploads.Claim(ctx, "w3", time.Minute)
	must(t, err)
	if c3 == nil || c3.ID != a2.ID {
		t.Fatalf("claim after a1 = %v, want a2", c3)
	}
}

func testLeaseExpiry(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	u := e.accept("a.csv", 3)
	c1, err := s.Uploads.Claim(ctx, "dead", time.Minute)
	must(t, err)
	e.clock.Advance(59 * time.Second)
	if c, _ := s.Uploads.Claim(ctx, "w2", time.Minute); c != nil {
		t.Fatal("claimed while the lease still holds")
	}
	e.clock.Advance(2 * time.Second)
	c2, err := s.Uploads.Claim(ctx, "w2", time.Minute)
	must(t, err)
	if c2 == nil || c2.ID != u.ID || c2.Attempts != 2 {
		t.Fatalf("claim after the lease = %+v, want the same upload, attempt 2", c2)
	}
	// The first holder lost its lease: its apply must not commit.
	_, err = s.Uploads.Apply(ctx, c1, rows(row("S1", "4006381333931", 1, 100)))
	wantCode(t, err, storelink.ECONFLICT)
	got, err := s.Uploads.Apply(ctx, c2, rows(row("S1", "4006381333931", 2, 100)))
	must(t, err)
	if got.Status != storelink.UploadApplied || got.RowsApplied != 1 {
		t.Fatalf("applied = %+v", got)
	}
	st, _, err := s.Uploads.Stock(ctx, e.client.ID, storelink.StockFilter{Limit: 10})
	must(t, err)
	if len(st) != 1 || st[0].Quantity != 2 {
		t.Fatalf("stock = %+v, want quantity 2 from the live holder", st)
	}
	_, err = s.Uploads.Apply(ctx, c2, rows())
	wantCode(t, err, storelink.ECONFLICT) // an upload is applied once
}

func testApply(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	u := e.accept("a.csv", 3)
	c, err := s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	retail := storelink.Money(2999)
	full := storelink.StockRow{StoreID: "S1", EAN: "4006381333931", ArticleNumber: "SKU-123", Quantity: 5, Price: 1999,
		RetailPrice: &retail, ArticleLocation: "Dept 3", ProductName: "Pen", ProductNumber: "P1", ArticleColor: "blue", ArticleSize: "M"}
	report := func(stores map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
		if !stores["S1"] || !stores["S2"] || stores["S9"] {
			return storelink.FeedReport{}, fmt.Errorf("stores = %v, want S1 and S2", stores)
		}
		for _, r := range []storelink.StockRow{row("S1", "4006381333931", 1, 100), full, row("S2", "96385074", 0, 5)} {
			if err := put(r); err != nil {
				return storelink.FeedReport{}, err
			}
		}
		return storelink.FeedReport{RowsTotal: 4, RowsValid: 3, RowsApplied: 2, RowsRejected: 1,
			Errors: []storelink.Problem{{Type: storelink.ProblemInvalidValue, Message: "bad", Count: 1,
				LineNumbers: []storelink.LineRef{{LineNumber: 4, StoreID: "S1", EAN: "x", Value: "<x>"}}}},
			Warnings: []storelink.Problem{{Type: storelink.ProblemDuplicated, Message: "dup", Count: 1,
				LineNumbers: []storelink.LineRef{{LineNumber: 2, StoreID: "S1", EAN: "4006381333931"}}}},
		}, nil
	}
	got, err := s.Uploads.Apply(ctx, c, report)
	must(t, err)
	if got.Status != storelink.UploadApplied || got.RowsTotal != 4 || got.RowsApplied != 2 || got.RowsRejected != 1 ||
		got.FinishedAt == nil || got.StartedAt == nil {
		t.Fatalf("upload after apply = %+v", got)
	}
	again, err := s.Uploads.Upload(ctx, id, u.ID)
	must(t, err)
	if len(again.Errors) != 1 || again.Errors[0].LineNumbers[0].LineNumber != 4 || again.Errors[0].LineNumbers[0].Value != "<x>" ||
		!again.HasErrors() ||
		len(again.Warnings) != 1 || again.Warnings[0].Type != storelink.ProblemDuplicated {
		t.Fatalf("stored report = %+v / %+v", again.Errors, again.Warnings)
	}
	st, _, err := s.Uploads.Stock(ctx, id, storelink.StockFilter{Limit: 10})
	must(t, err)
	if len(st) != 2 {
		t.Fatalf("stock = %+v", st)
	}
	g := st[0]
	if g.StockRow.Line = 0; g.StoreID != "S1" || g.Quantity != 5 || g.Price != 1999 || *g.RetailPrice != 2999 ||
		g.ArticleLocation != "Dept 3" || g.ProductName != "Pen" || g.ArticleSize != "M" || g.UploadID != u.ID || g.Available != 5 {
		t.Fatalf("stock row = %+v, want the later row", g)
	}
	if st[1].StoreID != "S2" || st[1].Quantity != 0 || st[1].RetailPrice != nil {
		t.Fatalf("second stock row = %+v", st[1])
	}
	if d, _ := s.Uploads.QueueDepth(ctx); d != 0 {
		t.Fatalf("queue depth = %d after the apply", d)
	}
	// A later feed sets the row anew: quantity absolute, optional fields as given.
	e.accept("b.csv", 3)
	c, err = s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	_, err = s.Uploads.Apply(ctx, c, rows(row("S1", "4006381333931", 9, 1500)))
	must(t, err)
	st, _, err = s.Uploads.Stock(ctx, id, storelink.StockFilter{StoreID: "S1", Limit: 10})
	must(t, err)
	if len(st) != 1 || st[0].Quantity != 9 || st[0].Price != 1500 || st[0].RetailPrice != nil || st[0].ArticleLocation != "" {
		t.Fatalf("stock after the second feed = %+v", st)
	}
}

func testApplyFileError(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	u := e.accept("a.csv", 3)
	c, err := s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	got, err := s.Uploads.Apply(ctx, c, func(_ map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
		must(t, put(row("S1", "4006381333931", 1, 100))) // put before the problem was found
		return storelink.FeedReport{RowsTotal: 1, RowsValid: 1, RowsApplied: 1, FileError: true,
			Errors: []storelink.Problem{{Type: storelink.ProblemEncoding, Message: "bad byte", Count: 1,
				LineNumbers: []storelink.LineRef{{LineNumber: 2}}}}}, nil
	})
	must(t, err)
	if got.ID != u.ID || got.Status != storelink.UploadRejected || got.RowsApplied != 0 || len(got.Errors) != 1 {
		t.Fatalf("upload = %+v, want rejected with the problem", got)
	}
	st, _, err := s.Uploads.Stock(ctx, e.client.ID, storelink.StockFilter{Limit: 10})
	must(t, err)
	if len(st) != 0 {
		t.Fatalf("a rejected file wrote %d stock rows", len(st))
	}
	// A file in which no row is valid is rejected too.
	e.accept("b.csv", 3)
	c, err = s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	got, err = s.Uploads.Apply(ctx, c, rows(row("S9", "4006381333931", 1, 100)))
	must(t, err)
	if got.Status != storelink.UploadRejected || got.RowsRejected != 1 {
		t.Fatalf("upload without a valid row = %+v, want rejected", got)
	}
}

func testApplyCallbackError(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	u := e.accept("a.csv", 3)
	c, err := s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	boom := errors.New("reader failed")
	_, err = s.Uploads.Apply(ctx, c, func(_ map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
		for i := range 500 { // more than one batch
			must(t, put(row("S1", fmt.Sprintf("%013d", i), 1, 100)))
		}
		return storelink.FeedReport{}, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Apply = %v, want the callback's error", err)
	}
	st, _, err := s.Uploads.Stock(ctx, e.client.ID, storelink.StockFilter{Limit: 10})
	must(t, err)
	got, err := s.Uploads.Upload(ctx, e.client.ID, u.ID)
	must(t, err)
	if len(st) != 0 || got.Status != storelink.UploadProcessing {
		t.Fatalf("after a failed apply: %d stock rows, status %s; want none, still processing", len(st), got.Status)
	}
}

func testFail(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	u := e.accept("a.csv", 3)
	next := e.accept("b.csv", 3)
	c, err := s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	must(t, s.Uploads.Fail(ctx, c, storelink.Problem{Type: "Processing failed", Message: "gave up", LineNumbers: []storelink.LineRef{}}))
	got, err := s.Uploads.Upload(ctx, e.client.ID, u.ID)
	must(t, err)
	if got.Status != storelink.UploadRejected || len(got.Errors) != 1 || got.Errors[0].Type != "Processing failed" {
		t.Fatalf("failed upload = %+v", got)
	}
	c, err = s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	if c == nil || c.ID != next.ID {
		t.Fatalf("claim after a failed upload = %v, want the next one", c)
	}
}

// testRelease: a claim given back after a fault waits out its back-off,
// still processing and ahead of the client's later uploads, and does not
// count as an attempt, however often it is released; it holds nothing
// afterwards, and releasing it again leaves another processor's lease alone.
func testRelease(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	u := e.accept("a.csv", 3)
	e.accept("b.csv", 3)
	c1, err := s.Uploads.Claim(ctx, "w1", time.Minute)
	must(t, err)
	if c1 == nil || c1.ID != u.ID || c1.Attempts != 1 {
		t.Fatalf("claim = %+v, want a.csv, attempt 1", c1)
	}
	must(t, s.Uploads.Release(ctx, c1, 30*time.Second))
	must(t, s.Uploads.Release(ctx, c1, 30*time.Second)) // sent again: changes nothing
	got, err := s.Uploads.Upload(ctx, e.client.ID, u.ID)
	must(t, err)
	if got.Status != storelink.UploadProcessing {
		t.Fatalf("released upload is %s, want processing", got.Status)
	}
	e.clock.Advance(29 * time.Second)
	if c, err := s.Uploads.Claim(ctx, "w2", time.Minute); err != nil || c != nil {
		t.Fatalf("claim during the back-off = %v, %v; want none (b.csv waits behind a.csv)", c, err)
	}
	e.clock.Advance(2 * time.Second)
	c2, err := s.Uploads.Claim(ctx, "w2", time.Minute)
	must(t, err)
	if c2 == nil || c2.ID != u.ID || c2.Attempts != 1 {
		t.Fatalf("claim after the back-off = %+v, want a.csv, still attempt 1", c2)
	}
	_, err = s.Uploads.Apply(ctx, c1, rows(row("S1", "4006381333931", 1, 100)))
	wantCode(t, err, storelink.ECONFLICT)
	must(t, s.Uploads.Release(ctx, c1, 0))
	if c, err := s.Uploads.Claim(ctx, "w3", time.Minute); err != nil || c != nil {
		t.Fatalf("claim while w2 holds the lease = %v, %v; want none", c, err)
	}
	e.clock.Advance(61 * time.Second)
	c3, err := s.Uploads.Claim(ctx, "w3", time.Minute)
	must(t, err)
	if c3 == nil || c3.ID != u.ID || c3.Attempts != 2 {
		t.Fatalf("claim after w2's lease ran out = %+v, want a.csv, attempt 2", c3)
	}
	got, err = s.Uploads.Apply(ctx, c3, rows(row("S1", "4006381333931", 2, 100)))
	must(t, err)
	if got.Status != storelink.UploadApplied {
		t.Fatalf("apply after a release = %+v, want applied", got)
	}

	// A release is of one claim: an older claim's leaves a later claim of
	// the same owner alone.
	c4, err := s.Uploads.Claim(ctx, "w4", time.Minute) // b.csv
	must(t, err)
	must(t, s.Uploads.Release(ctx, c4, 0))
	e.clock.Advance(time.Second)
	c5, err := s.Uploads.Claim(ctx, "w4", time.Minute)
	must(t, err)
	if c5 == nil || c5.ID != c4.ID || c5.Attempts != 1 {
		t.Fatalf("claim after the release = %+v, want b.csv, attempt 1", c5)
	}
	must(t, s.Uploads.Release(ctx, c4, 0))
	got, err = s.Uploads.Apply(ctx, c5, rows(row("S1", "4006381333931", 3, 100)))
	must(t, err)
	if got.Status != storelink.UploadApplied {
		t.Fatalf("apply of a later claim after an older one was released again = %+v, want applied", got)
	}
}

func testUploadListing(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	var ids []string
	for i := range 5 {
		ids = append(ids, e.accept(fmt.Sprintf("f%d.csv", i), 1).ID)
		e.clock.Advance(time.Millisecond)
	}
	page, err := s.Uploads.Uploads(ctx, id, storelink.UploadFilter{Limit: 2})
	must(t, err)
	if len(page) != 2 || page[0].ID != ids[4] || page[1].ID != ids[3] {
		t.Fatalf("first page = %v, want the newest two", page)
	}
	page, err = s.Uploads.Uploads(ctx, id, storelink.UploadFilter{Limit: 10, Before: ids[3]})
	must(t, err)
	if len(page) != 3 || page[0].ID != ids[2] || page[2].ID != ids[0] {
		t.Fatalf("second page = %v", page)
	}
	if page[0].Status != storelink.UploadAccepted || page[0].FileName != "f2.csv" || page[0].Errors == nil {
		t.Fatalf("listed upload = %+v", page[0])
	}
	// The last page ends the list; a cursor that is no upload of the
	// client is refused rather than taken for the end.
	page, err = s.Uploads.Uploads(ctx, id, storelink.UploadFilter{Limit: 10, Before: ids[0]})
	must(t, err)
	if len(page) != 0 {
		t.Fatalf("page before the oldest = %v, want none", page)
	}
	for _, before := range []string{"garbage", "a\x00b", "\xff"} {
		_, err = s.Uploads.Uploads(ctx, id, storelink.UploadFilter{Limit: 10, Before: before})
		wantCode(t, err, storelink.EINVALID)
	}
	_, err = s.Uploads.Upload(ctx, id, "nope")
	wantCode(t, err, storelink.ENOTFOUND)
	// Another client cannot read this client's upload by id.
	p, _ := s.Partners.CreatePartner(ctx, "Other")
	other, err := s.Partners.CreateClient(ctx, p.ID, "FR", "EUR")
	must(t, err)
	_, err = s.Uploads.Upload(ctx, other.ID, ids[0])
	wantCode(t, err, storelink.ENOTFOUND)
	_, err = s.Uploads.Uploads(ctx, other.ID, storelink.UploadFilter{Limit: 10, Before: ids[0]})
	wantCode(t, err, storelink.EINVALID)
}
