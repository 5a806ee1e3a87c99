package sqlite

import (
	"bytes"
	"cmp"
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
	"unsafe"

	"storelink"
	"storelink/service"
)

// stockBatch is the most rows one multi-row upsert writes (15 values a row
// stays well under SQLite's limit of 32766).
const stockBatch = 256

// The put rows are held in a window, sorted by store and EAN, and compared
// and written in runs of stockWindow rows of that order: the stored rows a
// run replaces are read with one scan (or one lookup) per store, and its
// writes meet the table's pages in turn. A file that comes in that order
// (store by store, each store's EANs rising) is written a run at a time as
// it is read, its writes overlapping the parse. A file in any other order
// (article by article, or none) is held whole, up to stockWindowBytes of
// window, and then written in the table's order as one in order would be:
// windows of a few thousand rows would each take some rows of every store,
// spread over its range, and so read and write each store's pages once a
// window. A row costs windowRowBytes and its values (windowValues): about
// 85 bytes for a line of BenchmarkStockImport's feed, so that a 10 MiB file
// of such lines is one window.
//
// Variables, so that a test can make windows small.
var (
	stockWindow      = 32768
	stockWindowBytes = 16 << 20
)

// windowRowBytes is what a row costs the window besides its values: the
// row, its place in order and its sortKey.
const windowRowBytes = int(unsafe.Sizeof(windowRow{})+unsafe.Sizeof(sortKey{})) + 4

// stockWriter compares put rows with the stock rows they would replace and
// writes only the rows whose values differ, the rows of new store/EAN pairs
// and the rows that repeat a pair of the file (StockRow.Repeats). The window
// (see stockWindow) is sorted by store and EAN and taken in runs of
// stockWindow rows, each compared in one of two ways:
//
//   - read: the stored rows of each store's part of the run are read with
//     one scan of the range of EANs it covers, and each row's digest (of
//     stockValues) is compared with the stored one; the rows that differ are
//     upserted. Reading a row costs less than upserting it, so this is the
//     way when most rows are as stored;
//   - upsert: the run is upserted with a DO UPDATE that applies only where
//     the digests differ, and the count of rows changed tells how many did.
//     This skips the read, which is the way when most rows differ (a first
//     import, prices changed everywhere).
//
// A run is read first, and the next one is upserted when more than half of
// a run's rows were written. Rows of one pair keep their file order and
// stay in one run, and a run's writes are made before the next run is read,
// so a later row of a pair compares with what an earlier one wrote, and
// wins.
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

	// The rows put since the last flush, in file order, and their values
	// (windowValues), each kept in blocks of a fixed size: a window grows
	// by a block at a time, never copying what it holds nor keeping room
	// it does not use (row, values).
	blocks   [][]windowRow
	n        int // rows in blocks
	arenas   [][]byte
	bytes    int                // what the window's rows cost, as stockWindowBytes counts
	storeIDs []string           // the store ids put, by windowRow.store
	stores   map[string]uint32  // the index of each store id in storeIDs
	rank     []uint32           // each store's place among storeIDs sorted, by index
	odd      []string           // the EANs eanKey does not pack, by windowRow.ean
	order    []int32            // the rows' indices, by store and EAN
	keys     []sortKey          // what sortWindow sorts
	write    []int32            // the indices of the run's rows to write
	held     map[uint64]heldRow // the stored rows of one store's run, by eanKey
	args     []any
	scratch  []byte // the row being added, encoded
	upsertN  bool   // upsert the next run rather than read it

	// inOrder tells whether every row put so far came in the window's order
	// (store, then EAN), with last the latest one: such a file's window is
	// written every stockWindow rows.
	inOrder bool
	last    windowRow
	hasLast bool

	text []byte // what readText read

	// pairs counts the store/EAN pairs put (rows without Repeats), written
	// those of them written by this upload.
	pairs, written int

	// sold holds the pairs at which sold units still reserve stock, each true once a row for it was put (ReleaseFulfilled);
	// nil until the first run reads them. soldEANs holds their EANs' keys.
	sold     map[stockKey]bool
	soldEANs map[uint64]bool
}

// heldRow is what the writer knows of a stored row: its digest (!ok for a
// row written before digests were kept), and whether this upload wrote it
// (only known of rows written in the run at hand; repeated reads it).
type heldRow struct {
	digest int64
	ok     bool
	mine   bool
}

type stockKey struct{ store, ean string }

// windowRow is a put row as the window keeps it, in 24 bytes and no
// allocation of its own: its EAN as eanKey packs it (or oddEAN and its
// place in odd), the digest of its values (of stockValues), where its
// values start in the arena (windowValues, which read back tells where
// they end) and its store's index, with repeatsBit when it repeats a pair.
type windowRow struct {
	ean    uint64
	digest int64
	from   uint32
	store  uint32
}

const (
	repeatsBit = 1 << 31
	oddEAN     = 1 << 63
)

func (r *windowRow) repeats() bool   { return r.store&repeatsBit != 0 }
func (r *windowRow) storeIx() uint32 { return r.store &^ repeatsBit }

// The blocks of the window: rowBlock rows, arenaBlock bytes of values (a
// row's values that take more have a block of their own). A row's from is
// its block's index times arenaBlock plus where in the block they start.
const (
	rowBlock   = 4096
	arenaBlock = 1 << 16
)

// row is row i of the window.
func (w *stockWriter) row(i int32) *windowRow { return &w.blocks[i/rowBlock][i%rowBlock] }

// values are the values of r, and what follows them in their block.
func (w *stockWriter) values(r *windowRow) []byte {
	return w.arenas[r.from/arenaBlock][r.from%arenaBlock:]
}

// keep adds a row with its values v to the window.
func (w *stockWriter) keep(row windowRow, v []byte) {
	last := len(w.arenas) - 1
	if last < 0 || len(w.arenas[last])+len(v) > arenaBlock {
		w.arenas = append(w.arenas, make([]byte, 0, max(arenaBlock, len(v))))
		last++
	}
	row.from = uint32(last*arenaBlock + len(w.arenas[last]))
	w.arenas[last] = append(w.arenas[last], v...)
	if w.n%rowBlock == 0 && w.n/rowBlock == len(w.blocks) {
		w.blocks = append(w.blocks, make([]windowRow, rowBlock))
	}
	*w.row(int32(w.n)) = row
	w.n++
	w.bytes += len(v) + windowRowBytes
}

func newStockWriter(ctx context.Context, tx *sql.Tx, stmt func(string) (*sql.Stmt, error), p service.StockWriterParams) *stockWriter {
	return &stockWriter{ctx: ctx, tx: tx, stmt: stmt, fixed: [3]any{p.ClientID, p.UploadID, ms(p.Now())}, client: p.ClientID,
		upid: p.UploadID, soldList: statusList(p.Sold), held: make(map[uint64]heldRow, stockBatch), inOrder: true}
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
	w.sold, w.soldEANs = map[stockKey]bool{}, map[uint64]bool{}
	for rows.Next() {
		var k stockKey
		if err := rows.Scan(&k.store, &k.ean); err != nil {
			return fmt.Errorf("read sold units: %w", err)
		}
		w.sold[k] = false
		if key, ok := eanKey(k.ean); ok {
			w.soldEANs[key] = true
		}
	}
	return rows.Err()
}

func (w *stockWriter) put(r storelink.StockRow) error {
	if w.add(&r) {
		return nil
	}
	return w.flush()
}

// add adds r to the window, and tells whether the window has room for more:
// it has none past stockWindowBytes, nor, while the rows come in the
// window's order, past stockWindow rows.
func (w *stockWriter) add(r *storelink.StockRow) bool {
	if w.stores == nil {
		w.stores = map[string]uint32{}
	}
	store, ok := w.stores[r.StoreID]
	if !ok {
		store = uint32(len(w.storeIDs))
		w.storeIDs = append(w.storeIDs, strings.Clone(r.StoreID))
		w.stores[w.storeIDs[store]] = store
	}
	ean, keyed := eanKey(r.EAN)
	if !keyed {
		ean = oddEAN | uint64(len(w.odd))
		w.odd = append(w.odd, strings.Clone(r.EAN))
	}
	w.scratch = stockValues(w.scratch[:0], r)
	row := windowRow{ean: ean, digest: int64(crc64.Checksum(w.scratch, crcTable)), store: store}
	if r.Repeats {
		row.store |= repeatsBit
	}
	w.scratch = windowValues(w.scratch[:0], r)
	w.keep(row, w.scratch)
	if w.inOrder && w.hasLast && w.compareKeys(&w.last, &row, false) > 0 {
		w.inOrder = false
	}
	w.last, w.hasLast = row, true
	if w.inOrder && w.n >= stockWindow {
		return false
	}
	return w.bytes < stockWindowBytes
}

// flush sorts the rows put since the last flush by store and EAN, and
// compares and writes them a run at a time.
func (w *stockWriter) flush() error {
	if w.n == 0 {
		return nil
	}
	if w.sold == nil {
		if err := w.readSold(); err != nil {
			return err
		}
	}
	w.sortWindow()
	for start := 0; start < len(w.order); {
		end := min(start+stockWindow, len(w.order))
		for end < len(w.order) && w.compareKeys(w.row(w.order[end-1]), w.row(w.order[end]), true) == 0 {
			end++ // the rows of one pair stay in one run
		}
		run := w.order[start:end]
		var wrote int
		var err error
		if w.upsertN {
			wrote, err = w.upsertBatch(run)
		} else {
			wrote, err = w.readBatch(run)
		}
		if err != nil {
			return err
		}
		w.upsertN = 2*wrote > len(run)
		start = end
	}
	w.reset()
	return nil
}

// reset empties the window, keeping its memory for the next one.
func (w *stockWriter) reset() {
	w.n, w.bytes, w.odd = 0, 0, w.odd[:0]
	// The blocks of values are kept for the next window, but for those of
	// one large row's.
	kept := w.arenas[:0]
	for _, a := range w.arenas {
		if cap(a) == arenaBlock {
			kept = append(kept, a[:0])
		}
	}
	clear(w.arenas[len(kept):])
	w.arenas = kept
	if w.last.ean&oddEAN != 0 {
		w.inOrder = false // the last row's EAN is gone with odd: its order is not known
	}
}

// sortKey is a row's place in the window's order in one number, its
// store's rank above its EAN's key, and the row's index.
type sortKey struct {
	key uint64
	i   int32
}

// sortWindow sets order to the window's rows by store and EAN, and the
// rows of one pair by file order. Their keys are packed in sortKeys when
// they fit (every EAN packed, at most 4096 stores): sorting those costs a
// third of comparing the rows.
func (w *stockWriter) sortWindow() {
	w.rankStores()
	w.order = slices.Grow(w.order[:0], w.n)[:w.n]
	if len(w.odd) > 0 || len(w.storeIDs) > 1<<12 {
		for i := range w.order {
			w.order[i] = int32(i)
		}
		byKey := func(a, b int32) int {
			return cmp.Or(w.compareKeys(w.row(a), w.row(b), true), cmp.Compare(a, b))
		}
		if !slices.IsSortedFunc(w.order, byKey) {
			slices.SortFunc(w.order, byKey)
		}
		return
	}
	keys := slices.Grow(w.keys[:0], w.n)[:w.n]
	for i := range keys {
		r := w.row(int32(i))
		keys[i] = sortKey{key: uint64(w.rank[r.storeIx()])<<51 | r.ean, i: int32(i)} // an EAN's key is below 2^51
	}
	bySortKey := func(a, b sortKey) int { return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.i, b.i)) }
	if !slices.IsSortedFunc(keys, bySortKey) {
		slices.SortFunc(keys, bySortKey)
	}
	for j, k := range keys {
		w.order[j] = k.i
	}
	w.keys = keys
}

// rankStores sets rank to each store's place among the store ids sorted:
// the window's order is theirs, as it is the table's.
func (w *stockWriter) rankStores() {
	byID := make([]uint32, len(w.storeIDs))
	for i := range byID {
		byID[i] = uint32(i)
	}
	slices.SortFunc(byID, func(a, b uint32) int { return strings.Compare(w.storeIDs[a], w.storeIDs[b]) })
	w.rank = slices.Grow(w.rank[:0], len(byID))[:len(byID)]
	for place, i := range byID {
		w.rank[i] = uint32(place)
	}
}

// compareKeys compares the store and EAN of two rows as the table orders
// them (ranked: by rank, which flush sets; otherwise by the store ids).
func (w *stockWriter) compareKeys(x, y *windowRow, ranked bool) int {
	if a, b := x.storeIx(), y.storeIx(); a != b {
		if ranked {
			return cmp.Compare(w.rank[a], w.rank[b])
		}
		return strings.Compare(w.storeIDs[a], w.storeIDs[b])
	}
	if (x.ean|y.ean)&oddEAN == 0 {
		return cmp.Compare(x.ean, y.ean)
	}
	return strings.Compare(w.eanOf(x.ean), w.eanOf(y.ean))
}

// readBatch reads the stored rows of the rows idx, which are in the
// window's order, compares and writes those that differ, and returns how
// many it wrote.
func (w *stockWriter) readBatch(idx []int32) (int, error) {
	w.write = w.write[:0]
	for start := 0; start < len(idx); {
		store := w.row(idx[start]).storeIx()
		end := start + 1
		for end < len(idx) && w.row(idx[end]).storeIx() == store {
			end++
		}
		if err := w.readHeld(w.storeIDs[store], idx[start:end]); err != nil {
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

// upsertBatch upserts the rows idx, which are in the window's order, where
// the digests differ, counting the changed rows as written; a row that
// repeats a pair is read and written after the others, as readBatch does,
// since whether its pair counts as written depends on the rows before it.
func (w *stockWriter) upsertBatch(idx []int32) (int, error) {
	w.write = w.write[:0]
	var repeats []int32
	for _, i := range idx {
		if w.row(i).repeats() {
			repeats = append(repeats, i)
			continue
		}
		w.pairs++
		w.noteSold(w.row(i))
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
	n, err := w.readText(scan, w.client, store, w.eanOf(w.row(idx[0]).ean), limit, w.eanOf(w.row(idx[len(idx)-1]).ean))
	if err != nil || n < limit {
		return err
	}
	clear(w.held)
	eans := make([]string, len(idx))
	for j, i := range idx {
		eans[j] = w.eanOf(w.row(i).ean)
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
	err = lookup.QueryRowContext(w.ctx, w.upid, w.client, w.storeIDs[r.storeIx()], w.eanOf(r.ean)).Scan(&mine)
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
	r := w.row(i)
	repeats := r.repeats()
	if !repeats {
		w.pairs++
	}
	w.noteSold(r)
	key, keyed := r.ean, r.ean&oddEAN == 0
	h, found := w.held[key]
	if keyed && found && h.ok && h.digest == r.digest && !repeats {
		return nil // held exactly so: nothing to write
	}
	// A row of a pair not yet put is a pair written; a repeated one is,
	// unless an earlier row of the pair was written.
	if !repeats || !keyed {
		if !repeats {
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
	if len(w.sold) > 0 && (r.ean&oddEAN != 0 || w.soldEANs[r.ean]) {
		k := stockKey{w.storeIDs[r.storeIx()], w.eanOf(r.ean)}
		if _, ok := w.sold[k]; ok {
			w.sold[k] = true
		}
	}
}

// eanKey packs an EAN of 1 to 14 digits (every GTIN) into a number that
// orders as the text does (SQLite's BINARY collation) and tells apart EANs
// that differ only in leading zeros: its digits padded with zeros on the
// right to 14, times 16, plus its length. parseHeld computes it alike from
// the stored text, and eanOf turns it back.
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
	return v*pow10[14-len(ean)]<<4 | uint64(len(ean)), true
}

var pow10 = func() (p [15]uint64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = 10 * p[i-1]
	}
	return p
}()

// eanOf is the EAN of a windowRow's ean.
func (w *stockWriter) eanOf(key uint64) string {
	if key&oddEAN != 0 {
		return w.odd[key&^oddEAN]
	}
	n := int(key & 15)
	v := key >> 4 / pow10[14-n]
	var b [14]byte
	for i := n - 1; i >= 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return string(b[:n])
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
			r := w.row(i)
			w.args = append(w.args, w.storeIDs[r.storeIx()], w.eanOf(r.ean))
			w.args = appendValueArgs(w.args, w.values(r))
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

// windowValues appends to buf the values a row sets as the window keeps
// them, shorter than stockValues' encoding: each number as a varint, the
// retail price behind a byte that tells whether there is one, each text
// behind its length.
func windowValues(buf []byte, r *storelink.StockRow) []byte {
	buf = binary.AppendVarint(buf, int64(r.Quantity))
	buf = binary.AppendVarint(buf, int64(r.Price))
	if r.RetailPrice != nil {
		buf = append(buf, 1)
		buf = binary.AppendVarint(buf, int64(*r.RetailPrice))
	} else {
		buf = append(buf, 0)
	}
	for _, s := range [...]string{r.ArticleNumber, r.ArticleLocation, r.ProductName, r.ProductNumber, r.ArticleColor, r.ArticleSize} {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	return buf
}

// appendValueArgs appends the values windowValues encoded at the start of
// v, as the upsert binds them: article number, quantity, price, retail
// price (nil when none), location, name, number, colour and size.
func appendValueArgs(args []any, v []byte) []any {
	qty, size := binary.Varint(v)
	v = v[size:]
	price, size := binary.Varint(v)
	v = v[size:]
	var retail any
	if v[0] == 1 {
		p, size := binary.Varint(v[1:])
		retail = p
		v = v[1+size:]
	} else {
		v = v[1:]
	}
	var text [6]string
	for k := range text {
		n, size := binary.Uvarint(v)
		text[k] = string(v[size : size+int(n)])
		v = v[size+int(n):]
	}
	return append(args, text[0], int(qty), price, retail, text[1], text[2], text[3], text[4], text[5])
}
