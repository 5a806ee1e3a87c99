package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"storelink"
	"storelink/service"
)

const uploadColumns = `id, client_id, file_name, size_bytes, sha256, status, received_at, started_at, finished_at,
	rows_total, rows_applied, rows_unchanged, rows_rejected, errors, warnings`

// scanUpload reads an upload row: times as Unix milliseconds, the problems
// as JSON text.
func scanUpload(row interface{ Scan(...any) error }) (*storelink.Upload, error) {
	u := &storelink.Upload{}
	var received int64
	var started, finished sql.NullInt64
	var problems, warnings string
	if err := row.Scan(&u.ID, &u.ClientID, &u.FileName, &u.SizeBytes, &u.SHA256, &u.Status, &received, &started, &finished,
		&u.RowsTotal, &u.RowsApplied, &u.RowsUnchanged, &u.RowsRejected, &problems, &warnings); err != nil {
		return nil, err
	}
	u.ReceivedAt, u.StartedAt, u.FinishedAt = fromMS(received), fromNullMS(started), fromNullMS(finished)
	if err := json.Unmarshal([]byte(problems), &u.Errors); err != nil {
		return nil, fmt.Errorf("decode the errors of upload %s: %w", u.ID, err)
	}
	if err := json.Unmarshal([]byte(warnings), &u.Warnings); err != nil {
		return nil, fmt.Errorf("decode the warnings of upload %s: %w", u.ID, err)
	}
	return u, nil
}

// GetBucket reads from the read pool, which never waits for the writer.
func (d *Driver) GetBucket(ctx context.Context, clientID string) (*storelink.Bucket, int, error) {
	return scanBucket(d.db.read.QueryRowContext(ctx, bucketSQL, clientID))
}

// claimUploadsSQL leases the uploads a claim takes (service.Uploads'
// ClaimUploads). cand is the oldest ?4 uploads that can be claimed, in
// acceptance order: waiting, or under a lease that ran out (or was given
// back) and whose backoff has passed, and with no earlier unfinished
// upload of their client that cannot be claimed; an earlier one that can is
// in cand before them. The NOT EXISTS is what keeps a client's uploads in
// acceptance order; it looks at the client's unfinished uploads only (the
// index uploads_unfinished_client). pick takes cand client by client, the
// clients in the order of their first in cand, each client's in acceptance
// order: the first, and the next ones while their files' bytes add up to
// at most ?5 and none was claimed before. ?1 is the owner, ?2 the lease's
// end, ?3 now, ?4 the most uploads, ?6 and ?7 the backoff's base and most
// (ms): an upload is free once lease_until + its backoff is before now
// (storelink.Backoff.Delay of attempts - failures, its interruptions).
var claimUploadsSQL = `
WITH cand AS (
	SELECT u.seq, u.client_id, u.size_bytes, u.attempts FROM uploads u INDEXED BY uploads_unfinished
	WHERE u.status IN ('accepted', 'processing')
	  AND (u.status = 'accepted' OR u.lease_until + ` + backoffSQL("u") + ` < ?3)
	  AND NOT EXISTS (SELECT 1 FROM uploads o INDEXED BY uploads_unfinished_client
	                  WHERE o.client_id = u.client_id AND o.seq < u.seq AND o.status IN ('accepted', 'processing')
	                    AND o.status = 'processing' AND o.lease_until + ` + backoffSQL("o") + ` >= ?3)
	ORDER BY u.seq
	LIMIT ?4
), pick AS (
	SELECT seq FROM (
		SELECT seq, row_number() OVER w AS n, sum(size_bytes) OVER w AS bytes, sum(attempts > 0) OVER w AS tried
		FROM (SELECT *, min(seq) OVER (PARTITION BY client_id) AS head FROM cand) WINDOW w AS (ORDER BY head, seq)
	) WHERE n = 1 OR (bytes <= ?5 AND tried = 0)
)
UPDATE uploads SET status = 'processing', lease_owner = ?1, lease_until = ?2, started_at = ?3, attempts = attempts + 1
WHERE seq IN (SELECT seq FROM pick)
RETURNING seq, id, client_id, file_name, size_bytes, sha256, received_at, attempts, failures`

// backoffSQL is storelink.Backoff.Delay in ms of the upload aliased u, its
// base and most being ?6 and ?7.
func backoffSQL(u string) string {
	n := "(" + u + ".attempts - " + u + ".failures)"
	return "(CASE WHEN " + n + " <= 1 THEN 0 ELSE min(?6 << min(" + n + " - 2, 30), ?7) END)"
}

// claimBodiesSQL reads the bodies of the uploads claimed, a JSON array of
// their ids.
const claimBodiesSQL = `SELECT upload_id, body FROM upload_bodies WHERE upload_id IN (SELECT value FROM json_each(?))`

// ClaimUploads claims in a write transaction of its own, in its turn
// (uploadTurn), reading now once it began: the write connection may have
// been waited for.
func (d *Driver) ClaimUploads(ctx context.Context, owner string, lease time.Duration, limit storelink.BatchLimit, backoff storelink.Backoff, now func() time.Time) ([]*storelink.Claim, error) {
	if err := d.db.uploadTurn.take(ctx); err != nil {
		return nil, err
	}
	defer d.db.uploadTurn.give()
	sqlTx, err := d.db.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	tx := orderTx{Tx: sqlTx, prepared: d.db.prepared}
	defer tx.Rollback()
	at := now()
	rows, err := tx.QueryContext(ctx, claimUploadsSQL, owner, ms(at.Add(lease)), ms(at), limit.Uploads, limit.Bytes,
		backoff.Base.Milliseconds(), backoff.Max.Milliseconds())
	if err != nil {
		return nil, err
	}
	type claimed struct {
		seq int64
		c   *storelink.Claim
	}
	var list []claimed
	byID := map[string]*storelink.Claim{}
	ids := make([]string, 0, limit.Uploads)
	for rows.Next() {
		c := &storelink.Claim{}
		var seq, received int64
		if err := rows.Scan(&seq, &c.ID, &c.ClientID, &c.FileName, &c.SizeBytes, &c.SHA256, &received, &c.Attempts, &c.Failures); err != nil {
			rows.Close()
			return nil, err
		}
		c.ReceivedAt, c.StartedAt = fromMS(received), &at
		list = append(list, claimed{seq, c})
		byID[c.ID] = c
		ids = append(ids, c.ID)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if err := rows.Err(); err != nil || len(list) == 0 {
		return nil, err
	}
	bodies, err := tx.QueryContext(ctx, claimBodiesSQL, jsonList(ids))
	if err != nil {
		return nil, fmt.Errorf("read upload bodies: %w", err)
	}
	for bodies.Next() {
		var id string
		var body []byte
		if err := bodies.Scan(&id, &body); err != nil {
			bodies.Close()
			return nil, fmt.Errorf("read upload bodies: %w", err)
		}
		if c := byID[id]; c != nil {
			c.Body = body
			delete(byID, id)
		}
	}
	if err := bodies.Close(); err != nil {
		return nil, err
	}
	if err := bodies.Err(); err != nil {
		return nil, fmt.Errorf("read upload bodies: %w", err)
	}
	if len(byID) > 0 {
		return nil, fmt.Errorf("uploads %v: their bodies are missing", slices.Sorted(maps.Keys(byID)))
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	slices.SortFunc(list, func(a, b claimed) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]*storelink.Claim, len(list))
	for i, l := range list {
		out[i] = l.c
	}
	return out, nil
}

// ReleaseUpload writes on the write pool, outside any transaction: one
// statement is its own. Times are Unix milliseconds.
func (d *Driver) ReleaseUpload(ctx context.Context, c *storelink.Claim, until time.Time, failed bool) error {
	_, err := d.db.write.ExecContext(ctx, `UPDATE uploads SET lease_owner = NULL, lease_until = ?1,
		attempts = CASE WHEN ?5 THEN attempts ELSE max(attempts - 1, 0) END, failures = failures + ?5
		WHERE id = ?2 AND status = 'processing' AND lease_owner = ?3 AND started_at = ?4`,
		ms(until), c.ID, c.Owner, ms(*c.StartedAt), failed)
	return err
}

// ReleaseUploadLeases sets the leases to have ended at 0 ms, before any
// clock reading.
func (d *Driver) ReleaseUploadLeases(ctx context.Context, owner string) error {
	_, err := d.db.write.ExecContext(ctx, `UPDATE uploads SET lease_until = 0, attempts = max(attempts - 1, 0)
		WHERE status = 'processing' AND lease_owner = ?`, owner)
	return err
}

// GetUpload reads from the read pool.
func (d *Driver) GetUpload(ctx context.Context, clientID, id string) (*storelink.Upload, error) {
	u, err := scanUpload(d.db.read.QueryRowContext(ctx, `SELECT `+uploadColumns+` FROM uploads WHERE client_id = ? AND id = ?`, clientID, id))
	return u, noRow(err)
}

// UploadExists reads from the read pool.
func (d *Driver) UploadExists(ctx context.Context, clientID, id string) (bool, error) {
	err := exists(ctx, d.db.read, `SELECT 1 FROM uploads WHERE client_id = ? AND id = ?`, clientID, id)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// ListUploads reads from the read pool, which never waits for the writer.
func (d *Driver) ListUploads(ctx context.Context, p service.UploadQuery) ([]storelink.Upload, error) {
	q := `SELECT ` + uploadColumns + ` FROM uploads WHERE client_id = ?`
	args := []any{p.ClientID}
	if p.Before != "" {
		q += ` AND seq < (SELECT seq FROM uploads WHERE client_id = ? AND id = ?)`
		args = append(args, p.ClientID, p.Before)
	}
	if p.Status != "" {
		q += ` AND status = ?`
		args = append(args, p.Status)
	}
	if !p.Since.IsZero() {
		q += ` AND received_at >= ?`
		args = append(args, ms(p.Since))
	}
	if !p.Until.IsZero() {
		q += ` AND received_at < ?`
		args = append(args, ms(p.Until))
	}
	q += ` ORDER BY seq DESC LIMIT ?`
	args = append(args, p.Limit)
	rows, err := d.db.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	list := []storelink.Upload{}
	for rows.Next() {
		u, err := scanUpload(rows)
		if err != nil {
			return nil, err
		}
		list = append(list, *u)
	}
	return list, rows.Err()
}

// CountUnfinished reads from the read pool.
func (d *Driver) CountUnfinished(ctx context.Context) (int, error) {
	var n int
	err := d.db.read.QueryRowContext(ctx, `SELECT count(*) FROM uploads WHERE status IN ('accepted', 'processing')`).Scan(&n)
	return n, err
}

// CountWaiting goes through the partial index of unfinished uploads, named,
// since SQLite would otherwise pick the client's index of every upload.
func (d *Driver) CountWaiting(ctx context.Context, clientID string) (int, int64, time.Time, error) {
	var n int
	var first, oldest sql.NullInt64
	err := d.db.read.QueryRowContext(ctx, `SELECT count(*), min(seq), min(received_at) FROM uploads INDEXED BY uploads_unfinished
		WHERE status IN ('accepted', 'processing') AND status = 'accepted' AND (? = '' OR client_id = ?)`, clientID, clientID).
		Scan(&n, &first, &oldest)
	if err != nil || !oldest.Valid {
		return n, first.Int64, time.Time{}, err
	}
	return n, first.Int64, fromMS(oldest.Int64), nil
}

// CountUnfinishedUpTo goes through the partial index of unfinished uploads.
func (d *Driver) CountUnfinishedUpTo(ctx context.Context, pos int64) (int, error) {
	var n int
	err := d.db.read.QueryRowContext(ctx, `SELECT count(*) FROM uploads INDEXED BY uploads_unfinished
		WHERE status IN ('accepted', 'processing') AND seq <= ?`, pos).Scan(&n)
	return n, err
}

// UploadFile reads from the read pool; a big file is one blob read.
func (d *Driver) UploadFile(ctx context.Context, clientID, id string, errorFile bool) ([]byte, bool, time.Time, error) {
	col := "b.body"
	if errorFile {
		col = "b.errors_csv"
	}
	var data []byte
	var kept bool
	var removed sql.NullInt64
	err := d.db.read.QueryRowContext(ctx, `SELECT `+col+`, b.upload_id IS NOT NULL, u.file_expired_at
		FROM uploads u LEFT JOIN upload_bodies b ON b.upload_id = u.id WHERE u.client_id = ? AND u.id = ?`, clientID, id).
		Scan(&data, &kept, &removed)
	if err != nil {
		return nil, false, time.Time{}, noRow(err)
	}
	var at time.Time
	if removed.Valid {
		at = fromMS(removed.Int64)
	}
	return data, kept, at, nil
}

// ExpireFiles notes the removal on the uploads, then drops the files of
// the uploads it noted, in one transaction on the write connection.
func (d *Driver) ExpireFiles(ctx context.Context, cutoff, at time.Time, limit int) (int, error) {
	tx, err := d.db.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, `UPDATE uploads SET file_expired_at = ? WHERE id IN (
		SELECT b.upload_id FROM upload_bodies b JOIN uploads u ON u.id = b.upload_id
		WHERE u.status IN ('applied', 'rejected', 'cancelled') AND u.received_at < ? LIMIT ?)`, ms(at), ms(cutoff), limit)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	if _, err := tx.ExecContext(ctx, `DELETE FROM upload_bodies WHERE upload_id IN (
		SELECT b.upload_id FROM upload_bodies b JOIN uploads u ON u.id = b.upload_id WHERE u.file_expired_at IS NOT NULL)`); err != nil {
		return 0, err
	}
	return int(n), tx.Commit()
}
