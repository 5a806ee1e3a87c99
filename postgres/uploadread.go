package postgres

import (
	"context"
	"fmt"
	"time"

	"storelink"
	"storelink/service"
)

const uploadColumns = `id, client_id, file_name, size_bytes, sha256, status, received_at, started_at, finished_at,
	rows_total, rows_applied, rows_unchanged, rows_rejected, errors, warnings`

// scanUpload reads an upload row; pgx decodes the jsonb problems itself.
func scanUpload(row interface{ Scan(...any) error }) (*storelink.Upload, error) {
	u := &storelink.Upload{}
	if err := row.Scan(&u.ID, &u.ClientID, &u.FileName, &u.SizeBytes, &u.SHA256, &u.Status, &u.ReceivedAt, &u.StartedAt, &u.FinishedAt,
		&u.RowsTotal, &u.RowsApplied, &u.RowsUnchanged, &u.RowsRejected, &u.Errors, &u.Warnings); err != nil {
		return nil, err
	}
	return u, nil
}

// GetBucket reads a client's bucket and store count without locking it.
func (d *Driver) GetBucket(ctx context.Context, clientID string) (*storelink.Bucket, int, error) {
	var stores int
	var tokens *float64
	var updated *time.Time
	err := d.db.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM stores WHERE client_id = c.id), k.tokens, k.updated_at
		FROM clients c LEFT JOIN capacity k ON k.client_id = c.id WHERE c.id = $1`, clientID).Scan(&stores, &tokens, &updated)
	if err != nil {
		return nil, 0, noRow(err)
	}
	if tokens == nil || updated == nil {
		return nil, stores, nil
	}
	return &storelink.Bucket{Tokens: *tokens, UpdatedAt: *updated}, stores, nil
}

// claimUploadSQL leases the oldest upload that is waiting, or whose lease
// ran out, and whose client has no earlier unfinished upload: that NOT
// EXISTS is what keeps a client's uploads in acceptance order. SKIP LOCKED
// passes over uploads another process is claiming or applying right now
// (an apply holds its upload's row lock), so two processes never claim the
// same upload, and the lease-expiry condition is checked again on the row
// as it is when locked.
//
// The NOT EXISTS looks at the client's previous upload only, cancelled ones
// passed over. That is the same test, because a client's finished uploads
// are always a prefix of its uploads but for cancelled ones, which can be
// anywhere after it: only the earliest unfinished one is ever claimed, and
// only a claimed one is finished. Asking for any earlier unfinished upload would
// walk the client's finished history (the index on (client_id, seq) does
// not hold the status) for every waiting upload the claim passes over; this
// way it is one index lookup per upload passed over.
const claimUploadSQL = `
WITH pick AS (
	SELECT u.seq FROM uploads u
	WHERE u.status IN ('accepted', 'processing')
	  AND (u.status = 'accepted' OR u.lease_until < $2)
	  AND NOT EXISTS (SELECT 1 FROM (SELECT o.status FROM uploads o WHERE o.client_id = u.client_id AND o.seq < u.seq
	                                 AND o.status <> 'cancelled' ORDER BY o.seq DESC LIMIT 1) prev
	                  WHERE prev.status IN ('accepted', 'processing'))
	ORDER BY u.seq
	LIMIT 1
	FOR UPDATE SKIP LOCKED
)
UPDATE uploads SET status = 'processing', lease_owner = $1, lease_until = $3, started_at = $2, attempts = attempts + 1
FROM pick WHERE uploads.seq = pick.seq
RETURNING id, client_id, file_name, size_bytes, sha256, received_at, attempts,
	(SELECT body FROM upload_bodies WHERE upload_id = uploads.id)`

// ClaimUpload claims in one statement that commits on its own: one round
// trip, its body included.
func (d *Driver) ClaimUpload(ctx context.Context, owner string, lease time.Duration, now func() time.Time) (*storelink.Claim, error) {
	at := now()
	c := &storelink.Claim{}
	err := d.db.pool.QueryRow(ctx, claimUploadSQL, owner, at, at.Add(lease)).
		Scan(&c.ID, &c.ClientID, &c.FileName, &c.SizeBytes, &c.SHA256, &c.ReceivedAt, &c.Attempts, &c.Body)
	if err != nil {
		return nil, noRow(err)
	}
	if c.Body == nil {
		return nil, fmt.Errorf("upload %s: its body is missing", c.ID)
	}
	c.StartedAt = &at
	return c, nil
}

// ReleaseUpload is one statement on the pool, which commits on its own.
func (d *Driver) ReleaseUpload(ctx context.Context, c *storelink.Claim, until time.Time) error {
	_, err := d.db.pool.Exec(ctx, `UPDATE uploads SET lease_owner = NULL, lease_until = $1, attempts = greatest(attempts - 1, 0)
		WHERE id = $2 AND status = 'processing' AND lease_owner = $3 AND started_at = $4`,
		until, c.ID, c.Owner, *c.StartedAt)
	return err
}

// ReleaseUploadLeases sets the leases to have ended before any clock
// reading ('-infinity'), which keeps the uploads processing, as they were,
// but claimable. There is no counterpart of SQLite's ReleaseLeases, which
// frees every lease at start-up: a lease that is not this process's may be
// a live one.
func (d *Driver) ReleaseUploadLeases(ctx context.Context, owner string) error {
	_, err := d.db.pool.Exec(ctx, `UPDATE uploads SET lease_until = '-infinity', attempts = greatest(attempts - 1, 0)
		WHERE status = 'processing' AND lease_owner = $1`, owner)
	return err
}

// GetUpload reads one upload of a client.
func (d *Driver) GetUpload(ctx context.Context, clientID, id string) (*storelink.Upload, error) {
	u, err := scanUpload(d.db.pool.QueryRow(ctx, `SELECT `+uploadColumns+` FROM uploads WHERE client_id = $1 AND id = $2`, clientID, id))
	return u, noRow(err)
}

// UploadExists tells an id that cannot be stored (not UTF-8) from a
// failing database as no upload.
func (d *Driver) UploadExists(ctx context.Context, clientID, id string) (bool, error) {
	return found(exists(ctx, d.db.pool, `SELECT 1 FROM uploads WHERE client_id = $1 AND id = $2`, clientID, id))
}

// ListUploads numbers its parameters as they are added (args).
func (d *Driver) ListUploads(ctx context.Context, p service.UploadQuery) ([]storelink.Upload, error) {
	var a args
	q := `SELECT ` + uploadColumns + ` FROM uploads WHERE client_id = ` + a.add(p.ClientID)
	if p.Before != "" {
		q += ` AND seq < (SELECT seq FROM uploads WHERE client_id = $1 AND id = ` + a.add(p.Before) + `)`
	}
	if p.Status != "" {
		q += ` AND status = ` + a.add(string(p.Status))
	}
	if !p.Since.IsZero() {
		q += ` AND received_at >= ` + a.add(p.Since)
	}
	if !p.Until.IsZero() {
		q += ` AND received_at < ` + a.add(p.Until)
	}
	q += ` ORDER BY seq DESC LIMIT ` + a.add(p.Limit)
	rows, err := d.db.pool.Query(ctx, q, a...)
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

// CountUnfinished counts with the small index of unfinished uploads.
func (d *Driver) CountUnfinished(ctx context.Context) (int, error) {
	var n int
	err := d.db.pool.QueryRow(ctx, `SELECT count(*) FROM uploads WHERE status IN ('accepted', 'processing')`).Scan(&n)
	return n, err
}

// CountWaiting repeats the status term so that the planner uses the small
// index of unfinished uploads.
func (d *Driver) CountWaiting(ctx context.Context, clientID string) (int, int64, time.Time, error) {
	var n int
	var first *int64
	var oldest *time.Time
	err := d.db.pool.QueryRow(ctx, `SELECT count(*), min(seq), min(received_at) FROM uploads
		WHERE status IN ('accepted', 'processing') AND status = 'accepted' AND ($1 = '' OR client_id = $1)`, clientID).
		Scan(&n, &first, &oldest)
	if err != nil || first == nil || oldest == nil {
		return n, 0, time.Time{}, err
	}
	return n, *first, oldest.UTC(), nil
}

// CountUnfinishedUpTo counts with the small index of unfinished uploads.
func (d *Driver) CountUnfinishedUpTo(ctx context.Context, pos int64) (int, error) {
	var n int
	err := d.db.pool.QueryRow(ctx, `SELECT count(*) FROM uploads
		WHERE status IN ('accepted', 'processing') AND seq <= $1`, pos).Scan(&n)
	return n, err
}

// UploadFile reads one of the kept files with the upload's row.
func (d *Driver) UploadFile(ctx context.Context, clientID, id string, errorFile bool) ([]byte, bool, time.Time, error) {
	col := "b.body"
	if errorFile {
		col = "b.errors_csv"
	}
	var data []byte
	var kept bool
	var removed *time.Time
	err := d.db.pool.QueryRow(ctx, `SELECT `+col+`, b.upload_id IS NOT NULL, u.file_expired_at
		FROM uploads u LEFT JOIN upload_bodies b ON b.upload_id = u.id WHERE u.client_id = $1 AND u.id = $2`, clientID, id).
		Scan(&data, &kept, &removed)
	if err != nil {
		return nil, false, time.Time{}, noRow(err)
	}
	var at time.Time
	if removed != nil {
		at = *removed
	}
	return data, kept, at, nil
}

// ExpireFiles removes files and notes it in one statement; SKIP LOCKED
// leaves the rows another process is removing to it.
func (d *Driver) ExpireFiles(ctx context.Context, cutoff, at time.Time, limit int) (int, error) {
	tag, err := d.db.pool.Exec(ctx, `WITH gone AS (
		DELETE FROM upload_bodies WHERE upload_id IN (
			SELECT b.upload_id FROM upload_bodies b JOIN uploads u ON u.id = b.upload_id
			WHERE u.status IN ('applied', 'rejected', 'cancelled') AND u.received_at < $1
			LIMIT $3 FOR UPDATE OF b SKIP LOCKED)
		RETURNING upload_id)
	UPDATE uploads SET file_expired_at = $2 FROM gone WHERE uploads.id = gone.upload_id`, cutoff, at, limit)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}
