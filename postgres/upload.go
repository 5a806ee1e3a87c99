package postgres

import (
	"context"
	"fmt"
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
func notify(ctx context.Context, tx pgx.Tx, channel string) error {
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, current_schema())`, channel)
	if err != nil {
		return fmt.Errorf("notify %s: %w", channel, err)
	}
	return nil
}

// LockBucket sends, with the BEGIN, the statements that lock the bucket
// row and read it: one round trip. The bucket arithmetic stays in the
// service, between this round trip and the one of InsertUpload's statement
// and COMMIT.
func (t *pipelinedTx) LockBucket(ctx context.Context, clientID string, countWaiting bool) (*storelink.Bucket, int, int, error) {
	var (
		found   bool
		stores  int
		waiting int
		tokens  *float64
		updated *time.Time
	)
	// The bucket row exists before it is locked: a first upload has nothing
	// to lock otherwise, and two first uploads would both see a full bucket.
	t.b.Queue(`INSERT INTO capacity (client_id) SELECT id FROM clients WHERE id = $1
		ON CONFLICT (client_id) DO NOTHING`, clientID)
	t.b.Queue(lockBucketSQL, clientID).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			found = true
			if err := rows.Scan(&stores, &tokens, &updated); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	// Counted in a statement after the lock, so with a snapshot taken once
	// the lock is held (READ COMMITTED): it sees every upload of the client
	// that an accept committed before, in any process.
	if countWaiting {
		t.b.Queue(waitingSQL, clientID).QueryRow(func(row pgx.Row) error { return row.Scan(&waiting) })
	}
	if err := t.send(ctx); err != nil {
		return nil, 0, 0, noRow(err)
	}
	if !found {
		return nil, 0, 0, service.ErrNotFound
	}
	if tokens == nil || updated == nil {
		return nil, stores, waiting, nil
	}
	return &storelink.Bucket{Tokens: *tokens, UpdatedAt: *updated}, stores, waiting, nil
}

// lockBucketSQL reads a client's bucket and store count and locks the
// bucket row, which must exist. (FOR UPDATE cannot lock the nullable side
// of an outer join, hence not GetBucket's join with clients.)
const lockBucketSQL = `SELECT (SELECT count(*) FROM stores WHERE client_id = k.client_id), k.tokens, k.updated_at
	FROM capacity k WHERE k.client_id = $1 FOR UPDATE`

// waitingSQL counts a client's waiting uploads. The repeated status term
// lets the planner use the small index of unfinished uploads rather than
// the client's index of every upload it ever sent.
const waitingSQL = `SELECT count(*) FROM uploads
	WHERE status IN ('accepted', 'processing') AND status = 'accepted' AND client_id = $1`

// acceptWriteSQL stores the bucket taken from, the upload row and its bytes
// in one statement.
const acceptWriteSQL = `WITH bucket AS (
	UPDATE capacity SET tokens = $2, updated_at = $3 WHERE client_id = $1
), upload AS (
	INSERT INTO uploads (id, client_id, file_name, size_bytes, sha256, status, received_at)
	VALUES ($4, $1, $5, $6, $7, $8, $9) RETURNING id
)
INSERT INTO upload_bodies (upload_id, body) SELECT id, $10 FROM upload`

// InsertUpload queues the one statement that writes the bucket, the upload
// and its bytes, to go with COMMIT; the processes on the database are told
// of the upload once it committed (wake).
func (t *pipelinedTx) InsertUpload(ctx context.Context, u *storelink.Upload, body []byte, next storelink.Bucket) error {
	t.b.Queue(acceptWriteSQL, u.ClientID, next.Tokens, next.UpdatedAt, u.ID, u.FileName, u.SizeBytes, u.SHA256,
		u.Status, u.ReceivedAt, body)
	t.wake = true
	return nil
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
func (t *pipelinedTx) Savepoint(context.Context) error {
	t.savepoint = savepointWanted
	return nil
}

// RollbackToSavepoint drops the writer, whose rows are not applied, and
// rolls back to the savepoint if one was made: a temporary table of the
// rows, made since, goes with it.
func (t *pipelinedTx) RollbackToSavepoint(context.Context) error {
	t.w = nil
	if t.savepoint == savepointMade {
		t.b.Queue(`ROLLBACK TO SAVEPOINT upload`)
	}
	return nil
}

// ReleaseSavepoint is queued, when one was made.
func (t *pipelinedTx) ReleaseSavepoint(context.Context) error {
	if t.savepoint == savepointMade {
		t.b.Queue(`RELEASE SAVEPOINT upload`)
	}
	t.savepoint = savepointNone
	return nil
}

// beforeCopy is called by the writer before it sends a statement of its
// own on the connection: what is queued goes first, with the savepoint
// that was asked for.
func (t *pipelinedTx) beforeCopy(ctx context.Context) error {
	if t.savepoint == savepointWanted {
		t.b.Queue(`SAVEPOINT upload`)
		t.savepoint = savepointMade
	}
	return t.send(ctx)
}

// LockUploads sends, with the BEGIN (or what else is queued), the
// statements that lock the uploads' rows, in acceptance order, and read
// their lease owners and the clients' stores: one round trip.
func (t *pipelinedTx) LockUploads(ctx context.Context, ids, clientIDs []string) ([]string, map[string]map[string]bool, error) {
	owner := make(map[string]string, len(ids))
	t.b.Queue(`SELECT id, coalesce(lease_owner, '') FROM uploads WHERE id = ANY($1) AND status = 'processing'
		ORDER BY seq FOR UPDATE`, ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id, o string
			if err := rows.Scan(&id, &o); err != nil {
				return err
			}
			owner[id] = o
		}
		return rows.Err()
	})
	stores := make(map[string]map[string]bool, len(clientIDs))
	for _, c := range clientIDs {
		stores[c] = map[string]bool{}
	}
	t.b.Queue(`SELECT client_id, id FROM stores WHERE client_id = ANY($1)`, clientIDs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var client, store string
			if err := rows.Scan(&client, &store); err != nil {
				return err
			}
			stores[client][store] = true
		}
		return rows.Err()
	})
	if err := t.send(ctx); err != nil {
		return nil, nil, err
	}
	owners := make([]string, len(ids))
	for i, id := range ids {
		owners[i] = owner[id]
	}
	return owners, stores, nil
}

// LockUpload sends, with the BEGIN, the statements that lock the upload's
// row and read its lease owner and the client's stores: one round trip.
// While the lock is held, no other process can claim the upload again, even
// once the lease has run out.
func (t *pipelinedTx) LockUpload(ctx context.Context, id, clientID string) (string, map[string]bool, error) {
	found := false
	var owner *string
	stores := map[string]bool{}
	t.b.Queue(`SELECT lease_owner FROM uploads WHERE id = $1 AND status = 'processing' FOR UPDATE`, id).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			found = true
			if err := rows.Scan(&owner); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	t.b.Queue(`SELECT id FROM stores WHERE client_id = $1`, clientID).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var store string
			if err := rows.Scan(&store); err != nil {
				return err
			}
			stores[store] = true
		}
		return rows.Err()
	})
	if err := t.send(ctx); err != nil {
		return "", nil, err
	}
	if !found {
		return "", nil, service.ErrNotFound
	}
	if owner != nil {
		t.owner = *owner
	}
	return t.owner, stores, nil
}

// ApplyStock queues the upsert of the rows put (stockWriter.queueApply),
// which also records how many pairs it left unchanged; FinishUpload keeps
// that count.
// The upsert of a large file (its rows copied into a temporary table) takes
// a while, so it is sent at once, in a round trip of its own: the time the
// service then reads for the upload's finish is when the rows were written.
// A small file's is sent with the rest, at COMMIT: its round trip would
// cost about what its upsert takes.
func (t *pipelinedTx) ApplyStock(ctx context.Context) error {
	if t.w == nil {
		return nil
	}
	if t.w.copied {
		if err := t.w.copy(); err != nil {
			return err
		}
	}
	if err := t.w.queueApply(t.b); err != nil {
		return err
	}
	if t.w.copied {
		return t.send(ctx)
	}
	return nil
}

// DiscardStock has nothing to drop: the rows put are written to the stock
// only by ApplyStock, and a temporary table of them is dropped at the end
// of the transaction. The upload's row stays locked, so its owner is as
// LockUpload read it.
func (t *pipelinedTx) DiscardStock(context.Context, string) (string, error) {
	return t.owner, nil
}

// ReleaseFulfilled is queued, to go with the upload's finish; it looks only
// at units still reserving (stockWriter.queueRelease).
func (t *pipelinedTx) ReleaseFulfilled(context.Context, string, string) error {
	if t.w != nil {
		t.w.queueRelease(t.b)
	}
	return nil
}

// FinishUpload is queued, to go with COMMIT; its RETURNING reads the upload
// as finished into *finished, so that no round trip reads it back. pgx
// encodes the problems as the jsonb they are kept in.
func (t *pipelinedTx) FinishUpload(_ context.Context, id string, status storelink.UploadStatus, r storelink.FeedReport, at time.Time, finished **storelink.Upload) error {
	t.b.Queue(`UPDATE uploads SET status = $1, finished_at = $2, rows_total = $3, rows_applied = $4,
		rows_rejected = $5, errors = $6, warnings = $7, lease_owner = NULL, lease_until = NULL WHERE id = $8
		RETURNING `+uploadColumns,
		status, at, r.RowsTotal, r.RowsApplied, r.RowsRejected, r.Errors, r.Warnings, id).QueryRow(func(row pgx.Row) error {
		u, err := scanUpload(row)
		*finished = u
		return err
	})
	t.b.Queue(`UPDATE upload_bodies SET errors_csv = $2 WHERE upload_id = $1`, id, r.ErrorFile)
	return nil
}

// CancelUpload sends, in one round trip, the cancel of the upload when it
// is still accepted, the drop of a cancelled upload's bytes and a read of
// the upload as it then stands. Each statement reads what was committed
// when it began: a claim that won the row before the cancel is seen by the
// read, and a claim that comes after finds the upload cancelled.
func (t *pipelinedTx) CancelUpload(ctx context.Context, clientID, id string, at time.Time) (*storelink.Upload, bool, error) {
	var cancelled, current *storelink.Upload
	t.b.Queue(`UPDATE uploads SET status = 'cancelled', finished_at = $3, file_expired_at = $3
		WHERE client_id = $1 AND id = $2 AND status = 'accepted' RETURNING `+uploadColumns, clientID, id, at).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			u, err := scanUpload(rows)
			if err != nil {
				return err
			}
			cancelled = u
		}
		return rows.Err()
	})
	t.b.Queue(`DELETE FROM upload_bodies b USING uploads u
		WHERE b.upload_id = u.id AND u.client_id = $1 AND u.id = $2 AND u.status = 'cancelled'`, clientID, id)
	t.b.Queue(`SELECT `+uploadColumns+` FROM uploads WHERE client_id = $1 AND id = $2`, clientID, id).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			u, err := scanUpload(rows)
			if err != nil {
				return err
			}
			current = u
		}
		return rows.Err()
	})
	if err := t.send(ctx); err != nil {
		return nil, false, noRow(err)
	}
	switch {
	case cancelled != nil:
		return cancelled, true, nil
	case current != nil:
		return current, false, nil
	}
	return nil, false, service.ErrNotFound
}

// PutBucket is queued, to go with COMMIT; LockBucket made the row.
func (t *pipelinedTx) PutBucket(_ context.Context, clientID string, b storelink.Bucket) error {
	t.b.Queue(`UPDATE capacity SET tokens = $2, updated_at = $3 WHERE client_id = $1`, clientID, b.Tokens, b.UpdatedAt)
	return nil
}
