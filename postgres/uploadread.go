package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
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

// claimUploadsSQL leases the uploads a claim takes (service.Uploads'
// ClaimUploads), client by client, so that the processes on one database
// share the clients between them and none reads the backlog of another's.
// heads is each client's oldest unfinished upload, found by skipping
// through the index uploads_unfinished_client from one client to the next
// (a loose index scan: a look per client, not per upload waiting). locked
// is those heads that can be claimed (waiting, or under a lease that ran
// out, or was given back, and whose backoff has passed), oldest first, each locked, those another process is claiming or
// applying right now passed over (SKIP LOCKED; an apply holds its uploads'
// row locks), the condition checked again on each row as it is when locked:
// a head that another claim took meanwhile is passed over too, never the
// upload behind it. A client whose head this statement holds is its alone:
// cand is, per such client, its unfinished uploads from the head on (at most
// $4), and ok those of them before the first that cannot be claimed. pick
// takes the clients in the order of their heads, each client's uploads in
// acceptance order: the first, and the next ones while they number at most
// $4, their files' bytes add up to at most $5 and none was claimed before.
// The UPDATE checks each row again as it is when it writes it (an upload
// cancelled meanwhile is not claimed). $1 is the owner, $2 now, $3 the
// lease's end, $6 and $7 the backoff's base and most (ms): an upload is free
// once lease_until + its backoff is before now (storelink.Backoff.Delay of
// attempts - failures, its interruptions).
//
// locked and the UPDATE find their rows by seq from an array (= ANY
// (ARRAY(…))), computed once, through the index: joined to the heads or the
// picks instead, on a table whose statistics say it is nearly empty (a new
// database, or a backlog that grew since the last ANALYZE), the planner
// may scan every unfinished upload and compute the picks again for each,
// which took seconds a claim with a backlog of a few thousand.
var claimUploadsSQL = `
WITH RECURSIVE heads AS (
	(SELECT client_id, seq FROM uploads WHERE status IN ('accepted', 'processing') ORDER BY client_id, seq LIMIT 1)
	UNION ALL
	SELECT n.client_id, n.seq FROM heads h CROSS JOIN LATERAL (
		SELECT client_id, seq FROM uploads
		WHERE status IN ('accepted', 'processing') AND client_id > h.client_id ORDER BY client_id, seq LIMIT 1) n
), locked AS (
	SELECT u.seq, u.client_id FROM uploads u
	WHERE u.seq = ANY (ARRAY(SELECT seq FROM heads)) AND u.status IN ('accepted', 'processing')
	  AND (u.status = 'accepted' OR u.lease_until + ` + backoffSQL("u") + ` < $2)
	ORDER BY u.seq
	LIMIT $4
	FOR UPDATE SKIP LOCKED
), cand AS (
	SELECT l.seq AS head, o.seq, o.size_bytes, o.attempts,
		bool_and(o.status = 'accepted' OR o.lease_until + ` + backoffSQL("o") + ` < $2) OVER (PARTITION BY l.seq ORDER BY o.seq) AS free
	FROM locked l CROSS JOIN LATERAL (
		SELECT seq, size_bytes, attempts, failures, status, lease_until FROM uploads
		WHERE client_id = l.client_id AND status IN ('accepted', 'processing') AND seq >= l.seq
		ORDER BY seq LIMIT $4) o
), pick AS (
	SELECT seq FROM (
		SELECT seq, row_number() OVER w AS n, sum(size_bytes) OVER w AS bytes,
			count(*) FILTER (WHERE attempts > 0) OVER w AS tried
		FROM cand WHERE free WINDOW w AS (ORDER BY head, seq)
	) t WHERE n = 1 OR (n <= $4 AND bytes <= $5 AND tried = 0)
)
UPDATE uploads SET status = 'processing', lease_owner = $1, lease_until = $3, started_at = $2, attempts = attempts + 1
WHERE uploads.seq = ANY (ARRAY(SELECT seq FROM pick)) AND uploads.status IN ('accepted', 'processing')
	AND (uploads.status = 'accepted' OR uploads.lease_until + ` + backoffSQL("uploads") + ` < $2)
RETURNING uploads.seq, id, client_id, file_name, size_bytes, sha256, received_at, attempts, failures,
	(SELECT body FROM upload_bodies WHERE upload_id = uploads.id)`

// backoffSQL is storelink.Backoff.Delay of the upload aliased u as an
// interval, its base and most in ms being $6 and $7.
func backoffSQL(u string) string {
	n := "(" + u + ".attempts - " + u + ".failures)"
	return "(CASE WHEN " + n + " <= 1 THEN 0 ELSE least($6::bigint << least(" + n + " - 2, 30), $7::bigint) END * interval '1 millisecond')"
}

// ClaimUploads claims in one statement that commits on its own: one round
// trip, the bodies included.
func (d *Driver) ClaimUploads(ctx context.Context, owner string, lease time.Duration, limit storelink.BatchLimit, backoff storelink.Backoff, now func() time.Time) ([]*storelink.Claim, error) {
	at := now()
	rows, err := d.db.pool.Query(ctx, claimUploadsSQL, owner, at, at.Add(lease), limit.Uploads, limit.Bytes,
		backoff.Base.Milliseconds(), backoff.Max.Milliseconds())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	type claimed struct {
		seq int64
		c   *storelink.Claim
	}
	var list []claimed
	for rows.Next() {
		c := &storelink.Claim{}
		c.StartedAt = &at
		var seq int64
		if err := rows.Scan(&seq, &c.ID, &c.ClientID, &c.FileName, &c.SizeBytes, &c.SHA256, &c.ReceivedAt, &c.Attempts, &c.Failures, &c.Body); err != nil {
			return nil, err
		}
		list = append(list, claimed{seq, c})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(list, func(a, b claimed) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]*storelink.Claim, len(list))
	for i, l := range list {
		if l.c.Body == nil {
			return nil, fmt.Errorf("upload %s: its body is missing", l.c.ID)
		}
		out[i] = l.c
	}
	return out, nil
}

// ReleaseUpload is one statement on the pool, which commits on its own.
func (d *Driver) ReleaseUpload(ctx context.Context, c *storelink.Claim, until time.Time, failed bool) error {
	_, err := d.db.pool.Exec(ctx, `UPDATE uploads SET lease_owner = NULL, lease_until = $1,
		attempts = CASE WHEN $5 THEN attempts ELSE greatest(attempts - 1, 0) END, failures = failures + CASE WHEN $5 THEN 1 ELSE 0 END
		WHERE id = $2 AND status = 'processing' AND lease_owner = $3 AND started_at = $4`,
		until, c.ID, c.Owner, *c.StartedAt, failed)
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
