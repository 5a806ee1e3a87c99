package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

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
func (d *uploads) GetBucket(ctx context.Context, clientID string) (service.ClientBucket, error) {
	return scanBucket(d.db.read.QueryRowContext(ctx, bucketSQL, clientID))
}

// claimableSQL reads the uploads a claim may take (UploadTx's
// ClaimableUploads): the oldest ?4 uploads that can be claimed, in
// acceptance order: waiting (?1), or processing (?2) under a lease that
// ran out (or was given back) and whose backoff has passed, and with no
// earlier unfinished upload of their client that cannot be claimed; an
// earlier one that can is among them before them. The NOT EXISTS is what
// keeps a client's uploads in acceptance order; it looks at the client's
// unfinished uploads only (the index uploads_unfinished_client). ?3 is
// now, ?5 and ?6 the backoff's base and most (ms): an upload is free once
// lease_until + its backoff is before now (storelink.Backoff.Delay of
// attempts - failures, its interruptions). The status terms that name
// 'accepted' and 'processing' are the partial indexes' predicate, which
// SQLite uses an index for only when the query names it.
var claimableSQL = `
SELECT u.seq, u.client_id, u.size_bytes, u.attempts FROM uploads u INDEXED BY uploads_unfinished
WHERE u.status IN ('accepted', 'processing')
  AND (u.status = ?1 OR u.lease_until + ` + backoffSQL("u") + ` < ?3)
  AND NOT EXISTS (SELECT 1 FROM uploads o INDEXED BY uploads_unfinished_client
                  WHERE o.client_id = u.client_id AND o.seq < u.seq AND o.status IN ('accepted', 'processing')
                    AND o.status = ?2 AND o.lease_until + ` + backoffSQL("o") + ` >= ?3)
ORDER BY u.seq
LIMIT ?4`

// backoffSQL is storelink.Backoff.Delay in ms of the upload aliased u, its
// base and most being ?5 and ?6.
func backoffSQL(u string) string {
	n := "(" + u + ".attempts - " + u + ".failures)"
	return "(CASE WHEN " + n + " <= 1 THEN 0 ELSE min(?5 << min(" + n + " - 2, 30), ?6) END)"
}

// ClaimableUploads reads in the transaction, which holds the one write
// connection: the rows it reads stay as they are until it ends.
func (t *uploadTx) ClaimableUploads(ctx context.Context, p service.ClaimParams) ([]service.Claimable, error) {
	s, err := t.stmt(ctx, claimableSQL)
	if err != nil {
		return nil, err
	}
	rows, err := s.QueryContext(ctx, p.Accepted, p.Processing, ms(p.Now), p.Limit,
		p.Backoff.Base.Milliseconds(), p.Backoff.Max.Milliseconds())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var list []service.Claimable
	for rows.Next() {
		var c service.Claimable
		if err := rows.Scan(&c.Seq, &c.ClientID, &c.SizeBytes, &c.Attempts); err != nil {
			return nil, err
		}
		list = append(list, c)
	}
	return list, rows.Err()
}

// leaseSQL leases the uploads of a JSON array of queue positions (?5): ?1
// the owner, ?2 the status they are set in, ?3 the lease's end, ?4 now.
const leaseSQL = `UPDATE uploads SET status = ?2, lease_owner = ?1, lease_until = ?3, started_at = ?4, attempts = attempts + 1
WHERE seq IN (SELECT value FROM json_each(?5))
RETURNING seq, id, client_id, file_name, size_bytes, sha256, received_at, attempts, failures`

// LeaseUploads leases the uploads in one statement.
func (t *uploadTx) LeaseUploads(ctx context.Context, p service.ClaimParams, seqs []int64) ([]*storelink.Claim, error) {
	lease, err := t.stmt(ctx, leaseSQL)
	if err != nil {
		return nil, err
	}
	rows, err := lease.QueryContext(ctx, p.Owner, p.Processing, ms(p.Until), ms(p.Now), jsonInts(seqs))
	if err != nil {
		return nil, err
	}
	type claimed struct {
		seq int64
		c   *storelink.Claim
	}
	var list []claimed
	at := p.Now
	for rows.Next() {
		c := &storelink.Claim{}
		var seq, received int64
		if err := rows.Scan(&seq, &c.ID, &c.ClientID, &c.FileName, &c.SizeBytes, &c.SHA256, &received, &c.Attempts, &c.Failures); err != nil {
			rows.Close()
			return nil, err
		}
		c.ReceivedAt, c.StartedAt = fromMS(received), &at
		list = append(list, claimed{seq, c})
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if err := rows.Err(); err != nil || len(list) == 0 {
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
func (d *uploads) ReleaseUpload(ctx context.Context, p service.ReleaseParams) error {
	_, err := d.db.write.ExecContext(ctx, `UPDATE uploads SET lease_owner = NULL, lease_until = ?1,
		attempts = CASE WHEN ?5 THEN attempts ELSE max(attempts - 1, 0) END, failures = failures + ?5
		WHERE id = ?2 AND status = ?6 AND lease_owner = ?3 AND started_at = ?4`,
		ms(p.Until), p.ID, p.Owner, ms(p.StartedAt), p.Failed, p.Processing)
	return err
}

// ReleaseUploadLeases sets the leases to have ended at 0 ms, before any
// clock reading.
func (d *uploads) ReleaseUploadLeases(ctx context.Context, owner string, processing storelink.UploadStatus) error {
	_, err := d.db.write.ExecContext(ctx, `UPDATE uploads SET lease_until = 0, attempts = max(attempts - 1, 0)
		WHERE status = ? AND lease_owner = ?`, processing, owner)
	return err
}

// GetUpload reads from the read pool.
func (d *uploads) GetUpload(ctx context.Context, clientID, id string) (*storelink.Upload, error) {
	u, err := scanUpload(d.db.read.QueryRowContext(ctx, `SELECT `+uploadColumns+` FROM uploads WHERE client_id = ? AND id = ?`, clientID, id))
	return u, noRow(err)
}

// UploadExists reads from the read pool.
func (d *uploads) UploadExists(ctx context.Context, clientID, id string) (bool, error) {
	err := exists(ctx, d.db.read, `SELECT 1 FROM uploads WHERE (client_id = ?1 OR ?1 = '') AND id = ?2`, clientID, id)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// ListUploads reads from the read pool, which never waits for the writer.
func (d *uploads) ListUploads(ctx context.Context, p service.UploadQuery) ([]storelink.Upload, error) {
	q := `SELECT ` + uploadColumns + ` FROM uploads WHERE 1 = 1`
	var args []any
	if p.ClientID != "" {
		q, args = q+` AND client_id = ?`, append(args, p.ClientID)
	}
	if p.Before != "" {
		q += ` AND seq < (SELECT seq FROM uploads WHERE id = ?)`
		args = append(args, p.Before)
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
	if p.HasErrors != nil {
		q += hasErrorsSQL(*p.HasErrors)
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

// CountUnfinished goes through the partial index of unfinished uploads,
// named, since SQLite would otherwise pick the client's index of every
// upload; the status term that names its statuses is its predicate, which
// SQLite uses the index for only when the query names it.
func (d *uploads) CountUnfinished(ctx context.Context, q service.UnfinishedQuery) (service.Unfinished, error) {
	var n service.Unfinished
	var first, oldest sql.NullInt64
	err := d.db.read.QueryRowContext(ctx, `SELECT count(*), min(seq), min(received_at) FROM uploads INDEXED BY uploads_unfinished
		WHERE status IN ('accepted', 'processing') AND (?1 = '' OR status = ?1) AND (?2 = '' OR client_id = ?2) AND (?3 = 0 OR seq <= ?3)`,
		q.Status, q.ClientID, q.UpTo).Scan(&n.N, &first, &oldest)
	if err != nil || !oldest.Valid {
		return n, err
	}
	n.First, n.Oldest = first.Int64, fromMS(oldest.Int64)
	return n, nil
}

// UploadBodies reads the files from the read pool, a piece at a time, in
// one statement. The pieces are put in their places by number rather than
// sorted by the statement: a sort would copy every piece into SQLite's
// sorter first.
func (d *uploads) UploadBodies(ctx context.Context, ids []string) (map[string]storelink.Chunks, error) {
	rows, err := d.db.read.QueryContext(ctx, `SELECT b.upload_id, c.n, c.data FROM upload_bodies b
		JOIN upload_chunks c ON c.file_id = b.file_id
		WHERE b.upload_id IN (SELECT value FROM json_each(?))`, jsonList(ids))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]storelink.Chunks, len(ids))
	for rows.Next() {
		var id string
		var n int
		var data []byte
		if err := rows.Scan(&id, &n, &data); err != nil {
			return nil, err
		}
		out[id] = storelink.Place(out[id], n, data)
	}
	return out, rows.Err()
}

// UploadFile reads from the read pool, in one statement, so that the
// pieces are those of one moment: a file is a row per piece, each with
// the upload's columns.
func (d *uploads) UploadFile(ctx context.Context, clientID, id string, errorFile bool) (service.UploadFile, error) {
	query := `SELECT c.n, c.data, b.upload_id IS NOT NULL, u.file_expired_at
		FROM uploads u LEFT JOIN upload_bodies b ON b.upload_id = u.id LEFT JOIN upload_chunks c ON c.file_id = b.file_id
		WHERE u.client_id = ? AND u.id = ?`
	if errorFile {
		query = `SELECT 0, b.errors_csv, b.upload_id IS NOT NULL, u.file_expired_at
		FROM uploads u LEFT JOIN upload_bodies b ON b.upload_id = u.id WHERE u.client_id = ? AND u.id = ?`
	}
	rows, err := d.db.read.QueryContext(ctx, query, clientID, id)
	if err != nil {
		return service.UploadFile{}, err
	}
	defer rows.Close()
	var f service.UploadFile
	found := false
	for rows.Next() {
		var n sql.NullInt64
		var data []byte
		var removed sql.NullInt64
		if err := rows.Scan(&n, &data, &f.Kept, &removed); err != nil {
			return service.UploadFile{}, err
		}
		found = true
		if removed.Valid {
			f.Removed = fromMS(removed.Int64)
		}
		if data != nil {
			f.Data = storelink.Place(f.Data, int(n.Int64), data)
		}
	}
	if err := rows.Err(); err != nil {
		return service.UploadFile{}, err
	}
	if !found {
		return service.UploadFile{}, service.ErrNotFound
	}
	return f, nil
}

// ExpireFiles notes the removal on the uploads, then drops the files of
// the uploads it noted, in one transaction on the write connection.
func (d *uploads) ExpireFiles(ctx context.Context, p service.ExpireParams) (int, error) {
	tx, err := d.db.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, `UPDATE uploads SET file_expired_at = ? WHERE id IN (
		SELECT b.upload_id FROM upload_bodies b JOIN uploads u ON u.id = b.upload_id
		WHERE u.status IN (SELECT value FROM json_each(?)) AND u.received_at < ? LIMIT ?)`, ms(p.At), statusList(p.Final), ms(p.Cutoff), p.Limit)
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

// statusList is a JSON array of statuses, for json_each.
func statusList[S ~string](list []S) string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = string(s)
	}
	return jsonList(out)
}

// hasErrorsSQL is the term of a listing that selects uploads by
// storelink.Upload.HasErrors: whether they dropped rows.
func hasErrorsSQL(has bool) string {
	if has {
		return ` AND rows_rejected > 0`
	}
	return ` AND rows_rejected = 0`
}
