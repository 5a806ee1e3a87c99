package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"storelink"
	"storelink/feed"
)

// Upload returns one upload of a client.
func (s *Uploads) Upload(ctx context.Context, clientID, uploadID string) (*storelink.Upload, error) {
	u, err := s.d.GetUpload(ctx, clientID, uploadID)
	if errors.Is(err, ErrNotFound) {
		return nil, storelink.Errorf(storelink.ENOTFOUND, "Upload %q not found.", uploadID)
	} else if err != nil {
		return nil, err
	}
	return u, nil
}

// Uploads lists a client's uploads, newest first.
func (s *Uploads) Uploads(ctx context.Context, clientID string, f storelink.UploadFilter) ([]storelink.Upload, error) {
	if clientID == "" {
		// "" is every client's to the driver (AllUploads); never here.
		return nil, storelink.Errorf(storelink.ENOTFOUND, "Client \"\" not found.")
	}
	return s.list(ctx, clientID, f)
}

// AllUploads lists every client's uploads, newest first, in one read: the
// operator's list.
func (s *Uploads) AllUploads(ctx context.Context, f storelink.UploadFilter) ([]storelink.Upload, error) {
	return s.list(ctx, "", f)
}

// list is Uploads over the client of clientID, or every client for "".
func (s *Uploads) list(ctx context.Context, clientID string, f storelink.UploadFilter) ([]storelink.Upload, error) {
	// An unknown cursor would find no upload to list from and so an empty
	// page, which reads as the end of the list: refuse it instead.
	if f.Before != "" {
		ok, err := s.d.UploadExists(ctx, clientID, f.Before)
		if err != nil {
			return nil, err
		} else if !ok {
			return nil, storelink.CursorError("before", f.Before)
		}
	}
	return s.d.ListUploads(ctx, UploadQuery{ClientID: clientID, Before: f.Before, Status: f.Status, Since: f.Since, Until: f.Until, HasErrors: f.HasErrors, Limit: f.Limit})
}

// UploadQuery selects a page of uploads, newest first.
type UploadQuery struct {
	// ClientID, when not "", selects one client's uploads; "" selects
	// every client's.
	ClientID string
	// Before, when not "", is the upload the page follows: only uploads
	// accepted before it are listed.
	Before string
	// Status, when not "", selects the uploads in that status.
	Status storelink.UploadStatus
	// Since and Until, when not zero, select the uploads received at or
	// after Since and before Until.
	Since, Until time.Time
	// HasErrors, when set, selects the uploads with rows_rejected above
	// zero (true) or at zero (false).
	HasErrors *bool
	Limit     int
}

// QueueDepth counts uploads not yet finished.
func (s *Uploads) QueueDepth(ctx context.Context) (int, error) {
	n, err := s.d.CountUnfinished(ctx, UnfinishedQuery{})
	return n.N, err
}

// Backlog tells how uploads wait, of one client or (clientID "") of all:
// for a client, how many unfinished uploads are ahead of its first waiting
// one; for all, every unfinished upload.
func (s *Uploads) Backlog(ctx context.Context, clientID string) (storelink.Backlog, error) {
	var b storelink.Backlog
	waiting, err := s.d.CountUnfinished(ctx, UnfinishedQuery{ClientID: clientID, Status: storelink.UploadAccepted})
	if err != nil {
		return b, fmt.Errorf("count waiting uploads: %w", err)
	}
	b.Waiting, b.Oldest = waiting.N, waiting.Oldest
	if clientID != "" && waiting.N == 0 {
		return b, nil // nothing of the client waits, so nothing is ahead of it
	}
	q := UnfinishedQuery{} // every unfinished upload
	if clientID != "" {
		q.UpTo = waiting.First // those up to the client's first waiting one
	}
	ahead, err := s.d.CountUnfinished(ctx, q)
	if err != nil {
		return b, fmt.Errorf("count uploads ahead: %w", err)
	}
	b.Ahead = ahead.N
	return b, nil
}

var _ storelink.StockService = (*Uploads)(nil)

// StockReads are the reads of the stock listing.
type StockReads interface {
	// ClientExists tells whether a client of that id exists.
	ClientExists(ctx context.Context, id string) (bool, error)
	// Stores returns a client's stores ordered by id, never nil.
	Stores(ctx context.Context, clientID string) ([]storelink.Store, error)
	// ListStock returns up to q.Limit stock rows of a client, ordered by
	// store and EAN, each with the units that order items hold reserved.
	// Never nil.
	ListStock(ctx context.Context, q StockQuery) ([]storelink.Stock, error)
}

// StockQuery selects a page of a client's stock.
type StockQuery struct {
	ClientID string
	// StoreID, EAN and ArticleNumber, when not "", select one store, one
	// EAN and one article number.
	StoreID, EAN, ArticleNumber string
	// After, when set, is the store and EAN of the row the page follows.
	After *StockKey
	Limit int
}

// StockKey is where a row of a client's stock is: its store and EAN.
type StockKey struct{ StoreID, EAN string }

// StoresFrom tells, for a listing of one EAN in every store, which stores
// the page after k starts with: (store, ean) > k with ean fixed is a store
// after k's, or k's own too when ean sorts after k's EAN. A driver reads
// such a listing store by store, a seek each, rather than the client's
// whole stock.
func (k StockKey) StoresFrom(ean string) (store string, inclusive bool) {
	return k.StoreID, ean > k.EAN
}

// Stock lists the stock in force, by store and EAN, a page at a time. A row
// shows the units free to order: its quantity less those reserved, never
// below zero.
func (s *Uploads) Stock(ctx context.Context, clientID string, f storelink.StockFilter) ([]storelink.Stock, string, error) {
	ok, err := s.d.ClientExists(ctx, clientID)
	if err != nil {
		return nil, "", err
	} else if !ok {
		return nil, "", storelink.Errorf(storelink.ENOTFOUND, "Client %q not found.", clientID)
	}
	q := StockQuery{ClientID: clientID, StoreID: f.StoreID, EAN: f.EAN, ArticleNumber: f.ArticleNumber, Limit: f.Limit + 1}
	if f.After != "" {
		store, ean, err := storelink.ParseStockCursor(f.After)
		if err != nil {
			return nil, "", err
		}
		q.After = &StockKey{StoreID: store, EAN: ean}
	}
	rows, err := s.d.ListStock(ctx, q)
	if err != nil {
		return nil, "", err
	}
	for i := range rows {
		rows[i].Available = max(rows[i].Quantity-rows[i].Reserved, 0)
	}
	rows, next := storelink.StockPage(rows, f.Limit)
	return rows, next, nil
}

// UploadFile returns the file of an upload as it was received.
func (s *Uploads) UploadFile(ctx context.Context, clientID, uploadID string) (storelink.Chunks, error) {
	u, err := s.d.GetUpload(ctx, clientID, uploadID)
	if err != nil {
		return nil, s.fileError(err, uploadID)
	}
	if u.Status == storelink.UploadCancelled {
		return nil, storelink.Errorf(storelink.EGONE, "Upload %s was cancelled at %s: its file was dropped then, and its size given back to the capacity.",
			uploadID, u.FinishedAt.UTC().Format(storelink.EventTimeLayout))
	}
	if err := s.expired("file", u); err != nil {
		return nil, err
	}
	f, err := s.d.UploadFile(ctx, clientID, uploadID, false)
	if err != nil {
		return nil, s.fileError(err, uploadID)
	}
	if !f.Kept {
		return nil, goneError("file", uploadID, f.Removed)
	}
	return f.Data, nil
}

// expired is EGONE for the files of a finished upload received longer
// ago than the retention, which are gone from then on, whether or not the
// sweep has removed them yet. An upload still waiting keeps its file.
func (s *Uploads) expired(what string, u *storelink.Upload) error {
	if s.retention <= 0 || !u.Status.Final() {
		return nil
	}
	if end := u.ReceivedAt.Add(s.retention); !s.now().Before(end) {
		return goneError(what, u.ID, end)
	}
	return nil
}

// UploadErrorFile returns the error file of a processed upload. An upload
// set aside without being processed (Fail) has none written: its error
// file is made of its problems, at line 0.
func (s *Uploads) UploadErrorFile(ctx context.Context, clientID, uploadID string) ([]byte, error) {
	u, err := s.d.GetUpload(ctx, clientID, uploadID)
	if err != nil {
		return nil, s.fileError(err, uploadID)
	}
	switch u.Status {
	case storelink.UploadAccepted, storelink.UploadProcessing:
		return nil, storelink.Errorf(storelink.ECONFLICT, "Upload %s is %s: its error file is made when it has been processed.", uploadID, u.Status)
	case storelink.UploadCancelled:
		return nil, storelink.Errorf(storelink.ECONFLICT, "Upload %s was cancelled before it was processed: it has no error file.", uploadID)
	}
	if err := s.expired("error file", u); err != nil {
		return nil, err
	}
	f, err := s.d.UploadFile(ctx, clientID, uploadID, true)
	switch {
	case err != nil:
		return nil, s.fileError(err, uploadID)
	case !f.Kept:
		return nil, goneError("error file", uploadID, f.Removed)
	case f.Data == nil:
		return feed.ProblemFile(u.Errors), nil
	}
	return f.Data.Bytes(), nil
}

func (s *Uploads) fileError(err error, uploadID string) error {
	if errors.Is(err, ErrNotFound) {
		return storelink.Errorf(storelink.ENOTFOUND, "Upload %q not found.", uploadID)
	}
	return err
}

// goneError is the answer for a file no longer kept, saying when it went.
func goneError(what, uploadID string, removed time.Time) error {
	if removed.IsZero() {
		return storelink.Errorf(storelink.EGONE, "The %s of upload %s is no longer kept.", what, uploadID)
	}
	return storelink.Errorf(storelink.EGONE, "The %s of upload %s is no longer kept: it expired at %s, when the upload retention had passed since it was received.",
		what, uploadID, removed.UTC().Format(storelink.EventTimeLayout))
}

// expireBatch is how many uploads' files one statement removes: a bounded
// transaction, so that the apply of an upload never waits long for it.
const expireBatch = 100

// orphanAge is how old a file that no upload names must be before
// ExpireFiles removes it: its accept put its pieces and then failed
// without removing them (the database was away). An accept in progress is
// far younger; its request would have timed out long before.
const orphanAge = time.Hour

// ExpireFiles removes, in batches, the files of the finished uploads
// received more than retention ago; an upload still waiting or processing
// keeps its file, whatever its age. It then removes the files no upload
// names (orphanAge), which it does not count.
func (s *Uploads) ExpireFiles(ctx context.Context, retention time.Duration) (int, error) {
	now := s.now()
	total := 0
	for {
		n, err := s.d.ExpireFiles(ctx, ExpireParams{Final: finalStatuses, Cutoff: now.Add(-retention), At: now, Limit: expireBatch})
		total += n
		if err != nil {
			return total, err
		}
		if n < expireBatch {
			break
		}
	}
	before := storelink.NewID(now.Add(-orphanAge))
	for {
		n, err := s.d.DropOrphanFiles(ctx, before, expireBatch)
		if err != nil {
			return total, fmt.Errorf("remove the files of uploads never accepted: %w", err)
		}
		if n < expireBatch {
			return total, nil
		}
	}
}
