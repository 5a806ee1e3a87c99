package postgres

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"storelink"
)

var _ storelink.StockService = (*DB)(nil)

// copyBatch is how many put rows are sent in one COPY. Larger batches save
// round trips; this one keeps a batch to a few megabytes.
const copyBatch = 10000

var stockInColumns = []string{"ord", "store_id", "ean", "article_number", "quantity", "price", "retail_price",
	"article_location", "product_name", "product_number", "article_color", "article_size"}

// stockWriter collects put rows and COPYs them, a batch at a time, into a
// temporary table that lives until the apply transaction ends; apply then
// writes them to the stock with one upsert. COPY is PostgreSQL's fastest
// way in (SQLite, without it, takes multi-row INSERTs instead).
type stockWriter struct {
	ctx     context.Context
	tx      pgx.Tx
	rows    [][]any
	n       int64 // rows put so far: the file order
	created bool
}

func newStockWriter(ctx context.Context, tx pgx.Tx) *stockWriter {
	return &stockWriter{ctx: ctx, tx: tx}
}

func (w *stockWriter) put(r storelink.StockRow) error {
	var retail any
	if r.RetailPrice != nil {
		retail = int64(*r.RetailPrice)
	}
	w.n++
	w.rows = append(w.rows, []any{w.n, r.StoreID, r.EAN, r.ArticleNumber, int32(r.Quantity), int64(r.Price), retail,
		r.ArticleLocation, r.ProductName, r.ProductNumber, r.ArticleColor, r.ArticleSize})
	if len(w.rows) < copyBatch {
		return nil
	}
	return w.flush()
}

// flush copies the rows put since the last flush.
func (w *stockWriter) flush() error {
	if len(w.rows) == 0 {
		return nil
	}
	if !w.created {
		// A file's rows are rows of one client and upload: those are
		// added by apply, not copied with every row.
		if _, err := w.tx.Exec(w.ctx, `CREATE TEMPORARY TABLE stock_in (
			ord bigint NOT NULL, store_id text COLLATE "C" NOT NULL, ean text COLLATE "C" NOT NULL, article_number text NOT NULL,
			quantity integer NOT NULL, price bigint NOT NULL, retail_price bigint, article_location text NOT NULL,
			product_name text NOT NULL, product_number text NOT NULL, article_color text NOT NULL, article_size text NOT NULL
		) ON COMMIT DROP`); err != nil {
			return fmt.Errorf("create stock_in: %w", err)
		}
		w.created = true
	}
	if _, err := w.tx.CopyFrom(w.ctx, pgx.Identifier{"stock_in"}, stockInColumns, pgx.CopyFromRows(w.rows)); err != nil {
		return fmt.Errorf("copy stock rows: %w", err)
	}
	clear(w.rows) // let the rows' strings go
	w.rows = w.rows[:0]
	return nil
}

// apply writes the copied rows to the stock. ON CONFLICT cannot change one
// row twice in a statement, so of the rows for one store and EAN only the
// last one put is kept: the later row of a file wins, as when rows are
// written one after another.
func (w *stockWriter) apply(clientID, uploadID string, now time.Time) error {
	if !w.created {
		return nil
	}
	// The sort that picks the last row of each store and EAN spilled to
	// disk with the default work_mem (4MB) from about 50,000 rows; the
	// largest file fits in 64MB, for this transaction only.
	if _, err := w.tx.Exec(w.ctx, `SET LOCAL work_mem = '64MB'`); err != nil {
		return fmt.Errorf("set work_mem: %w", err)
	}
	_, err := w.tx.Exec(w.ctx, `INSERT INTO stock (client_id, store_id, ean, article_number, quantity, price, retail_price,
			article_location, product_name, product_number, article_color, article_size, upload_id, updated_at)
		SELECT DISTINCT ON (store_id, ean) $1, store_id, ean, article_number, quantity, price, retail_price,
			article_location, product_name, product_number, article_color, article_size, $2, $3
		FROM stock_in ORDER BY store_id, ean, ord DESC
		ON CONFLICT (client_id, store_id, ean) DO UPDATE SET
			article_number = excluded.article_number, quantity = excluded.quantity, price = excluded.price,
			retail_price = excluded.retail_price, article_location = excluded.article_location,
			product_name = excluded.product_name, product_number = excluded.product_number,
			article_color = excluded.article_color, article_size = excluded.article_size,
			upload_id = excluded.upload_id, updated_at = excluded.updated_at`, clientID, uploadID, now)
	if err != nil {
		return fmt.Errorf("upsert stock: %w", err)
	}
	return nil
}

// args numbers query arguments as they are added: PostgreSQL's $1, $2, …
// where SQLite takes ?.
type args []any

func (a *args) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// Stock lists the stock in force, by store and EAN, a page at a time.
func (db *DB) Stock(ctx context.Context, clientID string, f storelink.StockFilter) ([]storelink.Stock, string, error) {
	if err := exists(ctx, db.pool, `SELECT 1 FROM clients WHERE id = $1`, clientID); err != nil {
		return nil, "", notFound(err, "client %q", clientID)
	}
	var a args
	q := `SELECT store_id, ean, article_number, quantity, price, retail_price, article_location, product_name,
		product_number, article_color, article_size, upload_id, updated_at,
		(SELECT count(*) FROM order_items i WHERE i.reserving AND i.client_id = s.client_id AND i.store_id = s.store_id AND i.ean = s.ean)
		FROM stock s WHERE client_id = ` + a.add(clientID)
	if f.StoreID != "" {
		q += ` AND store_id = ` + a.add(f.StoreID)
	}
	if f.EAN != "" {
		q += ` AND ean = ` + a.add(f.EAN)
	}
	if f.After != "" {
		store, ean, err := decodeStockCursor(f.After)
		if err != nil {
			return nil, "", err
		}
		q += ` AND (store_id, ean) > (` + a.add(store) + `, ` + a.add(ean) + `)`
	}
	q += ` ORDER BY store_id, ean LIMIT ` + a.add(f.Limit+1)
	rows, err := db.pool.Query(ctx, q, a...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	out := []storelink.Stock{}
	for rows.Next() {
		var s storelink.Stock
		var price int64
		var retail *int64
		if err := rows.Scan(&s.StoreID, &s.EAN, &s.ArticleNumber, &s.Quantity, &price, &retail, &s.ArticleLocation,
			&s.ProductName, &s.ProductNumber, &s.ArticleColor, &s.ArticleSize, &s.UploadID, &s.UpdatedAt, &s.Reserved); err != nil {
			return nil, "", err
		}
		s.Price = storelink.Money(price)
		if retail != nil {
			m := storelink.Money(*retail)
			s.RetailPrice = &m
		}
		s.Available = max(s.Quantity-s.Reserved, 0)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > f.Limit {
		out = out[:f.Limit]
		last := out[len(out)-1]
		next = encodeStockCursor(last.StoreID, last.EAN)
	}
	return out, next, nil
}

// The cursor is the SQLite store's: base64 of store and EAN.
func encodeStockCursor(store, ean string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(store + "\x00" + ean))
}

func decodeStockCursor(c string) (string, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	store, ean, ok := strings.Cut(string(b), "\x00")
	if err != nil || !ok || !utf8.ValidString(store+ean) || strings.ContainsRune(ean, 0) {
		return "", "", storelink.Errorf(storelink.EINVALID, "after is not a cursor returned by this call.")
	}
	return store, ean, nil
}
