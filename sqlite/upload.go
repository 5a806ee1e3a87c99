package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"storelink"
	"storelink/service"
)

var _ service.UploadDriver = (*uploads)(nil)

// uploads is the driver of the upload and stock calls.
type uploads struct{ db *DB }

// Transient is always false: with one writer no transaction is ever a
// deadlock's victim.
func (d *uploads) Transient(error) bool { return false }

// Fault turns a write that found the disk full into ENOSPACE.
func (d *uploads) Fault(err error) error { return Fault(err) }

// Begin starts a write transaction on the write pool, as the background
// loops' transactions do, once the upload calls' turn (uploadTurn) is its:
// the upload calls are not order calls and do not take the order calls'
// turn.
func (d *uploads) Begin(ctx context.Context) (service.UploadTx, error) {
	return d.begin(ctx, d.db.uploadTurn.take)
}

// BeginAhead is Begin that goes ahead of those waiting for the upload
// calls' turn (UploadDriver.BeginAhead): a cancel that came while an apply
// held the turn is made before the claim that would pick its upload up
// next, whenever that claim asked.
func (d *uploads) BeginAhead(ctx context.Context) (service.UploadTx, error) {
	return d.begin(ctx, d.db.uploadTurn.takeAhead)
}

func (d *uploads) begin(ctx context.Context, take func(context.Context) error) (service.UploadTx, error) {
	if err := take(ctx); err != nil {
		return nil, err
	}
	tx, err := d.db.write.BeginTx(ctx, nil)
	if err != nil {
		d.db.uploadTurn.give()
		return nil, err
	}
	return &uploadTx{db: d.db, tx: tx}, nil
}

// uploadTx is a transaction begun by uploads.Begin. Every statement is
// sent when its method is called: SQLite is in the process, so a statement
// costs no round trip.
type uploadTx struct {
	db    *DB
	tx    *sql.Tx
	w     *stockWriter // made by StockWriter
	ended bool         // the turn was given back
	// stmts holds the statements bound to tx (stmt).
	stmts map[string]*sql.Stmt
}

// stmt returns query's statement bound to the transaction, once per
// transaction: prepared when the database was opened (uploadStatements),
// or else now. The transaction closes it when it ends.
func (t *uploadTx) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if s := t.stmts[query]; s != nil {
		return s, nil
	}
	var s *sql.Stmt
	if p := t.db.prepared[query]; p != nil {
		s = t.tx.StmtContext(ctx, p)
	} else {
		var err error
		if s, err = t.tx.PrepareContext(ctx, query); err != nil {
			return nil, err
		}
	}
	if t.stmts == nil {
		t.stmts = map[string]*sql.Stmt{}
	}
	t.stmts[query] = s
	return s, nil
}

// exec runs a statement with stmt.
func (t *uploadTx) exec(ctx context.Context, query string, args ...any) error {
	s, err := t.stmt(ctx, query)
	if err == nil {
		_, err = s.ExecContext(ctx, args...)
	}
	return err
}

// uploadStatements are the statements of the upload calls' transactions
// (accepts, claims, applies), prepared once on the write connection
// (DB.prepare): parsing them again each time cost a small upload about a
// fifth of its accept and half of its apply (docs/benchmarks.md).
var uploadStatements = slices.Concat([]string{bucketSQL, waitingSQL, putBucketSQL, insertUploadSQL, insertChunkSQL, insertBodySQL,
	finishSQL, errorFileSQL, lockUploadsSQL, lockStoresSQL, claimableSQL, leaseSQL}, stockStatements)

// Commit commits and gives the turn back. When it returns nil what was
// written is on disk (synchronous=FULL).
func (t *uploadTx) Commit(context.Context) error {
	t.w = nil
	err := t.tx.Commit()
	t.end()
	if err != nil {
		return fmt.Errorf("commit upload transaction: %w", err)
	}
	return nil
}

// Rollback rolls back and gives the turn back; after Commit it does
// nothing.
func (t *uploadTx) Rollback(context.Context) error {
	t.w = nil
	err := t.tx.Rollback()
	t.end()
	if !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}

func (t *uploadTx) end() {
	if !t.ended {
		t.ended = true
		t.db.uploadTurn.give()
	}
}

// Savepoint makes a savepoint. (Its statement journal copies the pages
// the upload's writes change for the first time since the savepoint: a
// small file's few.)
func (t *uploadTx) Savepoint(ctx context.Context) error {
	_, err := t.tx.ExecContext(ctx, `SAVEPOINT upload`)
	return err
}

// RollbackToSavepoint rolls back to the savepoint, and drops the writer,
// whose rows are undone.
func (t *uploadTx) RollbackToSavepoint(ctx context.Context) error {
	t.w = nil
	_, err := t.tx.ExecContext(ctx, `ROLLBACK TO upload`)
	return err
}

// ReleaseSavepoint releases the savepoint.
func (t *uploadTx) ReleaseSavepoint(ctx context.Context) error {
	_, err := t.tx.ExecContext(ctx, `RELEASE upload`)
	return err
}

// LockBucket reads the bucket: the transaction holds the one write
// connection, so no other writer runs until it ends.
func (t *uploadTx) LockBucket(ctx context.Context, p service.LockBucketParams) (service.ClientBucket, error) {
	read, err := t.stmt(ctx, bucketSQL)
	if err != nil {
		return service.ClientBucket{}, err
	}
	b, err := scanBucket(read.QueryRowContext(ctx, p.ClientID))
	if err != nil || p.Waiting == "" {
		return b, err
	}
	count, err := t.stmt(ctx, waitingSQL)
	if err != nil {
		return service.ClientBucket{}, err
	}
	if err := count.QueryRowContext(ctx, p.ClientID, p.Waiting).Scan(&b.Waiting); err != nil {
		return service.ClientBucket{}, fmt.Errorf("count waiting uploads: %w", err)
	}
	return b, nil
}

// waitingSQL counts a client's uploads in a status (?2) among the
// unfinished. It goes through the index of unfinished uploads, which stays
// small, rather than the client's index, which holds every upload the
// client ever sent; the status term that names the index's statuses is
// what lets SQLite use a partial index.
const waitingSQL = `SELECT count(*) FROM uploads INDEXED BY uploads_unfinished
	WHERE status IN ('accepted', 'processing') AND status = ?2 AND client_id = ?1`

// bucketSQL reads a client's bucket and store count.
const bucketSQL = `SELECT (SELECT count(*) FROM stores WHERE client_id = c.id), k.tokens, k.updated_at
	FROM clients c LEFT JOIN capacity k ON k.client_id = c.id WHERE c.id = ?`

// scanBucket reads the row of bucketSQL; service.ErrNotFound for no
// client.
func scanBucket(row *sql.Row) (service.ClientBucket, error) {
	var b service.ClientBucket
	var tokens sql.NullFloat64
	var updated sql.NullInt64
	err := row.Scan(&b.Stores, &tokens, &updated)
	if err != nil {
		return b, noRow(err)
	}
	if tokens.Valid {
		b.Bucket = &storelink.Bucket{Tokens: tokens.Float64, UpdatedAt: fromMS(updated.Int64)}
	}
	return b, nil
}

// InsertUpload writes the bucket, the upload, the last pieces of its file
// and the row that names the file. Nothing else is told: only one process
// holds the database, and its server wakes its own processor after an
// accept.
func (t *uploadTx) InsertUpload(ctx context.Context, u *storelink.Upload, f service.NewFile, next storelink.Bucket) error {
	if err := t.exec(ctx, putBucketSQL, u.ClientID, next.Tokens, ms(next.UpdatedAt)); err != nil {
		return fmt.Errorf("update capacity: %w", err)
	}
	if err := t.exec(ctx, insertUploadSQL, u.ID, u.ClientID, u.FileName, u.SizeBytes, u.SHA256, u.Status, ms(u.ReceivedAt)); err != nil {
		return err
	}
	for i, c := range f.Chunks {
		if err := t.exec(ctx, insertChunkSQL, f.ID, f.First+i, c); err != nil {
			return fmt.Errorf("insert upload file: %w", err)
		}
	}
	if err := t.exec(ctx, insertBodySQL, u.ID, f.ID); err != nil {
		return fmt.Errorf("insert upload file: %w", err)
	}
	return nil
}

const (
	putBucketSQL = `INSERT INTO capacity (client_id, tokens, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (client_id) DO UPDATE SET tokens = excluded.tokens, updated_at = excluded.updated_at`
	insertUploadSQL = `INSERT INTO uploads (id, client_id, file_name, size_bytes, sha256, status, received_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`
	insertChunkSQL = `INSERT INTO upload_chunks (file_id, n, data) VALUES (?, ?, ?)`
	insertBodySQL  = `INSERT INTO upload_bodies (upload_id, file_id) VALUES (?, ?)`
)

// PutChunks writes each piece in a transaction of its own, in the upload
// calls' turn: an accept, a claim or an apply waits for one piece, never
// for a whole file. Each commit is on disk before the next piece (one
// fsync of the WAL per piece, a millisecond or two here; see
// docs/benchmarks.md).
func (d *uploads) PutChunks(ctx context.Context, fileID string, first int, chunks storelink.Chunks) error {
	for i, c := range chunks {
		if err := d.db.uploadTurn.take(ctx); err != nil {
			return err
		}
		_, err := d.db.write.ExecContext(ctx, insertChunkSQL, fileID, first+i, c)
		d.db.uploadTurn.give()
		if err != nil {
			return fmt.Errorf("insert upload file: %w", err)
		}
	}
	return nil
}

// DropFile removes the pieces of a file no upload names, in one statement.
func (d *uploads) DropFile(ctx context.Context, fileID string) error {
	if err := d.db.uploadTurn.take(ctx); err != nil {
		return err
	}
	defer d.db.uploadTurn.give()
	_, err := d.db.write.ExecContext(ctx, `DELETE FROM upload_chunks WHERE file_id = ?1
		AND NOT EXISTS (SELECT 1 FROM upload_bodies WHERE file_id = ?1)`, fileID)
	return err
}

// DropOrphanFiles reads the files' ids and removes their pieces, in one
// transaction.
func (d *uploads) DropOrphanFiles(ctx context.Context, before string, limit int) (int, error) {
	if err := d.db.uploadTurn.take(ctx); err != nil {
		return 0, err
	}
	defer d.db.uploadTurn.give()
	tx, err := d.db.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, `SELECT DISTINCT file_id FROM upload_chunks c WHERE file_id < ?
		AND NOT EXISTS (SELECT 1 FROM upload_bodies b WHERE b.file_id = c.file_id) LIMIT ?`, before, limit)
	if err != nil {
		return 0, err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, rows.Err()
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM upload_chunks WHERE file_id IN (SELECT value FROM json_each(?))`, jsonList(ids)); err != nil {
		return 0, err
	}
	return len(ids), tx.Commit()
}

// LockUploads reads the lease owners and the clients' stores, two
// queries: the transaction holds the one write connection, which is
// SQLite's lock.
const (
	lockUploadsSQL = `SELECT id, coalesce(lease_owner, '') FROM uploads
		WHERE id IN (SELECT value FROM json_each(?)) AND status = ?`
	lockStoresSQL = `SELECT client_id, id FROM stores WHERE client_id IN (SELECT value FROM json_each(?))`
)

func (t *uploadTx) LockUploads(ctx context.Context, p service.LockUploadsParams) (service.LockedUploads, error) {
	owners, stores, err := t.lockUploads(ctx, p.IDs, p.ClientIDs, p.Processing)
	return service.LockedUploads{Owners: owners, Stores: stores}, err
}

func (t *uploadTx) lockUploads(ctx context.Context, ids, clientIDs []string, processing storelink.UploadStatus) ([]string, map[string]map[string]bool, error) {
	owner := make(map[string]string, len(ids))
	lock, err := t.stmt(ctx, lockUploadsSQL)
	if err != nil {
		return nil, nil, err
	}
	rows, err := lock.QueryContext(ctx, jsonList(ids), processing)
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var id, o string
		if err := rows.Scan(&id, &o); err != nil {
			rows.Close()
			return nil, nil, err
		}
		owner[id] = o
	}
	if err := rows.Close(); err != nil {
		return nil, nil, err
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	owners := make([]string, len(ids))
	for i, id := range ids {
		owners[i] = owner[id]
	}
	stores := make(map[string]map[string]bool, len(clientIDs))
	for _, c := range clientIDs {
		stores[c] = map[string]bool{}
	}
	list, err := t.stmt(ctx, lockStoresSQL)
	if err != nil {
		return nil, nil, err
	}
	rows, err = list.QueryContext(ctx, jsonList(slices.Collect(maps.Keys(stores))))
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var client, store string
		if err := rows.Scan(&client, &store); err != nil {
			return nil, nil, err
		}
		stores[client][store] = true
	}
	return owners, stores, rows.Err()
}

func leaseOwner(ctx context.Context, tx *sql.Tx, id string, processing storelink.UploadStatus) (string, error) {
	var owner sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT lease_owner FROM uploads WHERE id = ? AND status = ?`, id, processing).Scan(&owner)
	return owner.String, noRow(err)
}

// StockWriter returns the writer's put: rows are held in a window and
// written in the table's order (stockWriter), stamped with the time the
// writer is made.
func (t *uploadTx) StockWriter(ctx context.Context, p service.StockWriterParams) func(storelink.StockRow) error {
	t.w = newStockWriter(ctx, t.tx, func(q string) (*sql.Stmt, error) { return t.stmt(ctx, q) }, p)
	return t.w.put
}

// ApplyStock compares and writes the rows of the last window (of a file not
// in the table's order, most often all of them); earlier windows are
// written already. The count of pairs left unchanged is written by
// FinishUpload, with the rest of the report.
func (t *uploadTx) ApplyStock(context.Context) error {
	if t.w == nil {
		return nil
	}
	return t.w.flush()
}

// DiscardStock rolls the transaction back, with the rows written so far,
// and begins another on the write connection, reading the lease owner
// again. (A savepoint would keep it to one transaction, but makes SQLite
// copy every stock page it touches into a statement journal on every
// import, rejected or not.)
func (t *uploadTx) DiscardStock(ctx context.Context, uploadID string, processing storelink.UploadStatus) (string, error) {
	t.w, t.stmts = nil, nil
	if err := t.tx.Rollback(); err != nil {
		return "", err
	}
	tx, err := t.db.write.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	t.tx = tx
	return leaseOwner(ctx, t.tx, uploadID, processing)
}

// ReleaseFulfilled ends the reservations at the pairs the writer found put
// among those it read sold: a pair whose row was left unchanged keeps the
// upload_id of an earlier upload, so the stock row cannot tell.
func (t *uploadTx) ReleaseFulfilled(ctx context.Context) error {
	if t.w == nil {
		return nil
	}
	for k, put := range t.w.sold {
		if !put {
			continue
		}
		if _, err := t.tx.ExecContext(ctx, `UPDATE order_items SET reserving = 0
			WHERE reserving = 1 AND status IN (SELECT value FROM json_each(?)) AND client_id = ? AND store_id = ? AND ean = ?`,
			t.w.soldList, t.w.client, k.store, k.ean); err != nil {
			return err
		}
	}
	return nil
}

// FinishUpload writes the report as JSON text; the upload is not read back
// here (finished stays nil), and the service reads it after the commit.
func (t *uploadTx) FinishUpload(ctx context.Context, p service.FinishParams) error {
	id, status, r, at := p.ID, p.Status, p.Report, p.At
	problems, _ := json.Marshal(r.Errors)
	warnings, _ := json.Marshal(r.Warnings)
	unchanged := 0
	if t.w != nil && status == storelink.UploadApplied {
		unchanged = t.w.unchanged()
	}
	if err := t.exec(ctx, finishSQL, status, ms(at), r.RowsTotal, r.RowsApplied, unchanged, r.RowsRejected,
		string(problems), string(warnings), p.Announce, id); err != nil {
		return err
	}
	if err := t.exec(ctx, errorFileSQL, r.ErrorFile, id); err != nil {
		return fmt.Errorf("write error file: %w", err)
	}
	return nil
}

const (
	finishSQL = `UPDATE uploads SET status = ?1, finished_at = ?2, rows_total = ?3, rows_applied = ?4,
		rows_unchanged = ?5, rows_rejected = ?6, errors = ?7, warnings = ?8, lease_owner = NULL, lease_until = NULL,
		event_due = ` + announce9SQL + ` WHERE id = ?10`
	// announce9SQL tells whether an enabled endpoint of the upload's
	// client, not deleted, names the event kind ?9 among its states (a
	// comma-separated list): through endpoints_live.
	announce9SQL = `(?9 <> '' AND EXISTS (SELECT 1 FROM endpoints e WHERE e.client_id = uploads.client_id AND e.deleted_at IS NULL
		AND e.enabled = 1 AND instr(',' || e.states || ',', ',' || ?9 || ',') > 0))`
	// cancelSQL cancels upload ?3 of client ?2 at ?1, from status ?5 to ?4,
	// its event due as finishSQL's is.
	cancelSQL = `UPDATE uploads SET status = ?4, finished_at = ?1, file_expired_at = ?1, event_due = ` +
		announce9SQL + ` WHERE client_id = ?2 AND id = ?3 AND status = ?5 RETURNING ` + uploadColumns
	errorFileSQL = `UPDATE upload_bodies SET errors_csv = ? WHERE upload_id = ?`
)

// CancelUpload cancels the upload in one statement when it is still
// accepted, and drops its bytes, or else reads it as it stands: the transaction holds the one
// write connection, so no claim comes between.
func (t *uploadTx) CancelUpload(ctx context.Context, p service.CancelParams) (service.Cancelled, error) {
	// ?6 to ?8 are unused: the kind is ?9, as in finishSQL.
	u, err := scanUpload(t.tx.QueryRowContext(ctx, cancelSQL, ms(p.At), p.ClientID, p.ID, p.To, p.From, nil, nil, nil, p.Announce))
	if err == nil {
		if _, err := t.tx.ExecContext(ctx, `DELETE FROM upload_bodies WHERE upload_id = ?`, p.ID); err != nil {
			return service.Cancelled{}, fmt.Errorf("drop upload body: %w", err)
		}
		return service.Cancelled{Upload: u, Cancelled: true}, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return service.Cancelled{}, err
	}
	u, err = scanUpload(t.tx.QueryRowContext(ctx, `SELECT `+uploadColumns+` FROM uploads WHERE client_id = ? AND id = ?`, p.ClientID, p.ID))
	return service.Cancelled{Upload: u}, noRow(err)
}

// PutBucket writes the client's bucket row, made if it is missing.
func (t *uploadTx) PutBucket(ctx context.Context, clientID string, b storelink.Bucket) error {
	return t.exec(ctx, putBucketSQL, clientID, b.Tokens, ms(b.UpdatedAt))
}
