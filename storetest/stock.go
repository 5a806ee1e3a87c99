package storetest

import (
	"fmt"
	"time"

	"storelink"
)

func testStockListing(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	e.accept("a.csv", 1)
	c, err := s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	var rs []storelink.StockRow
	for _, store := range []string{"S2", "S1"} {
		for i := range 5 {
			rs = append(rs, row(store, fmt.Sprintf("400638133393%d", i), i, 100))
		}
	}
	_, err = s.Uploads.Apply(ctx, c, rows(rs...))
	must(t, err)
	var all []storelink.Stock
	after := ""
	for pages := 0; ; pages++ {
		page, next, err := s.Uploads.Stock(ctx, id, storelink.StockFilter{Limit: 3, After: after})
		must(t, err)
		all = append(all, page...)
		if next == "" {
			break
		}
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		after = next
	}
	if len(all) != 10 || all[0].StoreID != "S1" || all[4].EAN != "4006381333934" || all[5].StoreID != "S2" {
		t.Fatalf("paged stock in wrong order or incomplete: %d rows", len(all))
	}
	one, _, err := s.Uploads.Stock(ctx, id, storelink.StockFilter{StoreID: "S2", EAN: "4006381333932", Limit: 10})
	must(t, err)
	if len(one) != 1 || one[0].Quantity != 2 {
		t.Fatalf("filtered stock = %+v", one)
	}
	_, _, err = s.Uploads.Stock(ctx, id, storelink.StockFilter{Limit: 3, After: "!!"})
	wantCode(t, err, storelink.EINVALID)
	_, _, err = s.Uploads.Stock(ctx, "nope", storelink.StockFilter{Limit: 3})
	wantCode(t, err, storelink.ENOTFOUND)
}

func testDeleteStoreStock(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	e.accept("a.csv", 1)
	c, err := s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	_, err = s.Uploads.Apply(ctx, c, rows(row("S1", "4006381333931", 1, 100), row("S2", "4006381333931", 2, 100)))
	must(t, err)
	must(t, s.Partners.DeleteStore(ctx, id, "S1"))
	st, _, err := s.Uploads.Stock(ctx, id, storelink.StockFilter{Limit: 10})
	must(t, err)
	if len(st) != 1 || st[0].StoreID != "S2" {
		t.Fatalf("stock after deleting S1 = %+v", st)
	}
}

// testStockListingByEAN: the stock of one EAN in every store, paged one
// row at a time, lists each store's row once, in store order, and none of
// another EAN or of a deleted store; a cursor of the unfiltered listing
// starts the EAN's listing where that listing's order puts it.
func testStockListingByEAN(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	for _, st := range []string{"S3", "S4"} {
		_, _, err := s.Partners.PutStore(ctx, id, st, "Store "+st)
		must(t, err)
	}
	const before, x, after = "4006381333910", "4006381333931", "4006381333999"
	e.feedUpload(row("S1", x, 1, 100), row("S1", after, 9, 100), row("S2", before, 9, 100), row("S2", x, 2, 100),
		row("S3", after, 9, 100), row("S4", x, 4, 100))
	list := func(cursor string) (stores []string) {
		for pages := 0; ; pages++ {
			page, next, err := s.Uploads.Stock(ctx, id, storelink.StockFilter{EAN: x, Limit: 1, After: cursor})
			must(t, err)
			for _, r := range page {
				if r.EAN != x {
					t.Fatalf("listing of EAN %s gave %+v", x, r)
				}
				stores = append(stores, r.StoreID)
			}
			if next == "" || pages > 10 {
				return stores
			}
			cursor = next
		}
	}
	if got := list(""); fmt.Sprint(got) != "[S1 S2 S4]" {
		t.Fatalf("EAN %s by store, a row a page: %v; want [S1 S2 S4]", x, got)
	}
	// The unfiltered listing's cursors: after (S2, before) comes S2's x;
	// after (S1, after) comes S2's.
	cursor := func(store, ean string) string {
		_, c := storelink.StockPage([]storelink.Stock{{StockRow: storelink.StockRow{StoreID: store, EAN: ean}}, {}}, 1)
		return c
	}
	if got := list(cursor("S2", before)); fmt.Sprint(got) != "[S2 S4]" {
		t.Fatalf("EAN %s after (S2, %s): %v; want [S2 S4]", x, before, got)
	}
	if got := list(cursor("S1", after)); fmt.Sprint(got) != "[S2 S4]" {
		t.Fatalf("EAN %s after (S1, %s): %v; want [S2 S4]", x, after, got)
	}
	if got := list(cursor("S2", x)); fmt.Sprint(got) != "[S4]" {
		t.Fatalf("EAN %s after (S2, %s): %v; want [S4]", x, x, got)
	}
	must(t, s.Partners.DeleteStore(ctx, id, "S2"))
	if got := list(""); fmt.Sprint(got) != "[S1 S4]" {
		t.Fatalf("EAN %s once S2 is deleted: %v; want [S1 S4]", x, got)
	}
}
