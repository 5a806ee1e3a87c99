package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
)

// TestApplyPaths: a file of a few rows is upserted straight from arrays, a
// file of more rows than one COPY batch (10,000) through the temporary
// table; both keep the later of two rows for one store and EAN, also when
// the two are in different batches, write NULL for a missing retail price,
// and take every row once; a pair the file repeats is written even where its
// last row holds what the stock does. A file rejected after some of its batches were
// copied leaves the stock as it was.
func TestApplyPaths(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	db := openAt(t, dbURL, time.Now)
	ctx := context.Background()
	p, err := db.Partners.CreatePartner(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.Partners.CreateClient(ctx, p.ID, "DE", "EUR")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	for _, tc := range []struct {
		name        string
		keys, again int // rows with keys 0…keys-1, then keys 0…again-1 once more
	}{
		{"small file", 50, 10},
		{"file of three batches", 24_000, 1_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := make([]storelink.StockRow, 0, tc.keys+tc.again)
			retail := storelink.Money(2999)
			for k := range tc.keys {
				r := storelink.StockRow{StoreID: fmt.Sprintf("S%d", k%3), EAN: fmt.Sprintf("%013d", k), ArticleNumber: "SKU",
					Quantity: 1, Price: 1000, ProductName: "first"}
				if k%2 == 0 {
					r.RetailPrice = &retail
				}
				rows = append(rows, r)
			}
			for k := range tc.again {
				rows = append(rows, storelink.StockRow{StoreID: fmt.Sprintf("S%d", k%3), EAN: fmt.Sprintf("%013d", k),
					ArticleNumber: "SKU", Quantity: 2, Price: 2000, ProductName: "later", Repeats: true})
			}
			if _, _, err := db.Uploads.Accept(ctx, storelink.NewUpload{ClientID: c.ID, FileName: "f.csv", Body: storelink.ChunksOf([]byte("x"))}, unlimited); err != nil {
				t.Fatal(err)
			}
			cl, err := db.Uploads.Claim(ctx, "w", time.Hour)
			if err != nil || cl == nil {
				t.Fatal(cl, err)
			}
			u, err := db.Uploads.Apply(ctx, cl, func(_ map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
				for _, r := range rows {
					if err := put(r); err != nil {
						return storelink.FeedReport{}, err
					}
				}
				return storelink.FeedReport{RowsTotal: len(rows), RowsValid: len(rows), RowsApplied: len(rows)}, nil
			})
			// Every pair is new or differs, or is repeated (which the first
			// file's keys set again are, with the values they already hold).
			if err != nil || u.Status != storelink.UploadApplied || u.RowsUnchanged != 0 {
				t.Fatalf("apply = %+v, %v; want applied, no row unchanged", u, err)
			}
			var n, later, nullRetail, fromUpload int
			if err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE product_name = 'later' AND quantity = 2 AND price = 2000),
				count(*) FILTER (WHERE retail_price IS NULL), count(*) FILTER (WHERE upload_id = $2)
				FROM stock WHERE client_id = $1`, c.ID, u.ID).Scan(&n, &later, &nullRetail, &fromUpload); err != nil {
				t.Fatal(err)
			}
			// The keys set again have no retail price the second time; of
			// the others, the odd ones never had one.
			wantNull := tc.again + (tc.keys-tc.again)/2
			if n != tc.keys || later != tc.again || nullRetail != wantNull || fromUpload != tc.keys {
				t.Fatalf("stock: %d rows, %d from the later row, %d without retail price, %d of this upload; want %d, %d, %d, %d",
					n, later, nullRetail, fromUpload, tc.keys, tc.again, wantNull, tc.keys)
			}
			got, _, err := db.Uploads.Stock(ctx, c.ID, storelink.StockFilter{StoreID: "S0", EAN: fmt.Sprintf("%013d", 0), Limit: 1})
			if err != nil || len(got) != 1 || got[0].Quantity != 2 || got[0].ProductName != "later" || got[0].RetailPrice != nil {
				t.Fatalf("stock of key 0 = %+v, %v; want the later row", got, err)
			}
		})
	}

	t.Run("file of three batches again, a unit sold at an unchanged pair", func(t *testing.T) {
		if _, _, err := db.Partners.PutStore(ctx, c.ID, "S0", "Store 0"); err != nil {
			t.Fatal(err)
		}
		ean := fmt.Sprintf("%013d", 1014) // a GTIN at S0, set by the file before and again unchanged
		o, err := db.Orders.CreateOrder(ctx, storelink.NewOrder{OrderNumber: "1", ClientID: c.ID, StoreID: "S0",
			Items: []storelink.NewItem{{EAN: ean, MarketplaceArticleNumber: "M"}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Orders.FulfilOrder(ctx, o.ID, storelink.FulfilRequest{}); err != nil {
			t.Fatal(err)
		}
		reserved := func() int {
			st, _, err := db.Uploads.Stock(ctx, c.ID, storelink.StockFilter{StoreID: "S0", EAN: ean, Limit: 1})
			if err != nil || len(st) != 1 {
				t.Fatalf("stock of S0 %s = %+v, %v", ean, st, err)
			}
			return st[0].Reserved
		}
		if r := reserved(); r != 1 {
			t.Fatalf("%d units reserved after the fulfilment, want 1", r)
		}
		var rows []storelink.StockRow
		retail := storelink.Money(2999)
		for k := range 24_000 {
			r := storelink.StockRow{StoreID: fmt.Sprintf("S%d", k%3), EAN: fmt.Sprintf("%013d", k), ArticleNumber: "SKU",
				Quantity: 1, Price: 1000, ProductName: "first"}
			if k%2 == 0 {
				r.RetailPrice = &retail
			}
			if k < 1_000 {
				r = storelink.StockRow{StoreID: r.StoreID, EAN: r.EAN, ArticleNumber: "SKU", Quantity: 2, Price: 2000, ProductName: "later"}
			}
			rows = append(rows, r)
		}
		if _, _, err := db.Uploads.Accept(ctx, storelink.NewUpload{ClientID: c.ID, FileName: "f.csv", Body: storelink.ChunksOf([]byte("x"))}, unlimited); err != nil {
			t.Fatal(err)
		}
		cl, err := db.Uploads.Claim(ctx, "w", time.Hour)
		if err != nil || cl == nil {
			t.Fatal(cl, err)
		}
		u, err := db.Uploads.Apply(ctx, cl, func(_ map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
			for _, r := range rows {
				if err := put(r); err != nil {
					return storelink.FeedReport{}, err
				}
			}
			return storelink.FeedReport{RowsTotal: len(rows), RowsValid: len(rows), RowsApplied: len(rows)}, nil
		})
		if err != nil || u.Status != storelink.UploadApplied || u.RowsUnchanged != len(rows) {
			t.Fatalf("apply = %+v, %v; want applied with every row unchanged", u, err)
		}
		if r := reserved(); r != 0 {
			t.Fatalf("%d units reserved after a file set their pair unchanged, want 0", r)
		}
	})

	t.Run("file rejected after two batches were copied", func(t *testing.T) {
		if _, _, err := db.Uploads.Accept(ctx, storelink.NewUpload{ClientID: c.ID, FileName: "f.csv", Body: storelink.ChunksOf([]byte("x"))}, unlimited); err != nil {
			t.Fatal(err)
		}
		cl, err := db.Uploads.Claim(ctx, "w", time.Hour)
		if err != nil || cl == nil {
			t.Fatal(cl, err)
		}
		u, err := db.Uploads.Apply(ctx, cl, func(_ map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
			for k := range 25_000 {
				if err := put(storelink.StockRow{StoreID: fmt.Sprintf("S%d", k%3), EAN: fmt.Sprintf("%013d", k),
					ArticleNumber: "SKU", Quantity: 3, Price: 3000, ProductName: "rejected"}); err != nil {
					return storelink.FeedReport{}, err
				}
			}
			return storelink.FeedReport{RowsTotal: 25_001, RowsValid: 25_000, RowsApplied: 25_000, FileError: true,
				Errors: []storelink.Problem{{Type: storelink.ProblemEncoding, Message: "bad byte", Count: 1,
					LineNumbers: []storelink.LineRef{{LineNumber: 25_002}}}}}, nil
		})
		if err != nil || u.Status != storelink.UploadRejected || u.RowsApplied != 0 {
			t.Fatalf("apply = %+v, %v; want rejected", u, err)
		}
		var n, rejected int
		if err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE product_name = 'rejected' OR upload_id = $2)
			FROM stock WHERE client_id = $1`, c.ID, u.ID).Scan(&n, &rejected); err != nil {
			t.Fatal(err)
		}
		if n != 24_000 || rejected != 0 {
			t.Fatalf("stock after the rejected file: %d rows, %d of them from it; want 24000 and none", n, rejected)
		}
	})
}
