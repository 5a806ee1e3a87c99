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

// BeginUpload starts an upload transaction that is sent as pgx batches on a
// pooled connection: BEGIN is queued, not sent, and every statement whose
// answer is not needed yet waits for the next that is, or for COMMIT. A
// batch is one round trip however many statements it holds, where a pgx.Tx
// costs one per statement and one each for BEGIN and COMMIT; on the upload
// calls' hot path, with a lock held meanwhile, round trips are most of
// what a call costs both storelink and PostgreSQL.
func (d *Driver) BeginUpload(ctx context.Context) (service.UploadTx, error) {
	c, err := d.db.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	t := &pipelinedTx{db: d.db, conn: c, b: &pgx.Batch{}}
	t.b.Queue(`BEGIN`)
	return t, nil
}

// pipelinedTx is a transaction begun by Driver.BeginUpload: its statements
// are queued in a batch until an answer or COMMIT is needed.
type pipelinedTx struct {
	db   *DB
	conn *pgxpool.Conn
	b    *pgx.Batch // queued and not yet sent
	// owner is the upload's lease owner as LockUpload read it with the row
	// locked, which it stays until the transaction ends.
	owner string
	w     *stockWriter
	wake  bool // an upload was inserted: the processors are told at commit
	done  bool
	// savepoint is where the savepoint of the upload at hand stands.
	savepoint savepointState
	// The writes of a batch's small files, kept to be sent as a few
	// statements for all of them (flushBatch): the writers of the files
	// applied and not copied, those whose reservations are released, and
	// the uploads finished.
	applied  []*stockWriter
	released []*stockWriter
	finished []finish
}

// savepointState is where a pipelined transaction's savepoint stands: none
// asked for, asked for and not yet made (nothing needed it), or made.
type savepointState int8

const (
	savepointNone savepointState = iota
	savepointWanted
	savepointMade
)

// send sends the statements queued, in one round trip, after the batch's
// writes kept until then (flushBatch).
func (t *pipelinedTx) send(ctx context.Context) error {
	if err := t.flushBatch(); err != nil {
		return err
	}
	b := t.b
	t.b = &pgx.Batch{}
	if b.Len() == 0 {
		return nil
	}
	return t.conn.SendBatch(ctx, b).Close()
}

// Commit sends what is queued with COMMIT, and then wakes the processors
// for an upload inserted (see wake). The writes kept for the batch (its
// files' rows, releases and finishes) are queued before COMMIT: after it
// they would run in a transaction of their own, with the uploads' locks
// already given up.
func (t *pipelinedTx) Commit(ctx context.Context) error {
	if t.done {
		return errors.New("commit of a pipelined transaction that ended")
	}
	if err := t.flushBatch(); err != nil {
		return err // Rollback ends it
	}
	queueCommit(t.b)
	if err := t.send(ctx); err != nil {
		return err // Rollback ends it
	}
	t.end(ctx)
	if t.wake {
		t.db.wake(ChannelUploads)
	}
	return nil
}

// Rollback rolls back what the transaction left open (an error, or a
// refusal between two batches) and gives the connection back; after Commit
// it does nothing.
func (t *pipelinedTx) Rollback(ctx context.Context) error {
	if !t.done {
		t.end(ctx)
	}
	return nil
}

// end gives the connection back, rolling back first when it is still in a
// transaction. Release closes a connection still in a transaction, so a
// failed ROLLBACK costs a connection, never a leaked transaction.
func (t *pipelinedTx) end(ctx context.Context) {
	t.done = true
	if pc := t.conn.Conn().PgConn(); !pc.IsClosed() && pc.TxStatus() != 'I' {
		_, _ = t.conn.Exec(ctx, "ROLLBACK")
	}
	t.conn.Release()
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
