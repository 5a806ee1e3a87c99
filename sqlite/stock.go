package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc64"
	"slices"
	"strings"
	"time"

	"storelink"
)

// stockBatch is how many put rows are compared and written together: the
// stock rows they replace are read with one range scan per store, and the
// rows that differ are written with one multi-row upsert of up to this many
// rows (15 values a row stays well under SQLite's limit of 32766).
const stockBatch = 256

// stockWriter compares put rows with the stock rows they would replace and
// writes only the rows whose values differ, the rows of new store/EAN pairs
// and the rows that repeat a pair of the file (StockRow.Repeats). The rows
// put are taken in batches, each compared in one of two ways:
//
//   - read: the batch is sorted by store and EAN, the stored rows of each
//     store's run are read with one scan of the range of EANs it covers,
//     and each row's digest (stockDigest) is compared with the stored one;
//     the rows that differ are upserted. Reading a row costs less than
//     upserting it, so this is the way when most rows are as stored;
//   - upsert: the batch is upserted with a DO UPDATE that applies only where
//     the digests differ, and the count of rows changed tells how many did.
//     This skips the read, which is the way when most rows differ (a first
//     import, prices changed everywhere).
//
// A batch is read first, and the next one is upserted when more than half
// of a batch's rows were written. Rows of one pair keep their file order, and
// a batch's writes are made before the next batch is read, so a later row
// of a pair compares with what an earlier one wrote, and wins.
type stockWriter struct {
	ctx context.Context
	tx  *sql.Tx
	// fixed holds the client id, upload id and time, bound once per
	// statement: they are the same on every row.
	fixed        [3]any
	client, upid string

	rows    []storelink.StockRow // put since the last batch
	digests []int64              // of rows
	order   []int32              // indices into rows, by store and EAN
	write   []int32              // indices into rows to write
	held    map[uint64]heldRow   // the stored rows of one store's run, by eanKey
	args    []any
	buf     []byte // stockDigest's scratch
	upsertN bool   // upsert the next batch rather than read it

	scan, list *sql.Stmt
	upserts    [2][9]*sql.Stmt // of 1, 2, 4, … 256 rows; [1] only where the digests differ

	// pairs counts the store/EAN pairs put (rows without Repeats), written
	// those of them written by this upload.
	pairs, written int

	// sold holds the pairs at which fulfilled or returned units still
	// reserve stock, each true once a row for it was put (ReleaseFulfilled);
	// nil until the first batch reads them.
	sold map[stockKey]bool
}

// heldRow is what the scan reads of a stored row: its digest (0 and !ok for
// a row written before digests were kept), and whether this upload wrote it.
type heldRow struct {
	digest int64
	ok     bool
	mine   bool
}

type stockKey struct{ store, ean string }

func newStockWriter(ctx context.Context, tx *sql.Tx, clientID, uploadID string, now time.Time) *stockWriter {
	return &stockWriter{ctx: ctx, tx: tx, fixed: [3]any{clientID, uploadID, ms(now)}, client: clientID, upid: uploadID,
		held: make(map[uint64]heldRow, stockBatch)}
}

// readSold reads the pairs at which fulfilled or returned units still
// reserve stock: few, through the index of reserving units.
func (w *stockWriter) readSold() error {
	rows, err := w.tx.QueryContext(w.ctx, `SELECT DISTINCT store_id, ean FROM order_items
		WHERE reserving = 1 AND status IN ('fulfilled', 'returned') AND client_id = ?`, w.client)
	if err != nil {
		return fmt.Errorf("read sold units: %w", err)
	}
	defer rows.Close()
	w.sold = map[stockKey]bool{}
	for rows.Next() {
		var k stockKey
		if err := rows.Scan(&k.store, &k.ean); err != nil {
			return fmt.Errorf("read sold units: %w", err)
		}
		w.sold[k] = false
	}
	return rows.Err()
}

func (w *stockWriter) put(r storelink.StockRow) error {
	var d int64
	w.buf, d = stockDigest(w.buf, &r)
	w.rows, w.digests = append(w.rows, r), append(w.digests, d)
	if len(w.rows) < stockBatch {
		return nil
	}
	return w.flush()
}

// flush compares and writes the rows put since the last flush.
func (w *stockWriter) flush() error {
	if len(w.rows) == 0 {
		return nil
	}
	if w.sold == nil {
		if err := w.readSold(); err != nil {
			return err
		}
	}
	w.order = w.order[:0]
	for i := range w.rows {
		w.order = append(w.order, int32(i))
	}
	var wrote int
	var err error
	if w.upsertN {
		wrote, err = w.upsertBatch()
	} else {
		wrote, err = w.readBatch(w.order)
	}
	if err != nil {
		return err
	}
	w.upsertN = 2*wrote > len(w.rows)
	clear(w.rows) // let the rows' strings go
	w.rows, w.digests = w.rows[:0], w.digests[:0]
	return nil
}

// readBatch reads the stored rows of the rows idx, compares and writes
// those that differ, and returns how many it wrote.
func (w *stockWriter) readBatch(idx []int32) (int, error) {
	// Stable: the rows of one pair stay in file order.
	if !slices.IsSortedFunc(idx, w.compareRows) {
		slices.SortStableFunc(idx, w.compareRows)
	}
	w.write = w.write[:0]
	for start := 0; start < len(idx); {
		store := w.rows[idx[start]].StoreID
		end := start + 1
		for end < len(idx) && w.rows[idx[end]].StoreID == store {
			end++
		}
		if err := w.readHeld(store, idx[start:end]); err != nil {
			return 0, err
		}
		for _, i := range idx[start:end] {
			w.compare(i)
		}
		start = end
	}
	_, err := w.upsert(w.write, false)
	return len(w.write), err
}

// upsertBatch upserts the batch where the digests differ, counting the
// changed rows as written; a row that repeats a pair is read and written
// after the others, as readBatch does, since whether its pair counts as
// written depends on the rows before it.
func (w *stockWriter) upsertBatch() (int, error) {
	w.write = w.write[:0]
	var repeats []int32
	for _, i := range w.order {
		if w.rows[i].Repeats {
			repeats = append(repeats, i)
			continue
		}
		w.pairs++
		w.noteSold(&w.rows[i])
		w.write = append(w.write, i)
	}
	changed, err := w.upsert(w.write, true)
	if err != nil {
		return 0, err
	}
	w.written += changed
	if len(repeats) == 0 {
		return changed, nil
	}
	more, err := w.readBatch(repeats)
	return changed + more, err
}

func (w *stockWriter) compareRows(a, b int32) int {
	x, y := &w.rows[a], &w.rows[b]
	if c := strings.Compare(x.StoreID, y.StoreID); c != 0 {
		return c
	}
	return strings.Compare(x.EAN, y.EAN)
}

// scanSlack bounds a range scan at this many rows per row of the run, and
// this many more: a range that holds more stored rows than that is read by
// its EANs instead, so that a batch never reads much more than its own rows.
const scanSlack = 4

// heldColumns reads a stored row's eanKey, twice and plus one when this
// upload wrote it, and its digest. The EANs of the stock are digits (the
// feed checks them), as eanKey needs. ?1 is the client, ?2 the upload, ?3
// the store.
const heldColumns = `SELECT (CAST(ean AS INTEGER) * 256 + length(ean)) * 2 + (upload_id = ?2), digest
	FROM stock WHERE client_id = ?1 AND store_id = ?3 AND `

// readHeld reads into held the stored rows of the run idx of one store,
// which is sorted by EAN: those in the range of its EANs, or, when that range
// holds many more rows than the run, those of its EANs.
func (w *stockWriter) readHeld(store string, idx []int32) error {
	clear(w.held)
	limit := scanSlack*len(idx) + stockBatch/8
	if w.scan == nil {
		var err error
		if w.scan, err = w.tx.PrepareContext(w.ctx, heldColumns+`ean BETWEEN ?4 AND ?5 LIMIT ?6`); err != nil {
			return fmt.Errorf("prepare stock scan: %w", err)
		}
	}
	n, err := w.readRows(w.scan, w.client, w.upid, store, w.rows[idx[0]].EAN, w.rows[idx[len(idx)-1]].EAN, limit)
	if err != nil || n < limit {
		return err
	}
	clear(w.held)
	eans := make([]string, len(idx))
	for j, i := range idx {
		eans[j] = w.rows[i].EAN
	}
	list, _ := json.Marshal(eans)
	if w.list == nil {
		if w.list, err = w.tx.PrepareContext(w.ctx, heldColumns+`ean IN (SELECT value FROM json_each(?4))`); err != nil {
			return fmt.Errorf("prepare stock lookup: %w", err)
		}
	}
	_, err = w.readRows(w.list, w.client, w.upid, store, string(list))
	return err
}

// readRows runs a query of heldColumns and puts its rows in held.
func (w *stockWriter) readRows(stmt *sql.Stmt, args ...any) (int, error) {
	rows, err := stmt.QueryContext(w.ctx, args...)
	if err != nil {
		return 0, fmt.Errorf("read stock: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var key int64
		var digest sql.NullInt64
		if err := rows.Scan(&key, &digest); err != nil {
			return n, fmt.Errorf("read stock: %w", err)
		}
		w.held[uint64(key>>1)] = heldRow{digest: digest.Int64, ok: digest.Valid, mine: key&1 == 1}
		n++
	}
	return n, rows.Err()
}

// compare decides whether row i is written, counting the pairs put and
// written.
func (w *stockWriter) compare(i int32) {
	r := &w.rows[i]
	if !r.Repeats {
		w.pairs++
	}
	w.noteSold(r)
	key, keyed := eanKey(r.EAN)
	h, found := w.held[key]
	if keyed && found && h.ok && h.digest == w.digests[i] && !r.Repeats {
		return // held exactly so: nothing to write
	}
	if !(keyed && found && h.mine) && (keyed || !r.Repeats) {
		w.written++
	}
	if keyed {
		w.held[key] = heldRow{digest: w.digests[i], ok: true, mine: true}
	}
	w.write = append(w.write, i)
}

// noteSold notes a row put for a pair in sold.
func (w *stockWriter) noteSold(r *storelink.StockRow) {
	if len(w.sold) > 0 {
		k := stockKey{r.StoreID, r.EAN}
		if _, ok := w.sold[k]; ok {
			w.sold[k] = true
		}
	}
}

// eanKey packs an EAN of up to 14 digits (every GTIN) into a number that
// tells apart EANs that differ only in leading zeros: its value times 256
// plus its length, which the scan computes alike from the stored text.
func eanKey(ean string) (uint64, bool) {
	if len(ean) == 0 || len(ean) > 14 {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(ean); i++ {
		d := ean[i] - '0'
		if d > 9 {
			return 0, false
		}
		v = v*10 + uint64(d)
	}
	return v<<8 | uint64(len(ean)), true
}

// upsert writes the rows idx, in statements of 256, 128, … 1 rows, and
// returns how many rows changed. With differing, a row is written only
// where its digest differs from the stored row's.
func (w *stockWriter) upsert(idx []int32, differing bool) (int, error) {
	stmts := &w.upserts[0]
	if differing {
		stmts = &w.upserts[1]
	}
	changed := 0
	for len(idx) > 0 {
		size := 0
		for 1<<(size+1) <= min(len(idx), stockBatch) {
			size++
		}
		n := 1 << size
		if stmts[size] == nil {
			q := stockSQL(n)
			if differing {
				q += ` WHERE digest IS NOT excluded.digest`
			}
			var err error
			if stmts[size], err = w.tx.PrepareContext(w.ctx, q); err != nil {
				return 0, fmt.Errorf("prepare stock upsert: %w", err)
			}
		}
		w.args = append(w.args[:0], w.fixed[:]...)
		for _, i := range idx[:n] {
			r := &w.rows[i]
			var retail any
			if r.RetailPrice != nil {
				retail = int64(*r.RetailPrice)
			}
			w.args = append(w.args, r.StoreID, r.EAN, r.ArticleNumber, r.Quantity, int64(r.Price), retail,
				r.ArticleLocation, r.ProductName, r.ProductNumber, r.ArticleColor, r.ArticleSize, w.digests[i])
		}
		res, err := stmts[size].ExecContext(w.ctx, w.args...)
		if err != nil {
			return 0, fmt.Errorf("upsert stock: %w", err)
		}
		k, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("upsert stock: %w", err)
		}
		changed += int(k)
		idx = idx[n:]
	}
	clear(w.args)
	return changed, nil
}

// unchanged is how many of the pairs put were left as they were.
func (w *stockWriter) unchanged() int { return w.pairs - w.written }

func (w *stockWriter) close() {
	for _, s := range slices.Concat([]*sql.Stmt{w.scan, w.list}, w.upserts[0][:], w.upserts[1][:]) {
		if s != nil {
			s.Close()
		}
	}
}

// stockSQL is the multi-row upsert of rows rows: SQLite has no COPY, and a
// multi-row INSERT is its fastest way in. The client, upload and time are
// ?1 to ?3, bound once; each row's values follow as plain parameters, which
// SQLite numbers on from there.
func stockSQL(rows int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO stock (client_id, upload_id, updated_at, store_id, ean, article_number, quantity, price,
	retail_price, article_location, product_name, product_number, article_color, article_size, digest)
	SELECT ?1, ?2, ?3, column1, column2, column3, column4, column5, column6, column7, column8, column9, column10,
	column11, column12 FROM (VALUES `)
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?,?,?,?,?,?)")
	}
	// "WHERE true" tells SQLite's parser that ON CONFLICT belongs to the
	// INSERT, not to a join of the SELECT.
	b.WriteString(`) WHERE true ON CONFLICT (client_id, store_id, ean) DO UPDATE SET
	article_number = excluded.article_number, quantity = excluded.quantity, price = excluded.price,
	retail_price = excluded.retail_price, article_location = excluded.article_location,
	product_name = excluded.product_name, product_number = excluded.product_number,
	article_color = excluded.article_color, article_size = excluded.article_size, digest = excluded.digest,
	upload_id = excluded.upload_id, updated_at = excluded.updated_at`)
	return b.String()
}

var crcTable = crc64.MakeTable(crc64.ECMA)

// stockDigest is the CRC-64 (ECMA) of the values a row sets, each number in
// 8 bytes and each text behind its length, so that no two rows' values
// encode alike. A CRC of 64 bits tells apart every two encodings that
// differ only within 8 bytes of each other, which any change of one number
// is; other changes it misses once in 2^64.
func stockDigest(buf []byte, r *storelink.StockRow) ([]byte, int64) {
	buf = binary.LittleEndian.AppendUint64(buf[:0], uint64(r.Quantity))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(r.Price))
	if r.RetailPrice != nil {
		buf = append(buf, 1)
		buf = binary.LittleEndian.AppendUint64(buf, uint64(*r.RetailPrice))
	} else {
		buf = append(buf, 0)
	}
	for _, s := range [...]string{r.ArticleNumber, r.ArticleLocation, r.ProductName, r.ProductNumber, r.ArticleColor, r.ArticleSize} {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	return buf, int64(crc64.Checksum(buf, crcTable))
}
