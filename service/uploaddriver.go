package service

import (
	"context"
	"time"

	"storelink"
)

// UploadDriver is the database as the upload and stock calls see it:
// reads and single statements that commit on their own, and the upload
// transactions that Begin starts. The statuses a statement names reach it
// as fields of its parameters; a driver's SQL names a status itself only
// where the planner needs it to use a partial index, and says so.
type UploadDriver interface {
	// Begin starts a write transaction of the upload calls. They have
	// transactions of their own kind so that a driver can send a
	// transaction's statements in as few round trips as it likes and take
	// the connection the upload work uses; the caller ends it with Commit or
	// Rollback, and Rollback after Commit does nothing. Begin returns ctx's
	// error when ctx ends before the transaction could begin.
	Begin(ctx context.Context) (UploadTx, error)
	// BeginAhead is Begin for a cancel of an upload that is waiting: on a
	// database whose writers take turns, it goes ahead of those that wait
	// for theirs, so that a cancel that came while an apply held the
	// database is made before a claim that asked earlier could pick the
	// upload up. (The service uses it only for an upload it read as
	// accepted, so that it never goes ahead of more than one cancel per
	// upload accepted.)
	BeginAhead(ctx context.Context) (UploadTx, error)
	// Transient tells whether err ended a transaction for a reason that a
	// fresh try of the same work can avoid, such as a deadlock between
	// writers: the service then runs the transaction again.
	Transient(err error) bool
	// Fault turns an error of the database's into the storelink error it
	// stands for (ENOSPACE for a full disk, EUNAVAILABLE for a database
	// away), or returns it as it is.
	Fault(err error) error

	// PutChunks writes pieces of a file under fileID, numbered from first
	// on, before the transaction that accepts its upload names the file
	// (InsertUpload): a piece, or a few, in each transaction of their own,
	// so that on a database with one writer a piece is all another writer
	// waits for. A file that no upload names is nobody's: DropFile removes
	// it, and DropOrphanFiles once it is old.
	PutChunks(ctx context.Context, fileID string, first int, chunks storelink.Chunks) error
	// DropFile removes the pieces put under fileID, unless an upload names
	// the file.
	DropFile(ctx context.Context, fileID string) error
	// DropOrphanFiles removes the pieces of up to limit files that no
	// upload names and whose ids sort before before (ids are made by
	// storelink.NewID, which sort by time), and returns how many files.
	DropOrphanFiles(ctx context.Context, before string, limit int) (int, error)
	// UploadBodies returns the files of the uploads of ids, by upload id,
	// as committed: the claims' files, read once the claim committed, so
	// that no transaction holds its locks while megabytes are read.
	UploadBodies(ctx context.Context, ids []string) (map[string]storelink.Chunks, error)

	// GetBucket returns a client's capacity bucket (Bucket nil when it
	// never took from it) and its number of stores, or ErrNotFound for no
	// client.
	GetBucket(ctx context.Context, clientID string) (ClientBucket, error)
	// ReleaseUpload clears the lease of the upload and makes it claimable
	// at p.Until, when the claim still holds it: the upload in
	// p.Processing, with p's owner and start. With p.Failed, the attempt
	// stays counted and the upload's failures are counted one more;
	// without, the attempt is uncounted.
	ReleaseUpload(ctx context.Context, p ReleaseParams) error
	// ReleaseUploadLeases makes the uploads in processing under owner's
	// lease claimable at once, uncounting their attempts.
	ReleaseUploadLeases(ctx context.Context, owner string, processing storelink.UploadStatus) error
	// GetUpload returns one upload of a client, or ErrNotFound.
	GetUpload(ctx context.Context, clientID, id string) (*storelink.Upload, error)
	// UploadExists tells whether the client has an upload of that id (any
	// client, for clientID "").
	UploadExists(ctx context.Context, clientID, id string) (bool, error)
	// ListUploads returns up to q.Limit uploads of a client that q selects,
	// newest first. Never nil.
	ListUploads(ctx context.Context, q UploadQuery) ([]storelink.Upload, error)
	// UploadFile returns the client's upload's file as received or, with
	// errorFile, its error file (nil when none was written), with Kept
	// true; Kept is false, with when the files were removed (zero when not
	// known), once they are no longer kept. ErrNotFound for no upload.
	UploadFile(ctx context.Context, clientID, id string, errorFile bool) (UploadFile, error)
	// ExpireFiles removes the files of up to p.Limit uploads in one of
	// p.Final received before p.Cutoff, noting p.At as when, and returns
	// how many.
	ExpireFiles(ctx context.Context, p ExpireParams) (int, error)
	// CountUnfinished counts the unfinished uploads (accepted or
	// processing) that q selects, and returns the queue position of the
	// first of them and when the oldest was accepted.
	CountUnfinished(ctx context.Context, q UnfinishedQuery) (Unfinished, error)

	StockReads
}

// ClientBucket is a client's capacity bucket as a driver reads it.
type ClientBucket struct {
	// Bucket is nil while the client never took from it.
	Bucket *storelink.Bucket
	// Stores is the client's number of stores.
	Stores int
	// Waiting counts the client's waiting uploads, when LockBucket was
	// asked to.
	Waiting int
}

// ReleaseParams give a claim back (UploadDriver.ReleaseUpload).
type ReleaseParams struct {
	// ID, Owner and StartedAt are the claim's: a later claim of the same
	// upload is not released.
	ID, Owner  string
	StartedAt  time.Time
	Processing storelink.UploadStatus
	// Until is when the upload can be claimed again.
	Until time.Time
	// Failed counts the attempt as a failure of the file; without, the
	// attempt is uncounted.
	Failed bool
}

// NewFile is the file of an upload being accepted (UploadTx.InsertUpload).
type NewFile struct {
	ID string
	// First is the number of the first piece of Chunks: those before it
	// were put under ID with PutChunks.
	First  int
	Chunks storelink.Chunks
}

// UploadFile is one of an upload's files as a driver reads it.
type UploadFile struct {
	// Data is nil for an error file that was not written.
	Data storelink.Chunks
	// Kept is false once the files are no longer kept; Removed is then
	// when they were removed (zero when not known).
	Kept    bool
	Removed time.Time
}

// ExpireParams select the uploads whose files ExpireFiles removes.
type ExpireParams struct {
	// Final are the statuses of finished uploads: an upload in another
	// keeps its file.
	Final  []storelink.UploadStatus
	Cutoff time.Time
	At     time.Time
	Limit  int
}

// UnfinishedQuery selects unfinished uploads to count.
type UnfinishedQuery struct {
	// ClientID, when not "", selects one client's.
	ClientID string
	// Status, when not "", selects the uploads in that status.
	Status storelink.UploadStatus
	// UpTo, when not 0, selects those at queue positions up to and
	// including it.
	UpTo int64
}

// Unfinished is what CountUnfinished counted.
type Unfinished struct {
	N int
	// First is the queue position of the first (0 when none), Oldest when
	// it was accepted (zero when none).
	First  int64
	Oldest time.Time
}

// UploadTx is one write transaction of the upload calls. Its row methods
// see what it wrote; nothing of it is seen by others before Commit. A
// driver may hold a write back until a later call needs its answer, or
// until Commit; the error of such a write, wherever it is returned, is a
// *HeldError that names the call that made it.
type UploadTx interface {
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error

	// LockBucket reads a client's bucket and number of stores, and keeps
	// every other transaction that locks it waiting until this one ends;
	// with p.Waiting set, it also counts the client's uploads in that
	// status as committed once the lock is held. ErrNotFound for no client.
	LockBucket(ctx context.Context, p LockBucketParams) (ClientBucket, error)
	// InsertUpload writes the client's bucket as next, the upload row, and
	// the pieces of its file from f.First on, naming f.ID as its file (the
	// pieces before f.First were put with PutChunks), and lets the
	// processors know there is work once the transaction commits.
	InsertUpload(ctx context.Context, u *storelink.Upload, f NewFile, next storelink.Bucket) error
	// CancelUpload sets the client's upload to p.To at p.At, and drops its
	// bytes, if it is still in p.From; it returns the upload as it then
	// stands and whether this call cancelled it, or ErrNotFound.
	CancelUpload(ctx context.Context, p CancelParams) (Cancelled, error)
	// PutBucket writes the client's bucket.
	PutBucket(ctx context.Context, clientID string, b storelink.Bucket) error

	// ClaimableUploads returns the uploads that a claim at p.Now may take,
	// locked until the transaction ends, client by client: for each
	// client it returns, its uploads from its oldest unfinished one on, in
	// acceptance order, as long as they are claimable (in p.Accepted, or in
	// p.Processing under a lease that ended more than p.Backoff's Delay of
	// their interruptions, attempts - failures, before p.Now); at most
	// p.Limit of a client. A client whose oldest unfinished upload is not
	// claimable is not returned. A driver may return only the clients of
	// the oldest p.Limit claimable uploads, and pass over the clients
	// another transaction holds. Which of them go together is the
	// service's (pick); whether one is claimable is asked of the database,
	// with the backoff's values, because a driver that skips the rows
	// other processes hold can only lock the rows it knows are claimable,
	// and judging them here would read every client's unfinished uploads.
	ClaimableUploads(ctx context.Context, p ClaimParams) ([]Claimable, error)
	// LeaseUploads leases the uploads of seqs (of ClaimableUploads, in this
	// transaction) to p.Owner until p.Until, starting at p.Now, setting them
	// in p.Processing, and counts an attempt of each; it returns their
	// claims, with their attempts (this one counted) and failures, in
	// acceptance order, and without their bodies (UploadBodies).
	LeaseUploads(ctx context.Context, p ClaimParams, seqs []int64) ([]*storelink.Claim, error)

	// LockUploads keeps every other transaction from changing the uploads
	// until this one ends and returns the owner of each one's lease ("" for
	// none, or when it is not in p.Processing), in the order of p.IDs, and
	// the ids of the stores of each client of p.ClientIDs.
	LockUploads(ctx context.Context, p LockUploadsParams) (LockedUploads, error)
	// StockWriter returns where the rows of an upload's file are put, in
	// file order; a later row for the same store and EAN overrides an
	// earlier one, and carries Repeats. The rows are stamped with the
	// upload and a time read from p.Now when the driver writes them. Per
	// row it costs a call and no allocation.
	StockWriter(ctx context.Context, p StockWriterParams) (put func(storelink.StockRow) error)
	// ApplyStock makes the rows put the stock in force. A pair whose stock
	// row already holds every value its row sets is not written (it keeps
	// its upload and time) unless a row of it carries Repeats; the pairs
	// so left are the upload's RowsUnchanged, which the driver records for
	// FinishUpload to keep.
	//
	// The comparison and its count are the driver's rather than the
	// service's because they are made where the rows are written: SQLite's
	// writer compares a digest of each row with the stored ones it reads a
	// store's range at a time, PostgreSQL's upsert compares in the
	// statement that writes and sends no row back. Above the driver, every
	// stored row of a file's pairs would be read into the process first,
	// which costs a 10 MiB feed more than its whole apply costs now
	// (BenchmarkStockImport).
	ApplyStock(ctx context.Context) error
	// ReleaseFulfilled ends the reservations of the client's units in the
	// writer's p.Sold statuses whose store and EAN the upload has set,
	// written or left unchanged.
	ReleaseFulfilled(ctx context.Context) error
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
	// transaction then sees it, or ErrNotFound when it is not in
	// processing: a driver that wrote the rows already may have to begin a
	// transaction afresh to drop them.
	DiscardStock(ctx context.Context, uploadID string, processing storelink.UploadStatus) (owner string, err error)
	// FinishUpload writes the upload's final status, time and report (with
	// the RowsUnchanged of ApplyStock, 0 when it was not called) with its
	// error file (p.Report.ErrorFile) beside its bytes, and ends its lease.
	// A driver that reads the upload back as finished in the same
	// statements sets *p.Into by Commit; otherwise it leaves it nil.
	FinishUpload(ctx context.Context, p FinishParams) error
}

// HeldError is the error of a write that an UploadTx held back and sent
// with a later call or with Commit: Call is the method that made it, For
// what it was for ("upload u_…", "uploads u_…, u_…" for a write shared by
// several, "client c_…"). Err is the database's error.
type HeldError struct {
	Call, For string
	Err       error
}

func (e *HeldError) Error() string { return e.Call + " of " + e.For + ": " + e.Err.Error() }
func (e *HeldError) Unwrap() error { return e.Err }

// LockBucketParams lock a client's bucket (UploadTx.LockBucket).
type LockBucketParams struct {
	ClientID string
	// Waiting, when not "", is the status of the uploads to count.
	Waiting storelink.UploadStatus
}

// CancelParams cancel an upload that is still waiting
// (UploadTx.CancelUpload).
type CancelParams struct {
	ClientID, ID string
	At           time.Time
	// From is the status the upload must be in, To the one it is set in.
	From, To storelink.UploadStatus
	// Announce is FinishParams' Announce, for the upload cancelled.
	Announce storelink.OrderState
}

// Cancelled is an upload as CancelUpload left it.
type Cancelled struct {
	Upload *storelink.Upload
	// Cancelled tells whether this call cancelled it.
	Cancelled bool
}

// ClaimParams are a claim's (UploadTx.ClaimableUploads, LeaseUploads).
type ClaimParams struct {
	Owner string
	// Now is when the claim is made, Until when its lease ends.
	Now, Until time.Time
	// Limit is the most uploads of a client that are looked at.
	Limit int
	// Backoff is the wait of an interrupted upload after its lease ended.
	Backoff storelink.Backoff
	// Accepted is the status of a waiting upload, Processing that of one
	// under a lease.
	Accepted, Processing storelink.UploadStatus
}

// Claimable is an upload a claim may take, as ClaimableUploads reads it.
type Claimable struct {
	// Seq is its queue position.
	Seq       int64
	ClientID  string
	SizeBytes int64
	// Attempts counts its claims so far.
	Attempts int
}

// LockUploadsParams lock the uploads of a batch (UploadTx.LockUploads).
type LockUploadsParams struct {
	IDs, ClientIDs []string
	Processing     storelink.UploadStatus
}

// LockedUploads are the lease owners of the uploads locked, by their
// order, and the stores of their clients, by client.
type LockedUploads struct {
	Owners []string
	Stores map[string]map[string]bool
}

// StockWriterParams make an upload's stock writer (UploadTx.StockWriter).
type StockWriterParams struct {
	ClientID, UploadID string
	// Now is read for the time the rows are stamped with.
	Now func() time.Time
	// Sold are the statuses of the order items whose reservations
	// ReleaseFulfilled ends.
	Sold []storelink.ItemStatus
}

// FinishParams finish an upload (UploadTx.FinishUpload).
type FinishParams struct {
	ID     string
	Status storelink.UploadStatus
	Report storelink.FeedReport
	At     time.Time
	// Into, when the driver reads the upload back as finished, is set to
	// it by Commit.
	Into **storelink.Upload
	// Announce is the kind of the upload's event: when an enabled endpoint
	// of the client, not deleted, names it among its states, the event is due
	// (OrderTx.TakeUploadEvent), to be written by Orders.AnnounceUploads.
	Announce storelink.OrderState
}
