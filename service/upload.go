package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"storelink"
)

var _ storelink.UploadService = (*Uploads)(nil)

// Uploads are the calls of stock uploads, from their acceptance to their
// apply, their files, and the stock in force they leave.
type Uploads struct {
	config
	d Driver
}

// UploadCalls are the upload calls a driver runs outside a service
// transaction: reads, the claim and the release, each one statement that
// commits on its own, and BeginUpload for the calls that need a
// transaction.
type UploadCalls interface {
	// BeginUpload starts a write transaction of the upload calls. They have
	// transactions of their own kind so that a driver can send a
	// transaction's statements in as few round trips as it likes and take
	// the connection the upload work uses; the caller ends it with Commit or
	// Rollback, and Rollback after Commit does nothing.
	BeginUpload(ctx context.Context) (UploadTx, error)
	// GetBucket returns a client's capacity bucket (nil when it never took
	// from it) and its number of stores, or ErrNotFound for no client.
	GetBucket(ctx context.Context, clientID string) (*storelink.Bucket, int, error)
	// ClaimUploads leases, until lease after the time it reads from now, the
	// uploads a claim takes together, in acceptance order, and counts an
	// attempt of each; it returns the claims in that order, with their
	// bodies and StartedAt, or none. An upload can be claimed when it is
	// waiting, or processing under a lease that ran out, and each earlier
	// unfinished upload of its client can be claimed too (and is claimed
	// with it). Of those, taken client by client (the clients in the order
	// of their oldest upload that can be claimed, each client's uploads in
	// acceptance order), a claim takes the first, and after it the next
	// ones while they number at most limit.Uploads, their files hold at
	// most limit.Bytes together (the first's included) and none was claimed
	// before (attempts 0), the first included: an upload claimed before is
	// claimed alone, so that a file that kills its processor never takes
	// others' attempts with it. An upload processing under a lease that ran
	// out, or given back, can be claimed once backoff.Delay(attempts -
	// failures) has passed after its lease's end; until then it is not
	// claimable, and neither are its client's later uploads. Taken client by client, a claim holds few
	// clients when their backlogs are deep, and leaves the others to the
	// other processes on the database. A driver may look at the oldest
	// limit.Uploads uploads that can be claimed only, of every client or of
	// each. The driver reads now when its claim can no longer wait for a
	// lock.
	// The claims carry the upload's attempts (this one counted) and
	// failures.
	ClaimUploads(ctx context.Context, owner string, lease time.Duration, limit storelink.BatchLimit, backoff storelink.Backoff, now func() time.Time) ([]*storelink.Claim, error)
	// ReleaseUpload clears the lease of c's upload and makes it claimable
	// at until, when c still holds it: the upload processing, with c's owner
	// and start. With failed, the attempt stays counted and the upload's
	// failures are counted one more; without, the attempt is uncounted.
	ReleaseUpload(ctx context.Context, c *storelink.Claim, until time.Time, failed bool) error
	// ReleaseUploadLeases makes the uploads in processing under owner's
	// lease claimable at once, uncounting their attempts.
	ReleaseUploadLeases(ctx context.Context, owner string) error
	// GetUpload returns one upload of a client, or ErrNotFound.
	GetUpload(ctx context.Context, clientID, id string) (*storelink.Upload, error)
	// UploadExists tells whether the client has an upload of that id.
	UploadExists(ctx context.Context, clientID, id string) (bool, error)
	// ListUploads returns up to q.Limit uploads of a client that q selects,
	// newest first. Never nil.
	ListUploads(ctx context.Context, q UploadQuery) ([]storelink.Upload, error)
	// UploadFile returns the client's upload's file as received or, with
	// errorFile, its error file (nil when none was written), with kept
	// true; kept is false, with when the files were removed (zero when not
	// known), once they are no longer kept. ErrNotFound for no upload.
	UploadFile(ctx context.Context, clientID, id string, errorFile bool) (data []byte, kept bool, removed time.Time, err error)
	// ExpireFiles removes the files of up to limit finished uploads
	// received before cutoff, noting at as when, and returns how many.
	ExpireFiles(ctx context.Context, cutoff, at time.Time, limit int) (int, error)
	// CountUnfinished counts the uploads accepted or processing.
	CountUnfinished(ctx context.Context) (int, error)
	// CountWaiting counts the uploads accepted and not yet claimed, of one
	// client or ("") of all, and returns the queue position of the first of
	// them (0 when none waits) and when it was accepted.
	CountWaiting(ctx context.Context, clientID string) (n int, first int64, oldest time.Time, err error)
	// CountUnfinishedUpTo counts the unfinished uploads at queue positions
	// up to and including pos.
	CountUnfinishedUpTo(ctx context.Context, pos int64) (int, error)
}

// UploadTx is one write transaction of the upload calls. Its row methods
// see what it wrote; nothing of it is seen by others before Commit. A
// driver may hold a write back until a later call needs its answer, or
// until Commit: the error of a write may therefore come from a later call.
type UploadTx interface {
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error

	// LockBucket reads a client's bucket (nil when it never took from it)
	// and number of stores, and keeps every other transaction that locks it
	// waiting until this one ends; with countWaiting, it also counts the
	// client's waiting uploads as committed once the lock is held.
	// ErrNotFound for no client.
	LockBucket(ctx context.Context, clientID string, countWaiting bool) (b *storelink.Bucket, stores, waiting int, err error)
	// InsertUpload writes the client's bucket as next, and the upload row
	// and its bytes, and lets the processors know there is work once the
	// transaction commits.
	InsertUpload(ctx context.Context, u *storelink.Upload, body []byte, next storelink.Bucket) error
	// CancelUpload ends the client's upload as cancelled at at, and drops
	// its bytes (their capacity is given back), if it is still accepted; it returns the upload as it then
	// stands and whether this call cancelled it, or ErrNotFound.
	CancelUpload(ctx context.Context, clientID, id string, at time.Time) (u *storelink.Upload, cancelled bool, err error)
	// PutBucket writes the client's bucket.
	PutBucket(ctx context.Context, clientID string, b storelink.Bucket) error
	// LockUpload keeps every other transaction from changing the upload
	// until this one ends and returns the owner of its lease ("" for none),
	// or ErrNotFound when it is not processing; with it, the ids of its
	// client's stores. The two are one call so that a driver can send them
	// to the database together.
	LockUpload(ctx context.Context, id, clientID string) (owner string, stores map[string]bool, err error)
	// LockUploads is LockUpload of several uploads at once, for a batch:
	// owners[i] is the owner of the lease of ids[i] ("" for none, or when it
	// is not processing), and stores holds, for each client of clientIDs,
	// the ids of its stores.
	LockUploads(ctx context.Context, ids, clientIDs []string) (owners []string, stores map[string]map[string]bool, err error)
	// StockWriter returns where the rows of an upload's file are put, in
	// file order; a later row for the same store and EAN overrides an
	// earlier one, and carries Repeats. The rows are stamped with the
	// upload and a time read from now when the driver writes them. Per row
	// it costs a call and no allocation.
	StockWriter(ctx context.Context, clientID, uploadID string, now func() time.Time) (put func(storelink.StockRow) error)
	// ApplyStock makes the rows put the stock in force. A pair whose stock
	// row already holds every value its row sets is not written (it keeps
	// its upload and time) unless a row of it carries Repeats; the pairs
	// so left are the upload's RowsUnchanged, which the driver records for
	// FinishUpload to keep.
	ApplyStock(ctx context.Context) error
	// Savepoint marks where RollbackToSavepoint goes back to, for one
	// upload of several applied in the transaction, before its rows are
	// put; ReleaseSavepoint drops the mark, keeping what was written since.
	// The marks do not nest: one upload's is released before the next
	// one's is made. The locks of LockUploads, taken before, are kept
	// either way.
	Savepoint(ctx context.Context) error
	// RollbackToSavepoint undoes what was written since the mark, with the
	// rows put, which are not to be applied, and keeps the mark.
	RollbackToSavepoint(ctx context.Context) error
	ReleaseSavepoint(ctx context.Context) error
	// DiscardStock drops the rows put, so that none is ever in force, and
	// returns the owner of the upload's lease ("" for none) as the
	// transaction then sees it, or ErrNotFound when it is not processing: a
	// driver that wrote the rows already may have to begin a transaction
	// afresh to drop them.
	DiscardStock(ctx context.Context, uploadID string) (owner string, err error)
	// ReleaseFulfilled ends the reservations of the client's fulfilled and
	// returned units whose store and EAN the upload has set, written or
	// left unchanged.
	ReleaseFulfilled(ctx context.Context, clientID, uploadID string) error
	// FinishUpload writes the upload's final status, time and report (with
	// the RowsUnchanged of ApplyStock, 0 when it was not called) with its
	// error file (r.ErrorFile) beside its bytes, and ends its lease. A driver that reads the upload back as
	// finished in the same statements sets *finished by Commit; otherwise
	// it leaves it nil.
	FinishUpload(ctx context.Context, id string, status storelink.UploadStatus, r storelink.FeedReport, at time.Time, finished **storelink.Upload) error
}

// inUploadTx runs fn in an upload transaction of its own and commits it,
// running it again, as inTx does, when it ended for a transient reason.
func (s *Uploads) inUploadTx(ctx context.Context, fn func(tx UploadTx) error) error {
	return retried(ctx, s.d.Transient, s.d.BeginUpload, fn)
}

// Accept takes the upload's size from the client's bucket and stores the
// upload row and its bytes in one transaction, with the bucket locked until
// it commits: the uploads of one client, from any process, take from it one
// at a time. The client's waiting uploads are counted under the same lock,
// so the limit on them holds however many accepts race.
func (s *Uploads) Accept(ctx context.Context, nu storelink.NewUpload, policy storelink.CapacityPolicy) (*storelink.Upload, storelink.Capacity, error) {
	var u *storelink.Upload
	var capacity storelink.Capacity
	err := s.inUploadTx(ctx, func(tx UploadTx) error {
		u, capacity = nil, storelink.Capacity{} // inUploadTx may run this again
		bucket, stores, waiting, err := tx.LockBucket(ctx, nu.ClientID, policy.MaxWaiting > 0)
		if errors.Is(err, ErrNotFound) {
			return storelink.Errorf(storelink.ENOTFOUND, "Client %q not found.", nu.ClientID)
		} else if err != nil {
			return fmt.Errorf("lock capacity: %w", err)
		}
		now := s.now() // after the lock: another upload may have been waited for
		next, c, err := policy.Take(bucket, stores, int64(len(nu.Body)), now)
		capacity = c
		if err != nil {
			return err
		}
		if policy.MaxWaiting > 0 && waiting >= policy.MaxWaiting {
			return storelink.Errorf(storelink.EBACKLOG, "%d uploads of this client are waiting to be processed.", waiting)
		}
		up := &storelink.Upload{
			ID: storelink.NewID(now), ClientID: nu.ClientID, FileName: nu.FileName, SizeBytes: int64(len(nu.Body)),
			SHA256: nu.SHA256, Status: storelink.UploadAccepted, ReceivedAt: now,
			Errors: []storelink.Problem{}, Warnings: []storelink.Problem{},
		}
		if err := tx.InsertUpload(ctx, up, nu.Body, next); err != nil {
			return fmt.Errorf("insert upload: %w", err)
		}
		u = up
		return nil
	})
	if err != nil {
		return nil, capacity, err
	}
	return u, capacity, nil
}

// Cancel cancels an accepted upload and gives its bytes back to the
// bucket, with the bucket locked as Accept locks it. The driver's one
// statement decides between the cancel and a processor's claim: whichever
// comes first wins, and the other finds the upload no longer accepted.
func (s *Uploads) Cancel(ctx context.Context, clientID, uploadID string, policy storelink.CapacityPolicy) (*storelink.Upload, error) {
	var u *storelink.Upload
	err := s.inUploadTx(ctx, func(tx UploadTx) error {
		u = nil // inUploadTx may run this again
		bucket, stores, _, err := tx.LockBucket(ctx, clientID, false)
		if errors.Is(err, ErrNotFound) {
			return storelink.Errorf(storelink.ENOTFOUND, "Client %q not found.", clientID)
		} else if err != nil {
			return fmt.Errorf("lock capacity: %w", err)
		}
		now := s.now()
		up, cancelled, err := tx.CancelUpload(ctx, clientID, uploadID, now)
		switch {
		case errors.Is(err, ErrNotFound):
			return storelink.Errorf(storelink.ENOTFOUND, "Upload %q not found.", uploadID)
		case err != nil:
			return fmt.Errorf("cancel upload %s: %w", uploadID, err)
		case cancelled:
			if err := tx.PutBucket(ctx, clientID, policy.Give(bucket, stores, up.SizeBytes, now)); err != nil {
				return fmt.Errorf("give back capacity: %w", err)
			}
		case up.Status != storelink.UploadCancelled:
			return storelink.Errorf(storelink.ECONFLICT,
				"Upload %s is %s: only an upload that is still accepted, not yet picked up for processing, can be cancelled; its capacity stays used.",
				uploadID, up.Status)
		}
		u = up
		return nil
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

// Capacity reports the bucket of a client.
func (s *Uploads) Capacity(ctx context.Context, clientID string, policy storelink.CapacityPolicy) (storelink.Capacity, error) {
	bucket, stores, err := s.d.GetBucket(ctx, clientID)
	if errors.Is(err, ErrNotFound) {
		return storelink.Capacity{}, storelink.Errorf(storelink.ENOTFOUND, "Client %q not found.", clientID)
	} else if err != nil {
		return storelink.Capacity{}, err
	}
	return policy.Peek(bucket, stores, s.now()), nil
}

// Claim leases the next upload to process: a batch of one.
func (s *Uploads) Claim(ctx context.Context, owner string, lease time.Duration) (*storelink.Claim, error) {
	claims, err := s.ClaimBatch(ctx, owner, lease, storelink.BatchLimit{Uploads: 1})
	if err != nil || len(claims) == 0 {
		return nil, err
	}
	return claims[0], nil
}

// ClaimBatch leases the next uploads to process. Which ones (the oldest
// claimable upload, and the next ones that can go with it) is the
// driver's one statement, so that two processes never claim the same, nor
// two uploads of one client between them.
func (s *Uploads) ClaimBatch(ctx context.Context, owner string, lease time.Duration, limit storelink.BatchLimit) ([]*storelink.Claim, error) {
	limit.Uploads = max(limit.Uploads, 1)
	claims, err := s.d.ClaimUploads(ctx, owner, lease, limit, storelink.InterruptedBackoff, s.now)
	if err != nil {
		return nil, fmt.Errorf("claim uploads: %w", err)
	}
	for _, c := range claims {
		c.Owner, c.Status = owner, storelink.UploadProcessing
	}
	return claims, nil
}

// Apply runs fn inside one transaction that holds the upload's lock after
// checking that the claim still holds its lease (ECONFLICT when another
// processor took it over), and makes the rows it puts the stock in force. A
// file-level problem, or a file without one valid row, applies nothing: the
// upload is rejected, in the same transaction as far as the driver can.
// Applied, the upload ends the reservations of fulfilled units whose store
// and EAN it set: the partner's own count now reflects the sale (CONTRACT
// 3.4).
func (s *Uploads) Apply(ctx context.Context, c *storelink.Claim, fn storelink.FeedApply) (*storelink.Upload, error) {
	var u *storelink.Upload
	// Not run again on a transient end, as inUploadTx would: fn is run once.
	err := once(ctx, s.d.BeginUpload, func(tx UploadTx) error {
		owner, stores, err := tx.LockUpload(ctx, c.ID, c.ClientID)
		if err := held(c, owner, err); err != nil {
			return err
		}
		report, err := fn(stores, tx.StockWriter(ctx, c.ClientID, c.ID, s.now))
		if err != nil {
			return fmt.Errorf("apply upload %s: %w", c.ID, err)
		}
		status := storelink.UploadApplied
		if report.FileError || report.RowsApplied == 0 {
			status, report.RowsApplied = storelink.UploadRejected, 0
			owner, err := tx.DiscardStock(ctx, c.ID)
			if err := held(c, owner, err); err != nil {
				return err
			}
		} else {
			if err := tx.ApplyStock(ctx); err != nil {
				return fmt.Errorf("apply upload %s: %w", c.ID, err)
			}
			if err := tx.ReleaseFulfilled(ctx, c.ClientID, c.ID); err != nil {
				return fmt.Errorf("release fulfilled reservations: %w", err)
			}
		}
		return finish(ctx, tx, c.ID, status, report, s.now(), &u)
	})
	if err != nil {
		return nil, err
	}
	if u == nil {
		return s.Upload(ctx, c.ClientID, c.ID)
	}
	return u, nil
}

// held tells whether the claim still holds its upload's lease, from the
// owner that the driver read with the upload locked: ECONFLICT when the
// upload is no longer processing or another processor took it over.
func held(c *storelink.Claim, owner string, err error) error {
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("lock upload %s: %w", c.ID, err)
	}
	if err != nil || owner == "" || owner != c.Owner {
		return storelink.Errorf(storelink.ECONFLICT, "Upload %s is no longer held by this processor.", c.ID)
	}
	return nil
}

// Fail finishes an upload that could not be processed at all (its file
// made every attempt fail, or its processing was interrupted too often), so
// that it stops blocking the client's later uploads.
func (s *Uploads) Fail(ctx context.Context, c *storelink.Claim, problem storelink.Problem) error {
	return s.inUploadTx(ctx, func(tx UploadTx) error {
		var u *storelink.Upload
		r := storelink.FeedReport{FileError: true, Errors: []storelink.Problem{problem}}
		return finish(ctx, tx, c.ID, storelink.UploadRejected, r, s.now(), &u)
	})
}

// Release gives a claim back uncounted (UploadService.Release). The claim
// is known by its owner and start, and the driver clears the owner, so that
// only the first of repeated releases counts.
func (s *Uploads) Release(ctx context.Context, c *storelink.Claim, after time.Duration) error {
	if err := s.d.ReleaseUpload(ctx, c, s.now().Add(after), false); err != nil {
		return fmt.Errorf("release upload %s: %w", c.ID, err)
	}
	return nil
}

// Retry gives a claim back counted as a failure of its file
// (UploadService.Retry), known by its owner and start as Release's is.
func (s *Uploads) Retry(ctx context.Context, c *storelink.Claim, after time.Duration) error {
	if err := s.d.ReleaseUpload(ctx, c, s.now().Add(after), true); err != nil {
		return fmt.Errorf("give back upload %s after a failure: %w", c.ID, err)
	}
	return nil
}

// ReleaseOwnLeases hands back, after an orderly stop, the uploads that
// owner's processor was applying when it was stopped: their applies rolled
// back, so they are claimable again at once (instead of when the lease runs
// out), and the claim is not counted, not even as an interruption: an
// orderly stop is neither the file's fault nor a reason to wait.
// Only owner's leases are touched: other processes on the database hold
// theirs.
func (s *Uploads) ReleaseOwnLeases(ctx context.Context, owner string) error {
	return s.d.ReleaseUploadLeases(ctx, owner)
}

// finish records the report with the final status and the error file, and
// ends the lease. The bytes stay, for the partner to download, until
// ExpireFiles removes them.
func finish(ctx context.Context, tx UploadTx, id string, status storelink.UploadStatus, r storelink.FeedReport, at time.Time, u **storelink.Upload) error {
	r.Errors, r.Warnings = nonNil(r.Errors), nonNil(r.Warnings)
	if err := tx.FinishUpload(ctx, id, status, r, at, u); err != nil {
		return fmt.Errorf("finish upload %s: %w", id, err)
	}
	return nil
}

// nonNil makes no problems an empty list, which a report shows as [].
func nonNil(p []storelink.Problem) []storelink.Problem {
	if p == nil {
		return []storelink.Problem{}
	}
	return p
}
