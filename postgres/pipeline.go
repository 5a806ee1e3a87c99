package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"storelink/service"
)

// pipe is a transaction on a pooled connection whose statements are sent
// as pgx batches: BEGIN, and every statement whose answer is not needed
// yet, wait in b for the next statement whose answer is (or for COMMIT) and
// go with it, in one round trip. A pgx.Tx costs a round trip per statement
// and one each for BEGIN and COMMIT; on the hot paths, with a lock held
// meanwhile, round trips are most of what a call costs both storelink and
// PostgreSQL.
//
// Exec, Query and QueryRow send what is queued with their statement. The
// statements that with adds are the sending call's own, and so are their
// errors.
type pipe struct {
	conn *pgxpool.Conn
	b    *pgx.Batch // queued and not yet sent
	done bool
	// beforeSend, when set, queues the writes its owner kept back until a
	// send, ahead of the send's statements.
	beforeSend func() error
}

// beginPipe takes a connection from the pool and queues BEGIN on it.
func beginPipe(ctx context.Context, pool *pgxpool.Pool) (pipe, error) {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return pipe{}, err
	}
	p := pipe{conn: c, b: &pgx.Batch{}}
	p.b.Queue(`BEGIN`)
	return p, nil
}

// with adds the statements of b, which have no callbacks, to go with the
// next send as part of the call that sends it: their errors are that
// call's own.
func (p *pipe) with(b *pgx.Batch) {
	p.b.QueuedQueries = append(p.b.QueuedQueries, b.QueuedQueries...)
}

// hold makes the errors of the statements queued on b from index from on,
// writes that call did not send, call's wherever they come back
// (service.HeldError): with a later call's statements, or with COMMIT.
func hold(b *pgx.Batch, from int, call, what string) {
	for _, q := range b.QueuedQueries[from:] {
		fn := q.Fn
		q.Fn = func(br pgx.BatchResults) error {
			var err error
			if fn != nil {
				err = fn(br)
			} else {
				_, err = br.Exec()
			}
			if err != nil {
				return &service.HeldError{Call: call, For: what, Err: err}
			}
			return nil
		}
	}
}

// take returns what is queued, the writes kept back included, and starts an
// empty batch.
func (p *pipe) take() (*pgx.Batch, error) {
	if p.done {
		return nil, errors.New("statement in a transaction that ended")
	}
	if p.beforeSend != nil {
		if err := p.beforeSend(); err != nil {
			return nil, err
		}
	}
	b := p.b
	p.b = &pgx.Batch{}
	return b, nil
}

// send sends the statements queued, in one round trip.
func (p *pipe) send(ctx context.Context) error { return p.sendWith(ctx, nil) }

// sendWith sends the statements queued and then last's, in one round trip.
func (p *pipe) sendWith(ctx context.Context, last func(b *pgx.Batch)) error {
	b, err := p.take()
	if err != nil {
		return err
	}
	if last != nil {
		last(b)
	}
	if b.Len() == 0 {
		return nil
	}
	return p.conn.SendBatch(ctx, b).Close()
}

// sendBatch sends the statements queued and then b's, in one round trip.
func (p *pipe) sendBatch(ctx context.Context, b *pgx.Batch) error {
	return p.sendWith(ctx, func(q *pgx.Batch) { q.QueuedQueries = append(q.QueuedQueries, b.QueuedQueries...) })
}

// Exec sends the statement with those queued.
func (p *pipe) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	err := p.sendWith(ctx, func(b *pgx.Batch) {
		b.Queue(sql, args...).Exec(func(t pgconn.CommandTag) error {
			tag = t
			return nil
		})
	})
	return tag, err
}

// QueryRow returns a row whose Scan sends the query with those queued.
func (p *pipe) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return pipeRow{p: p, ctx: ctx, sql: sql, args: args}
}

type pipeRow struct {
	p    *pipe
	ctx  context.Context
	sql  string
	args []any
}

// Scan sends the query. A query that finds no row is not a failed batch to
// pgx (which would drop the statements it has prepared on the connection,
// to prepare them again at their next use): its pgx.ErrNoRows is returned
// after the batch.
func (r pipeRow) Scan(dest ...any) error {
	none := false
	err := r.p.sendWith(r.ctx, func(b *pgx.Batch) {
		b.Queue(r.sql, r.args...).QueryRow(func(row pgx.Row) error {
			err := row.Scan(dest...)
			if errors.Is(err, pgx.ErrNoRows) {
				none, err = true, nil
			}
			return err
		})
	})
	if err == nil && none {
		err = pgx.ErrNoRows
	}
	return err
}

// Query sends the query with those queued and returns its rows as they
// come; the batch ends when they are read to the end or closed.
func (p *pipe) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	b, err := p.take()
	if err != nil {
		return nil, err
	}
	b.Queue(sql, args...)
	br := p.conn.SendBatch(ctx, b)
	for _, q := range b.QueuedQueries[:b.Len()-1] {
		if q.Fn != nil {
			err = q.Fn(br)
		} else {
			_, err = br.Exec()
		}
		if err != nil {
			_ = br.Close()
			return nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &pipeRows{Rows: rows, br: br}, nil
}

// pipeRows are the rows of a query sent in a batch: when they end, the
// batch is closed, and its error is theirs.
type pipeRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *pipeRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *pipeRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.br.Close()
}

func (r *pipeRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// commit sends what is queued with COMMIT and gives the connection back.
// After an error the transaction is still open: rollback ends it.
func (p *pipe) commit(ctx context.Context) error {
	if p.done {
		return errors.New("commit of a transaction that ended")
	}
	if p.beforeSend != nil {
		if err := p.beforeSend(); err != nil {
			return err
		}
	}
	queueCommit(p.b)
	if err := p.send(ctx); err != nil {
		return err
	}
	p.end(ctx)
	return nil
}

// rollback rolls back what the transaction left open (an error, or a
// refusal between two sends) and gives the connection back; after commit
// it does nothing.
func (p *pipe) rollback(ctx context.Context) {
	if !p.done {
		p.end(ctx)
	}
}

// end gives the connection back, rolling back first when it is still in a
// transaction. Release closes a connection still in a transaction, so a
// failed ROLLBACK costs a connection, never a leaked transaction.
func (p *pipe) end(ctx context.Context) {
	p.done = true
	if pc := p.conn.Conn().PgConn(); !pc.IsClosed() && pc.TxStatus() != 'I' {
		_, _ = p.conn.Exec(ctx, "ROLLBACK")
	}
	p.conn.Release()
}

// queueCommit ends a pipelined transaction. PostgreSQL answers the COMMIT of
// a transaction that has failed with ROLLBACK, not with an error; that is
// made an error here. (Within one batch it cannot happen: after an error
// PostgreSQL skips the rest of the batch, COMMIT included.)
func queueCommit(b *pgx.Batch) {
	b.Queue(`COMMIT`).Exec(func(tag pgconn.CommandTag) error {
		if tag.String() != "COMMIT" {
			return errors.New("commit: the transaction was rolled back")
		}
		return nil
	})
}

// notifier sends one process's notifications on one channel one at a time,
// on a goroutine of its own, and coalesces the ones asked for while one is
// being sent into the next: that next one is sent after they were asked
// for, so it wakes the listeners for their work too.
type notifier struct {
	mu      sync.Mutex
	sending bool // a goroutine is sending
	again   bool // asked for since that goroutine's send began
}

// notifyTimeout bounds one notification; a slow one holds back only the
// notifications coalesced behind it, which polling covers anyway.
const notifyTimeout = 5 * time.Second

// signal makes sure that send runs, in full, after this call; it never
// waits for it.
func (n *notifier) signal(send func(ctx context.Context)) {
	n.mu.Lock()
	if n.sending {
		n.again = true
		n.mu.Unlock()
		return
	}
	n.sending = true
	n.mu.Unlock()
	go func() {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
			send(ctx)
			cancel()
			n.mu.Lock()
			if !n.again {
				n.sending = false
				n.mu.Unlock()
				return
			}
			n.again = false
			n.mu.Unlock()
		}
	}()
}
