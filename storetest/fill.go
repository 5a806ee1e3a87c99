package storetest

import (
	"fmt"
	"slices"

	"storelink"
)

// testFillStock: the rows the grown-tables benchmark fills in directly
// (Fixture.FillStock) are rows as an apply writes them: listed with their
// values, in the stock of their client only, and a feed of the same rows
// finds every one of them unchanged (their digests are the apply's).
func testFillStock(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	p, err := s.Partners.CreatePartner(ctx, "Other")
	must(t, err)
	other, err := s.Partners.CreateClient(ctx, p.ID, "DE", "EUR")
	must(t, err)
	var rs []storelink.StockRow
	const n = 300
	for i := range n {
		retail := storelink.Money(1500 + i)
		r := storelink.StockRow{StoreID: fmt.Sprintf("S%d", 1+i*2/n), EAN: fmt.Sprintf("%013d", i),
			ArticleNumber: fmt.Sprintf("ART-%d", i), Quantity: i % 7, Price: storelink.Money(1000 + i), RetailPrice: &retail,
			ArticleLocation: fmt.Sprintf("Aisle %d", i%5)}
		if i == 5 {
			r.RetailPrice = nil
		}
		rs = append(rs, r)
	}
	filled, err := e.fixture.FillStock(ctx, e.client.ID, "filled", slices.Values(rs))
	if err != nil || filled != n {
		t.Fatalf("FillStock = %d, %v; want %d rows", filled, err, n)
	}
	got, _, err := s.Uploads.Stock(ctx, e.client.ID, storelink.StockFilter{Limit: 1000})
	if err != nil || len(got) != n {
		t.Fatalf("stock of the filled client: %d rows, %v; want %d", len(got), err, n)
	}
	for i, g := range got {
		r := rs[i]
		if g.StoreID != r.StoreID || g.EAN != r.EAN || g.Quantity != r.Quantity || g.Price != r.Price ||
			(g.RetailPrice == nil) != (r.RetailPrice == nil) || (r.RetailPrice != nil && *g.RetailPrice != *r.RetailPrice) ||
			g.ArticleLocation != r.ArticleLocation || g.UploadID != "filled" {
			t.Fatalf("row %d = %+v, want %+v", i, g, r)
		}
	}
	if o, _, err := s.Uploads.Stock(ctx, other.ID, storelink.StockFilter{Limit: 10}); err != nil || len(o) != 0 {
		t.Fatalf("stock of the other client = %v, %v; want none", o, err)
	}
	if u := e.feedUpload(rs...); u.RowsUnchanged != n {
		t.Fatalf("a feed of the filled rows = %+v; want all %d rows unchanged", u, n)
	}
}
