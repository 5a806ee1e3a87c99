package storetest

import (
	"fmt"
	"time"

	"storelink"
)

func testStockListing(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	e.accept("a.csv", 1)
	c, err := s.Claim(ctx, "w", time.Minute)
	must(t, err)
	var rs []storelink.StockRow
	for _, store := range []string{"S2", "S1"} {
		for i := range 5 {
			rs = append(rs, row(store, fmt.Sprintf("400638133393%d", i), i, 100))
		}
	}
	_, err = s.Apply(ctx, c, rows(rs...))
	must(t, err)
	var all []storelink.Stock
	after := ""
	for pages := 0; ; pages++ {
		page, next, err := s.Stock(ctx, id, storelink.StockFilter{Limit: 3, After: after})
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
	one, _, err := s.Stock(ctx, id, storelink.StockFilter{StoreID: "S2", EAN: "4006381333932", Limit: 10})
	must(t, err)
	if len(one) != 1 || one[0].Quantity != 2 {
		t.Fatalf("filtered stock = %+v", one)
	}
	_, _, err = s.Stock(ctx, id, storelink.StockFilter{Limit: 3, After: "!!"})
	wantCode(t, err, storelink.EINVALID)
	_, _, err = s.Stock(ctx, "nope", storelink.StockFilter{Limit: 3})
	wantCode(t, err, storelink.ENOTFOUND)
}

func testDeleteStoreStock(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	e.accept("a.csv", 1)
	c, err := s.Claim(ctx, "w", time.Minute)
	must(t, err)
	_, err = s.Apply(ctx, c, rows(row("S1", "4006381333931", 1, 100), row("S2", "4006381333931", 2, 100)))
	must(t, err)
	must(t, s.DeleteStore(ctx, id, "S1"))
	st, _, err := s.Stock(ctx, id, storelink.StockFilter{Limit: 10})
	must(t, err)
	if len(st) != 1 || st[0].StoreID != "S2" {
		t.Fatalf("stock after deleting S1 = %+v", st)
	}
}
