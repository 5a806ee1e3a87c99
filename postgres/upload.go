package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
	"storelink/service"
)

// Notification channels. A notification's payload is the schema of the
// installation that sent it.
const (
	// ChannelUploads is notified when an upload is accepted.
	ChannelUploads = "storelink_uploads"
	// ChannelDeliveries is notified when deliveries become due: events
	// written, a redelivery, an endpoint enabled.
	ChannelDeliveries = "storelink_deliveries"
)

// notify queues a notification on channel, sent by PostgreSQL when the
// transaction commits (and never when it rolls back).
func notify(ctx context.Context, tx querier, channel string) error {
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, current_schema())`, channel)
	if err != nil {
		return fmt.Errorf("notify %s: %w", channel, err)
	}
	return nil
}

var _ service.UploadDriver = (*uploads)(nil)

// uploads is the driver of the upload and stock calls.
type uploads struct{ db *DB }

// Transient tells deadlock victims and serialization failures: with many
// writers these are expected and rare, and a fresh try avoids them.
func (d *uploads) Transient(err error) bool { return retryable(err) }

// Fault turns an unreachable database into EUNAVAILABLE and a full disk
// into ENOSPACE.
func (d *uploads) Fault(err error) error { return Fault(err) }

// BeginAhead is Begin: PostgreSQL's writers do not take turns, and a
// cancel and a claim meet at the upload's row lock.
func (d *uploads) BeginAhead(ctx context.Context) (service.UploadTx, error) { return d.Begin(ctx) }

// Begin starts an upload transaction on a pipe, so that the upload calls'
// statements go a few to a round trip.
func (d *uploads) Begin(ctx context.Context) (service.UploadTx, error) {
	p, err := beginPipe(ctx, d.db.pool)
	if err != nil {
		return nil, err
	}
	t := &uploadTx{db: d.db, p: p}
	t.p.beforeSend = t.flushBatch
	return t, nil
}

// uploadTx is a transaction begun by uploads.Begin: its statements are
// queued in a batch until an answer or COMMIT is needed.
type uploadTx struct {
	p  pipe
	db *DB
	// owners are the uploads' lease owners as LockUploads read them with
	// their rows locked, which they stay until the transaction ends.
	owners map[string]string
	w      *stockWriter
	wake   bool // an upload was inserted: the processors are told at commit
	// savepoint is where the savepoint of the upload at hand stands.
	savepoint savepointState
	// The writes of a batch's small files, kept to be sent as a few
	// statements for all of them (flushBatch, before each send): the
	// writers of the files applied and not copied, those whose
	// reservations are released, and the uploads finished. They go before
	// COMMIT: after it they would run in a transaction of their own, with
	// the uploads' locks already given up.
	applied  []*stockWriter
	released []*stockWriter
	finished []finish
}

// savepointState is where a pipelined transaction's savepoint stands: none
// asked for, asked for and not yet made (nothing needed it), or made.
type savepointState int8

const (
	savepointNone savepointState = iota
	savepointWanted
	savepointMade
)

// Commit sends what is queued, the batch's kept writes first, with COMMIT,
// and then wakes the processors for an upload inserted (see wake).
func (t *uploadTx) Commit(ctx context.Context) error {
	if err := t.p.commit(ctx); err != nil {
		return err // Rollback ends it
	}
	if t.wake {
		t.db.wake(ChannelUploads)
	}
	return nil
}

// Rollback rolls back what the transaction left open; after Commit it does
// nothing.
func (t *uploadTx) Rollback(ctx context.Context) error {
	t.p.rollback(ctx)
	return nil
}

// LockBucket sends, with the BEGIN, the statements that lock the bucket
// row and read it: one round trip. The bucket arithmetic stays in the
// service, between this round trip and the one of InsertUpload's statement
// and COMMIT.
func (t *uploadTx) LockBucket(ctx context.Context, p service.LockBucketParams) (service.ClientBucket, error) {
	var (
		found   bool
		b       service.ClientBucket
		tokens  *float64
		updated *time.Time
	)
	clientID := p.ClientID
	// The bucket row exists before it is locked: a first upload has nothing
	// to lock otherwise, and two first uploads would both see a full bucket.
	t.p.b.Queue(`INSERT INTO capacity (client_id) SELECT id FROM clients WHERE id = $1
		ON CONFLICT (client_id) DO NOTHING`, clientID)
	t.p.b.Queue(lockBucketSQL, clientID).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			found = true
			if err := rows.Scan(&b.Stores, &tokens, &updated); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	// Counted in a statement after the lock, so with a snapshot taken once
	// the lock is held (READ COMMITTED): it sees every upload of the client
	// that an accept committed before, in any process.
	if p.Waiting != "" {
		t.p.b.Queue(waitingSQL, clientID, p.Waiting).QueryRow(func(row pgx.Row) error { return row.Scan(&b.Waiting) })
	}
	if err := t.p.send(ctx); err != nil {
		return service.ClientBucket{}, noRow(err)
	}
	if !found {
		return service.ClientBucket{}, service.ErrNotFound
	}
	if tokens != nil && updated != nil {
		b.Bucket = &storelink.Bucket{Tokens: *tokens, UpdatedAt: *updated}
	}
	return b, nil
}

// lockBucketSQL reads a client's bucket and store count and locks the
// bucket row, which must exist. (FOR UPDATE cannot lock the nullable side
// of an outer join, hence not GetBucket's join with clients.)
const lockBucketSQL = `SELECT (SELECT count(*) FROM stores WHERE client_id = k.client_id), k.tokens, k.updated_at
	FROM capacity k WHERE k.client_id = $1 FOR UPDATE`

// waitingSQL counts a client's uploads in a status ($2) among the
// unfinished. The status term that names the statuses of the index of
// unfinished uploads (its predicate) lets the planner use that small index
// rather than the client's index of every upload it ever sent.
const waitingSQL = `SELECT count(*) FROM uploads
	WHERE status IN ('accepted', 'processing') AND status = $2 AND client_id = $1`

// acceptWriteSQL stores the bucket taken from, the upload row, the last
// pieces of its file ($12, numbered from $11) and the row that names the
// file ($10) in one statement.
const acceptWriteSQL = `WITH bucket AS (
	UPDATE capacity SET tokens = $2, updated_at = $3 WHERE client_id = $1
), upload AS (
	INSERT INTO uploads (id, client_id, file_name, size_bytes, sha256, status, received_at)
	VALUES ($4, $1, $5, $6, $7, $8, $9) RETURNING id
), chunks AS (
	INSERT INTO upload_chunks (file_id, n, data)
	SELECT $10, $11 + i - 1, d FROM unnest($12::bytea[]) WITH ORDINALITY AS t (d, i)
)
INSERT INTO upload_bodies (upload_id, file_id) SELECT id, $10 FROM upload`

// InsertUpload queues the one statement that writes the bucket, the upload
// and its file, to go with COMMIT; the processes on the database are told
// of the upload once it committed (wake).
func (t *uploadTx) InsertUpload(ctx context.Context, u *storelink.Upload, f service.NewFile, next storelink.Bucket) error {
	n := t.p.b.Len()
	t.p.b.Queue(acceptWriteSQL, u.ClientID, next.Tokens, next.UpdatedAt, u.ID, u.FileName, u.SizeBytes, u.SHA256,
		u.Status, u.ReceivedAt, f.ID, f.First, [][]byte(f.Chunks))
	hold(t.p.b, n, "InsertUpload", "upload "+u.ID)
	t.wake = true
	return nil
}

// PutChunks writes the pieces in one statement, which commits on its own:
// PostgreSQL's writers do not wait for one another's rows.
func (d *uploads) PutChunks(ctx context.Context, fileID string, first int, chunks storelink.Chunks) error {
	_, err := d.db.pool.Exec(ctx, `INSERT INTO upload_chunks (file_id, n, data)
		SELECT $1, $2 + i - 1, d FROM unnest($3::bytea[]) WITH ORDINALITY AS t (d, i)`, fileID, first, [][]byte(chunks))
	return err
}

// DropFile removes the pieces of a file no upload names, in one statement.
func (d *uploads) DropFile(ctx context.Context, fileID string) error {
	_, err := d.db.pool.Exec(ctx, `DELETE FROM upload_chunks WHERE file_id = $1
		AND NOT EXISTS (SELECT 1 FROM upload_bodies WHERE file_id = $1)`, fileID)
	return err
}

// DropOrphanFiles removes the pieces of the files it finds in one
// statement.
func (d *uploads) DropOrphanFiles(ctx context.Context, before string, limit int) (int, error) {
	var n int
	err := d.db.pool.QueryRow(ctx, `WITH orphans AS (
			SELECT DISTINCT file_id FROM upload_chunks c WHERE file_id < $1
			AND NOT EXISTS (SELECT 1 FROM upload_bodies b WHERE b.file_id = c.file_id) LIMIT $2),
		gone AS (DELETE FROM upload_chunks WHERE file_id IN (SELECT file_id FROM orphans) RETURNING file_id)
		SELECT count(DISTINCT file_id) FROM gone`, before, limit).Scan(&n)
	return n, err
}

// wake notifies the processes on the database that there is work, once the
// transaction that made it has committed. A transaction that has sent a
// NOTIFY holds a lock of the whole cluster from just before its commit
// record is written until that record is flushed to disk: notifying from
// Accept's own transaction would make the accepts of every client and
// process commit one after another, each waiting for its own flush, where
// they otherwise share flushes. The notification goes in a transaction of its own
// instead, one that does not wait for its flush (synchronous_commit off for
// it alone), so the lock is held for moments.
//
// The notifications of one process are coalesced (see notifier): while one
// is being sent, the accepts that commit meanwhile wait for the next, which
// covers them all. Under load that is one notification per round trip
// instead of one per accept, each of which woke every process's listener.
//
// A notification is only a wake-up: the processes poll the queue besides,
// so one that is lost (the call failed, or the server crashed before the
// flush, taking the listeners' connections with it) delays work by a poll
// interval and loses none; the upload is committed either way, so a failure
// is not the caller's.
func (db *DB) wake(channel string) {
	db.notifiers[channel].signal(func(ctx context.Context) {
		_, _ = db.pool.Exec(ctx, `SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, current_schema())`, channel)
	})
}

// Savepoint is made only when the rows put start to be written before
// ApplyStock, by a COPY (stockWriter.copy): a file of at most copyBatch
// rows is only written by ApplyStock, which the service calls after the
// savepoint's release, so until then there is nothing to undo. A
// savepoint that writes is a subtransaction with an id of its own, which
// every snapshot taken meanwhile lists; more than 64 of them in a
// transaction spill from shared memory to the subtransaction log and slow
// every session's visibility checks. A batch of small files makes none.
func (t *uploadTx) Savepoint(context.Context) error {
	t.savepoint = savepointWanted
	return nil
}

// RollbackToSavepoint drops the writer, whose rows are not applied, and
// rolls back to the savepoint if one was made: a temporary table of the
// rows, made since, goes with it.
func (t *uploadTx) RollbackToSavepoint(context.Context) error {
	t.w = nil
	if t.savepoint == savepointMade {
		n := t.p.b.Len()
		t.p.b.Queue(`ROLLBACK TO SAVEPOINT upload`)
		hold(t.p.b, n, "RollbackToSavepoint", "the upload's savepoint")
	}
	return nil
}

// ReleaseSavepoint is queued, when one was made.
func (t *uploadTx) ReleaseSavepoint(context.Context) error {
	if t.savepoint == savepointMade {
		n := t.p.b.Len()
		t.p.b.Queue(`RELEASE SAVEPOINT upload`)
		hold(t.p.b, n, "ReleaseSavepoint", "the upload's savepoint")
	}
	t.savepoint = savepointNone
	return nil
}

// beforeCopy is called by the writer before it sends a statement of its
// own on the connection: what is queued goes first, with the savepoint
// that was asked for.
func (t *uploadTx) beforeCopy(ctx context.Context) error {
	// The earlier uploads' writes go before the savepoint, which must undo
	// this upload's alone.
	if err := t.flushBatch(); err != nil {
		return err
	}
	if t.savepoint == savepointWanted {
		n := t.p.b.Len()
		t.p.b.Queue(`SAVEPOINT upload`)
		hold(t.p.b, n, "Savepoint", "upload "+t.w.upload)
		t.savepoint = savepointMade
	}
	return t.p.send(ctx)
}

// LockUploads sends, with the BEGIN (or what else is queued), the
// statements that lock the uploads' rows, in acceptance order, and read
// their lease owners and the clients' stores: one round trip. While the
// locks are held, no other process can claim the uploads again, even once
// their leases have run out.
func (t *uploadTx) LockUploads(ctx context.Context, p service.LockUploadsParams) (service.LockedUploads, error) {
	ids := p.IDs
	owner := make(map[string]string, len(ids))
	t.p.b.Queue(`SELECT id, coalesce(lease_owner, '') FROM uploads WHERE id = ANY($1) AND status = $2
		ORDER BY seq FOR UPDATE`, ids, p.Processing).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id, o string
			if err := rows.Scan(&id, &o); err != nil {
				return err
			}
			owner[id] = o
		}
		return rows.Err()
	})
	stores := make(map[string]map[string]bool, len(p.ClientIDs))
	for _, c := range p.ClientIDs {
		stores[c] = map[string]bool{}
	}
	t.p.b.Queue(`SELECT client_id, id FROM stores WHERE client_id = ANY($1)`, p.ClientIDs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var client, store string
			if err := rows.Scan(&client, &store); err != nil {
				return err
			}
			stores[client][store] = true
		}
		return rows.Err()
	})
	if err := t.p.send(ctx); err != nil {
		return service.LockedUploads{}, err
	}
	owners := make([]string, len(ids))
	for i, id := range ids {
		owners[i] = owner[id]
	}
	t.owners = owner
	return service.LockedUploads{Owners: owners, Stores: stores}, nil
}

// ApplyStock queues the upsert of the rows put of a file that was copied
// (stockWriter.queueApply), which also records how many pairs it left
// unchanged; FinishUpload keeps that count. Such an upsert takes a while,
// so it is sent at once, in a round trip of its own: the time the service
// then reads for the upload's finish is when the rows were written. A small
// file's rows are kept, to be written with the other small files of the
// transaction (flushBatch) at COMMIT: its round trip would cost about what
// its upsert takes, and a statement per file most of what a batch of them
// costs PostgreSQL.
func (t *uploadTx) ApplyStock(ctx context.Context) error {
	switch {
	case t.w == nil:
		return nil
	case !t.w.copied:
		if t.w.rows.len() > 0 {
			t.applied = append(t.applied, t.w)
		}
		return nil
	}
	// The earlier files' writes go first (the copies flushed them already).
	if err := t.flushBatch(); err != nil {
		return err
	}
	if err := t.w.copy(); err != nil {
		return err
	}
	t.w.queueApply(t.p.b)
	return t.p.send(ctx)
}

// DiscardStock has nothing to drop: the rows put are written to the stock
// only by ApplyStock, and a temporary table of them is dropped at the end
// of the transaction. The upload's row stays locked, so its owner is as
// LockUploads read it.
func (t *uploadTx) DiscardStock(_ context.Context, uploadID string, _ storelink.UploadStatus) (string, error) {
	owner, ok := t.owners[uploadID]
	if !ok {
		return "", service.ErrNotFound
	}
	return owner, nil
}

// ReleaseFulfilled is queued, to go with the upload's finish; it looks only
// at units still reserving (stockWriter.queueRelease).
func (t *uploadTx) ReleaseFulfilled(context.Context) error {
	switch {
	case t.w == nil:
	case t.w.copied:
		n := t.p.b.Len()
		t.w.queueRelease(t.p.b)
		hold(t.p.b, n, "ReleaseFulfilled", "upload "+t.w.upload)
	case t.w.rows.len() > 0:
		t.released = append(t.released, t.w) // with the others' (flushBatch)
	}
	return nil
}

// FinishUpload is kept, to be written with the other uploads finished in
// the transaction, in one statement at COMMIT (flushBatch), whose RETURNING
// reads the upload as finished into *finished, so that no round trip reads
// it back.
func (t *uploadTx) FinishUpload(_ context.Context, p service.FinishParams) error {
	t.finished = append(t.finished, finish{id: p.ID, status: p.Status, report: p.Report, at: p.At, into: p.Into, announce: p.Announce})
	return nil
}

// finish is an upload's finish, kept until flushBatch.
type finish struct {
	id       string
	status   storelink.UploadStatus
	report   storelink.FeedReport
	at       time.Time
	into     **storelink.Upload
	announce storelink.OrderState
}

// finishSQL finishes uploads, one row of the arrays each; $1 the ids, $2 the
// statuses, $3 the times, $4 to $6 the row counts, $7 and $8 the problems as
// JSON, $9 the kinds of their events (announceSQL).
var finishSQL = `UPDATE uploads SET status = f.fstatus, finished_at = f.fat, rows_total = f.ftotal, rows_applied = f.fapplied,
	rows_rejected = f.frejected, errors = f.ferrors::jsonb, warnings = f.fwarnings::jsonb, lease_owner = NULL, lease_until = NULL,
	event_due = ` + announceSQL("f.fannounce") + `
FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::integer[], $5::integer[], $6::integer[], $7::text[], $8::text[], $9::text[])
	AS f (fid, fstatus, fat, ftotal, fapplied, frejected, ferrors, fwarnings, fannounce)
WHERE id = f.fid
RETURNING ` + uploadColumns

// announceSQL tells whether an enabled endpoint of the upload's client,
// not deleted, names the event kind kind among its states: through
// endpoints_live.
func announceSQL(kind string) string {
	return `(` + kind + ` <> '' AND EXISTS (SELECT 1 FROM endpoints e WHERE e.client_id = uploads.client_id AND e.deleted_at IS NULL
		AND e.enabled AND ` + kind + ` = ANY (e.states)))`
}

// flushBatch queues the writes kept for the transaction's small files: their
// rows (stockWriter.queueApplyAll), the release of reservations at their
// pairs, and the uploads' finishes, a statement or a few for all of them
// rather than a few for each; error files one statement each. It runs
// before anything is sent, so that what is kept goes in order with the
// rest.
func (t *uploadTx) flushBatch() error {
	if len(t.applied) > 0 {
		n := t.p.b.Len()
		queueApplyAll(t.p.b, t.applied, t.applied[0].now())
		hold(t.p.b, n, "ApplyStock", uploadsOf(t.applied))
		t.applied = nil
	}
	if len(t.released) > 0 {
		var clients, stores, eans []string
		for _, w := range t.released {
			for range w.rows.store {
				clients = append(clients, w.client)
			}
			stores, eans = append(stores, w.rows.store...), append(eans, w.rows.ean...)
		}
		// Every writer of a transaction has the service's statuses.
		n := t.p.b.Len()
		t.p.b.Queue(`UPDATE order_items i SET reserving = false
			FROM unnest($1::text[], $2::text[], $3::text[]) AS r (client_id, store_id, ean)
			WHERE i.reserving AND i.status = ANY ($4) AND i.client_id = r.client_id
			  AND r.store_id = i.store_id COLLATE "C" AND r.ean = i.ean COLLATE "C"`, clients, stores, eans, t.released[0].sold)
		hold(t.p.b, n, "ReleaseFulfilled", uploadsOf(t.released))
		t.released = nil
	}
	if len(t.finished) == 0 {
		return nil
	}
	n := len(t.finished)
	ids, statuses, ats := make([]string, n), make([]string, n), make([]time.Time, n)
	totals, applied, rejected := make([]int32, n), make([]int32, n), make([]int32, n)
	problems, warnings, announce := make([]string, n), make([]string, n), make([]string, n)
	into := make(map[string]**storelink.Upload, n)
	for i, f := range t.finished {
		r := &f.report
		announce[i] = string(f.announce)
		ids[i], statuses[i], ats[i] = f.id, string(f.status), f.at
		totals[i], applied[i], rejected[i] = int32(r.RowsTotal), int32(r.RowsApplied), int32(r.RowsRejected)
		e, err := json.Marshal(r.Errors)
		if err != nil {
			return err
		}
		w, err := json.Marshal(r.Warnings)
		if err != nil {
			return err
		}
		problems[i], warnings[i], into[f.id] = string(e), string(w), f.into
		if r.ErrorFile != nil {
			// A file's upload_bodies row has no error file before its
			// finish: only one is written.
			from := t.p.b.Len()
			t.p.b.Queue(`UPDATE upload_bodies SET errors_csv = $2 WHERE upload_id = $1`, f.id, r.ErrorFile)
			hold(t.p.b, from, "FinishUpload", "upload "+f.id)
		}
	}
	what := "upload " + ids[0]
	if n > 1 {
		what = "uploads " + strings.Join(ids, ", ")
	}
	t.finished = nil
	from := t.p.b.Len()
	t.p.b.Queue(finishSQL, ids, statuses, ats, totals, applied, rejected, problems, warnings, announce).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			u, err := scanUpload(rows)
			if err != nil {
				return err
			}
			if p := into[u.ID]; p != nil {
				*p = u
			}
		}
		return rows.Err()
	})
	hold(t.p.b, from, "FinishUpload", what)
	return nil
}

// uploadsOf names the uploads of ws, for a HeldError.
func uploadsOf(ws []*stockWriter) string {
	if len(ws) == 1 {
		return "upload " + ws[0].upload
	}
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.upload
	}
	return "uploads " + strings.Join(ids, ", ")
}

// CancelUpload sends, in one round trip, the cancel of the upload when it
// is still accepted, the drop of a cancelled upload's bytes and a read of
// the upload as it then stands. Each statement reads what was committed
// when it began: a claim that won the row before the cancel is seen by the
// read, and a claim that comes after finds the upload cancelled.
func (t *uploadTx) CancelUpload(ctx context.Context, p service.CancelParams) (service.Cancelled, error) {
	clientID, id := p.ClientID, p.ID
	var cancelled, current *storelink.Upload
	t.p.b.Queue(`UPDATE uploads SET status = $4, finished_at = $3, file_expired_at = $3, event_due = `+announceSQL("$6::text")+`
		WHERE client_id = $1 AND id = $2 AND status = $5 RETURNING `+uploadColumns, clientID, id, p.At, p.To, p.From, p.Announce).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			u, err := scanUpload(rows)
			if err != nil {
				return err
			}
			cancelled = u
		}
		return rows.Err()
	})
	t.p.b.Queue(`DELETE FROM upload_bodies b USING uploads u
		WHERE b.upload_id = u.id AND u.client_id = $1 AND u.id = $2 AND u.status = $3`, clientID, id, p.To)
	t.p.b.Queue(`SELECT `+uploadColumns+` FROM uploads WHERE client_id = $1 AND id = $2`, clientID, id).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			u, err := scanUpload(rows)
			if err != nil {
				return err
			}
			current = u
		}
		return rows.Err()
	})
	if err := t.p.send(ctx); err != nil {
		return service.Cancelled{}, noRow(err)
	}
	switch {
	case cancelled != nil:
		return service.Cancelled{Upload: cancelled, Cancelled: true}, nil
	case current != nil:
		return service.Cancelled{Upload: current}, nil
	}
	return service.Cancelled{}, service.ErrNotFound
}

// PutBucket is queued, to go with COMMIT; LockBucket made the row.
func (t *uploadTx) PutBucket(_ context.Context, clientID string, b storelink.Bucket) error {
	n := t.p.b.Len()
	t.p.b.Queue(`UPDATE capacity SET tokens = $2, updated_at = $3 WHERE client_id = $1`, clientID, b.Tokens, b.UpdatedAt)
	hold(t.p.b, n, "PutBucket", "client "+clientID)
	return nil
}
