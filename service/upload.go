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
	d UploadDriver
}

// finalStatuses are the statuses of finished uploads, whose files expire.
var finalStatuses = []storelink.UploadStatus{storelink.UploadApplied, storelink.UploadRejected, storelink.UploadCancelled}

// inUploadTx runs fn in an upload transaction of its own and commits it,
// running it again, as inTx does, when it ended for a transient reason.
func (s *Uploads) inUploadTx(ctx context.Context, fn func(tx UploadTx) error) error {
	return retried(ctx, s.d.Transient, s.d.Begin, fn)
}

// Accept takes the upload's size from the client's bucket and stores the
// upload row and its bytes in one transaction, with the bucket locked until
// it commits: the uploads of one client, from any process, take from it one
// at a time. The client's waiting uploads are counted under the same lock,
// so the limit on them holds however many accepts race.
//
// The file's pieces but the last are written first, each on its own
// (PutChunks): the transaction writes the last with the upload, so a file
// of one piece costs one transaction, and a larger one keeps the bucket
// and, on a database with one writer, every other writer waiting for one
// piece of it at most. When the upload is refused the pieces are removed.
func (s *Uploads) Accept(ctx context.Context, nu storelink.NewUpload, policy storelink.CapacityPolicy) (*storelink.Upload, storelink.Capacity, error) {
	size := nu.Body.Len()
	file := NewFile{ID: storelink.NewID(s.now()), Chunks: nu.Body}
	if n := len(nu.Body); n > 1 {
		if err := s.d.PutChunks(ctx, file.ID, 0, nu.Body[:n-1]); err != nil {
			s.dropFile(ctx, file.ID)
			return nil, storelink.Capacity{}, fmt.Errorf("store the file: %w", err)
		}
		file.First, file.Chunks = n-1, nu.Body[n-1:]
	}
	u, capacity, err := s.accept(ctx, nu, size, file, policy)
	if err != nil && file.First > 0 {
		s.dropFile(ctx, file.ID)
	}
	return u, capacity, err
}

// dropFile removes the pieces of a file put for an upload that was not
// accepted; one left behind (the database away) is nobody's, and the file
// sweeper removes it later (DropOrphanFiles).
func (s *Uploads) dropFile(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = s.d.DropFile(ctx, id)
}

// accept is Accept's transaction.
func (s *Uploads) accept(ctx context.Context, nu storelink.NewUpload, size int64, file NewFile, policy storelink.CapacityPolicy) (*storelink.Upload, storelink.Capacity, error) {
	var u *storelink.Upload
	var capacity storelink.Capacity
	err := s.inUploadTx(ctx, func(tx UploadTx) error {
		u, capacity = nil, storelink.Capacity{} // inUploadTx may run this again
		lock := LockBucketParams{ClientID: nu.ClientID}
		if policy.MaxWaiting > 0 {
			lock.Waiting = storelink.UploadAccepted
		}
		b, err := tx.LockBucket(ctx, lock)
		if errors.Is(err, ErrNotFound) {
			return storelink.Errorf(storelink.ENOTFOUND, "Client %q not found.", nu.ClientID)
		} else if err != nil {
			return fmt.Errorf("lock capacity: %w", err)
		}
		now := s.now() // after the lock: another upload may have been waited for
		next, c, err := policy.Take(b.Bucket, b.Stores, size, now)
		capacity = c
		if err != nil {
			return err
		}
		if policy.MaxWaiting > 0 && b.Waiting >= policy.MaxWaiting {
			return storelink.Errorf(storelink.EBACKLOG, "%d uploads of this client are waiting to be processed.", b.Waiting)
		}
		up := &storelink.Upload{
			ID: storelink.NewID(now), ClientID: nu.ClientID, FileName: nu.FileName, SizeBytes: size,
			SHA256: nu.SHA256, Status: storelink.UploadAccepted, ReceivedAt: now,
			Errors: []storelink.Problem{}, Warnings: []storelink.Problem{},
		}
		if err := tx.InsertUpload(ctx, up, file, next); err != nil {
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
// comes first wins, and the other finds the upload no longer accepted. An
// upload read as accepted before is cancelled in a transaction that goes
// ahead of those waiting (BeginAhead), so that a cancel sent while the
// upload waits behind an apply is not beaten by a claim that asked first.
func (s *Uploads) Cancel(ctx context.Context, clientID, uploadID string, policy storelink.CapacityPolicy) (*storelink.Upload, error) {
	begin := s.d.Begin
	if w, err := s.d.GetUpload(ctx, clientID, uploadID); err == nil && w.Status == storelink.UploadAccepted {
		begin = s.d.BeginAhead
	}
	var u *storelink.Upload
	err := retried(ctx, s.d.Transient, begin, func(tx UploadTx) error {
		u = nil // inUploadTx may run this again
		b, err := tx.LockBucket(ctx, LockBucketParams{ClientID: clientID})
		if errors.Is(err, ErrNotFound) {
			return storelink.Errorf(storelink.ENOTFOUND, "Client %q not found.", clientID)
		} else if err != nil {
			return fmt.Errorf("lock capacity: %w", err)
		}
		now := s.now()
		res, err := tx.CancelUpload(ctx, CancelParams{ClientID: clientID, ID: uploadID, At: now,
			From: storelink.UploadAccepted, To: storelink.UploadCancelled, Announce: storelink.EventUploadFinished})
		up := res.Upload
		switch {
		case errors.Is(err, ErrNotFound):
			return storelink.Errorf(storelink.ENOTFOUND, "Upload %q not found.", uploadID)
		case err != nil:
			return fmt.Errorf("cancel upload %s: %w", uploadID, err)
		case res.Cancelled:
			if err := tx.PutBucket(ctx, clientID, policy.Give(b.Bucket, b.Stores, up.SizeBytes, now)); err != nil {
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

// ClientStores returns the ids of a client's stores as they are now: what a
// check of its file ahead of the apply takes (the apply reads them again,
// locked).
func (s *Uploads) ClientStores(ctx context.Context, clientID string) (map[string]bool, error) {
	list, err := s.d.Stores(ctx, clientID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(list))
	for _, st := range list {
		out[st.ID] = true
	}
	return out, nil
}

// Capacity reports the bucket of a client.
func (s *Uploads) Capacity(ctx context.Context, clientID string, policy storelink.CapacityPolicy) (storelink.Capacity, error) {
	b, err := s.d.GetBucket(ctx, clientID)
	if errors.Is(err, ErrNotFound) {
		return storelink.Capacity{}, storelink.Errorf(storelink.ENOTFOUND, "Client %q not found.", clientID)
	} else if err != nil {
		return storelink.Capacity{}, err
	}
	return policy.Peek(b.Bucket, b.Stores, s.now()), nil
}

// Apply runs fn inside one transaction that holds the upload's lock after
// checking that the claim still holds its lease (ECONFLICT when another
// processor took it over), and makes the rows it puts the stock in force. A
// file-level problem, or a file without one valid row, applies nothing: the
// upload is rejected, in the same transaction as far as the driver can.
// Applied, the upload ends the reservations of fulfilled units whose store
// and EAN it set: the partner's own count now reflects the sale.
func (s *Uploads) Apply(ctx context.Context, c *storelink.Claim, fn storelink.FeedApply) (*storelink.Upload, error) {
	var u *storelink.Upload
	// Not run again on a transient end, as inUploadTx would: fn is run once.
	err := once(ctx, s.d.Begin, func(tx UploadTx) error {
		locked, err := tx.LockUploads(ctx, LockUploadsParams{IDs: []string{c.ID}, ClientIDs: []string{c.ClientID}, Processing: storelink.UploadProcessing})
		if err != nil {
			return fmt.Errorf("lock upload %s: %w", c.ID, err)
		}
		if err := held(c, locked.Owners[0], nil); err != nil {
			return err
		}
		report, err := fn(locked.Stores[c.ClientID], tx.StockWriter(ctx, s.writer(c)))
		if err != nil {
			return fmt.Errorf("apply upload %s: %w", c.ID, err)
		}
		status := storelink.UploadApplied
		if report.FileError || report.RowsApplied == 0 {
			status, report.RowsApplied = storelink.UploadRejected, 0
			owner, err := tx.DiscardStock(ctx, c.ID, storelink.UploadProcessing)
			if err := held(c, owner, err); err != nil {
				return err
			}
		} else {
			if err := tx.ApplyStock(ctx); err != nil {
				return fmt.Errorf("apply upload %s: %w", c.ID, err)
			}
			if err := tx.ReleaseFulfilled(ctx); err != nil {
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
	if err := s.d.ReleaseUpload(ctx, release(c, s.now().Add(after), false)); err != nil {
		return fmt.Errorf("release upload %s: %w", c.ID, err)
	}
	return nil
}

// Retry gives a claim back counted as a failure of its file
// (UploadService.Retry), known by its owner and start as Release's is.
func (s *Uploads) Retry(ctx context.Context, c *storelink.Claim, after time.Duration) error {
	if err := s.d.ReleaseUpload(ctx, release(c, s.now().Add(after), true)); err != nil {
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
	return s.d.ReleaseUploadLeases(ctx, owner, storelink.UploadProcessing)
}

// release is the release of c, claimable again at until.
func release(c *storelink.Claim, until time.Time, failed bool) ReleaseParams {
	return ReleaseParams{ID: c.ID, Owner: c.Owner, StartedAt: *c.StartedAt, Processing: storelink.UploadProcessing,
		Until: until, Failed: failed}
}

// writer is what the stock writer of c's upload is made with.
func (s *Uploads) writer(c *storelink.Claim) StockWriterParams {
	return StockWriterParams{ClientID: c.ClientID, UploadID: c.ID, Now: s.now, Sold: soldStatuses}
}

// finish records the report with the final status and the error file, and
// ends the lease. The bytes stay, for the partner to download, until
// ExpireFiles removes them.
func finish(ctx context.Context, tx UploadTx, id string, status storelink.UploadStatus, r storelink.FeedReport, at time.Time, u **storelink.Upload) error {
	r.Errors, r.Warnings = nonNil(r.Errors), nonNil(r.Warnings)
	if err := tx.FinishUpload(ctx, FinishParams{ID: id, Status: status, Report: r, At: at, Into: u, Announce: storelink.EventUploadFinished}); err != nil {
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
