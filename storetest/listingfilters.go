package storetest

import (
	"fmt"
	"time"

	"storelink"
)

// Uploads are listed by status and by the time they were received, and
// the filters hold on every page that the cursor reaches.
func testUploadListingFilters(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	start := e.clock.Now()
	var ids []string
	for i := range 6 {
		ids = append(ids, e.accept(fmt.Sprintf("f%d.csv", i), 1).ID)
		e.clock.Advance(time.Minute)
	}
	// The first two are applied, the fourth is cancelled; the rest wait.
	for range 2 {
		c, err := s.Uploads.Claim(ctx, "w", time.Minute)
		must(t, err)
		_, err = s.Uploads.Apply(ctx, c, rows(row("S1", "4006381333931", 1, 100)))
		must(t, err)
	}
	_, err := s.Uploads.Cancel(ctx, id, ids[3], policy)
	must(t, err)

	list := func(f storelink.UploadFilter) []string {
		t.Helper()
		var out []string
		for pages := 0; ; pages++ {
			f.Limit = 1
			page, err := s.Uploads.Uploads(ctx, id, f)
			must(t, err)
			for _, u := range page {
				if f.Status != "" && u.Status != f.Status {
					t.Fatalf("listing %+v gave upload %s in status %s", f, u.ID, u.Status)
				}
				out = append(out, u.ID)
			}
			if len(page) == 0 || pages > 10 {
				return out
			}
			f.Before = page[len(page)-1].ID
		}
	}
	same := func(what string, got []string, want ...string) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
	same("applied", list(storelink.UploadFilter{Status: storelink.UploadApplied}), ids[1], ids[0])
	same("accepted", list(storelink.UploadFilter{Status: storelink.UploadAccepted}), ids[5], ids[4], ids[2])
	same("cancelled", list(storelink.UploadFilter{Status: storelink.UploadCancelled}), ids[3])
	same("rejected", list(storelink.UploadFilter{Status: storelink.UploadRejected}))
	// Received from minute 2 (inclusive) to minute 4 (exclusive).
	same("since and until", list(storelink.UploadFilter{Since: start.Add(2 * time.Minute), Until: start.Add(4 * time.Minute)}), ids[3], ids[2])
	same("since", list(storelink.UploadFilter{Since: start.Add(4 * time.Minute)}), ids[5], ids[4])
	same("until", list(storelink.UploadFilter{Until: start.Add(time.Minute)}), ids[0])
	same("accepted since", list(storelink.UploadFilter{Status: storelink.UploadAccepted, Since: start.Add(3 * time.Minute)}), ids[5], ids[4])
}

// Uploads that dropped rows (has_errors) are told from those that dropped
// none by their rows_rejected, whatever their status, and the filter holds
// on every page.
func testUploadListingHasErrors(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	apply := func(name string, rs ...storelink.StockRow) *storelink.Upload {
		t.Helper()
		e.accept(name, 1)
		c, err := s.Uploads.Claim(ctx, "w", time.Minute)
		must(t, err)
		u, err := s.Uploads.Apply(ctx, c, rows(rs...))
		must(t, err)
		return u
	}
	clean := apply("clean.csv", row("S1", "4006381333931", 1, 100))
	partial := apply("partial.csv", row("S1", "4006381333931", 2, 100), row("S9", "4006381333931", 1, 100), row("S9", "96385074", 1, 100))
	none := apply("none.csv", row("S9", "4006381333931", 1, 100))
	waiting := e.accept("waiting.csv", 1)
	for _, c := range []struct {
		u      *storelink.Upload
		status storelink.UploadStatus
		has    bool
	}{{clean, storelink.UploadApplied, false}, {partial, storelink.UploadApplied, true}, {none, storelink.UploadRejected, true}, {waiting, storelink.UploadAccepted, false}} {
		got, err := s.Uploads.Upload(ctx, id, c.u.ID)
		must(t, err)
		if got.Status != c.status || got.HasErrors() != c.has || c.u.HasErrors() != c.has {
			t.Fatalf("%s: status %s, rows_rejected %d, has errors %v; want %s, %v", got.FileName, got.Status, got.RowsRejected, got.HasErrors(), c.status, c.has)
		}
	}
	if partial.RowsRejected != 2 || partial.RowsApplied != 1 {
		t.Fatalf("partial upload: %d applied, %d rejected; want 1 and 2", partial.RowsApplied, partial.RowsRejected)
	}
	list := func(f storelink.UploadFilter) []string {
		t.Helper()
		var out []string
		for pages := 0; ; pages++ {
			f.Limit = 1
			page, err := s.Uploads.Uploads(ctx, id, f)
			must(t, err)
			for _, u := range page {
				if u.HasErrors() != *f.HasErrors {
					t.Fatalf("listing has_errors=%v gave upload %s with %d rows rejected", *f.HasErrors, u.FileName, u.RowsRejected)
				}
				out = append(out, u.FileName)
			}
			if len(page) == 0 || pages > 10 {
				return out
			}
			f.Before = page[len(page)-1].ID
		}
	}
	yes, no := true, false
	same := func(what string, got []string, want ...string) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
	same("has errors", list(storelink.UploadFilter{HasErrors: &yes}), "none.csv", "partial.csv")
	same("has no errors", list(storelink.UploadFilter{HasErrors: &no}), "waiting.csv", "clean.csv")
	same("applied with errors", list(storelink.UploadFilter{HasErrors: &yes, Status: storelink.UploadApplied}), "partial.csv")
	same("applied without errors", list(storelink.UploadFilter{HasErrors: &no, Status: storelink.UploadApplied}), "clean.csv")
}

// Stock is listed by article number, alone or with a store, and paged.
func testStockListingByArticle(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	e.accept("a.csv", 1)
	c, err := s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	var rs []storelink.StockRow
	for _, store := range []string{"S1", "S2"} {
		for i := range 4 {
			r := row(store, fmt.Sprintf("400638133393%d", i), i, 100)
			r.ArticleNumber = fmt.Sprintf("SKU-%d", i%2)
			rs = append(rs, r)
		}
	}
	_, err = s.Uploads.Apply(ctx, c, rows(rs...))
	must(t, err)
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		page, next, err := s.Uploads.Stock(ctx, id, storelink.StockFilter{ArticleNumber: "SKU-1", Limit: 1, After: after})
		must(t, err)
		for _, st := range page {
			if st.ArticleNumber != "SKU-1" {
				t.Fatalf("listing by SKU-1 gave %+v", st)
			}
			got = append(got, st.StoreID+"/"+st.EAN)
		}
		if next == "" || pages > 10 {
			break
		}
		after = next
	}
	want := "[S1/4006381333931 S1/4006381333933 S2/4006381333931 S2/4006381333933]"
	if fmt.Sprint(got) != want {
		t.Fatalf("stock of SKU-1: %v, want %s", got, want)
	}
	one, _, err := s.Uploads.Stock(ctx, id, storelink.StockFilter{StoreID: "S2", ArticleNumber: "SKU-0", Limit: 10})
	must(t, err)
	if len(one) != 2 || one[0].StoreID != "S2" || one[0].ArticleNumber != "SKU-0" {
		t.Fatalf("stock of SKU-0 at S2: %+v", one)
	}
	none, _, err := s.Uploads.Stock(ctx, id, storelink.StockFilter{ArticleNumber: "SKU-9", Limit: 10})
	must(t, err)
	if none == nil || len(none) != 0 {
		t.Fatalf("stock of an unknown article number: %+v, want an empty list", none)
	}
}
