package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"storelink"
)

// BenchmarkApply measures the bulk apply of a feed: rows a second through
// COPY into the temporary table and the one upsert, half of them new and
// half updating rows already in force. (Stores are not checked here: the
// rows are put as the feed check would put them.)
func BenchmarkApply(b *testing.B) {
	const rows = 100_000
	dbURL := newSchema(b)
	db := openAt(b, dbURL, time.Now)
	ctx := context.Background()
	p, err := db.Partners.CreatePartner(ctx, "Acme")
	if err != nil {
		b.Fatal(err)
	}
	c, err := db.Partners.CreateClient(ctx, p.ID, "DE", "EUR")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := db.Uploads.Accept(ctx, storelink.NewUpload{ClientID: c.ID, FileName: "f.csv", Body: storelink.ChunksOf([]byte("x"))}, unlimited); err != nil {
			b.Fatal(err)
		}
		cl, err := db.Uploads.Claim(ctx, "w", time.Hour)
		if err != nil || cl == nil {
			b.Fatal(cl, err)
		}
		_, err = db.Uploads.Apply(ctx, cl, func(_ map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
			for r := range rows {
				n := r + i*rows/2
				if err := put(storelink.StockRow{StoreID: fmt.Sprintf("S%d", n%10), EAN: fmt.Sprintf("%013d", n), ArticleNumber: "SKU-1",
					Quantity: r % 50, Price: 1999, ProductName: "Something"}); err != nil {
					return storelink.FeedReport{}, err
				}
			}
			return storelink.FeedReport{RowsTotal: rows, RowsValid: rows, RowsApplied: rows}, nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "rows/s")
}
