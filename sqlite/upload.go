package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"storelink"
	"storelink/service"
)

// BeginUpload starts a write transaction on the write pool, as the
// background loops' transactions do: the upload calls are not order calls
// and do not take the order calls' turn.
func (d *Driver) BeginUpload(ctx context.Context) (service.UploadTx, error) {
	tx, err := d.db.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &uploadTx{db: d.db, tx: tx}, nil
}

// uploadTx is a transaction begun by Driver.BeginUpload. Every statement is
// sent when its method is called: SQLite is in the process, so a statement
// costs no round trip.
type uploadTx struct {
	db *DB
	tx *sql.Tx
	w  *stockWriter // made by StockWriter
}

// Commit commits. When it returns nil what was written is on disk
// (synchronous=FULL).
func (t *uploadTx) Commit(context.Context) error {
	t.closeWriter()
	if err := t.tx.Commit(); err != nil {
		return fmt.Errorf("commit upload transaction: %w", err)
	}
	return nil
}

// Rollback rolls back; after Commit it does nothing.
func (t *uploadTx) Rollback(context.Context) error {
	t.closeWriter()
	if err := t.tx.Rollback(); !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}

func (t *uploadTx) closeWriter() {
	if t.w != nil {
		t.w.close()
	}
}

// LockBucket reads the bucket: the transaction holds the one write
// connection, so no other writer runs until it ends.
func (t *uploadTx) LockBucket(ctx context.Context, clientID string, countWaiting bool) (*storelink.Bucket, int, int, error) {
	bucket, stores, err := loadBucket(ctx, t.tx, clientID)
	if err != nil || !countWaiting {
		return bucket, stores, 0, err
	}
	var waiting int
	if err := t.tx.QueryRowContext(ctx, waitingSQL, clientID).Scan(&waiting); err != nil {
		return nil, 0, 0, fmt.Errorf("count waiting uploads: %w", err)
	}
	return bucket, stores, waiting, nil
}

// waitingSQL counts a client's waiting uploads. It goes through the index of
// unfinished uploads, which stays small, rather than the client's index,
// which holds every upload the client ever sent; the repeated status term
// is what lets SQLite use a partial index.
const waitingSQL = `SELECT count(*) FROM uploads INDEXED BY uploads_unfinished
	WHERE status IN ('accepted', 'processing') AND status = 'accepted' AND client_id = ?`

// loadBucket reads a client's bucket and store count; service.ErrNotFound
// for no client.
func loadBucket(ctx context.Context, q querier, clientID string) (*storelink.Bucket, int, error) {
	var stores int
	var tokens sql.NullFloat64
	var updated sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM stores WHERE client_id = c.id), k.tokens, k.updated_at
		FROM clients c LEFT JOIN capacity k ON k.client_id = c.id WHERE c.id = ?`, clientID).Scan(&stores, &tokens, &updated)
	if err != nil {
		return nil, 0, noRow(err)
	}
	if !tokens.Valid {
		return nil, stores, nil
	}
	return &storelink.Bucket{Tokens: tokens.Float64, UpdatedAt: fromMS(updated.Int64)}, stores, nil
}

// InsertUpload writes the bucket, the upload and its bytes. Nothing else
// is told: only one process holds the file, and its server wakes its own
// processor after an accept.
func (t *uploadTx) InsertUpload(ctx context.Context, u *storelink.Upload, body []byte, next storelink.Bucket) error {
	if _, err := t.tx.ExecContext(ctx, `INSERT INTO capacity (client_id, tokens, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (client_id) DO UPDATE SET tokens = excluded.tokens, updated_at = excluded.updated_at`,
		u.ClientID, next.Tokens, ms(next.UpdatedAt)); err != nil {
		return fmt.Errorf("update capacity: %w", err)
	}
	if _, err := t.tx.ExecContext(ctx, `INSERT INTO uploads (id, client_id, file_name, size_bytes, sha256, status, received_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, u.ID, u.ClientID, u.FileName, u.SizeBytes, u.SHA256, u.Status, ms(u.ReceivedAt)); err != nil {
		return err
	}
	if _, err := t.tx.ExecContext(ctx, `INSERT INTO upload_bodies (upload_id, body) VALUES (?, ?)`, u.ID, body); err != nil {
		return fmt.Errorf("insert upload body: %w", err)
	}
	return nil
}

// LockUpload reads the lease owner and the client's stores: the
// transaction holds the one write connection, which is SQLite's lock.
func (t *uploadTx) LockUpload(ctx context.Context, id, clientID string) (string, map[string]bool, error) {
	owner, err := leaseOwner(ctx, t.tx, id)
	if err != nil {
		return "", nil, err
	}
	list, err := queryStores(ctx, t.tx, clientID)
	if err != nil {
		return "", nil, err
	}
	stores := make(map[string]bool, len(list))
	for _, s := range list {
		stores[s.ID] = true
	}
	return owner, stores, nil
}

func leaseOwner(ctx context.Context, tx *sql.Tx, id string) (string, error) {
	var owner sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT lease_owner FROM uploads WHERE id = ? AND status = 'processing'`, id).Scan(&owner)
	return owner.String, noRow(err)
}

// StockWriter returns the writer's put: rows are upserted in batches as
// they come (stockWriter), stamped with the time the writer is made.
func (t *uploadTx) StockWriter(ctx context.Context, clientID, uploadID string, now func() time.Time) func(storelink.StockRow) error {
	t.closeWriter()
	t.w = newStockWriter(ctx, t.tx, clientID, uploadID, now())
	return t.w.put
}

// ApplyStock compares and writes the last, partial batch; the others are
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
func (t *uploadTx) DiscardStock(ctx context.Context, uploadID string) (string, error) {
	t.closeWriter()
	t.w = nil
	if err := t.tx.Rollback(); err != nil {
		return "", err
	}
	tx, err := t.db.write.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	t.tx = tx
	return leaseOwner(ctx, t.tx, uploadID)
}

// ReleaseFulfilled ends the reservations at the pairs the writer found put
// among those it read sold: a pair whose row was left unchanged keeps the
// upload_id of an earlier upload, so the stock row cannot tell.
func (t *uploadTx) ReleaseFulfilled(ctx context.Context, clientID, _ string) error {
	if t.w == nil {
		return nil
	}
	for k, put := range t.w.sold {
		if !put {
			continue
		}
		if _, err := t.tx.ExecContext(ctx, `UPDATE order_items SET reserving = 0
			WHERE reserving = 1 AND status IN ('fulfilled', 'returned') AND client_id = ? AND store_id = ? AND ean = ?`,
			clientID, k.store, k.ean); err != nil {
			return err
		}
	}
	return nil
}

// FinishUpload writes the report as JSON text; the upload is not read back
// here (finished stays nil), and the service reads it after the commit.
func (t *uploadTx) FinishUpload(ctx context.Context, id string, status storelink.UploadStatus, r storelink.FeedReport, at time.Time, _ **storelink.Upload) error {
	problems, _ := json.Marshal(r.Errors)
	warnings, _ := json.Marshal(r.Warnings)
	unchanged := 0
	if t.w != nil && status == storelink.UploadApplied {
		unchanged = t.w.unchanged()
	}
	_, err := t.tx.ExecContext(ctx, `UPDATE uploads SET status = ?, finished_at = ?, rows_total = ?, rows_applied = ?,
		rows_unchanged = ?, rows_rejected = ?, errors = ?, warnings = ?, lease_owner = NULL, lease_until = NULL WHERE id = ?`,
		status, ms(at), r.RowsTotal, r.RowsApplied, unchanged, r.RowsRejected, string(problems), string(warnings), id)
	if err != nil {
		return err
	}
	if _, err := t.tx.ExecContext(ctx, `UPDATE upload_bodies SET errors_csv = ? WHERE upload_id = ?`, r.ErrorFile, id); err != nil {
		return fmt.Errorf("write error file: %w", err)
	}
	return nil
}

// CancelUpload cancels the upload in one statement when it is still
// accepted, and drops its bytes, or else reads it as it stands: the transaction holds the one
// write connection, so no claim comes between.
func (t *uploadTx) CancelUpload(ctx context.Context, clientID, id string, at time.Time) (*storelink.Upload, bool, error) {
	u, err := scanUpload(t.tx.QueryRowContext(ctx, `UPDATE uploads SET status = 'cancelled', finished_at = ?1, file_expired_at = ?1
		WHERE client_id = ?2 AND id = ?3 AND status = 'accepted' RETURNING `+uploadColumns, ms(at), clientID, id))
	if err == nil {
		if _, err := t.tx.ExecContext(ctx, `DELETE FROM upload_bodies WHERE upload_id = ?`, id); err != nil {
			return nil, false, fmt.Errorf("drop upload body: %w", err)
		}
		return u, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, false, err
	}
	u, err = scanUpload(t.tx.QueryRowContext(ctx, `SELECT `+uploadColumns+` FROM uploads WHERE client_id = ? AND id = ?`, clientID, id))
	return u, false, noRow(err)
}

// PutBucket writes the client's bucket row, made if it is missing.
func (t *uploadTx) PutBucket(ctx context.Context, clientID string, b storelink.Bucket) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO capacity (client_id, tokens, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (client_id) DO UPDATE SET tokens = excluded.tokens, updated_at = excluded.updated_at`,
		clientID, b.Tokens, ms(b.UpdatedAt))
	return err
}
