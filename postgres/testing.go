package postgres

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"storelink"
)

// ExecForTest runs one statement on the pool. It is for tests only: the
// conformance suite uses it to inject faults (a trigger that makes event
// writes fail) and show that an order's state change never outlives its
// event. No service code calls it.
func (db *DB) ExecForTest(ctx context.Context, query string) error {
	_, err := db.pool.Exec(ctx, query)
	return err
}

// AdminExecForTest runs one statement on a connection of its own to dbURL:
// the tests make and drop their schemas with it. A statement PostgreSQL
// chooses as a deadlock's victim is tried again, up to five times: a DROP
// SCHEMA can meet the last statements of a serve just stopped or killed,
// its backend still running them. No service code calls it.
func AdminExecForTest(ctx context.Context, dbURL, query string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for try := 1; ; try++ {
		_, err := conn.Exec(ctx, query)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "40P01" || try == 5 {
			return err
		}
		time.Sleep(time.Duration(try) * 100 * time.Millisecond)
	}
}

// FillStockForTest COPYs the rows of seq into the stock of one client, as
// an apply would leave them but without an upload, its file or the
// comparison: for the benchmark of grown tables (issue 15), which fills the
// stock of other clients by the million before it measures. The client's
// stores must exist and its stock must hold none of the pairs. It returns
// how many rows it wrote. No service code calls it.
func (db *DB) FillStockForTest(ctx context.Context, clientID, uploadID string, seq iter.Seq[storelink.StockRow]) (int, error) {
	now := db.Now()
	next, stop := iter.Pull(seq)
	defer stop()
	row := make([]any, 14)
	n, err := db.pool.CopyFrom(ctx, pgx.Identifier{"stock"}, []string{"client_id", "store_id", "ean", "article_number",
		"quantity", "price", "retail_price", "article_location", "product_name", "product_number", "article_color",
		"article_size", "upload_id", "updated_at"}, pgx.CopyFromFunc(func() ([]any, error) {
		r, ok := next()
		if !ok {
			return nil, nil
		}
		var retail pgtype.Int8
		if r.RetailPrice != nil {
			retail = pgtype.Int8{Int64: int64(*r.RetailPrice), Valid: true}
		}
		row[0], row[1], row[2], row[3], row[4], row[5] = clientID, r.StoreID, r.EAN, r.ArticleNumber, int32(r.Quantity), int64(r.Price)
		row[6], row[7], row[8], row[9], row[10], row[11] = retail, r.ArticleLocation, r.ProductName, r.ProductNumber, r.ArticleColor, r.ArticleSize
		row[12], row[13] = uploadID, now
		return row, nil
	}))
	return int(n), err
}
