package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"storelink"
	"storelink/service"
)

// stockWriter collects put rows into full batches and writes each with one
// prepared multi-row upsert; rows of one file are written in file order, so
// a later row for the same store and EAN wins.
type stockWriter struct {
	ctx context.Context
	tx  *sql.Tx
	// fixed holds the client id, upload id and time, converted to any once:
	// they are the same on every row, and converting them for each row would
	// allocate three times a row.
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

// ListStock reads a page from the read pool, walking the primary key from
// the page's start.
func (d *Driver) ListStock(ctx context.Context, p service.StockQuery) ([]storelink.Stock, error) {
	q := `SELECT store_id, ean, article_number, quantity, price, retail_price, article_location, product_name,
		product_number, article_color, article_size, upload_id, updated_at,
		(SELECT count(*) FROM order_items i WHERE i.reserving = 1 AND i.client_id = s.client_id AND i.store_id = s.store_id AND i.ean = s.ean)
		FROM stock s WHERE client_id = ?`
	args := []any{p.ClientID}
	if p.StoreID != "" {
		q += ` AND store_id = ?`
		args = append(args, p.StoreID)
	}
	if p.EAN != "" {
		q += ` AND ean = ?`
		args = append(args, p.EAN)
	}
	if p.ArticleNumber != "" {
		q += ` AND article_number = ?`
		args = append(args, p.ArticleNumber)
	}
	if a := p.After; a != nil {
		// A row value, not "store_id > ? OR (store_id = ? AND ean > ?)":
		// SQLite walks the primary key from the cursor only for the row
		// value; with the OR every page scans the client's stock from its
		// start, so paging through it all takes quadratic time.
		if p.StoreID != "" && a.StoreID == p.StoreID {
			q += ` AND ean > ?`
			args = append(args, a.EAN)
		} else {
			q += ` AND (store_id, ean) > (?, ?)`
			args = append(args, a.StoreID, a.EAN)
		}
	}
	q += ` ORDER BY store_id, ean LIMIT ?`
	args = append(args, p.Limit)
	rows, err := d.db.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	list := []storelink.Stock{}
	for rows.Next() {
		var s storelink.Stock
		var price, updated int64
		var retail sql.NullInt64
		if err := rows.Scan(&s.StoreID, &s.EAN, &s.ArticleNumber, &s.Quantity, &price, &retail, &s.ArticleLocation,
			&s.ProductName, &s.ProductNumber, &s.ArticleColor, &s.ArticleSize, &s.UploadID, &updated, &s.Reserved); err != nil {
			return nil, err
		}
		s.Price, s.UpdatedAt = storelink.Money(price), fromMS(updated)
		if retail.Valid {
			r := storelink.Money(retail.Int64)
			s.RetailPrice = &r
		}
		list = append(list, s)
	}
	return list, rows.Err()
}
