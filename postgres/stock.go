package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"storelink"
	"storelink/service"
)

// copyBatch is how many put rows are sent in one COPY. Larger batches save
// round trips; this one keeps a batch to a few megabytes. A file of at most
// this many rows is not copied at all (see queueApplyAll).
const copyBatch = 10000

var stockInColumns = []string{"ord", "store_id", "ean", "article_number", "quantity", "price", "retail_price",
	"article_location", "product_name", "product_number", "article_color", "article_size", "repeats"}

// stockWriter collects put rows and writes them to the stock with one
// upsert when ApplyStock is called. A file of more than copyBatch rows is COPYed,
// a batch at a time, into a temporary table that lives until the apply
// transaction ends, and upserted from there: COPY is PostgreSQL's fastest
// way in (SQLite, without it, takes multi-row INSERTs instead). A smaller
// file is upserted straight from arrays, without the table.
type stockWriter struct {
	ctx    context.Context
	conn   *pgx.Conn // in the apply transaction
	client string
	upload string
	now    func() time.Time // read when the rows are upserted
	sold   []string         // the statuses of the items whose reservations queueRelease ends
	rows   stockColumns     // put since the last COPY
	n      int64            // rows put so far: the file order
	copied bool             // stock_in exists and holds the earlier rows
	// before is called before each COPY: the transaction's queued
	// statements go first (uploadTx.beforeCopy).
	before func(context.Context) error
}

// stockColumns holds rows column by column, as the upsert's arrays take
// them, and without an allocation per row.
type stockColumns struct {
	ord                                 []int64
	store, ean, article                 []string
	quantity                            []int32
	price                               []int64
	retail                              []pgtype.Int8
	location, name, number, color, size []string
	repeats                             []bool
}

func (c *stockColumns) add(ord int64, r storelink.StockRow) {
	var retail pgtype.Int8
	if r.RetailPrice != nil {
		retail = pgtype.Int8{Int64: int64(*r.RetailPrice), Valid: true}
	}
	c.ord, c.store, c.ean, c.article = append(c.ord, ord), append(c.store, r.StoreID), append(c.ean, r.EAN), append(c.article, r.ArticleNumber)
	c.quantity, c.price, c.retail = append(c.quantity, int32(r.Quantity)), append(c.price, int64(r.Price)), append(c.retail, retail)
	c.location, c.name, c.number = append(c.location, r.ArticleLocation), append(c.name, r.ProductName), append(c.number, r.ProductNumber)
	c.color, c.size = append(c.color, r.ArticleColor), append(c.size, r.ArticleSize)
	c.repeats = append(c.repeats, r.Repeats)
}

func (c *stockColumns) len() int { return len(c.ord) }

// reset empties the columns, keeping their arrays but not the strings.
func (c *stockColumns) reset() {
	for _, s := range [][]string{c.store, c.ean, c.article, c.location, c.name, c.number, c.color, c.size} {
		clear(s)
	}
	c.ord, c.store, c.ean, c.article = c.ord[:0], c.store[:0], c.ean[:0], c.article[:0]
	c.quantity, c.price, c.retail = c.quantity[:0], c.price[:0], c.retail[:0]
	c.location, c.name, c.number, c.color, c.size = c.location[:0], c.name[:0], c.number[:0], c.color[:0], c.size[:0]
	c.repeats = c.repeats[:0]
}

// StockWriter returns the put of a stockWriter on the transaction's
// connection. LockUploads has sent everything queued before, so the rows
// copied follow the upload's lock in the transaction.
func (t *uploadTx) StockWriter(ctx context.Context, p service.StockWriterParams) func(storelink.StockRow) error {
	sold := make([]string, len(p.Sold))
	for i, s := range p.Sold {
		sold[i] = string(s)
	}
	t.w = &stockWriter{ctx: ctx, conn: t.p.conn.Conn(), client: p.ClientID, upload: p.UploadID, now: p.Now, sold: sold, before: t.beforeCopy}
	return t.w.put
}

func (w *stockWriter) put(r storelink.StockRow) error {
	w.n++
	w.rows.add(w.n, r)
	if w.rows.len() < copyBatch {
		return nil
	}
	return w.copy()
}

// copy moves the rows put since the last COPY into stock_in.
func (w *stockWriter) copy() error {
	if w.rows.len() == 0 {
		return nil
	}
	if err := w.before(w.ctx); err != nil {
		return err
	}
	if !w.copied {
		// A file's rows are rows of one client and upload: those are
		// added by apply, not copied with every row. An earlier upload of
		// the transaction (a batch) may have made the table: it is
		// emptied, its statements having been sent (before).
		if _, err := w.conn.Exec(w.ctx, `CREATE TEMPORARY TABLE IF NOT EXISTS stock_in (
			ord bigint NOT NULL, store_id text COLLATE "C" NOT NULL, ean text COLLATE "C" NOT NULL, article_number text NOT NULL,
			quantity integer NOT NULL, price bigint NOT NULL, retail_price bigint, article_location text NOT NULL,
			product_name text NOT NULL, product_number text NOT NULL, article_color text NOT NULL, article_size text NOT NULL,
			repeats boolean NOT NULL
		) ON COMMIT DROP; TRUNCATE stock_in`); err != nil {
			return fmt.Errorf("create stock_in: %w", err)
		}
		w.copied = true
	}
	c := &w.rows
	row := make([]any, len(stockInColumns)) // COPY encodes a row before it asks for the next
	if _, err := w.conn.CopyFrom(w.ctx, pgx.Identifier{"stock_in"}, stockInColumns, pgx.CopyFromSlice(c.len(), func(i int) ([]any, error) {
		row[0], row[1], row[2], row[3], row[4], row[5] = c.ord[i], c.store[i], c.ean[i], c.article[i], c.quantity[i], c.price[i]
		row[6], row[7], row[8], row[9], row[10], row[11] = c.retail[i], c.location[i], c.name[i], c.number[i], c.color[i], c.size[i]
		row[12] = c.repeats[i]
		return row, nil
	})); err != nil {
		return fmt.Errorf("copy stock rows: %w", err)
	}
	c.reset()
	return nil
}

// writeChangedSQL ends the INSERT of the stock upserts: of the rows r of the
// source joined to the stock rows s of their pairs, it writes the new
// pairs, the pairs a file repeats, and those whose values differ; the
// others are left as they are.
const writeChangedSQL = `	WHERE s.ean IS NULL OR r.repeats
		OR (s.article_number, s.quantity, s.price, s.retail_price, s.article_location, s.product_name,
			s.product_number, s.article_color, s.article_size)
		IS DISTINCT FROM (r.article_number, r.quantity, r.price, r.retail_price, r.article_location, r.product_name,
			r.product_number, r.article_color, r.article_size)
	ON CONFLICT (client_id, store_id, ean) DO UPDATE SET
		article_number = excluded.article_number, quantity = excluded.quantity, price = excluded.price,
		retail_price = excluded.retail_price, article_location = excluded.article_location,
		product_name = excluded.product_name, product_number = excluded.product_number,
		article_color = excluded.article_color, article_size = excluded.article_size,
		upload_id = excluded.upload_id, updated_at = excluded.updated_at`

// upsertStockSQL is the statement that writes the rows put, from a source
// (the temporary table) that gives them with their file order, ord. ON
// CONFLICT cannot change one row twice in a statement, so of the rows for
// one store and EAN only the last one put is kept
// (DISTINCT ON … ord DESC): the later row of a file wins, as when rows are
// written one after another. Of those, only the rows whose values differ
// from the stock row's are written, and the rows of pairs the file repeats
// (StockRow.Repeats, which the last row of such a pair has): the others are
// found by the join and left as they are, not even locked, which ON
// CONFLICT DO UPDATE … WHERE would do, writing every page it looks at. The
// statement records on the upload how many pairs it left unchanged.
// $1 is the client, $2 the upload, $3 the time.
func upsertStockSQL(from string) string {
	return `WITH src AS (
	SELECT DISTINCT ON (store_id, ean) store_id, ean, article_number, quantity, price, retail_price,
		article_location, product_name, product_number, article_color, article_size, repeats
	FROM ` + from + `
	ORDER BY store_id, ean, ord DESC
), written AS (
	INSERT INTO stock (client_id, store_id, ean, article_number, quantity, price, retail_price,
		article_location, product_name, product_number, article_color, article_size, upload_id, updated_at)
	SELECT $1, r.store_id, r.ean, r.article_number, r.quantity, r.price, r.retail_price,
		r.article_location, r.product_name, r.product_number, r.article_color, r.article_size, $2, $3
	FROM src r LEFT JOIN stock s ON s.client_id = $1 AND s.store_id = r.store_id COLLATE "C" AND s.ean = r.ean COLLATE "C"
` + writeChangedSQL + `
	RETURNING 1
)
UPDATE uploads SET rows_unchanged = (SELECT count(*) FROM src) - (SELECT count(*) FROM written) WHERE id = $2`
}

// queueApply queues on b the statement that writes the rows put of a file
// that was copied to the stock, once they are all copied (copy sends what
// was queued before: b must be the transaction's batch as it is after). A file
// that never filled a batch is not copied: its rows are written from arrays
// with the transaction's other small files (queueApplyAll). The temporary
// table costs more than such a file's upsert: creating and dropping it
// writes a few dozen rows to the system catalogues and sends catalogue
// invalidations that every connection of the server processes; with many
// small uploads at once that costs more of the database's time than the
// upserts themselves.
func (w *stockWriter) queueApply(b *pgx.Batch) {
	// The sort that picks the last row of each store and EAN must fit in
	// work_mem not to spill to disk; 64MB holds the largest file's rows,
	// for this transaction only.
	b.Queue(`SET LOCAL work_mem = '64MB'`)
	b.Queue(upsertStockSQL(`stock_in`), w.client, w.upload, w.now())
}

// upsertStockAllSQL is upsertStockSQL for the rows of several files of
// distinct clients at once, from arrays: each row names its file ($1, a
// number from 1) and the files' clients and uploads are $15 and $16, in that
// order; $17 is the time. The statement records on each upload how many
// pairs it left unchanged.
const upsertStockAllSQL = `WITH files AS (
	SELECT * FROM unnest($15::text[], $16::text[]) WITH ORDINALITY AS f (client_id, upload_id, file)
), src AS (
	SELECT DISTINCT ON (r.file, r.store_id, r.ean) r.file, r.store_id, r.ean, r.article_number, r.quantity, r.price, r.retail_price,
		r.article_location, r.product_name, r.product_number, r.article_color, r.article_size, r.repeats
	FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::integer[], $7::bigint[], $8::bigint[],
		$9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::boolean[])
		AS r (file, ord, store_id, ean, article_number, quantity, price, retail_price,
		      article_location, product_name, product_number, article_color, article_size, repeats)
	ORDER BY r.file, r.store_id, r.ean, r.ord DESC
), written AS (
	INSERT INTO stock (client_id, store_id, ean, article_number, quantity, price, retail_price,
		article_location, product_name, product_number, article_color, article_size, upload_id, updated_at)
	SELECT f.client_id, r.store_id, r.ean, r.article_number, r.quantity, r.price, r.retail_price,
		r.article_location, r.product_name, r.product_number, r.article_color, r.article_size, f.upload_id, $17
	FROM src r JOIN files f ON f.file = r.file
	LEFT JOIN stock s ON s.client_id = f.client_id AND s.store_id = r.store_id COLLATE "C" AND s.ean = r.ean COLLATE "C"
` + writeChangedSQL + `
	RETURNING upload_id
), put AS (
	SELECT file, count(*) AS n FROM src GROUP BY file
), changed AS (
	SELECT upload_id, count(*) AS n FROM written GROUP BY upload_id
)
UPDATE uploads u SET rows_unchanged = p.n - coalesce(c.n, 0)
FROM files f JOIN put p ON p.file = f.file LEFT JOIN changed c ON c.upload_id = f.upload_id
WHERE u.id = f.upload_id`

// queueApplyAll queues on b the statements that write the rows of the
// small files ws (not copied), in their order, stamped at: one statement
// for the first file of each client, one for the second, and so on, so
// that a statement never changes a row twice and a client's later file is
// written, and compared, after its earlier one.
func queueApplyAll(b *pgx.Batch, ws []*stockWriter, at time.Time) {
	rounds := [][]*stockWriter{}
	round := map[string]int{} // client → its files so far
	for _, w := range ws {
		k := round[w.client]
		round[w.client] = k + 1
		if k == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[k] = append(rounds[k], w)
	}
	for _, r := range rounds {
		var all stockColumns
		var file []int64
		clients, uploads := make([]string, len(r)), make([]string, len(r))
		for i, w := range r {
			clients[i], uploads[i] = w.client, w.upload
			c := &w.rows
			for range c.ord {
				file = append(file, int64(i+1))
			}
			all.ord, all.store, all.ean, all.article = append(all.ord, c.ord...), append(all.store, c.store...), append(all.ean, c.ean...), append(all.article, c.article...)
			all.quantity, all.price, all.retail = append(all.quantity, c.quantity...), append(all.price, c.price...), append(all.retail, c.retail...)
			all.location, all.name, all.number = append(all.location, c.location...), append(all.name, c.name...), append(all.number, c.number...)
			all.color, all.size, all.repeats = append(all.color, c.color...), append(all.size, c.size...), append(all.repeats, c.repeats...)
		}
		b.Queue(upsertStockAllSQL, file, all.ord, all.store, all.ean, all.article, all.quantity, all.price, all.retail,
			all.location, all.name, all.number, all.color, all.size, all.repeats, clients, uploads, at)
	}
}

// queueRelease queues on b the statement that ends the reservations of the
// client's sold units (of the statuses in sold) at the pairs put. A pair whose row
// was left unchanged keeps the upload_id of an earlier upload, so the pairs
// are taken from the rows put, not from the stock. A join rather than
// EXISTS: the planner then hashes the few units and scans the rows put once,
// where for EXISTS it would first make the rows put distinct; with no unit
// to release it reads no row put at all.
func (w *stockWriter) queueRelease(b *pgx.Batch) {
	const release = `UPDATE order_items i SET reserving = false FROM `
	const same = `
		WHERE i.reserving AND i.status = ANY ($2) AND i.client_id = $1
		  AND r.store_id = i.store_id COLLATE "C" AND r.ean = i.ean COLLATE "C"`
	if w.copied {
		b.Queue(release+`stock_in r`+same, w.client, w.sold)
	} else if w.rows.len() > 0 {
		b.Queue(release+`unnest($3::text[], $4::text[]) AS r (store_id, ean)`+same, w.client, w.sold, w.rows.store, w.rows.ean)
	}
}

// args numbers query arguments as they are added: PostgreSQL's $1, $2, …
// where SQLite takes ?.
type args []any

func (a *args) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// ClientExists is the partners' read of a client.
func (d *uploads) ClientExists(ctx context.Context, id string) (bool, error) {
	return partners{d.db}.ClientExists(ctx, id)
}

// Stores is the partners' read of a client's stores.
func (d *uploads) Stores(ctx context.Context, clientID string) ([]storelink.Store, error) {
	return partners{d.db}.Stores(ctx, clientID)
}

// ListStock reads a page, from the page's start on the primary key (a row
// value comparison, which PostgreSQL walks the index from).
func (d *uploads) ListStock(ctx context.Context, p service.StockQuery) ([]storelink.Stock, error) {
	var a args
	q := `SELECT store_id, ean, article_number, quantity, price, retail_price, article_location, product_name,
		product_number, article_color, article_size, upload_id, updated_at, ` + reservedSQL + `
		FROM stock s WHERE client_id = ` + a.add(p.ClientID)
	if p.StoreID != "" {
		q += ` AND store_id = ` + a.add(p.StoreID)
	}
	after := p.After
	if p.EAN != "" {
		q += ` AND ean = ` + a.add(p.EAN)
		if p.StoreID == "" {
			// An EAN of every store: one seek per store of the client
			// (the stores from the cursor's on), where ean = $n alone
			// would read the client's whole stock.
			q += ` AND store_id = ANY (ARRAY(SELECT id FROM stores WHERE client_id = $1`
			if after != nil {
				store, inclusive := after.StoresFrom(p.EAN)
				if inclusive {
					q += ` AND id >= ` + a.add(store)
				} else {
					q += ` AND id > ` + a.add(store)
				}
				after = nil
			}
			q += `))`
		}
	}
	if p.ArticleNumber != "" {
		q += ` AND article_number = ` + a.add(p.ArticleNumber)
	}
	if after != nil {
		q += ` AND (store_id, ean) > (` + a.add(after.StoreID) + `, ` + a.add(after.EAN) + `)`
	}
	q += ` ORDER BY store_id, ean LIMIT ` + a.add(p.Limit)
	rows, err := d.db.pool.Query(ctx, q, a...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	list := []storelink.Stock{}
	for rows.Next() {
		var s storelink.Stock
		if err := rows.Scan(&s.StoreID, &s.EAN, &s.ArticleNumber, &s.Quantity, &s.Price, &s.RetailPrice, &s.ArticleLocation,
			&s.ProductName, &s.ProductNumber, &s.ArticleColor, &s.ArticleSize, &s.UploadID, &s.UpdatedAt, &s.Reserved); err != nil {
			return nil, err
		}
		list = append(list, s)
	}
	return list, rows.Err()
}
