package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"storelink"
)

var _ storelink.StockService = (*DB)(nil)

// stockWriter collects put rows into full batches and writes each with one
// prepared multi-row upsert; rows of one file are written in file order, so
// a later row for the same store and EAN wins.
type stockWriter struct {
	ctx context.Context
	tx  *sql.Tx
	// fixed holds the client id, upload id and time, converted to any once:
	// they are the same on every row, and converting them for each row would
	// allocate three times a row, a few percent of an import's time.
	fixed [3]any

	stmt *sql.Stmt
	args []any
	n    int
}

func newStockWriter(ctx context.Context, tx *sql.Tx, clientID, uploadID string, now time.Time) *stockWriter {
	return &stockWriter{ctx: ctx, tx: tx, fixed: [3]any{clientID, uploadID, ms(now)}}
}

func (w *stockWriter) put(r storelink.StockRow) error {
	var retail any
	if r.RetailPrice != nil {
		retail = int64(*r.RetailPrice)
	}
	w.args = append(w.args, w.fixed[0], r.StoreID, r.EAN, r.ArticleNumber, r.Quantity, int64(r.Price), retail,
		r.ArticleLocation, r.ProductName, r.ProductNumber, r.ArticleColor, r.ArticleSize, w.fixed[1], w.fixed[2])
	w.n++
	if w.n < stockBatch {
		return nil
	}
	if w.stmt == nil {
		var err error
		if w.stmt, err = w.tx.PrepareContext(w.ctx, stockSQL(stockBatch)); err != nil {
			return fmt.Errorf("prepare stock upsert: %w", err)
		}
	}
	if _, err := w.stmt.ExecContext(w.ctx, w.args...); err != nil {
		return fmt.Errorf("upsert stock: %w", err)
	}
	w.args, w.n = w.args[:0], 0
	return nil
}

// flush writes the last, partial batch.
func (w *stockWriter) flush() error {
	if w.n == 0 {
		return nil
	}
	if _, err := w.tx.ExecContext(w.ctx, stockSQL(w.n), w.args...); err != nil {
		return fmt.Errorf("upsert stock: %w", err)
	}
	w.args, w.n = w.args[:0], 0
	return nil
}

func (w *stockWriter) close() {
	if w.stmt != nil {
		w.stmt.Close()
	}
}

// Stock lists the stock in force, by store and EAN, a page at a time.
func (db *DB) Stock(ctx context.Context, clientID string, f storelink.StockFilter) ([]storelink.Stock, string, error) {
	if err := exists(ctx, db.read, `SELECT 1 FROM clients WHERE id = ?`, clientID); err != nil {
		return nil, "", notFound(err, "client %q", clientID)
	}
	q := `SELECT store_id, ean, article_number, quantity, price, retail_price, article_location, product_name,
		product_number, article_color, article_size, upload_id, updated_at,
		(SELECT count(*) FROM order_items i WHERE i.reserving = 1 AND i.client_id = s.client_id AND i.store_id = s.store_id AND i.ean = s.ean)
		FROM stock s WHERE client_id = ?`
	args := []any{clientID}
	if f.StoreID != "" {
		q += ` AND store_id = ?`
		args = append(args, f.StoreID)
	}
	if f.EAN != "" {
		q += ` AND ean = ?`
		args = append(args, f.EAN)
	}
	if f.After != "" {
		store, ean, err := storelink.ParseStockCursor(f.After)
		if err != nil {
			return nil, "", err
		}
		// A row value, not "store_id > ? OR (store_id = ? AND ean > ?)":
		// SQLite walks the primary key from the cursor only for the row
		// value; with the OR every page scanned the client's stock from its
		// start, so paging through it all took quadratic time.
		if f.StoreID != "" && store == f.StoreID {
			q += ` AND ean > ?`
			args = append(args, ean)
		} else {
			q += ` AND (store_id, ean) > (?, ?)`
			args = append(args, store, ean)
		}
	}
	q += ` ORDER BY store_id, ean LIMIT ?`
	args = append(args, f.Limit+1)
	rows, err := db.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	out := []storelink.Stock{}
	for rows.Next() {
		var s storelink.Stock
		var price int64
		var retail sql.NullInt64
		var updated int64
		if err := rows.Scan(&s.StoreID, &s.EAN, &s.ArticleNumber, &s.Quantity, &price, &retail, &s.ArticleLocation,
			&s.ProductName, &s.ProductNumber, &s.ArticleColor, &s.ArticleSize, &s.UploadID, &updated, &s.Reserved); err != nil {
			return nil, "", err
		}
		s.Price = storelink.Money(price)
		if retail.Valid {
			m := storelink.Money(retail.Int64)
			s.RetailPrice = &m
		}
		s.UpdatedAt = fromMS(updated)
		s.Available = max(s.Quantity-s.Reserved, 0)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	out, next := storelink.StockPage(out, f.Limit)
	return out, next, nil
}
