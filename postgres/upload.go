package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
)

var _ storelink.UploadService = (*DB)(nil)

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

// Accept takes the upload's size from the client's bucket and stores the
// upload row and its bytes in one transaction. The bucket row stays locked
// until the commit, so the uploads of one client, from any process, take
// from it one at a time.
//
// The transaction is sent in two round trips (see pipelined): one that
// begins it and locks the bucket, one that writes the bucket, the upload and
// its bytes and commits. The bucket arithmetic stays in the domain, between
// the two. Sent statement by statement it would take seven round trips,
// four of them with the bucket locked, and round trips are most of what an
// accept costs both storelink and PostgreSQL.
func (db *DB) Accept(ctx context.Context, nu storelink.NewUpload, policy storelink.CapacityPolicy) (*storelink.Upload, storelink.Capacity, error) {
	var u *storelink.Upload
	var capacity storelink.Capacity
	err := db.pipelined(ctx, func(conn *pgx.Conn) error {
		u, capacity = nil, storelink.Capacity{}
		var (
			found   bool
			stores  int
			tokens  *float64
			updated *time.Time
		)
		lock := &pgx.Batch{}
		lock.Queue(`BEGIN`)
		// The bucket row exists before it is locked: a first upload has
		// nothing to lock otherwise, and two first uploads would both see
		// a full bucket.
		lock.Queue(`INSERT INTO capacity (client_id) SELECT id FROM clients WHERE id = $1
			ON CONFLICT (client_id) DO NOTHING`, nu.ClientID)
		lock.Queue(lockBucketSQL, nu.ClientID).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				found = true
				if err := rows.Scan(&stores, &tokens, &updated); err != nil {
					return err
				}
			}
			return rows.Err()
		})
		// Counted in a statement after the lock, so with a snapshot taken
		// once the lock is held: it sees every upload of the client that
		// an accept committed before, in any process.
		waiting := 0
		if policy.MaxWaiting > 0 {
			lock.Queue(waitingSQL, nu.ClientID).QueryRow(func(row pgx.Row) error { return row.Scan(&waiting) })
		}
		if err := conn.SendBatch(ctx, lock).Close(); err != nil {
			return notFound(fmt.Errorf("lock capacity: %w", err), "client %q", nu.ClientID)
		}
		if !found {
			return notFound(pgx.ErrNoRows, "client %q", nu.ClientID)
		}
		var bucket *storelink.Bucket
		if tokens != nil && updated != nil {
			bucket = &storelink.Bucket{Tokens: *tokens, UpdatedAt: *updated}
		}
		now := db.now() // after the lock: another upload may have been waited for
		next, c, err := policy.Take(bucket, stores, int64(len(nu.Body)), now)
		capacity = c
		if err != nil {
			return err // pipelined rolls back
		}
		if policy.MaxWaiting > 0 && waiting >= policy.MaxWaiting {
			return storelink.Errorf(storelink.EBACKLOG, "%d uploads of this client are waiting to be processed.", waiting)
		}
		up := &storelink.Upload{
			ID: storelink.NewID(now), ClientID: nu.ClientID, FileName: nu.FileName, SizeBytes: int64(len(nu.Body)),
			SHA256: nu.SHA256, Status: storelink.UploadAccepted, ReceivedAt: now,
			Errors: []storelink.Problem{}, Warnings: []storelink.Problem{},
		}
		write := &pgx.Batch{}
		write.Queue(acceptWriteSQL, up.ClientID, next.Tokens, next.UpdatedAt, up.ID, up.FileName, up.SizeBytes, up.SHA256,
			up.Status, now, nu.Body)
		queueCommit(write)
		if err := conn.SendBatch(ctx, write).Close(); err != nil {
			return fmt.Errorf("insert upload: %w", err)
		}
		u = up
		return nil
	})
	if err != nil {
		return nil, capacity, err
	}
	db.wake(ChannelUploads)
	return u, capacity, nil
}

// lockBucketSQL reads a client's bucket and store count and locks the
// bucket row, which must exist. (FOR UPDATE cannot lock the nullable side
// of an outer join, hence not loadBucket's join with clients.)
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

// wake notifies the processes on the database that there is work, once the
// transaction that made it has committed. A transaction that has sent a
// NOTIFY holds a lock of the whole cluster from just before its commit
// record is written until that record is flushed to disk: notifying from
// Accept's own transaction made the accepts of every client and process
// commit one after another, each waiting for its own flush, where they
// otherwise share flushes. The notification goes in a transaction of its own
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

// Capacity reports the bucket of a client.
func (db *DB) Capacity(ctx context.Context, clientID string, policy storelink.CapacityPolicy) (storelink.Capacity, error) {
	bucket, stores, err := loadBucket(ctx, db.pool, clientID)
	if err != nil {
		return storelink.Capacity{}, err
	}
	return policy.Peek(bucket, stores, db.now()), nil
}

// loadBucket reads a client's bucket and store count without locking it.
func loadBucket(ctx context.Context, q querier, clientID string) (*storelink.Bucket, int, error) {
	var stores int
	var tokens *float64
	var updated *time.Time
	err := q.QueryRow(ctx, `SELECT (SELECT count(*) FROM stores WHERE client_id = c.id), k.tokens, k.updated_at
		FROM clients c LEFT JOIN capacity k ON k.client_id = c.id WHERE c.id = $1`, clientID).Scan(&stores, &tokens, &updated)
	if err != nil {
		return nil, 0, notFound(err, "client %q", clientID)
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
// The NOT EXISTS looks at the client's previous upload only. That is the
// same test, because a client's finished uploads are always a prefix of its
// uploads: only the earliest unfinished one is ever claimed, and only a
// claimed one is finished. Asking for any earlier unfinished upload would
// walk the client's finished history (the index on (client_id, seq) does
// not hold the status) for every waiting upload the claim passes over, so a
// claim that finds nothing to take would cost time in proportion to every
// client's history; this way it is one index lookup per upload passed over.
const claimUploadSQL = `
WITH pick AS (
	SELECT u.seq FROM uploads u
	WHERE u.status IN ('accepted', 'processing')
	  AND (u.status = 'accepted' OR u.lease_until < $2)
	  AND NOT EXISTS (SELECT 1 FROM (SELECT o.status FROM uploads o WHERE o.client_id = u.client_id AND o.seq < u.seq
	                                 ORDER BY o.seq DESC LIMIT 1) prev
	                  WHERE prev.status IN ('accepted', 'processing'))
	ORDER BY u.seq
	LIMIT 1
	FOR UPDATE SKIP LOCKED
)
UPDATE uploads SET status = 'processing', lease_owner = $1, lease_until = $3, started_at = $2, attempts = attempts + 1
FROM pick WHERE uploads.seq = pick.seq
RETURNING id, client_id, file_name, size_bytes, sha256, received_at, attempts,
	(SELECT body FROM upload_bodies WHERE upload_id = uploads.id)`

// Claim leases the next upload to process.
func (db *DB) Claim(ctx context.Context, owner string, lease time.Duration) (*storelink.Claim, error) {
	now := db.now()
	c := &storelink.Claim{Owner: owner}
	err := db.pool.QueryRow(ctx, claimUploadSQL, owner, now, now.Add(lease)).
		Scan(&c.ID, &c.ClientID, &c.FileName, &c.SizeBytes, &c.SHA256, &c.ReceivedAt, &c.Attempts, &c.Body)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("claim upload: %w", err)
	}
	if c.Body == nil {
		return nil, fmt.Errorf("claim upload %s: its body is missing", c.ID)
	}
	c.Status, c.StartedAt = storelink.UploadProcessing, &now
	return c, nil
}

// Apply runs fn inside one transaction that holds the upload's row lock.
// The rows it puts are collected (stockWriter: a large file's are copied
// into a temporary table as they come) and written to the stock by one
// upsert at the end, so a file-level problem, or a file without one valid
// row, simply skips that upsert: the rejection is recorded in the same
// transaction, with nothing applied.
//
// The transaction is pipelined (see pipelined) in round trips around fn:
// one that begins it, checks the lease and reads the client's stores, and
// one that writes the rows and the report and commits, its RETURNING being
// the upload as it then is; a large file's rows are written in a round trip
// of their own before the report, so that its finished_at is when they
// were. Statement by statement it would take nine round trips and one more
// to read the upload back; for a small file those are most of what an apply
// costs both storelink and PostgreSQL.
func (db *DB) Apply(ctx context.Context, c *storelink.Claim, fn storelink.FeedApply) (*storelink.Upload, error) {
	var u *storelink.Upload
	// Not run again on a deadlock, as inTx would: fn is run once.
	err := db.tryPipelined(ctx, func(conn *pgx.Conn) error {
		stores, err := beginLeased(ctx, conn, c)
		if err != nil {
			return err
		}
		w := newStockWriter(ctx, conn)
		report, err := fn(stores, w.put)
		if err != nil {
			return fmt.Errorf("apply upload %s: %w", c.ID, err)
		}
		status := storelink.UploadApplied
		end := &pgx.Batch{}
		if report.FileError || report.RowsApplied == 0 {
			status, report.RowsApplied = storelink.UploadRejected, 0
		} else {
			if err := w.queueApply(end, c.ClientID, c.ID, db.now()); err != nil {
				return fmt.Errorf("apply upload %s: %w", c.ID, err)
			}
			queueReleaseFulfilled(end, c.ClientID, c.ID)
			// The upsert of a large file (its rows copied into a temporary
			// table) takes a while: its finished_at is taken once it is
			// done, a round trip later, not before it was sent. A small
			// file's takes about the round trip it would add.
			if w.copied {
				if err := conn.SendBatch(ctx, end).Close(); err != nil {
					return fmt.Errorf("apply upload %s: %w", c.ID, err)
				}
				end = &pgx.Batch{}
			}
		}
		queueFinish(end, c.ID, status, report, db.now(), &u)
		queueCommit(end)
		if err := conn.SendBatch(ctx, end).Close(); err != nil {
			return fmt.Errorf("commit upload %s: %w", c.ID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

// beginLeased begins the apply transaction, takes the upload's row lock
// after checking that the claim still holds its lease (ECONFLICT when
// another processor took it over), and reads the client's stores, in one
// round trip. While the lock is held, no other process can claim the upload
// again, even once the lease has run out.
func beginLeased(ctx context.Context, conn *pgx.Conn, c *storelink.Claim) (map[string]bool, error) {
	held := false
	stores := map[string]bool{}
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`SELECT lease_owner FROM uploads WHERE id = $1 AND status = 'processing' FOR UPDATE`, c.ID).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var owner *string
			if err := rows.Scan(&owner); err != nil {
				return err
			}
			held = owner != nil && *owner == c.Owner
		}
		return rows.Err()
	})
	b.Queue(`SELECT id FROM stores WHERE client_id = $1`, c.ClientID).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			stores[id] = true
		}
		return rows.Err()
	})
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("begin apply of upload %s: %w", c.ID, err)
	}
	if !held {
		return nil, storelink.Errorf(storelink.ECONFLICT, "Upload %s is no longer held by this processor.", c.ID)
	}
	return stores, nil
}

// queueReleaseFulfilled ends the reservations of fulfilled units whose
// store and EAN this upload has just set: the partner's own count now
// reflects the sale (CONTRACT 3.4). Only units still reserving are looked
// at.
func queueReleaseFulfilled(b *pgx.Batch, clientID, uploadID string) {
	b.Queue(`UPDATE order_items i SET reserving = false
		WHERE i.reserving AND i.status IN ('fulfilled', 'returned') AND i.client_id = $1
		  AND EXISTS (SELECT 1 FROM stock s WHERE s.client_id = i.client_id AND s.store_id = i.store_id
		              AND s.ean = i.ean AND s.upload_id = $2)`, clientID, uploadID)
}

// queueFinish records the report, ends the lease and drops the bytes, which
// are no longer needed once the upload is final. The upload as finished is
// read into *u.
func queueFinish(b *pgx.Batch, id string, status storelink.UploadStatus, r storelink.FeedReport, now time.Time, u **storelink.Upload) {
	errs, _ := json.Marshal(nonNil(r.Errors))
	warns, _ := json.Marshal(nonNil(r.Warnings))
	b.Queue(`UPDATE uploads SET status = $1, finished_at = $2, rows_total = $3, rows_applied = $4,
		rows_rejected = $5, errors = $6, warnings = $7, lease_owner = NULL, lease_until = NULL WHERE id = $8
		RETURNING `+uploadColumns,
		status, now, r.RowsTotal, r.RowsApplied, r.RowsRejected, string(errs), string(warns), id).QueryRow(func(row pgx.Row) error {
		var err error
		*u, err = scanUpload(row)
		if err != nil {
			return fmt.Errorf("finish upload %s: %w", id, err)
		}
		return nil
	})
	b.Queue(`DELETE FROM upload_bodies WHERE upload_id = $1`, id)
}

// Fail finishes an upload that could not be processed at all (it failed
// every attempt), so that it stops blocking the client's later uploads.
func (db *DB) Fail(ctx context.Context, c *storelink.Claim, problem storelink.Problem) error {
	return db.pipelined(ctx, func(conn *pgx.Conn) error {
		var u *storelink.Upload
		r := storelink.FeedReport{FileError: true, Errors: []storelink.Problem{problem}}
		b := &pgx.Batch{}
		b.Queue(`BEGIN`)
		queueFinish(b, c.ID, storelink.UploadRejected, r, db.now(), &u)
		queueCommit(b)
		return conn.SendBatch(ctx, b).Close()
	})
}

// Release gives a claim back uncounted (UploadService.Release). The claim
// is known by its owner and start; the owner is cleared, so that only the
// first of repeated releases counts.
func (db *DB) Release(ctx context.Context, c *storelink.Claim, after time.Duration) error {
	_, err := db.pool.Exec(ctx, `UPDATE uploads SET lease_owner = NULL, lease_until = $1, attempts = greatest(attempts - 1, 0)
		WHERE id = $2 AND status = 'processing' AND lease_owner = $3 AND started_at = $4`,
		db.now().Add(after), c.ID, c.Owner, *c.StartedAt)
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

// ReleaseOwnLeases hands back, after an orderly stop, the uploads that
// owner's processor was applying when it was stopped: their applies rolled
// back, so they are claimable again at once (instead of when the lease runs
// out), and the interrupted claim does not count towards the attempts after
// which an upload is given up on. Only owner's leases are touched: the other
// processes on the database hold theirs. (SQLite's ReleaseLeases, which
// frees every lease at start-up, has no counterpart here: a lease that is
// not this process's may be a live one.)
func (db *DB) ReleaseOwnLeases(ctx context.Context, owner string) error {
	// A lease that ended before any clock reading ('-infinity'; SQLite
	// writes 0 ms) keeps the upload in processing, as it was, but
	// claimable.
	_, err := db.pool.Exec(ctx, `UPDATE uploads SET lease_until = '-infinity', attempts = greatest(attempts - 1, 0)
		WHERE status = 'processing' AND lease_owner = $1`, owner)
	return err
}
