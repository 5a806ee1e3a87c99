package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// The WAL is copied back into the database file (a checkpoint) in the
// background, on a connection of its own, rather than by the commit that
// happens to take it past SQLite's threshold: that commit, an order call's
// or a round of delivery bookkeeping on the one write connection, would
// otherwise copy a thousand pages and wait for two fsyncs while every
// other writer waits for it. A passive checkpoint takes no lock that a
// writer or reader waits for. The write connection still checkpoints
// itself past walBackstop pages, should this one fall behind or fail.
//
// Once a checkpoint has copied everything, the next write starts the WAL
// over from its beginning, and its commit truncates the file to
// walSizeLimit (journal_size_limit on the write connection): the file
// would otherwise keep, for good, the size of the largest burst it held.
const (
	checkpointEvery = 250 * time.Millisecond
	walBackstop     = 16384   // pages: 64 MiB
	walSizeLimit    = 4 << 20 // bytes
)

// checkpointer runs passive checkpoints every checkpointEvery until
// stopped. One that finds nothing new in the WAL does nothing, not even an
// fsync.
type checkpointer struct {
	conn *sql.DB
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func startCheckpointer(dsn string) (*checkpointer, error) {
	conn, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	conn.SetMaxOpenConns(1)
	c := &checkpointer{conn: conn, stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c, nil
}

func (c *checkpointer) run() {
	defer close(c.done)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			// An error (the file is busy, say) is left to the next tick,
			// and to the backstop.
			_, _ = c.conn.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`)
			cancel()
		}
	}
}

// close stops the checkpoints and closes the connection.
func (c *checkpointer) close() error {
	if c == nil {
		return nil
	}
	c.once.Do(func() { close(c.stop) })
	<-c.done
	return c.conn.Close()
}
