package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"storelink"
)

// The statements of the deliverer's transactions, each of which records
// finished attempts and claims the next deliveries, run prepared
// (deliveryStatements), since they run hundreds of times a second under
// load: parsing them again each time would be a large share of the CPU of
// delivering a backlog. A claim's lists of ids go in as one JSON array so
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
	// enabled. One at a time, as 410s are rare and each may disable its
	// endpoint.
	goneSQL = `UPDATE deliveries SET next_attempt_at = ?1, attempts = ?3, tries = ?4, updated_at = ?1
		WHERE seq = ?2 AND state = 'pending'`
	disableSQL = `UPDATE endpoints SET enabled = 0, disabled_reason = ?1, updated_at = ?2 WHERE id = ?3`
)

// The statements that record a batch of attempts take their rows as
// parameters, VALUES (?, ...), rather than as JSON, whose parsing costs as
// much as the rows' writes: one statement for each size in batchSizes,
// prepared once, and a batch is cut into as few as add up to it.
var batchSizes = [...]int{128, 64, 32, 16, 8, 4, 2, 1}

var (
	// insertAttemptsSQL inserts n attempts: (delivery_id, number, at,
	// duration_ms, status_code, error, response) each.
	insertAttemptsSQL = batchStatements(`INSERT OR IGNORE INTO delivery_attempts
		(delivery_id, number, at, duration_ms, status_code, error, response) VALUES `, 7, ``)
	// The outcomes, each for n deliveries: (seq, attempts, tries) each, and
	// the retry's next_attempt_at after them; ?1 is the time now. Only the
	// results of the leases' holders come here (leaseBook.holder). Each row
	// is looked up by seq, its rowid; the + keeps the planner from walking
	// an index of every pending delivery for the few listed.
	succeededSQL = batchStatements(`UPDATE deliveries SET state = 'succeeded', next_attempt_at = NULL,
		attempts = r.column2, tries = r.column3, updated_at = ?1 FROM (VALUES `, 3, heldSQL)
	retrySQL = batchStatements(`UPDATE deliveries SET next_attempt_at = r.column4,
		attempts = r.column2, tries = r.column3, updated_at = ?1 FROM (VALUES `, 4, heldSQL)
	failedSQL = batchStatements(`UPDATE deliveries SET state = 'failed', next_attempt_at = NULL,
		attempts = r.column2, tries = r.column3, updated_at = ?1 FROM (VALUES `, 3, heldSQL)
)

const heldSQL = `) AS r WHERE deliveries.seq = r.column1 AND +deliveries.state = 'pending'`

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
	insertAttemptsSQL, succeededSQL, retrySQL, failedSQL)

// execBatch runs statements[i] (for batchSizes[i] rows) on rows, cut into
// as few statements as add up to their number. args are the first
// parameters of each statement, before the rows'.
func execBatch(ctx context.Context, tx *bookTx, statements []string, args []any, rows [][]any) error {
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

// ReleaseClaims gives back claimed deliveries that were not attempted, as a
// deliverer that stops does with those it claimed ahead: their leases end,
// and each is claimed again at once as it was before its claim, its
// attempt and try not counted. A claim whose lease was lost is left alone.
func (db *DB) ReleaseClaims(ctx context.Context, jobs []storelink.DeliveryJob) error {
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

// ClaimDeliveries leases due deliveries and reads what their attempts need.
func (db *DB) ClaimDeliveries(ctx context.Context, owner string, lease time.Duration, limit, perEndpoint int) ([]storelink.DeliveryJob, error) {
	return db.RecordAndClaim(ctx, nil, owner, lease, limit, perEndpoint)
}

// RecordAttempts records finished attempts and moves their deliveries on.
func (db *DB) RecordAttempts(ctx context.Context, results []storelink.AttemptResult) error {
	_, err := db.RecordAndClaim(ctx, results, "", 0, 0, 0)
	return err
}

// RecordAndClaim records finished attempts, as RecordAttempts, then claims
// up to limit due deliveries for owner, as ClaimDeliveries, in one
// transaction: the claim sees what was recorded (the next events of these
// orders, the places freed under the endpoints' caps), and a round of
// deliveries costs one commit. The leases are held in memory (leaseBook):
// the claim only reads. When the claim fails after the record succeeded,
// the record is committed all the same and the claim's error returned,
// with no jobs: a failed claim leases nothing.
func (db *DB) RecordAndClaim(ctx context.Context, results []storelink.AttemptResult, owner string, lease time.Duration,
	limit, perEndpoint int) ([]storelink.DeliveryJob, error) {
	if len(results) == 0 && limit <= 0 {
		return nil, nil
	}
	var sealErr error
	if limit > 0 {
		if _, sealErr = db.sealer(); sealErr != nil && len(results) == 0 {
			return nil, sealErr
		}
	}
	tx, err := db.beginBookkeeping(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	// As in beginBookkeeping: the write connection is ours.
	sctx := context.WithoutCancel(ctx)
	now := db.now()
	// The queue changes as the round goes (the claim sees the record's
	// outcomes); should the round fail, it is dropped, and read again from
	// the file by the next.
	settled := false
	defer func() {
		if !settled {
			db.queue.reset()
		}
	}()
	ended, err := record(sctx, tx, &db.leases, &db.queue, results, ms(now))
	if err != nil {
		return nil, err
	}
	var jobs []storelink.DeliveryJob
	var taken map[string]*deliveryLease
	var claimErr error
	if limit > 0 {
		if claimErr = sealErr; claimErr == nil {
			jobs, taken, claimErr = claim(sctx, tx, db.Sealer, &db.leases, &db.queue, ended, owner, now, lease, limit, perEndpoint)
		}
	}
	// The book follows the commit before the write connection goes back
	// (the deferred Rollback gives it back after an error).
	if err := tx.Tx.Commit(); err != nil {
		return nil, err
	}
	db.leases.settle(ended, taken)
	if claimErr != nil {
		db.queue.reset()
	}
	settled = true // and the connection is given back: the queue is not ours
	tx.release()
	if claimErr != nil {
		return nil, claimErr
	}
	return jobs, nil
}

// claim picks up to limit due deliveries for owner from the queue, at
// most perEndpoint in flight per endpoint, and returns their jobs and the
// leases to take for them once the transaction commits. It reads only: the
// picked rows, their endpoints, and the rows queued since the last claim.
// The leases ending, those of the results recorded in the same
// transaction, count as ended.
func claim(ctx context.Context, tx *bookTx, sealer *storelink.Sealer, book *leaseBook, q *deliveryQueue, ending []*deliveryLease, owner string,
	now time.Time, lease time.Duration, limit, perEndpoint int) ([]storelink.DeliveryJob, map[string]*deliveryLease, error) {
	nowMS := ms(now)
	if err := q.sync(ctx, tx, book, ending, nowMS); err != nil {
		return nil, nil, err
	}
	lines := q.pick(nowMS, limit, perEndpoint)
	if len(lines) == 0 {
		return nil, nil, nil
	}
	seqs := make([]int64, len(lines))
	for i, l := range lines {
		seqs[i] = l.entries[0].seq
	}
	rows := make(map[int64]*claimed, len(lines))
	if err := eachRow(ctx, tx, pickedSQL, jsonInts(seqs), func(r *sql.Rows) error {
		var c claimed
		if err := r.Scan(&c.seq, &c.id, &c.eventID, &c.attempts, &c.tries, &c.state, &c.next, &c.payload); err != nil {
			return err
		}
		rows[c.seq] = &c
		return nil
	}); err != nil {
		return nil, nil, fmt.Errorf("claim deliveries: %w", err)
	}
	endpoints := make([]string, 0, 1)
	for _, l := range lines {
		if id := l.key.endpoint.id; !slices.Contains(endpoints, id) {
			endpoints = append(endpoints, id)
		}
	}
	targets := make(map[string]*target, len(endpoints))
	if err := eachRow(ctx, tx, endpointsSQL, jsonList(endpoints), func(rows *sql.Rows) error {
		var id, url, apiKey, secret, previous string
		var enabled bool
		var until int64
		if err := rows.Scan(&id, &enabled, &url, &apiKey, &secret, &previous, &until); err != nil {
			return err
		}
		if enabled {
			targets[id] = unseal(sealer, url, apiKey, secret, previous, until > nowMS)
		}
		return nil
	}); err != nil {
		return nil, nil, fmt.Errorf("read claimed endpoints: %w", err)
	}
	jobs := make([]storelink.DeliveryJob, 0, len(lines))
	taken := make(map[string]*deliveryLease, len(lines))
	until := ms(now.Add(lease))
	for _, l := range lines {
		e, d := l.key.endpoint, &l.entries[0]
		p, t := rows[d.seq], targets[e.id]
		switch {
		case p == nil || p.state != string(storelink.DeliveryPending):
			// Not pending (or gone) in the file: out of the queue.
			l.entries = slices.Delete(l.entries, 0, 1)
			q.fix(l)
			continue
		case p.next > nowMS:
			d.next = p.next
			q.fix(l)
			continue
		case t == nil:
			// Disabled (or gone): its deliveries wait, parked.
			e.disabled = true
			q.fix(l)
			continue
		}
		// A lease that ran out on this delivery was an attempt and a try,
		// whether or not its result came in.
		attempts, tries, lostAttempt, lostTry := p.attempts, p.tries, 0, 0
		if a, t := book.previous(p.id); a > 0 {
			attempts, tries = max(attempts, a), max(tries, t)
			lostAttempt, lostTry = attempts, tries
		}
		jobs = append(jobs, storelink.DeliveryJob{DeliveryID: p.id, EventID: p.eventID, EndpointID: e.id,
			Attempt: attempts + 1, Try: tries + 1, URL: t.url, APIKey: t.apiKey, Secrets: t.secrets, Body: p.payload, Owner: owner,
			Unsealable: t.unsealable})
		taken[p.id] = &deliveryLease{id: p.id, seq: p.seq, endpointID: e.id, order: l.key.order, owner: owner, until: until,
			attempt: attempts + 1, try: tries + 1, lostAttempt: lostAttempt, lostTry: lostTry}
		d.leased = true
		e.leased++
	}
	return jobs, taken, nil
}

// target is where a claimed delivery goes and what it is signed with;
// unsealable is set when its key or secret cannot be opened
// (Sealer.OpenEndpoint): the job goes to the deliverer all the same, to be
// recorded as an attempt that failed for this reason, so that the other
// endpoints' deliveries in the claim go out.
type target struct {
	url, apiKey string
	secrets     []string
	unsealable  string
}

func unseal(sealer *storelink.Sealer, url, apiKey, secret, previous string, previousLive bool) *target {
	if !previousLive {
		previous = ""
	}
	key, secrets, ok := sealer.OpenEndpoint(apiKey, secret, previous)
	if !ok {
		return &target{url: url, unsealable: storelink.UnsealableReason}
	}
	return &target{url: url, apiKey: key, secrets: secrets}
}

// eachRow runs a prepared query with one argument and calls fn on each row.
func eachRow(ctx context.Context, tx *bookTx, query, arg string, fn func(*sql.Rows) error) error {
	rows, err := tx.QueryContext(ctx, query, arg)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// claimed is a delivery picked by a claim, as the file has it.
type claimed struct {
	seq                int64
	id, eventID, state string
	attempts, tries    int
	next               int64
	payload            []byte
}

// rowsAffected reads a result's count, or 0 after an error.
func rowsAffected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// record records finished attempts and moves their deliveries on: a
// statement for the attempts and one per outcome, but for 410s. Every
// attempt is recorded; only those whose lease is still theirs
// (leaseBook.holder) move their delivery on. It returns those leases, to
// end once the transaction commits.
func record(ctx context.Context, tx *bookTx, book *leaseBook, q *deliveryQueue, results []storelink.AttemptResult, now int64) ([]*deliveryLease, error) {
	if len(results) == 0 {
		return nil, nil
	}
	attempts := make([][]any, len(results))
	var held [storelink.OutcomeGone][][]any           // succeeded, retry, failed
	var moved [storelink.OutcomeGone][]*deliveryLease // the leases of held's rows
	var retryAt []int64                               // of moved[OutcomeRetry]
	ended := make([]*deliveryLease, 0, len(results))
	type goneResult struct {
		r storelink.AttemptResult
		l *deliveryLease
	}
	var gone []goneResult
	for i, r := range results {
		a := r.Attempt
		var code any
		if a.StatusCode != 0 {
			code = a.StatusCode
		}
		attempts[i] = []any{r.Job.DeliveryID, a.Number, ms(a.At), a.DurationMS, code, a.Error, a.Response}
		// The same result twice in one batch moves its delivery once.
		l := book.holder(r.Job)
		if l == nil || slices.Contains(ended, l) {
			continue
		}
		ended = append(ended, l)
		if r.Outcome != storelink.OutcomeGone {
			moved[r.Outcome] = append(moved[r.Outcome], l)
		}
		switch r.Outcome {
		case storelink.OutcomeSucceeded, storelink.OutcomeFailed:
			held[r.Outcome] = append(held[r.Outcome], []any{l.seq, l.attempt, l.try})
		case storelink.OutcomeRetry:
			held[r.Outcome] = append(held[r.Outcome], []any{l.seq, l.attempt, l.try, ms(r.NextAt)})
			retryAt = append(retryAt, ms(r.NextAt))
		case storelink.OutcomeGone:
			gone = append(gone, goneResult{r, l})
		}
	}
	if err := execBatch(ctx, tx, insertAttemptsSQL, nil, attempts); err != nil {
		return nil, fmt.Errorf("record attempts: %w", err)
	}
	for o, statements := range [...][]string{succeededSQL, retrySQL, failedSQL} {
		if err := execBatch(ctx, tx, statements, []any{now}, held[o]); err != nil {
			return nil, fmt.Errorf("record outcomes of %d deliveries: %w", len(held[o]), err)
		}
	}
	for _, g := range gone {
		r, l := g.r, g.l
		res, err := tx.ExecContext(ctx, goneSQL, now, l.seq, l.attempt, max(l.try-1, 0))
		if n, _ := rowsAffected(res, err); n > 0 {
			_, err = tx.ExecContext(ctx, disableSQL,
				"The endpoint answered 410 Gone at "+r.Attempt.At.UTC().Format(time.RFC3339)+".", now, r.Job.EndpointID)
			if e := q.endpoints[l.endpointID]; e != nil {
				e.disabled = true
			}
		}
		if err != nil {
			return nil, fmt.Errorf("record outcome of delivery %s: %w", r.Job.DeliveryID, err)
		}
		q.unlease(l, func(d *queued) { d.next = now })
	}
	// The queue follows: a round that fails drops it (see RecordAndClaim).
	if q.loaded {
		for i, l := range moved[storelink.OutcomeRetry] {
			q.unlease(l, func(d *queued) { d.next = retryAt[i] })
		}
		for _, o := range [...]storelink.Outcome{storelink.OutcomeSucceeded, storelink.OutcomeFailed} {
			for _, l := range moved[o] {
				q.done(l)
			}
		}
	}
	return ended, nil
}

// jsonList is a JSON array of strings.
func jsonList(list []string) string {
	b := []byte{'['}
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return string(append(b, ']'))
}

// jsonInts is a JSON array of integers.
func jsonInts(list []int64) string {
	b := []byte{'['}
	for i, n := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, n, 10)
	}
	return string(append(b, ']'))
}

// appendJSONString appends s as a JSON string, as encoding/json writes it
// but for HTML characters, which it leaves alone: invalid UTF-8 becomes
// U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\\ufffd"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// Redeliver makes a delivery pending again, due now, with a fresh schedule.
// A delivery being attempted right now is left to that attempt: sending it
// again meanwhile would send the event twice at once.
func (db *DB) Redeliver(ctx context.Context, id string) error {
	var seq, eventSeq int64
	var endpointID, orderID string
	if err := db.read.QueryRowContext(ctx, `SELECT seq, event_seq, endpoint_id, order_id FROM deliveries WHERE id = ?`, id).
		Scan(&seq, &eventSeq, &endpointID, &orderID); err != nil {
		return notFound(err, "delivery %q", id)
	}
	// The write connection, held, keeps claims out between the look at the
	// lease and the update.
	conn, err := db.write.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	now := ms(db.now())
	if !db.leases.redeliverable(id, now) {
		return nil
	}
	if _, err = conn.ExecContext(ctx, `UPDATE deliveries SET state = 'pending', tries = 0, next_attempt_at = ?, updated_at = ?
		WHERE seq = ?`, now, now, seq); err != nil {
		db.queue.reset()
		return err
	}
	db.queue.redeliver(endpointID, orderID, queued{seq: seq, eventSeq: eventSeq, next: now})
	return nil
}

// deliveriesQuery is the query of a listing of deliveries, and false for a
// state no delivery has.
//
// A listing by state reads that state's own rows: the pending ones in
// deliveries_pending, the failed ones in
// deliveries_failed (the + keeps a client's filter from taking
// deliveries_client, every delivery of the client, instead). The state is
// written out rather than bound, since a partial index is only used for a
// literal. Without a state, or for succeeded, most rows match: the table
// is read newest first, or the client's rows are.
func deliveriesQuery(f storelink.DeliveryFilter) (string, []any, bool) {
	from, client := `deliveries`, ` AND client_id = ?`
	var where string
	switch f.State {
	case "":
	case storelink.DeliverySucceeded:
		where = ` AND state = 'succeeded'`
	case storelink.DeliveryPending:
		from, where = `deliveries INDEXED BY deliveries_pending`, ` AND state = 'pending'`
	case storelink.DeliveryFailed:
		from, where, client = `deliveries INDEXED BY deliveries_failed`, ` AND state = 'failed'`, ` AND +client_id = ?`
	default:
		return "", nil, false
	}
	q := `SELECT id, event_id, endpoint_id, client_id, order_id, event_state, state, next_attempt_at, created_at, updated_at
		FROM ` + from + ` WHERE 1 = 1` + where
	var args []any
	if f.ClientID != "" {
		q, args = q+client, append(args, f.ClientID)
	}
	if f.Before != "" {
		q, args = q+` AND seq < (SELECT seq FROM deliveries WHERE id = ?)`, append(args, f.Before)
	}
	return q + ` ORDER BY seq DESC LIMIT ?`, append(args, f.Limit), true
}

// Deliveries lists deliveries, newest first, each with its attempts.
func (db *DB) Deliveries(ctx context.Context, f storelink.DeliveryFilter) ([]storelink.Delivery, error) {
	q, args, ok := deliveriesQuery(f)
	if !ok {
		return []storelink.Delivery{}, nil
	}
	rows, err := db.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	out := []storelink.Delivery{}
	for rows.Next() {
		var d storelink.Delivery
		var next sql.NullInt64
		var created, updated int64
		if err := rows.Scan(&d.ID, &d.EventID, &d.EndpointID, &d.ClientID, &d.OrderID, &d.EventState, &d.State, &next, &created, &updated); err != nil {
			rows.Close()
			return nil, err
		}
		d.NextAttemptAt, d.CreatedAt, d.UpdatedAt = fromNullMS(next), fromMS(created), fromMS(updated)
		out = append(out, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Attempts, err = db.attempts(ctx, out[i].ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (db *DB) attempts(ctx context.Context, deliveryID string) ([]storelink.Attempt, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT number, at, duration_ms, coalesce(status_code, 0), error, response
		FROM delivery_attempts WHERE delivery_id = ? ORDER BY number`, deliveryID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []storelink.Attempt{}
	for rows.Next() {
		var a storelink.Attempt
		var at int64
		if err := rows.Scan(&a.Number, &at, &a.DurationMS, &a.StatusCode, &a.Error, &a.Response); err != nil {
			return nil, err
		}
		a.At = fromMS(at)
		out = append(out, a)
	}
	return out, rows.Err()
}

// PendingDeliveries counts pending deliveries and the age of the oldest.
func (db *DB) PendingDeliveries(ctx context.Context) (int, time.Duration, error) {
	var n int
	var oldest sql.NullInt64
	err := db.read.QueryRowContext(ctx, `SELECT count(*), min(created_at) FROM deliveries WHERE state = 'pending'`).Scan(&n, &oldest)
	if err != nil || !oldest.Valid {
		return n, 0, err
	}
	return n, db.now().Sub(fromMS(oldest.Int64)), nil
}

// bookTx is a write transaction for delivery bookkeeping (claims and attempt
// records) whose commit is not fsynced: synchronous=NORMAL on a connection
// pinned for it. In WAL mode a crash of the process loses none of it; a power
// cut may lose the last few, and then an event is sent again, which
// at-least-once delivery allows. Everything that must survive a power cut
// (uploads, orders, events and the deliveries queued with them) commits with
// synchronous=FULL, as the connection is set back before it is released.
// Its statement journals stay in memory (temp_store=MEMORY, set back too): a
// statement that writes a batch of rows journals the pages it changes, and
// past 64 KiB SQLite moved the journal to a file it made for each statement.
type bookTx struct {
	orderTx
	conn *sql.Conn
}

func (db *DB) beginBookkeeping(ctx context.Context) (*bookTx, error) {
	conn, err := db.write.Conn(ctx)
	if err != nil {
		return nil, err
	}
	// The wait is over once the connection is ours: what follows takes
	// microseconds, and a context that can be cancelled costs the driver a
	// goroutine for each statement.
	ctx = context.WithoutCancel(ctx)
	b := &bookTx{conn: conn}
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
func (b *bookTx) release() {
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
func (b *bookTx) Commit() error {
	err := b.Tx.Commit()
	b.release()
	return err
}

// Rollback rolls back (if not yet committed) and releases the connection.
func (b *bookTx) Rollback() error {
	var err error
	if b.Tx != nil {
		err = b.Tx.Rollback()
	}
	b.release()
	return err
}
