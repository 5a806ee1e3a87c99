package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc64"
	"slices"
	"strconv"
	"strings"

	"storelink"
	"storelink/service"
)

// stockBatch is the most rows one multi-row upsert writes (15 values a row
// stays well under SQLite's limit of 32766).
const stockBatch = 256

// stockWindow is how many put rows are compared and written together. They
// are sorted by store and EAN first, so the stored rows they replace are
// read with one scan (or one lookup) per store, and written in the table's
// order, whatever order the file has: store by store, article by article
// or none. A window of a few thousand rows gives each store of a feed
// sorted by article a run long enough to scan, and a shuffled feed's
// writes pages in order. Its rows are kept compact (windowRow): a window
// holds at most stockWindowBytes of their values, whatever the lines' length.
//
// Variables, so that a test can make windows small.
var (
	stockWindow      = 32768
	stockWindowBytes = 4 << 20
)

// stockWriter compares put rows with the stock rows they would replace and
// writes only the rows whose values differ, the rows of new store/EAN pairs
// and the rows that repeat a pair of the file (StockRow.Repeats). The rows
// put are taken in batches of stockWindow, each compared in one of two ways:
//
//   - read: the batch is sorted by store and EAN, the stored rows of each
//     store's run are read with one scan of the range of EANs it covers,
//     and each row's digest (of stockValues) is compared with the stored one;
//     the rows that differ are upserted. Reading a row costs less than
//     upserting it, so this is the way when most rows are as stored;
//   - upsert: the batch, sorted alike, is upserted with a DO UPDATE that applies only where
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
	// stmt returns a statement of stockStatements, prepared once, bound to
	// the transaction (uploadTx.stmt).
	stmt func(query string) (*sql.Stmt, error)
	// fixed holds the client id, upload id and time, bound once per
	// statement: they are the same on every row.
	fixed        [3]any
	client, upid string
	// soldList is the JSON array of the statuses of the items whose
	// reservations ReleaseFulfilled ends.
	soldList string

	rows    []windowRow        // put since the last batch
	arena   []byte             // the values of rows
	stores  map[string]string  // the store ids put, each kept once
	order   []int32            // indices into rows, by store and EAN
	write   []int32            // indices into rows to write
	held    map[uint64]heldRow // the stored rows of one store's run, by eanKey
	args    []any
	upsertN bool // upsert the next batch rather than read it

	text []byte // what readText read

	// pairs counts the store/EAN pairs put (rows without Repeats), written
	// those of them written by this upload.
	pairs, written int

	// sold holds the pairs at which sold units still reserve stock, each true once a row for it was put (ReleaseFulfilled);
	// nil until the first batch reads them.
	sold map[stockKey]bool
}

// heldRow is what the writer knows of a stored row: its digest (!ok for a
// row written before digests were kept), and whether this upload wrote it
// (only known of rows written in the batch at hand; repeated reads it).
type heldRow struct {
	digest int64
	ok     bool
	mine   bool
}

type stockKey struct{ store, ean string }

// windowRow is a put row as the window keeps it: its pair, whether it
// repeats one, the digest of its values, and where in the arena its values
// are (stockValues' encoding, which decodeValues reads back). A row whose
// values differ costs their strings again when it is written; a row held as
// it is costs no string of its own but its EAN.
type windowRow struct {
	store, ean string
	digest     int64
	from, to   int32
	repeats    bool
}

func newStockWriter(ctx context.Context, tx *sql.Tx, stmt func(string) (*sql.Stmt, error), p service.StockWriterParams) *stockWriter {
	return &stockWriter{ctx: ctx, tx: tx, stmt: stmt, fixed: [3]any{p.ClientID, p.UploadID, ms(p.Now())}, client: p.ClientID,
		upid: p.UploadID, soldList: statusList(p.Sold), held: make(map[uint64]heldRow, stockBatch), stores: map[string]string{}}
}

// The writer's statements, prepared once on the write connection (see
// DB.prepare): parsing them again for every file would cost a small file
// about as much as its writes.
var (
	soldSQL = `SELECT DISTINCT store_id, ean FROM order_items
		WHERE reserving = 1 AND status IN (SELECT value FROM json_each(?2)) AND client_id = ?1`
	stockScanSQL    = stockHeldSQL(`ean BETWEEN ?3 AND ?5`)
	stockListSQL    = stockHeldSQL(`ean IN (SELECT value FROM json_each(?3))`)
	stockMineSQL    = `SELECT upload_id = ?1 FROM stock WHERE client_id = ?2 AND store_id = ?3 AND ean = ?4`
	stockUpserts    [2][9]string // of 1, 2, 4, … 256 rows; [1] only where the digests differ
	stockStatements = func() []string {
		list := []string{soldSQL, stockScanSQL, stockListSQL, stockMineSQL}
		for size := range stockUpserts[0] {
			stockUpserts[0][size] = stockSQL(1 << size)
			stockUpserts[1][size] = stockSQL(1<<size) + ` WHERE digest IS NOT excluded.digest`
			list = append(list, stockUpserts[0][size], stockUpserts[1][size])
		}
		return list
	}()
)

// readSold reads the pairs at which sold units (of the statuses in
// soldList) still reserve stock: few, through the index of reserving
// units.
func (w *stockWriter) readSold() error {
	stmt, err := w.stmt(soldSQL)
	if err != nil {
		return fmt.Errorf("read sold units: %w", err)
	}
	rows, err := stmt.QueryContext(w.ctx, w.client, w.soldList)
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
	if w.add(&r) {
		return nil
	}
	return w.flush()
}

// add adds r to the window, and tells whether the window has room for more.
func (w *stockWriter) add(r *storelink.StockRow) bool {
	if w.rows == nil {
		w.rows = make([]windowRow, 0, stockWindow)
	}
	store, ok := w.stores[r.StoreID]
	if !ok {
		store = strings.Clone(r.StoreID)
		w.stores[store] = store
	}
	from := len(w.arena)
	w.arena = stockValues(w.arena, r)
	w.rows = append(w.rows, windowRow{store: store, ean: strings.Clone(r.EAN), repeats: r.Repeats,
		digest: int64(crc64.Checksum(w.arena[from:], crcTable)), from: int32(from), to: int32(len(w.arena))})
	return len(w.rows) < stockWindow && len(w.arena) < stockWindowBytes
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
	clear(w.rows) // let the EANs go
	w.rows, w.arena = w.rows[:0], w.arena[:0]
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
		store := w.rows[idx[start]].store
		end := start + 1
		for end < len(idx) && w.rows[idx[end]].store == store {
			end++
		}
		if err := w.readHeld(store, idx[start:end]); err != nil {
			return 0, err
		}
		for _, i := range idx[start:end] {
			if err := w.compare(i); err != nil {
				return 0, err
			}
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
	// In the table's order: writes that meet their pages in turn. Stable:
	// the rows of one pair stay in file order.
	if !slices.IsSortedFunc(w.order, w.compareRows) {
		slices.SortStableFunc(w.order, w.compareRows)
	}
	w.write = w.write[:0]
	var repeats []int32
	for _, i := range w.order {
		if w.rows[i].repeats {
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
	if c := strings.Compare(x.store, y.store); c != 0 {
		return c
	}
	return strings.Compare(x.ean, y.ean)
}

// scanSlack bounds a range scan at this many stored rows per row of the run
// (and stockBatch/8 more, for a short run): a range that holds more than
// that is read by its EANs instead, so that a batch never reads much more
// than its own rows, however few of a large store's articles a file names.
const scanSlack = 8

// stockHeldSQL reads the stored rows of one store that cond selects, at most
// ?4 of them: how many, and their EANs and digests as one text,
// "EAN:DIGEST,EAN:DIGEST,…" (a row without a digest is left out), which
// parseHeld reads. One text rather than a result row per stored row: going
// through database/sql row by row costs twice what SQLite's scan does. ?1
// is the client, ?2 the store.
func stockHeldSQL(cond string) string {
	return `SELECT count(*), group_concat(ean || ':' || digest, ',')
	FROM (SELECT ean, digest FROM stock WHERE client_id = ?1 AND store_id = ?2 AND ` + cond + ` LIMIT ?4)`
}

// readHeld reads into held the stored rows of the run idx of one store,
// which is sorted by EAN: those in the range of its EANs, or, when that range
// holds many more rows than the run, those of its EANs.
func (w *stockWriter) readHeld(store string, idx []int32) error {
	clear(w.held)
	limit := scanSlack*len(idx) + stockBatch/8
	scan, err := w.stmt(stockScanSQL)
	if err != nil {
		return fmt.Errorf("prepare stock scan: %w", err)
	}
	n, err := w.readText(scan, w.client, store, w.rows[idx[0]].ean, limit, w.rows[idx[len(idx)-1]].ean)
	if err != nil || n < limit {
		return err
	}
	clear(w.held)
	eans := make([]string, len(idx))
	for j, i := range idx {
		eans[j] = w.rows[i].ean
	}
	list, _ := json.Marshal(eans)
	lookup, err := w.stmt(stockListSQL)
	if err != nil {
		return fmt.Errorf("prepare stock lookup: %w", err)
	}
	_, err = w.readText(lookup, w.client, store, string(list), -1)
	return err
}

// readText runs a query of stockHeldSQL and puts the rows it reads in held.
func (w *stockWriter) readText(stmt *sql.Stmt, args ...any) (int, error) {
	var n int
	if err := stmt.QueryRowContext(w.ctx, args...).Scan(&n, &w.text); err != nil {
		return 0, fmt.Errorf("read stock: %w", err)
	}
	parseHeld(w.text, w.held)
	return n, nil
}

// parseHeld reads "EAN:DIGEST,…" into held by eanKey. An entry that is not
// digits, a colon and a number is passed over: the EANs of the stock are
// digits (the feed checks them), and a row passed over is written anew.
func parseHeld(text []byte, held map[uint64]heldRow) {
	for len(text) > 0 {
		entry := text
		if i := bytes.IndexByte(text, ','); i >= 0 {
			entry, text = text[:i], text[i+1:]
		} else {
			text = nil
		}
		colon := bytes.IndexByte(entry, ':')
		if colon < 0 {
			continue
		}
		key, ok := eanKey(string(entry[:colon])) // no allocation: the conversion does not escape
		digest, err := strconv.ParseInt(string(entry[colon+1:]), 10, 64)
		if ok && err == nil {
			held[key] = heldRow{digest: digest, ok: true}
		}
	}
}

// repeated tells whether the stored row of r's pair was written by this
// upload: for a row that repeats a pair whose earlier row was in an earlier
// batch. One lookup a repeated row, which a file has few of.
func (w *stockWriter) repeated(r *windowRow) (bool, error) {
	lookup, err := w.stmt(stockMineSQL)
	if err != nil {
		return false, fmt.Errorf("prepare stock lookup: %w", err)
	}
	var mine bool
	err = lookup.QueryRowContext(w.ctx, w.upid, w.client, r.store, r.ean).Scan(&mine)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("read stock: %w", err)
	}
	return mine, nil
}

// compare decides whether row i is written, counting the pairs put and
// written.
func (w *stockWriter) compare(i int32) error {
	r := &w.rows[i]
	if !r.repeats {
		w.pairs++
	}
	w.noteSold(r)
	key, keyed := eanKey(r.ean)
	h, found := w.held[key]
	if keyed && found && h.ok && h.digest == r.digest && !r.repeats {
		return nil // held exactly so: nothing to write
	}
	// A row of a pair not yet put is a pair written; a repeated one is,
	// unless an earlier row of the pair was written.
	if !r.repeats || !keyed {
		if !r.repeats {
			w.written++
		}
	} else if !(found && h.mine) {
		mine, err := w.repeated(r)
		if err != nil {
			return err
		}
		if !mine {
			w.written++
		}
	}
	if keyed {
		w.held[key] = heldRow{digest: r.digest, ok: true, mine: true}
	}
	w.write = append(w.write, i)
	return nil
}

// noteSold notes a row put for a pair in sold.
func (w *stockWriter) noteSold(r *windowRow) {
	if len(w.sold) > 0 {
		k := stockKey{r.store, r.ean}
		if _, ok := w.sold[k]; ok {
			w.sold[k] = true
		}
	}
}

// eanKey packs an EAN of up to 14 digits (every GTIN) into a number that
// tells apart EANs that differ only in leading zeros: its value times 256
// plus its length, which parseHeld computes alike from the stored text.
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
	queries := &stockUpserts[0]
	if differing {
		queries = &stockUpserts[1]
	}
	changed := 0
	for len(idx) > 0 {
		size := 0
		for 1<<(size+1) <= min(len(idx), stockBatch) {
			size++
		}
		n := 1 << size
		stmt, err := w.stmt(queries[size])
		if err != nil {
			return 0, fmt.Errorf("prepare stock upsert: %w", err)
		}
		w.args = append(w.args[:0], w.fixed[:]...)
		for _, i := range idx[:n] {
			r := &w.rows[i]
			w.args = append(w.args, r.store, r.ean)
			w.args = appendValueArgs(w.args, w.arena[r.from:r.to])
			w.args = append(w.args, r.digest)
		}
		res, err := stmt.ExecContext(w.ctx, w.args...)
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

// stockValues appends to buf the values a row sets, each number in 8
// bytes and each text behind its length, so that no two rows' values encode
// alike. Its CRC-64 (ECMA) is the row's digest, stored with the row: a CRC
// of 64 bits tells apart every two encodings that differ only within 8
// bytes of each other, which any change of one number is; other changes it
// misses once in 2^64.
func stockValues(buf []byte, r *storelink.StockRow) []byte {
	buf = binary.LittleEndian.AppendUint64(buf, uint64(r.Quantity))
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
	return buf
}

// appendValueArgs appends the values stockValues encoded in v, as the
// upsert binds them: article number, quantity, price, retail price (nil
// when none), location, name, number, colour and size.
func appendValueArgs(args []any, v []byte) []any {
	qty := int(int64(binary.LittleEndian.Uint64(v)))
	price := int64(binary.LittleEndian.Uint64(v[8:]))
	v = v[16:]
	var retail any
	if v[0] == 1 {
		retail = int64(binary.LittleEndian.Uint64(v[1:]))
		v = v[9:]
	} else {
		v = v[1:]
	}
	var text [6]string
	for k := range text {
		n, size := binary.Uvarint(v)
		text[k] = string(v[size : size+int(n)])
		v = v[size+int(n):]
	}
	return append(args, text[0], qty, price, retail, text[1], text[2], text[3], text[4], text[5])
}
