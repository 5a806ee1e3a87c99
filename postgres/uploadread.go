package postgres

import (
	"cmp"
	"context"
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
func (d *uploads) GetBucket(ctx context.Context, clientID string) (service.ClientBucket, error) {
	var b service.ClientBucket
	var tokens *float64
	var updated *time.Time
	err := d.db.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM stores WHERE client_id = c.id), k.tokens, k.updated_at
		FROM clients c LEFT JOIN capacity k ON k.client_id = c.id WHERE c.id = $1`, clientID).Scan(&b.Stores, &tokens, &updated)
	if err != nil {
		return service.ClientBucket{}, noRow(err)
	}
	if tokens != nil && updated != nil {
		b.Bucket = &storelink.Bucket{Tokens: *tokens, UpdatedAt: *updated}
	}
	return b, nil
}

// claimableSQL reads the uploads a claim may take (UploadTx's
// ClaimableUploads), client by client, so that the processes on one
// database share the clients between them and none reads the backlog of
// another's. heads is each client's oldest unfinished upload, found by
// skipping through the index uploads_unfinished_client from one client to
// the next (a loose index scan: a look per client, not per upload
// waiting). locked is those heads that can be claimed (waiting, $1, or
// under a lease that ran out, or was given back, and whose backoff has
// passed), oldest first, at most $3, each locked, those another process is
// claiming or applying right now passed over (SKIP LOCKED; an apply holds
// its uploads' row locks), the condition checked again on each row as it
// is when locked: a head that another claim took meanwhile is passed over
// too, never the upload behind it. A client whose head this transaction
// holds is its alone: cand is, per such client, its unfinished uploads from
// the head on (at most $3), and the statement returns those before the
// first that cannot be claimed. $2 is now, $4 and $5 the backoff's base and
// most (ms): an upload is free once lease_until + its backoff is before now
// (storelink.Backoff.Delay of attempts - failures, its interruptions); $6
// is the status of an upload under a lease. The status terms that name
// 'accepted' and 'processing' are the partial index's predicate, which the
// planner uses the index for only when the query names it.
//
// locked finds its rows by seq from an array (= ANY (ARRAY(…))), computed
// once, through the index: joined to the heads instead, on a table whose
// statistics say it is nearly empty (a new database, or a backlog that
// grew since the last ANALYZE), the planner may scan every unfinished
// upload, which took seconds a claim with a backlog of a few thousand.
var claimableSQL = `
WITH RECURSIVE heads AS (
	(SELECT client_id, seq FROM uploads WHERE status IN ('accepted', 'processing') ORDER BY client_id, seq LIMIT 1)
	UNION ALL
	SELECT n.client_id, n.seq FROM heads h CROSS JOIN LATERAL (
		SELECT client_id, seq FROM uploads
		WHERE status IN ('accepted', 'processing') AND client_id > h.client_id ORDER BY client_id, seq LIMIT 1) n
), locked AS (
	SELECT u.seq, u.client_id FROM uploads u
	WHERE u.seq = ANY (ARRAY(SELECT seq FROM heads)) AND u.status IN ($1, $6)
	  AND (u.status = $1 OR u.lease_until + ` + backoffSQL("u", "$4", "$5") + ` < $2)
	ORDER BY u.seq
	LIMIT $3
	FOR UPDATE SKIP LOCKED
), cand AS (
	SELECT o.seq, l.client_id, o.size_bytes, o.attempts,
		bool_and(o.status = $1 OR o.lease_until + ` + backoffSQL("o", "$4", "$5") + ` < $2) OVER (PARTITION BY l.seq ORDER BY o.seq) AS free
	FROM locked l CROSS JOIN LATERAL (
		SELECT seq, size_bytes, attempts, failures, status, lease_until FROM uploads
		WHERE client_id = l.client_id AND status IN ('accepted', 'processing') AND seq >= l.seq
		ORDER BY seq LIMIT $3) o
)
SELECT seq, client_id, size_bytes, attempts FROM cand WHERE free`

// backoffSQL is storelink.Backoff.Delay of the upload aliased u as an
// interval, its base and most in ms being the parameters base and most.
func backoffSQL(u, base, most string) string {
	n := "(" + u + ".attempts - " + u + ".failures)"
	return "(CASE WHEN " + n + " <= 1 THEN 0 ELSE least(" + base + "::bigint << least(" + n + " - 2, 30), " + most + "::bigint) END * interval '1 millisecond')"
}

// ClaimableUploads sends, with the BEGIN, the statement that locks the
// clients' heads and reads the uploads that can be claimed: one round
// trip.
func (t *uploadTx) ClaimableUploads(ctx context.Context, p service.ClaimParams) ([]service.Claimable, error) {
	rows, err := t.p.Query(ctx, claimableSQL, p.Accepted, p.Now, p.Limit, p.Backoff.Base.Milliseconds(), p.Backoff.Max.Milliseconds(),
		p.Processing)
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

// leaseSQL leases the uploads at the queue positions $5, checking each row
// again as it is when it writes it: an upload cancelled since it was read
// is not claimed. $1 is the owner, $2 the status they are set in, $3 now,
// $4 the lease's end, $6 the status of a waiting upload, $7 and $8 the
// backoff's base and most.
var leaseSQL = `
UPDATE uploads SET status = $2, lease_owner = $1, lease_until = $4, started_at = $3, attempts = attempts + 1
WHERE uploads.seq = ANY ($5) AND uploads.status IN ($6, $2)
	AND (uploads.status = $6 OR uploads.lease_until + ` + backoffSQL("uploads", "$7", "$8") + ` < $3)
RETURNING uploads.seq, id, client_id, file_name, size_bytes, sha256, received_at, attempts, failures`

// LeaseUploads leases in one statement.
func (t *uploadTx) LeaseUploads(ctx context.Context, p service.ClaimParams, seqs []int64) ([]*storelink.Claim, error) {
	rows, err := t.p.Query(ctx, leaseSQL, p.Owner, p.Processing, p.Now, p.Until, seqs, p.Accepted,
		p.Backoff.Base.Milliseconds(), p.Backoff.Max.Milliseconds())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	type claimed struct {
		seq int64
		c   *storelink.Claim
	}
	var list []claimed
	at := p.Now
	for rows.Next() {
		c := &storelink.Claim{}
		c.StartedAt = &at
		var seq int64
		if err := rows.Scan(&seq, &c.ID, &c.ClientID, &c.FileName, &c.SizeBytes, &c.SHA256, &c.ReceivedAt, &c.Attempts, &c.Failures); err != nil {
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
		out[i] = l.c
	}
	return out, nil
}

// ReleaseUpload is one statement on the pool, which commits on its own.
func (d *uploads) ReleaseUpload(ctx context.Context, p service.ReleaseParams) error {
	_, err := d.db.pool.Exec(ctx, `UPDATE uploads SET lease_owner = NULL, lease_until = $1,
		attempts = CASE WHEN $5 THEN attempts ELSE greatest(attempts - 1, 0) END, failures = failures + CASE WHEN $5 THEN 1 ELSE 0 END
		WHERE id = $2 AND status = $6 AND lease_owner = $3 AND started_at = $4`,
		p.Until, p.ID, p.Owner, p.StartedAt, p.Failed, p.Processing)
	return err
}

// ReleaseUploadLeases sets the leases to have ended before any clock
// reading ('-infinity'), which keeps the uploads processing, as they were,
// but claimable. There is no counterpart of SQLite's ReleaseLeases, which
// frees every lease at start-up: a lease that is not this process's may be
// a live one.
func (d *uploads) ReleaseUploadLeases(ctx context.Context, owner string, processing storelink.UploadStatus) error {
	_, err := d.db.pool.Exec(ctx, `UPDATE uploads SET lease_until = '-infinity', attempts = greatest(attempts - 1, 0)
		WHERE status = $2 AND lease_owner = $1`, owner, processing)
	return err
}

// GetUpload reads one upload of a client.
func (d *uploads) GetUpload(ctx context.Context, clientID, id string) (*storelink.Upload, error) {
	u, err := scanUpload(d.db.pool.QueryRow(ctx, `SELECT `+uploadColumns+` FROM uploads WHERE client_id = $1 AND id = $2`, clientID, id))
	return u, noRow(err)
}

// UploadExists tells an id that cannot be stored (not UTF-8) from a
// failing database as no upload.
func (d *uploads) UploadExists(ctx context.Context, clientID, id string) (bool, error) {
	return found(exists(ctx, d.db.pool, `SELECT 1 FROM uploads WHERE (client_id = $1 OR $1 = '') AND id = $2`, clientID, id))
}

// ListUploads numbers its parameters as they are added (args).
func (d *uploads) ListUploads(ctx context.Context, p service.UploadQuery) ([]storelink.Upload, error) {
	var a args
	q := `SELECT ` + uploadColumns + ` FROM uploads WHERE true`
	if p.ClientID != "" {
		q += ` AND client_id = ` + a.add(p.ClientID)
	}
	if p.Before != "" {
		q += ` AND seq < (SELECT seq FROM uploads WHERE id = ` + a.add(p.Before) + `)`
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
	if p.HasErrors != nil {
		q += hasErrorsSQL(*p.HasErrors)
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

// CountUnfinished counts with the small index of unfinished uploads: the
// status term that names its statuses is its predicate, which the planner
// uses it for only when the query names it.
func (d *uploads) CountUnfinished(ctx context.Context, q service.UnfinishedQuery) (service.Unfinished, error) {
	var n service.Unfinished
	var first *int64
	var oldest *time.Time
	err := d.db.pool.QueryRow(ctx, `SELECT count(*), min(seq), min(received_at) FROM uploads
		WHERE status IN ('accepted', 'processing') AND ($1 = '' OR status = $1) AND ($2 = '' OR client_id = $2)
		  AND ($3::bigint = 0 OR seq <= $3::bigint)`, string(q.Status), q.ClientID, q.UpTo).
		Scan(&n.N, &first, &oldest)
	if err != nil || first == nil || oldest == nil {
		return n, err
	}
	n.First, n.Oldest = *first, oldest.UTC()
	return n, nil
}

// UploadBodies reads the files in one statement, a row per piece, which
// are put in their places by number rather than sorted by the server.
func (d *uploads) UploadBodies(ctx context.Context, ids []string) (map[string]storelink.Chunks, error) {
	rows, err := d.db.pool.Query(ctx, `SELECT b.upload_id, c.n, c.data FROM upload_bodies b
		JOIN upload_chunks c ON c.file_id = b.file_id
		WHERE b.upload_id = ANY ($1)`, ids)
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

// UploadFile reads one of the kept files with the upload's row, in one
// statement (a row per piece of the file), so that they are of one
// moment.
func (d *uploads) UploadFile(ctx context.Context, clientID, id string, errorFile bool) (service.UploadFile, error) {
	query := `SELECT c.n, c.data, b.upload_id IS NOT NULL, u.file_expired_at
		FROM uploads u LEFT JOIN upload_bodies b ON b.upload_id = u.id LEFT JOIN upload_chunks c ON c.file_id = b.file_id
		WHERE u.client_id = $1 AND u.id = $2`
	if errorFile {
		query = `SELECT 0, b.errors_csv, b.upload_id IS NOT NULL, u.file_expired_at
		FROM uploads u LEFT JOIN upload_bodies b ON b.upload_id = u.id WHERE u.client_id = $1 AND u.id = $2`
	}
	rows, err := d.db.pool.Query(ctx, query, clientID, id)
	if err != nil {
		return service.UploadFile{}, err
	}
	defer rows.Close()
	var f service.UploadFile
	found := false
	for rows.Next() {
		var n *int
		var data []byte
		var removed *time.Time
		if err := rows.Scan(&n, &data, &f.Kept, &removed); err != nil {
			return service.UploadFile{}, err
		}
		found = true
		if removed != nil {
			f.Removed = *removed
		}
		if data != nil && n != nil {
			f.Data = storelink.Place(f.Data, *n, data)
		} else if data != nil {
			f.Data = storelink.Chunks{data}
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

// ExpireFiles removes files and notes it in one statement; SKIP LOCKED
// leaves the rows another process is removing to it.
func (d *uploads) ExpireFiles(ctx context.Context, p service.ExpireParams) (int, error) {
	final := make([]string, len(p.Final))
	for i, s := range p.Final {
		final[i] = string(s)
	}
	tag, err := d.db.pool.Exec(ctx, `WITH gone AS (
		DELETE FROM upload_bodies WHERE upload_id IN (
			SELECT b.upload_id FROM upload_bodies b JOIN uploads u ON u.id = b.upload_id
			WHERE u.status = ANY ($4) AND u.received_at < $1
			LIMIT $3 FOR UPDATE OF b SKIP LOCKED)
		RETURNING upload_id)
	UPDATE uploads SET file_expired_at = $2 FROM gone WHERE uploads.id = gone.upload_id`, p.Cutoff, p.At, p.Limit, final)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

// hasErrorsSQL is the term of a listing that selects uploads by
// storelink.Upload.HasErrors: whether they dropped rows.
func hasErrorsSQL(has bool) string {
	if has {
		return ` AND rows_rejected > 0`
	}
	return ` AND rows_rejected = 0`
}
