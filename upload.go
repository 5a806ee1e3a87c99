package storelink

import (
	"context"
	"strings"
	"time"
)

// UploadStatus is where a stock upload stands. An upload is a row that is
// also its own queue entry: the processor claims accepted uploads and moves
// them on.
type UploadStatus string

const (
	// UploadAccepted: the file and its record are durable; not yet picked up.
	UploadAccepted UploadStatus = "accepted"
	// UploadProcessing: a processor holds a lease on it. When the lease runs
	// out (the processor died) it is claimed again and processed from scratch.
	UploadProcessing UploadStatus = "processing"
	// UploadApplied: the valid rows are in force. Row problems may be listed.
	UploadApplied UploadStatus = "applied"
	// UploadRejected: nothing was applied, because of a file-level problem or
	// because no row was valid.
	UploadRejected UploadStatus = "rejected"
	// UploadCancelled: the client cancelled it while it was accepted;
	// nothing was applied and its bytes went back to the capacity.
	UploadCancelled UploadStatus = "cancelled"
)

// Final tells whether the status can change no more.
func (s UploadStatus) Final() bool {
	return s == UploadApplied || s == UploadRejected || s == UploadCancelled
}

// Upload is one stock file received from a client, with its processing report
// once it has one.
type Upload struct {
	ID          string       `json:"upload_id"`
	ClientID    string       `json:"client_id"`
	FileName    string       `json:"file_name"`
	SizeBytes   int64        `json:"size_bytes"`
	SHA256      string       `json:"sha256"`
	Status      UploadStatus `json:"status"`
	ReceivedAt  time.Time    `json:"received_at"`
	StartedAt   *time.Time   `json:"started_at"`
	FinishedAt  *time.Time   `json:"finished_at"`
	RowsTotal   int          `json:"rows_total"`
	RowsApplied int          `json:"rows_applied"`
	// RowsUnchanged counts the pairs of RowsApplied whose stock row already
	// held exactly what the file sets: nothing was written for them, and
	// they keep the upload_id and updated_at of the upload that last
	// changed them. A pair the file gives more than once is written, and so
	// is not among them.
	RowsUnchanged int       `json:"rows_unchanged"`
	RowsRejected  int       `json:"rows_rejected"`
	Errors        []Problem `json:"errors"`
	Warnings      []Problem `json:"warnings"`
}

// HasErrors tells whether the upload dropped any row (RowsRejected): an
// applied upload with errors applied only part of its file. It is derived
// from the count and not stored, so the two cannot disagree; answers show it
// as has_errors.
func (u Upload) HasErrors() bool { return u.RowsRejected > 0 }

// ErrorFileName is the name the upload's error file is downloaded under:
// its file's name with -errors before the .csv (stock.csv:
// stock-errors.csv), so that the two sort together in a download folder.
func (u Upload) ErrorFileName() string {
	base := u.FileName
	if len(base) >= 4 && strings.EqualFold(base[len(base)-4:], ".csv") {
		base = base[:len(base)-4]
	}
	return base + "-errors.csv"
}

// NewUpload is a received file on its way into the store.
type NewUpload struct {
	ClientID string
	FileName string
	Body     Chunks
	SHA256   string
}

// Claim is an upload a processor holds a lease on, with its bytes.
type Claim struct {
	Upload
	Body  Chunks
	Owner string // lease holder; the apply only commits while it still holds
	// Attempts counts claims of this upload, this one included; a claim
	// given back uncounted (Release) is not among them. An upload claimed
	// before is claimed alone.
	Attempts int
	// Failures counts the earlier claims whose processing the file made
	// fail (given back with Retry). The other earlier claims were
	// interrupted (Interruptions): the process died, or lost the lease.
	Failures int
}

// Interruptions counts the earlier claims of the upload that ended without
// an outcome: the process died while applying it, or its lease ran out,
// or its give-back was lost on the way.
func (c *Claim) Interruptions() int { return max(c.Attempts-1-c.Failures, 0) }

// Backoff is how long an upload whose processing was interrupted waits,
// once its lease is over, before it is claimed again: nothing after the
// first interruption (a restart is common), then Base doubling with each
// further one, up to Max. A file that kills its process every time is
// then tried at a slowing pace, and the service runs in between.
type Backoff struct {
	Base, Max time.Duration
}

// InterruptedBackoff is the backoff of interrupted uploads: 1 s doubling to
// 5 minutes, so that twenty interruptions take about an hour.
var InterruptedBackoff = Backoff{Base: time.Second, Max: 5 * time.Minute}

// Delay is the wait after n interruptions.
func (b Backoff) Delay(n int) time.Duration {
	if n <= 1 {
		return 0
	}
	return min(b.Base<<min(n-2, 30), b.Max)
}

// BatchLimit bounds a batch of uploads claimed together
// (UploadService.ClaimBatch): how many, and how many bytes their files hold
// together. Small files are applied together so that the cost of a
// transaction's commit is shared; the bounds keep a batch's apply short, so
// that the first upload of a batch does not wait long for the last.
type BatchLimit struct {
	Uploads int
	Bytes   int64
}

// BatchResult is what became of one claim of a batch
// (UploadService.ApplyBatch): the upload as finished, applied or rejected,
// or why it was not finished.
type BatchResult struct {
	Upload *Upload
	Err    error
}

// StockRow is one valid feed row: for its store and EAN, the absolute quantity
// and price, and the optional fields (empty when not given).
type StockRow struct {
	StoreID         string `json:"store_id"`
	EAN             string `json:"ean"`
	ArticleNumber   string `json:"article_number"`
	Quantity        int    `json:"quantity"`
	Price           Money  `json:"price"`
	RetailPrice     *Money `json:"retail_price,omitempty"`
	ArticleLocation string `json:"article_location,omitempty"`
	ProductName     string `json:"product_name,omitempty"`
	ProductNumber   string `json:"product_number,omitempty"`
	ArticleColor    string `json:"article_color,omitempty"`
	ArticleSize     string `json:"article_size,omitempty"`
	// Line is the line of the file the row starts on (the header is line 1).
	Line int `json:"-"`
	// Repeats is set when an earlier row of the file had the same store and
	// EAN: this row overrides it (a Duplicated value warning). Such a pair
	// is written whatever it holds, so that how many pairs an upload left
	// unchanged does not depend on the order a driver writes rows in.
	Repeats bool `json:"-"`
}

// Stock is a row of the stock in force: the latest feed values of a store and
// EAN, with the quantity available for routing.
type Stock struct {
	StockRow
	// Reserved is the number of units held by orders (0 until orders exist).
	Reserved int `json:"reserved"`
	// Available = Quantity - Reserved, never below zero.
	Available int       `json:"available"`
	UpdatedAt time.Time `json:"updated_at"`
	UploadID  string    `json:"upload_id"`
}

// StockFilter selects stock rows of one client; After is the cursor returned
// with the previous page.
type StockFilter struct {
	StoreID       string
	EAN           string
	ArticleNumber string
	Limit         int
	After         string
}

// UploadFilter selects uploads of one client, newest first; Before is an
// upload id from the previous page. Status, when set, selects uploads in
// that status; Since and Until, when not zero, those received at or after
// Since and before Until; HasErrors, when set, those that dropped rows
// (true) or dropped none (false), as Upload.HasErrors tells.
type UploadFilter struct {
	Limit        int
	Before       string
	Status       UploadStatus
	Since, Until time.Time
	HasErrors    *bool
}

// ParseHasErrors reads the has_errors filter of an upload listing: "true"
// or "false", nothing else, so that a typo is not read as one of them.
// Errors: EINVALID.
func ParseHasErrors(v string) (bool, error) {
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, Errorf(EINVALID, "has_errors must be true or false.")
}

// UploadStatuses are the statuses an upload can be in, in the order it
// goes through them.
var UploadStatuses = []UploadStatus{UploadAccepted, UploadProcessing, UploadApplied, UploadRejected, UploadCancelled}

// FeedApply is called by UploadService.Apply inside the apply transaction.
// It decodes and checks the file, calls put for every valid row in file order
// (a later row for the same store and EAN overrides an earlier one), and
// returns the report. stores is the set of the client's registered stores as
// of the transaction. A report with FileError set applies nothing. A row
// whose store and EAN an earlier row had carries Repeats.
type FeedApply func(stores map[string]bool, put func(StockRow) error) (FeedReport, error)

// UploadService receives, queues and applies stock uploads.
type UploadService interface {
	// Accept stores the upload durably and takes its size from the client's
	// capacity bucket. Errors: ETOOLARGE when the file is larger than the
	// whole bucket; ERATELIMIT (with RetryAfter) when the bucket has not
	// enough left; ENOTFOUND for an unknown client.
	Accept(ctx context.Context, u NewUpload, policy CapacityPolicy) (*Upload, Capacity, error)
	// Capacity reports a client's bucket without taking from it.
	Capacity(ctx context.Context, clientID string, policy CapacityPolicy) (Capacity, error)
	// ClientStores returns the ids of a client's stores as they are now.
	ClientStores(ctx context.Context, clientID string) (map[string]bool, error)
	// Claim leases the oldest unfinished upload of some client whose earlier
	// uploads are all finished. It returns nil, nil when there is none.
	Claim(ctx context.Context, owner string, lease time.Duration) (*Claim, error)
	// Apply runs fn in one transaction, writes the rows it puts, records the
	// report and finishes the upload, all or nothing. It fails with
	// ECONFLICT when the claim's lease was lost.
	Apply(ctx context.Context, c *Claim, fn FeedApply) (*Upload, error)
	// ClaimBatch leases, as Claim does, the oldest upload that can be
	// claimed, and with it, in acceptance order, the next ones that can be
	// claimed once it is, as long as they fit in limit: an upload waiting
	// behind its client's earlier upload can be claimed with it. An upload
	// claimed before (whose processor died or lost its lease) is claimed
	// alone, and so is a file larger than limit.Bytes. An upload whose
	// processing was interrupted is claimed again once its lease is over and
	// InterruptedBackoff's delay has passed; its client's later uploads wait
	// for it. It returns the claims in acceptance order, or none.
	ClaimBatch(ctx context.Context, owner string, lease time.Duration, limit BatchLimit) ([]*Claim, error)
	// ApplyBatch applies claims, in their order, in one transaction, each all
	// or nothing as Apply applies it alone: a rejected file writes nothing,
	// and a claim whose lease was lost is not applied (ECONFLICT), nor are
	// its client's later claims, which are given back uncounted. When the
	// apply of one fails otherwise, nothing of the transaction is kept and
	// the claims are applied one at a time, so that the failure is that
	// claim's alone. fn returns what Apply would be given for a claim; it may
	// be called twice for one. It returns what became of each claim, in
	// their order.
	ApplyBatch(ctx context.Context, claims []*Claim, fn func(*Claim) FeedApply) []BatchResult
	// Fail finishes a claimed upload as rejected with one problem, applying
	// nothing: for an upload that could not be processed at all.
	Fail(ctx context.Context, c *Claim, problem Problem) error
	// Release gives a claim back uncounted: the upload stays processing,
	// claimable again once after has passed, and the claim is not counted,
	// neither as a failure nor as an interruption. It is for
	// an apply that failed for a fault of the service (a full disk, a lost
	// database), not of the file. Only that claim is released: an upload
	// claimed again since (by anyone), released already or finished is
	// left as it is, so a release that is sent again changes nothing.
	Release(ctx context.Context, c *Claim, after time.Duration) error
	// Retry gives a claim back counted as a failure of its file (Failures):
	// the upload stays processing, claimable again once after has passed.
	// It is for an apply that the file made fail (an error that is no
	// fault of the service, a panic); like Release, only that claim is
	// given back, once.
	Retry(ctx context.Context, c *Claim, after time.Duration) error
	// Cancel cancels an upload that is still accepted, before any
	// processor picked it up: it will never be applied, and its size goes
	// back to the client's capacity bucket. Cancelling a cancelled upload
	// answers it as it is. Errors: ENOTFOUND; ECONFLICT once processing
	// began (its capacity stays used).
	Cancel(ctx context.Context, clientID, uploadID string, policy CapacityPolicy) (*Upload, error)
	// UploadFile returns the file of an upload as it was received
	// (decompressed). Errors: ENOTFOUND; EGONE once it is no longer kept.
	UploadFile(ctx context.Context, clientID, uploadID string) (Chunks, error)
	// UploadErrorFile returns the error file of a processed upload: every
	// row dropped by an error as it stood in the file, with its line and
	// problems, or for a file rejected as a whole its problem at line 0.
	// Errors: ENOTFOUND; ECONFLICT while it is not processed, or when it
	// was cancelled; EGONE once the upload's files are no longer kept.
	UploadErrorFile(ctx context.Context, clientID, uploadID string) ([]byte, error)
	// ExpireFiles removes the files of finished uploads received more
	// than retention ago, and returns how many it removed.
	ExpireFiles(ctx context.Context, retention time.Duration) (int, error)
	// AllUploads lists every client's uploads, newest first, before
	// f.Before when set: the operator's list. Errors: EINVALID when
	// f.Before is no upload.
	AllUploads(ctx context.Context, f UploadFilter) ([]Upload, error)
	// Upload returns one upload of a client. Errors: ENOTFOUND.
	Upload(ctx context.Context, clientID, uploadID string) (*Upload, error)
	// Uploads lists a client's uploads, newest first, before f.Before when
	// set. Errors: EINVALID when f.Before is not an upload of the client.
	Uploads(ctx context.Context, clientID string, f UploadFilter) ([]Upload, error)
	// QueueDepth counts uploads not yet finished.
	QueueDepth(ctx context.Context) (int, error)
	// Backlog tells how uploads wait: those of one client, or with
	// clientID "" those of every client.
	Backlog(ctx context.Context, clientID string) (Backlog, error)
}

// Backlog is how many uploads wait to be picked up by a processor.
type Backlog struct {
	// Waiting counts uploads accepted and not yet picked up.
	Waiting int
	// Ahead counts, for one client, the unfinished uploads of every client
	// up to and including the client's oldest waiting one: how many must be
	// finished before one of the client's waiting places frees up. For the
	// whole service it is the number of unfinished uploads.
	Ahead int
	// Oldest is when the oldest waiting upload was accepted; zero when none
	// waits.
	Oldest time.Time
}

// StockService reads the stock in force.
type StockService interface {
	// Stock lists a client's stock ordered by store and EAN, and the cursor
	// of the next page ("" when this is the last).
	Stock(ctx context.Context, clientID string, f StockFilter) ([]Stock, string, error)
}
