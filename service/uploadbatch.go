package service

import (
	"context"
	"fmt"

	"storelink"
)

// ApplyBatch applies claims (of ClaimBatch), in their order, in one
// transaction, so that the commit, which on a database that waits for its
// disk costs about what the apply of a small file costs, is shared. Each
// upload is applied as Apply applies it alone: its lease is checked with
// its row locked (all of the batch's at once), which they stay until the
// commit; a savepoint marks where its rows start, so that a rejected file
// undoes its own rows alone.
//
// A client's uploads keep their order: once one of a client's claims is
// not applied, neither is any later claim of that client in the batch;
// those are given back uncounted, to be claimed again once the earlier one
// is finished.
//
// A failure that is not a rejection (fn's error, a statement that fails)
// rolls the whole transaction back, and the claims are then applied one at
// a time, as Apply does, so that the failure ends only its own upload's
// apply and the others are applied all the same. A fault of the database
// (a full disk, a database away) or the end of ctx is every claim's error:
// a lone apply would fail the same way.
func (s *Uploads) ApplyBatch(ctx context.Context, claims []*storelink.Claim, fn func(*storelink.Claim) storelink.FeedApply) []storelink.BatchResult {
	out := make([]storelink.BatchResult, len(claims))
	err := once(ctx, s.d.Begin, func(tx UploadTx) error {
		clear(out)
		return s.applyTogether(ctx, tx, claims, fn, out)
	})
	switch {
	case err == nil:
		s.settle(ctx, claims, out)
	case ctx.Err() != nil || s.faultOf(err):
		for i := range out {
			out[i] = storelink.BatchResult{Err: err}
		}
	default:
		s.applyAlone(ctx, claims, fn, out)
	}
	return out
}

// applyTogether applies the claims in tx. A claim's result is left empty
// when it was finished (its Upload is read or set by the commit), and
// holds why when it was not. The savepoint covers the putting of a file's
// rows, which a driver may write as they come; a rejection is known
// before they are applied.
func (s *Uploads) applyTogether(ctx context.Context, tx UploadTx, claims []*storelink.Claim, fn func(*storelink.Claim) storelink.FeedApply, out []storelink.BatchResult) error {
	ids, clients := make([]string, len(claims)), make([]string, len(claims))
	for i, c := range claims {
		ids[i], clients[i] = c.ID, c.ClientID
	}
	locked, err := tx.LockUploads(ctx, LockUploadsParams{IDs: ids, ClientIDs: clients, Processing: storelink.UploadProcessing})
	if err != nil {
		return fmt.Errorf("lock uploads: %w", err)
	}
	behind := map[string]string{} // client → its claim not applied
	for i, c := range claims {
		if earlier, ok := behind[c.ClientID]; ok {
			out[i].Err = heldBack(c, earlier)
			continue
		}
		if err := held(c, locked.Owners[i], nil); err != nil {
			out[i].Err, behind[c.ClientID] = err, c.ID
			continue
		}
		if err := tx.Savepoint(ctx); err != nil {
			return fmt.Errorf("savepoint of upload %s: %w", c.ID, err)
		}
		report, err := fn(c)(locked.Stores[c.ClientID], tx.StockWriter(ctx, s.writer(c)))
		if err != nil {
			return fmt.Errorf("apply upload %s: %w", c.ID, err)
		}
		status := storelink.UploadApplied
		if report.FileError || report.RowsApplied == 0 {
			status, report.RowsApplied = storelink.UploadRejected, 0
			if err := tx.RollbackToSavepoint(ctx); err != nil {
				return fmt.Errorf("discard the rows of upload %s: %w", c.ID, err)
			}
		}
		if err := tx.ReleaseSavepoint(ctx); err != nil {
			return fmt.Errorf("release the savepoint of upload %s: %w", c.ID, err)
		}
		if status == storelink.UploadApplied {
			if err := tx.ApplyStock(ctx); err != nil {
				return fmt.Errorf("apply upload %s: %w", c.ID, err)
			}
			if err := tx.ReleaseFulfilled(ctx); err != nil {
				return fmt.Errorf("release fulfilled reservations: %w", err)
			}
		}
		if err := finish(ctx, tx, c.ID, status, report, s.now(), &out[i].Upload); err != nil {
			return err
		}
	}
	return nil
}

// applyAlone applies the claims one at a time, after their transaction
// together failed.
func (s *Uploads) applyAlone(ctx context.Context, claims []*storelink.Claim, fn func(*storelink.Claim) storelink.FeedApply, out []storelink.BatchResult) {
	behind := map[string]string{}
	for i, c := range claims {
		if earlier, ok := behind[c.ClientID]; ok {
			out[i].Err = heldBack(c, earlier)
			continue
		}
		u, err := s.Apply(ctx, c, fn(c))
		out[i] = storelink.BatchResult{Upload: u, Err: err}
		if err == nil {
			continue
		}
		behind[c.ClientID] = c.ID
		if ctx.Err() != nil || s.faultOf(err) {
			for j := i + 1; j < len(claims); j++ {
				out[j].Err = err
			}
			break
		}
	}
	s.giveBackHeld(ctx, claims, out)
}

// settle reads back the uploads finished by the commit that the driver did
// not read as finished, and gives back the claims held back.
func (s *Uploads) settle(ctx context.Context, claims []*storelink.Claim, out []storelink.BatchResult) {
	for i, c := range claims {
		if out[i].Upload == nil && out[i].Err == nil {
			out[i].Upload, out[i].Err = s.Upload(ctx, c.ClientID, c.ID)
		}
	}
	s.giveBackHeld(ctx, claims, out)
}

// giveBackHeld releases, uncounted and claimable at once, the claims held
// back behind an earlier claim of their client: they were not tried.
func (s *Uploads) giveBackHeld(ctx context.Context, claims []*storelink.Claim, out []storelink.BatchResult) {
	for i, c := range claims {
		if e, ok := out[i].Err.(*heldBackError); ok {
			if err := s.Release(ctx, c, 0); err != nil {
				e.release = err
			}
		}
	}
}

// faultOf tells whether err is a fault of the database: a full disk, or
// a database that cannot be reached.
func (s *Uploads) faultOf(err error) bool {
	switch storelink.ErrorCode(s.d.Fault(err)) {
	case storelink.ENOSPACE, storelink.EUNAVAILABLE:
		return true
	}
	return false
}

// heldBackError is the result of a claim not applied because an earlier
// claim of its client in the batch was not: an ECONFLICT, with the error of
// its release when that failed (its lease then runs out: an interruption).
type heldBackError struct {
	conflict *storelink.Error
	release  error
}

func heldBack(c *storelink.Claim, earlier string) error {
	return &heldBackError{conflict: storelink.Errorf(storelink.ECONFLICT,
		"Upload %s was not applied: the earlier upload %s of its client was not; it is given back, to be claimed again after that one.", c.ID, earlier)}
}

func (e *heldBackError) Error() string {
	if e.release != nil {
		return fmt.Sprintf("%s (its release failed: %v)", e.conflict.Error(), e.release)
	}
	return e.conflict.Error()
}

func (e *heldBackError) Unwrap() error { return e.conflict }
