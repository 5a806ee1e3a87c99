package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"storelink"
)

// TestFillStockForTest: the rows the grown-tables benchmark fills in
// directly are rows as an apply writes them: listed with their values, in
// the stock of their client only, and an upload of the same rows finds
// every one of them unchanged.
func TestFillStockForTest(t *testing.T) {
	t.Parallel()
	f := openDB(t, newSchema(t), time.Now)
	svc := services(f)
	ctx := context.Background()
	var clients []string
	for _, name := range []string{"Filled", "Other"} {
		p, err := svc.CreatePartner(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		c, err := svc.CreateClient(ctx, p.ID, "DE", "EUR")
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c.ID)
	}
	rows := fillRows(300)
	rows[5].RetailPrice = nil
	n, err := f.FillStockForTest(ctx, clients[0], "filled", slices.Values(rows))
	if err != nil || n != len(rows) {
		t.Fatalf("FillStockForTest = %d, %v; want %d rows", n, err, len(rows))
	}
	got, _, err := svc.Stock(ctx, clients[0], storelink.StockFilter{Limit: 1000})
	if err != nil || len(got) != len(rows) {
		t.Fatalf("stock of the filled client: %d rows, %v; want %d", len(got), err, len(rows))
	}
	for i, s := range got {
		r := rows[i]
		if s.StoreID != r.StoreID || s.EAN != r.EAN || s.Quantity != r.Quantity || s.Price != r.Price ||
			(s.RetailPrice == nil) != (r.RetailPrice == nil) || (r.RetailPrice != nil && *s.RetailPrice != *r.RetailPrice) ||
			s.ArticleLocation != r.ArticleLocation || s.UploadID != "filled" {
			t.Fatalf("row %d = %+v, want %+v", i, s, r)
		}
	}
	if other, _, err := svc.Stock(ctx, clients[1], storelink.StockFilter{Limit: 10}); err != nil || len(other) != 0 {
		t.Fatalf("stock of the other client = %v, %v; want none", other, err)
	}

	if _, _, err := svc.Accept(ctx, storelink.NewUpload{ClientID: clients[0], FileName: "f.csv", Body: []byte("x")},
		unlimited); err != nil {
		t.Fatal(err)
	}
	cl, err := svc.Claim(ctx, "w", time.Hour)
	if err != nil || cl == nil {
		t.Fatal(cl, err)
	}
	u, err := svc.Apply(ctx, cl, func(_ map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
		for _, r := range rows {
			if err := put(r); err != nil {
				return storelink.FeedReport{}, err
			}
		}
		return storelink.FeedReport{RowsTotal: len(rows), RowsValid: len(rows), RowsApplied: len(rows)}, nil
	})
	if err != nil || u.Status != storelink.UploadApplied || u.RowsUnchanged != len(rows) {
		t.Fatalf("apply of the filled rows = %+v, %v; want applied, all %d rows unchanged", u, err, len(rows))
	}
}

// fillRows are n rows over three stores, by store and EAN.
func fillRows(n int) []storelink.StockRow {
	var rows []storelink.StockRow
	for i := range n {
		retail := storelink.Money(1500 + i)
		rows = append(rows, storelink.StockRow{StoreID: fmt.Sprintf("S%d", i*3/n), EAN: fmt.Sprintf("%013d", i),
			ArticleNumber: fmt.Sprintf("ART-%d", i), Quantity: i % 7, Price: storelink.Money(1000 + i), RetailPrice: &retail,
			ArticleLocation: fmt.Sprintf("Aisle %d", i%5)})
	}
	return rows
}
