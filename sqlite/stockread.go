package sqlite

import (
	"context"
	"database/sql"

	"storelink"
	"storelink/service"
)

// ClientExists is the partners' read of a client.
func (d *uploads) ClientExists(ctx context.Context, id string) (bool, error) {
	return partners{d.db}.ClientExists(ctx, id)
}

// Stores is the partners' read of a client's stores.
func (d *uploads) Stores(ctx context.Context, clientID string) ([]storelink.Store, error) {
	return partners{d.db}.Stores(ctx, clientID)
}

// ListStock reads a page from the read pool, walking the primary key from
// the page's start.
func (d *uploads) ListStock(ctx context.Context, p service.StockQuery) ([]storelink.Stock, error) {
	q := `SELECT store_id, ean, article_number, quantity, price, retail_price, article_location, product_name,
		product_number, article_color, article_size, upload_id, updated_at,
		(SELECT count(*) FROM order_items i WHERE i.reserving = 1 AND i.client_id = s.client_id AND i.store_id = s.store_id AND i.ean = s.ean)
		FROM stock s WHERE client_id = ?1`
	args := []any{p.ClientID}
	if p.StoreID != "" {
		q += ` AND store_id = ?`
		args = append(args, p.StoreID)
	}
	after := p.After
	if p.EAN != "" {
		q += ` AND ean = ?`
		args = append(args, p.EAN)
		if p.StoreID == "" {
			// An EAN of every store: one seek per store of the client
			// (the stores from the cursor's on), where ean = ? alone
			// would read the client's whole stock.
			q += ` AND store_id IN (SELECT id FROM stores WHERE client_id = ?1`
			if after != nil {
				store, inclusive := after.StoresFrom(p.EAN)
				if inclusive {
					q += ` AND id >= ?`
				} else {
					q += ` AND id > ?`
				}
				args = append(args, store)
				after = nil
			}
			q += `)`
		}
	}
	if p.ArticleNumber != "" {
		q += ` AND article_number = ?`
		args = append(args, p.ArticleNumber)
	}
	if a := after; a != nil {
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
