package dbtest

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"storelink"
)

// Postgres is raw SQL on a PostgreSQL database, each call on a connection
// of its own to URL, which selects the schema as the storelink process's
// does (search_path).
type Postgres struct {
	URL string
	// Now stamps the rows FillStock writes: the process's clock.
	Now func() time.Time
}

// Exec runs one statement. A statement PostgreSQL chooses as a deadlock's
// victim is tried again, up to five times: a DROP SCHEMA can meet the last
// statements of a serve just stopped or killed, its backend still running
// them.
func (p Postgres) Exec(ctx context.Context, query string) error {
	conn, err := p.connect(ctx)
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

// AdminExec runs one statement on the database at dbURL, as Exec does: the
// tests make and drop their schemas with it.
func AdminExec(ctx context.Context, dbURL, query string) error {
	return Postgres{URL: dbURL}.Exec(ctx, query)
}

// FillStock COPYs the rows of seq into the stock of one client, as an
// apply would leave them but without an upload, its file or the
// comparison, updated at Now. The client's stores must exist and its stock
// must hold none of the pairs. It returns how many rows it wrote.
func (p Postgres) FillStock(ctx context.Context, clientID, uploadID string, seq iter.Seq[storelink.StockRow]) (int, error) {
	conn, err := p.connect(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	now := p.Now()
	next, stop := iter.Pull(seq)
	defer stop()
	row := make([]any, 14)
	n, err := conn.CopyFrom(ctx, pgx.Identifier{"stock"}, []string{"client_id", "store_id", "ean", "article_number",
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

// connect opens a connection to URL; the parameters of a pool in it
// (pool_max_conns) are the storelink process's and are left out.
func (p Postgres) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgxpool.ParseConfig(p.URL)
	if err != nil {
		// The error may quote the URL, password included.
		return nil, errors.New("dbtest: the database URL cannot be parsed")
	}
	return pgx.ConnectConfig(ctx, cfg.ConnConfig)
}
