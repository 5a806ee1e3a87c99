package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"storelink"
)

var _ storelink.UploadService = (*DB)(nil)

// Accept takes the upload's size from the client's bucket and stores the
// upload row and its bytes in one transaction. When it returns nil the
// upload is on disk (synchronous=FULL).
func (db *DB) Accept(ctx context.Context, nu storelink.NewUpload, policy storelink.CapacityPolicy) (*storelink.Upload, storelink.Capacity, error) {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, storelink.Capacity{}, err
	}
	defer tx.Rollback()
	now := db.now()
	bucket, stores, err := loadBucket(ctx, tx, nu.ClientID)
	if err != nil {
		return nil, storelink.Capacity{}, err
	}
	next, capacity, err := policy.Take(bucket, stores, int64(len(nu.Body)), now)
	if err != nil {
		return nil, capacity, err
	}
	if policy.MaxWaiting > 0 {
		var waiting int
		if err := tx.QueryRowContext(ctx, waitingSQL, nu.ClientID).Scan(&waiting); err != nil {
			return nil, capacity, fmt.Errorf("count waiting uploads: %w", err)
		}
		if waiting >= policy.MaxWaiting {
			return nil, capacity, storelink.Errorf(storelink.EBACKLOG, "%d uploads of this client are waiting to be processed.", waiting)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO capacity (client_id, tokens, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (client_id) DO UPDATE SET tokens = excluded.tokens, updated_at = excluded.updated_at`,
		nu.ClientID, next.Tokens, ms(next.UpdatedAt)); err != nil {
		return nil, capacity, fmt.Errorf("update capacity: %w", err)
	}
	u := &storelink.Upload{
		ID: storelink.NewID(now), ClientID: nu.ClientID, FileName: nu.FileName, SizeBytes: int64(len(nu.Body)),
		SHA256: nu.SHA256, Status: storelink.UploadAccepted, ReceivedAt: now,
		Errors: []storelink.Problem{}, Warnings: []storelink.Problem{},
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO uploads (id, client_id, file_name, size_bytes, sha256, status, received_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, u.ID, u.ClientID, u.FileName, u.SizeBytes, u.SHA256, u.Status, ms(now)); err != nil {
		return nil, capacity, fmt.Errorf("insert upload: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO upload_bodies (upload_id, body) VALUES (?, ?)`, u.ID, nu.Body); err != nil {
		return nil, capacity, fmt.Errorf("insert upload body: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, capacity, fmt.Errorf("commit upload: %w", err)
	}
	return u, capacity, nil
}

// waitingSQL counts a client's waiting uploads. It goes through the index of
// unfinished uploads, which stays small, rather than the client's index,
// which holds every upload the client ever sent; the repeated status term
// is what lets SQLite use a partial index.
const waitingSQL = `SELECT count(*) FROM uploads INDEXED BY uploads_unfinished
	WHERE status IN ('accepted', 'processing') AND status = 'accepted' AND client_id = ?`

// Capacity reports the bucket of a client.
func (db *DB) Capacity(ctx context.Context, clientID string, policy storelink.CapacityPolicy) (storelink.Capacity, error) {
	bucket, stores, err := loadBucket(ctx, db.read, clientID)
	if err != nil {
		return storelink.Capacity{}, err
	}
	return policy.Peek(bucket, stores, db.now()), nil
}

func loadBucket(ctx context.Context, q querier, clientID string) (*storelink.Bucket, int, error) {
	var stores int
	var tokens sql.NullFloat64
	var updated sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM stores WHERE client_id = c.id), k.tokens, k.updated_at
		FROM clients c LEFT JOIN capacity k ON k.client_id = c.id WHERE c.id = ?`, clientID).Scan(&stores, &tokens, &updated)
	if err != nil {
		return nil, 0, notFound(err, "client %q", clientID)
	}
	if !tokens.Valid {
		return nil, stores, nil
	}
	return &storelink.Bucket{Tokens: tokens.Float64, UpdatedAt: fromMS(updated.Int64)}, stores, nil
}

// Claim leases the oldest upload that is waiting, or whose lease ran out,
// and whose client has no earlier unfinished upload: that one WHERE clause is
// what keeps a client's uploads in acceptance order.
func (db *DB) Claim(ctx context.Context, owner string, lease time.Duration) (*storelink.Claim, error) {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	now := db.now() // after BEGIN: the write lock may have been waited for
	c := &storelink.Claim{Owner: owner}
	var received int64
	err = tx.QueryRowContext(ctx, `UPDATE uploads
		SET status = 'processing', lease_owner = ?, lease_until = ?, started_at = ?, attempts = attempts + 1
		WHERE seq = (
			SELECT u.seq FROM uploads u
			WHERE u.status IN ('accepted', 'processing')
			  AND (u.status = 'accepted' OR u.lease_until < ?)
			  AND NOT EXISTS (SELECT 1 FROM uploads o
			                  WHERE o.client_id = u.client_id AND o.seq < u.seq AND o.status IN ('accepted', 'processing'))
			ORDER BY u.seq LIMIT 1)
		RETURNING id, client_id, file_name, size_bytes, sha256, received_at, attempts`,
		owner, ms(now.Add(lease)), ms(now), ms(now)).
		Scan(&c.ID, &c.ClientID, &c.FileName, &c.SizeBytes, &c.SHA256, &received, &c.Attempts)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("claim upload: %w", err)
	}
	if err := tx.QueryRowContext(ctx, `SELECT body FROM upload_bodies WHERE upload_id = ?`, c.ID).Scan(&c.Body); err != nil {
		return nil, fmt.Errorf("read upload body %s: %w", c.ID, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	c.Status, c.ReceivedAt, c.StartedAt = storelink.UploadProcessing, fromMS(received), &now
	return c, nil
}

// stockBatch is how many rows go into one multi-row INSERT: 13 values a row
// stays well under SQLite's limit of 32766 bound values.
const stockBatch = 200

const stockInsert = `INSERT INTO stock (client_id, store_id, ean, article_number, quantity, price, retail_price,
	article_location, product_name, product_number, article_color, article_size, upload_id, updated_at) VALUES `

const stockUpsert = ` ON CONFLICT (client_id, store_id, ean) DO UPDATE SET
	article_number = excluded.article_number, quantity = excluded.quantity, price = excluded.price,
	retail_price = excluded.retail_price, article_location = excluded.article_location,
	product_name = excluded.product_name, product_number = excluded.product_number,
	article_color = excluded.article_color, article_size = excluded.article_size,
	upload_id = excluded.upload_id, updated_at = excluded.updated_at`

func stockSQL(rows int) string {
	var b strings.Builder
	b.WriteString(stockInsert)
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
	}
	b.WriteString(stockUpsert)
	return b.String()
}

// Apply runs fn inside one write transaction and writes the rows it puts in
// multi-row upserts. A file-level problem, or a file without one valid row,
// rolls the whole transaction back and records the rejection in a second one.
// (A savepoint would keep it to one transaction, but makes SQLite copy every
// stock page it touches into a statement journal, which slows every import
// for the sake of the rare rejected file.)
func (db *DB) Apply(ctx context.Context, c *storelink.Claim, fn storelink.FeedApply) (*storelink.Upload, error) {
	tx, err := db.leased(ctx, c)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	storeList, err := queryStores(ctx, tx, c.ClientID)
	if err != nil {
		return nil, err
	}
	stores := make(map[string]bool, len(storeList))
	for _, s := range storeList {
		stores[s.ID] = true
	}
	w := newStockWriter(ctx, tx, c.ClientID, c.ID, db.now())
	defer w.close()
	report, err := fn(stores, w.put)
	if err == nil {
		err = w.flush()
	}
	if err != nil {
		return nil, fmt.Errorf("apply upload %s: %w", c.ID, err)
	}
	status := storelink.UploadApplied
	if report.FileError || report.RowsApplied == 0 {
		status, report.RowsApplied = storelink.UploadRejected, 0
		if err := tx.Rollback(); err != nil {
			return nil, err
		}
		if tx, err = db.leased(ctx, c); err != nil {
			return nil, err
		}
		defer tx.Rollback()
	}
	if status == storelink.UploadApplied {
		if err := releaseFulfilled(ctx, tx, c.ClientID, c.ID); err != nil {
			return nil, err
		}
	}
	if err := finish(ctx, tx, c.ID, status, report, db.now()); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit upload %s: %w", c.ID, err)
	}
	return db.Upload(ctx, c.ClientID, c.ID)
}

// releaseFulfilled ends the reservations of fulfilled units whose store and
// EAN this upload has just set: the partner's own count now reflects the sale
// (CONTRACT 3.4). Only units still reserving are looked at, so this stays
// small however large the stock is.
func releaseFulfilled(ctx context.Context, tx *sql.Tx, clientID, uploadID string) error {
	_, err := tx.ExecContext(ctx, `UPDATE order_items SET reserving = 0
		WHERE reserving = 1 AND status IN ('fulfilled', 'returned') AND client_id = ?
		  AND EXISTS (SELECT 1 FROM stock s WHERE s.client_id = order_items.client_id AND s.store_id = order_items.store_id
		              AND s.ean = order_items.ean AND s.upload_id = ?)`, clientID, uploadID)
	if err != nil {
		return fmt.Errorf("release fulfilled reservations: %w", err)
	}
	return nil
}

// leased begins a write transaction after checking that the claim still
// holds the upload's lease; ECONFLICT when another processor took it over.
func (db *DB) leased(ctx context.Context, c *storelink.Claim) (*sql.Tx, error) {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	var owner sql.NullString
	err = tx.QueryRowContext(ctx, `SELECT lease_owner FROM uploads WHERE id = ? AND status = 'processing'`, c.ID).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && owner.String != c.Owner) {
		tx.Rollback()
		return nil, storelink.Errorf(storelink.ECONFLICT, "Upload %s is no longer held by this processor.", c.ID)
	} else if err != nil {
		tx.Rollback()
		return nil, err
	}
	return tx, nil
}

// finish records the report, ends the lease and drops the bytes, which are
// no longer needed once the upload is final.
func finish(ctx context.Context, tx *sql.Tx, id string, status storelink.UploadStatus, r storelink.FeedReport, now time.Time) error {
	errs, _ := json.Marshal(nonNil(r.Errors))
	warns, _ := json.Marshal(nonNil(r.Warnings))
	_, err := tx.ExecContext(ctx, `UPDATE uploads SET status = ?, finished_at = ?, rows_total = ?, rows_applied = ?,
		rows_rejected = ?, errors = ?, warnings = ?, lease_owner = NULL, lease_until = NULL WHERE id = ?`,
		status, ms(now), r.RowsTotal, r.RowsApplied, r.RowsRejected, string(errs), string(warns), id)
	if err != nil {
		return fmt.Errorf("finish upload %s: %w", id, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM upload_bodies WHERE upload_id = ?`, id); err != nil {
		return fmt.Errorf("drop upload body %s: %w", id, err)
	}
	return nil
}

// Fail finishes an upload that could not be processed at all (it failed
// every attempt), so that it stops blocking the client's later uploads.
func (db *DB) Fail(ctx context.Context, c *storelink.Claim, problem storelink.Problem) error {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	r := storelink.FeedReport{FileError: true, Errors: []storelink.Problem{problem}}
	if err := finish(ctx, tx, c.ID, storelink.UploadRejected, r, db.now()); err != nil {
		return err
	}
	return tx.Commit()
}

// Release gives a claim back uncounted (UploadService.Release). The claim
// is known by its owner and start; the owner is cleared, so that only the
// first of repeated releases counts.
func (db *DB) Release(ctx context.Context, c *storelink.Claim, after time.Duration) error {
	_, err := db.write.ExecContext(ctx, `UPDATE uploads SET lease_owner = NULL, lease_until = ?, attempts = max(attempts - 1, 0)
		WHERE id = ? AND status = 'processing' AND lease_owner = ? AND started_at = ?`,
		ms(db.now().Add(after)), c.ID, c.Owner, ms(*c.StartedAt))
	if err != nil {
		return fmt.Errorf("release upload %s: %w", c.ID, err)
	}
	return nil
}

func nonNil(p []storelink.Problem) []storelink.Problem {
	if p == nil {
		return []storelink.Problem{}
	}
	return p
}
