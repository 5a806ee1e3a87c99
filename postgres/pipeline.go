package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pipelined runs fn on a pooled connection for a transaction that fn sends
// as pgx batches, BEGIN first in its first batch and queueCommit last in its
// last. A batch is one round trip however many statements it holds, where a
// pgx.Tx costs one per statement and one each for BEGIN and COMMIT; on a
// hot path with a lock held meanwhile those round trips are most of the
// cost. Whatever fn leaves open (an error, or a refusal between two
// batches) is rolled back here. Like inTx, a transaction that PostgreSQL
// ended as a deadlock victim or a serialization failure is run again, so fn
// must set its results afresh on every run.
func (db *DB) pipelined(ctx context.Context, fn func(conn *pgx.Conn) error) error {
	for try := 1; ; try++ {
		err := db.tryPipelined(ctx, fn)
		if try < 4 && retryable(err) {
			continue
		}
		return err
	}
}

func (db *DB) tryPipelined(ctx context.Context, fn func(conn *pgx.Conn) error) error {
	c, err := db.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// Release closes a connection still in a transaction, so a failed
	// ROLLBACK costs a connection, never a leaked transaction.
	defer c.Release()
	err = fn(c.Conn())
	if pc := c.Conn().PgConn(); !pc.IsClosed() && pc.TxStatus() != 'I' {
		if err == nil {
			err = errors.New("postgres: a pipelined transaction was left open")
		}
		_, _ = c.Exec(ctx, "ROLLBACK")
	}
	return err
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
