package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"

	"storelink"
	"storelink/service"
)

// The statements of the deliverer's transactions, each of which records
// finished attempts and claims the next deliveries, run prepared
// (deliveryStatements), since they run hundreds of times a second under
// load, and parsing them again each time would cost more than running them. A claim's lists of ids go in as one JSON array so
// that the SQL is the same whatever their number; a record's rows go in as
// parameters of statements made for a few batch sizes (batchStatements).
// Either way a batch is one statement, or a few, not one per delivery: a
// statement of its own costs more than the rows it changes.
const (
	// pickedSQL reads what the attempts of the deliveries a claim picked
	// (?1, a JSON array of their seqs) need, and whether each is still
	// pending and due (deliveryQueue): each row by its seq, its rowid, and
	// the event's payload by event_seq, the event's.
	pickedSQL = `SELECT d.seq, d.id, d.event_id, d.attempts, d.tries, d.state, coalesce(d.next_attempt_at, 9223372036854775807), ev.payload
		FROM deliveries d JOIN events ev ON ev.seq = d.event_seq AND ev.id = d.event_id
		WHERE d.seq IN (SELECT value FROM json_each(?1))`
	// endpointsSQL reads the endpoints of the claimed deliveries, each once
	// however many deliveries share it.
	endpointsSQL = `SELECT id, enabled, url, api_key, secret, previous_secret, coalesce(previous_secret_until, 0)
		FROM endpoints WHERE id IN (SELECT value FROM json_each(?1))`

	// Parked, not failed: the try does not count (?4 is the one before
	// it), and the delivery goes out again as soon as the endpoint is
	// enabled, provided it is still pending (?6). One at a time, as 410s
	// are rare and each may disable its endpoint. The row is looked up by
	// seq, its rowid; the + keeps SQLite from weighing the partial indexes
	// of a state against the bound one, which would have it prepare the
	// statement again on each run.
	goneSQL = `UPDATE deliveries SET next_attempt_at = ?5, attempts = ?3, tries = ?4, updated_at = ?1
		WHERE seq = ?2 AND +state = ?6`
	// disableSQL disables the endpoint unless it changed since the parked
	// attempt began (?4, Move.Since).
	disableSQL = `UPDATE endpoints SET enabled = 0, disabled_reason = ?1, updated_at = ?2 WHERE id = ?3 AND updated_at < ?4`
)

// The statements that record a batch of attempts take their rows as
// parameters, VALUES (?, ...), rather than as JSON, whose parsing costs as
// much as the rows' writes: one statement for each size in batchSizes,
// prepared once, and a batch is cut into as few as add up to it.
var batchSizes = [...]int{128, 64, 32, 16, 8, 4, 2, 1}

var (
	// insertAttemptsSQL inserts n attempts: (delivery_id, number, at,
	// duration_ms, status_code, error, response, url, endpoint_id,
	// succeeded) each.
	insertAttemptsSQL = batchStatements(`INSERT OR IGNORE INTO delivery_attempts
		(delivery_id, number, at, duration_ms, status_code, error, response, url, endpoint_id, succeeded) VALUES `, 10, ``)
	// The outcomes, each for n deliveries: (seq, attempts, tries) each, and
	// the retry's next_attempt_at after them; ?1 is the state a delivery is
	// moved from, pending (RecordAttemptsParams.Pending), and ?2 the time
	// now. Only the results of the leases' holders come here
	// (leaseBook.holder). Each row is looked up by seq, its rowid; the +
	// keeps the planner from walking an index of every pending delivery for
	// the few listed, and from weighing the partial indexes against the
	// bound state (see goneSQL).
	// endedSQL ends deliveries in state ?3 (Move.End), the rows from ?4.
	endedSQL = batchStatements(`UPDATE deliveries SET state = ?3, next_attempt_at = NULL,
		attempts = r.column2, tries = r.column3, updated_at = ?2 FROM (VALUES `, 3, heldSQL)
	retrySQL = batchStatements(`UPDATE deliveries SET next_attempt_at = r.column4,
		attempts = r.column2, tries = r.column3, updated_at = ?2 FROM (VALUES `, 4, heldSQL)
)

const heldSQL = `) AS r WHERE deliveries.seq = r.column1 AND +deliveries.state = ?1`

// batchStatements returns the statement head VALUES (?, ...) × n tail for
// each of batchSizes, in its order.
func batchStatements(head string, columns int, tail string) []string {
	row := "(?" + strings.Repeat(", ?", columns-1) + ")"
	out := make([]string, len(batchSizes))
	for i, n := range batchSizes {
		out[i] = head + row + strings.Repeat(", "+row, n-1) + tail
	}
	return out
}

var deliveryStatements = slices.Concat([]string{queueSQL, disabledSQL, lastSQL, pickedSQL, endpointsSQL, goneSQL, disableSQL},
	insertAttemptsSQL, endedSQL, retrySQL)

// execBatch runs statements[i] (for batchSizes[i] rows) on rows, cut into
// as few statements as add up to their number. args are the first
// parameters of each statement, before the rows'.
func execBatch(ctx context.Context, tx *unsyncedTx, statements []string, args []any, rows [][]any) error {
	for len(rows) > 0 {
		i := 0
		for batchSizes[i] > len(rows) {
			i++
		}
		n := batchSizes[i]
		params := append(make([]any, 0, len(args)+n*len(rows[0])), args...)
		for _, r := range rows[:n] {
			params = append(params, r...)
		}
		if _, err := tx.ExecContext(ctx, statements[i], params...); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

// ReleaseClaims gives back claimed deliveries that were not attempted: their
// leases end, and each is claimed again at once as it was before its claim,
// its attempt and try not counted. Nothing is written: the leases are held
// in memory (leaseBook), and the write connection is held only to keep the
// rounds out meanwhile. The queue holds pending deliveries alone, so the
// state takes no part.
func (d *webhooks) ReleaseClaims(ctx context.Context, jobs []storelink.DeliveryJob, _ storelink.DeliveryState) error {
	db := d.db
	conn, err := db.write.Conn(ctx) // see leaseBook
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, l := range db.leases.release(jobs) {
		db.queue.unlease(l, nil)
	}
	return nil
}

// BeginRound starts a round of the deliverer's bookkeeping on the write
// connection, committed without fsync (unsyncedTx). The leases are held in
// memory (leaseBook) and the pending deliveries are queued in memory
// (deliveryQueue): the round's claim only reads the file, and the book
// and the queue follow the round as it commits.
func (d *webhooks) BeginRound(ctx context.Context) (service.RoundTx, error) {
	tx, err := d.db.beginUnsynced(ctx)
	if err != nil {
		return nil, err
	}
	return &roundTx{db: d.db, tx: tx}, nil
}

// roundTx is a round of the deliverer's bookkeeping. The queue changes as
// the round goes (the claim sees the record's outcomes); should the round
// not commit, or its claim fail, the queue is dropped, and read again from
// the file by the next round. The leases the round ends and takes are
// applied to the book after the commit and before the write connection
// goes back, so that no other writer sees the file and the book disagree.
type roundTx struct {
	db          *DB
	tx          *unsyncedTx
	ended       []*deliveryLease          // by the record
	taken       map[string]*deliveryLease // by the claim
	claimFailed bool
	claimed     bool // ClaimDue ended the round
	done        bool
}

// RecordAttempts records finished attempts and moves their deliveries on
// (record).
func (r *roundTx) RecordAttempts(ctx context.Context, p service.RecordAttemptsParams) error {
	// As in beginUnsynced: the write connection is ours.
	ended, err := record(context.WithoutCancel(ctx), r.tx, &r.db.leases, &r.db.queue, p)
	r.ended = ended
	return err
}

// ClaimDue picks due deliveries from the queue, leases them in the book
// (claim) and commits the round. It takes no lock and reads no key: the
// round holds the one write connection, which keeps every other claim out,
// and only this process, which checked its key against the file before it
// was given it, can change the file's key.
func (r *roundTx) ClaimDue(ctx context.Context, p service.ClaimDueParams) (service.ClaimDueResult, error) {
	claimed, taken, err := claim(context.WithoutCancel(ctx), r.tx, &r.db.leases, &r.db.queue, r.ended, p)
	if err != nil {
		r.claimFailed = true
	} else {
		r.taken = taken
	}
	r.claimed = true
	if cerr := r.Commit(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		return service.ClaimDueResult{}, err
	}
	return service.ClaimDueResult{Claimed: claimed}, nil
}

// Commit commits, applies the round to the lease book and gives the write
// connection back.
func (r *roundTx) Commit(context.Context) error {
	if r.done {
		if r.claimed {
			return nil // ClaimDue committed
		}
		return errors.New("commit of an ended transaction")
	}
	r.done = true
	db := r.db
	if err := r.tx.Tx.Commit(); err != nil {
		db.queue.reset()
		r.tx.release()
		return err
	}
	db.leases.settle(r.ended, r.taken)
	if r.claimFailed {
		db.queue.reset()
	}
	r.tx.release()
	return nil
}

// Rollback rolls back, unless the round ended already, drops the queue and
// gives the write connection back.
func (r *roundTx) Rollback(context.Context) error {
	if r.done {
		return nil
	}
	r.done = true
	r.db.queue.reset()
	return r.tx.Rollback()
}

// unsyncedTx is a write transaction whose commit is not fsynced, for the
// deliverer's bookkeeping (claims and attempt records): synchronous=NORMAL on a connection
// pinned for it. In WAL mode a crash of the process loses none of it; a power
// cut may lose the last few, and then an event is sent again, which
// at-least-once delivery allows. Everything that must survive a power cut
// (uploads, orders, events and the deliveries queued with them) commits with
// synchronous=FULL, as the connection is set back before it is released.
// Its statement journals stay in memory (temp_store=MEMORY, set back too): a
// statement that writes a batch of rows journals the pages it changes, and
// past 64 KiB SQLite would otherwise move the journal to a file it makes for
// each statement.
type unsyncedTx struct {
	orderTx
	conn *sql.Conn
}

func (db *DB) beginUnsynced(ctx context.Context) (*unsyncedTx, error) {
	conn, err := db.write.Conn(ctx)
	if err != nil {
		return nil, err
	}
	// The wait is over once the connection is ours: what follows takes
	// microseconds, and a context that can be cancelled costs the driver a
	// goroutine for each statement.
	ctx = context.WithoutCancel(ctx)
	b := &unsyncedTx{conn: conn}
	if _, err := conn.ExecContext(ctx, `PRAGMA synchronous = NORMAL; PRAGMA temp_store = MEMORY`); err != nil {
		b.release() // the first may have taken
		return nil, err
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		b.release()
		return nil, err
	}
	b.orderTx = orderTx{Tx: tx, prepared: db.prepared}
	return b, nil
}

// release sets the connection back to synchronous=FULL (and temp_store to
// its default) and returns it to the pool, or, should that fail, has the
// pool throw it away: a connection that commits without fsync must never
// serve a durable write.
func (b *unsyncedTx) release() {
	if b.conn == nil {
		return
	}
	if _, err := b.conn.ExecContext(context.Background(), `PRAGMA synchronous = FULL; PRAGMA temp_store = DEFAULT`); err != nil {
		_ = b.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	b.conn.Close()
	b.conn = nil
}

// Commit commits and releases the connection.
func (b *unsyncedTx) Commit() error {
	err := b.Tx.Commit()
	b.release()
	return err
}

// Rollback rolls back (if not yet committed) and releases the connection.
func (b *unsyncedTx) Rollback() error {
	var err error
	if b.Tx != nil {
		err = b.Tx.Rollback()
	}
	b.release()
	return err
}

// rowsAffected reads a result's count, or 0 after an error.
func rowsAffected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// record records p's attempts and moves their deliveries on as p.Moves
// say: a statement for the attempts and one per kind of move, but for
// parking, which disables an endpoint: one at a time, as 410s are rare.
// Every attempt is recorded; only those whose lease is still theirs
// (leaseBook.holder) move their delivery on, if it is still in state
// p.Pending. It returns those leases, to end once the transaction commits.
func record(ctx context.Context, tx *unsyncedTx, book *leaseBook, q *deliveryQueue, p service.RecordAttemptsParams) ([]*deliveryLease, error) {
	results, moves, now := p.Results, p.Moves, ms(p.Now)
	if len(results) == 0 {
		return nil, nil
	}
	attempts := make([][]any, len(results))
	var held [service.MovePark][][]any                // the rows of each kind's statements
	var moved [service.MovePark][]*deliveryLease      // the leases of held's rows
	var end [service.MovePark]storelink.DeliveryState // the state each ended kind goes to (Move.End)
	var retryAt []int64                               // of moved[service.MoveRetry]
	ended := make([]*deliveryLease, 0, len(results))
	type parkedResult struct {
		r *storelink.AttemptResult
		m *service.Move
		l *deliveryLease
	}
	var parked []parkedResult
	for i := range results {
		r := &results[i]
		a := r.Attempt
		var code any
		if a.StatusCode != 0 {
			code = a.StatusCode
		}
		attempts[i] = []any{r.Job.DeliveryID, a.Number, ms(a.At), a.DurationMS, code, a.Error, a.Response, a.URL, r.Job.EndpointID,
			moves[i].Kind == service.MoveSucceeded}
		// The same result twice in one batch moves its delivery once.
		l := book.holder(r.Job)
		if l == nil || slices.Contains(ended, l) {
			continue
		}
		ended = append(ended, l)
		m := &moves[i]
		var row []any
		switch m.Kind {
		case service.MovePark:
			parked = append(parked, parkedResult{r, m, l})
			continue
		case service.MoveRetry:
			row = []any{l.seq, l.attempt, l.try, ms(m.NextAt)}
			retryAt = append(retryAt, ms(m.NextAt))
		default:
			row = []any{l.seq, l.attempt, l.try}
		}
		held[m.Kind], end[m.Kind] = append(held[m.Kind], row), m.End
		moved[m.Kind] = append(moved[m.Kind], l)
	}
	if err := execBatch(ctx, tx, insertAttemptsSQL, nil, attempts); err != nil {
		return nil, fmt.Errorf("insert attempts: %w", err)
	}
	for kind := range service.MovePark {
		statements, args := endedSQL, []any{p.Pending, now, end[kind]}
		if kind == service.MoveRetry {
			statements, args = retrySQL, []any{p.Pending, now}
		}
		if err := execBatch(ctx, tx, statements, args, held[kind]); err != nil {
			return nil, fmt.Errorf("move %d deliveries on: %w", len(held[kind]), err)
		}
	}
	for _, pr := range parked {
		l := pr.l
		res, err := tx.ExecContext(ctx, goneSQL, now, l.seq, l.attempt, pr.m.Tries, ms(pr.m.NextAt), p.Pending)
		if n, _ := rowsAffected(res, err); n > 0 {
			res, err = tx.ExecContext(ctx, disableSQL, pr.m.Disable, now, pr.r.Job.EndpointID, ms(pr.m.Since))
			if n, _ := rowsAffected(res, err); n > 0 {
				if e := q.endpoints[l.endpointID]; e != nil {
					e.disabled = true
				}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("park delivery %s: %w", pr.r.Job.DeliveryID, err)
		}
		q.unlease(l, func(d *queued) { d.next = ms(pr.m.NextAt) })
	}
	// The queue follows: a round that fails drops it (roundTx).
	if q.loaded {
		for i, l := range moved[service.MoveRetry] {
			q.unlease(l, func(d *queued) { d.next = retryAt[i] })
		}
		for _, kind := range [...]service.MoveKind{service.MoveSucceeded, service.MoveFailed} {
			for _, l := range moved[kind] {
				q.done(l)
			}
		}
	}
	return ended, nil
}
