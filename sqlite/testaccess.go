package sqlite

import (
	"context"
	"database/sql"
	"iter"

	"storelink"
)

// TestAccess is an open database as package storelink/internal/dbtest
// reaches it, to give tests and benchmarks raw SQL: they inject faults
// with it, look at what is stored, and fill grown tables before they
// measure. It is no part of the driver: the services never call it, and
// serve never imports dbtest (cmd/storelink's TestServeHasNoTestHooks
// checks). The package's own tests reach it directly.
type TestAccess struct{ db *DB }

// TestAccess returns the database's TestAccess, for package dbtest.
func (db *DB) TestAccess() TestAccess { return TestAccess{db: db} }

// Exec runs one statement on the write connection, which settings of the
// connection (a PRAGMA) reach too. The queue of pending deliveries is read
// again from the file afterwards, as the statement may have changed
// deliveries behind its back.
func (a TestAccess) Exec(ctx context.Context, query string) error {
	db := a.db
	conn, err := db.write.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.ExecContext(ctx, query)
	db.queue.reset()
	return err
}

// Query runs a query on the read pool and returns its rows, each column as
// text by name (NULL as "").
func (a TestAccess) Query(ctx context.Context, query string, args ...any) ([]map[string]string, error) {
	rows, err := a.db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []map[string]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make(map[string]string, len(cols))
		for i, c := range cols {
			row[c] = vals[i].String
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// FillStock writes the rows of seq to the stock of one client, as an apply
// writes them (digest included) but without an upload, its file or the
// comparison: the benchmark of grown tables fills the stock of other
// clients by the million with it before it measures. The client's stores
// must exist; rows already stored for a pair are replaced. It commits
// every million rows and returns how many it wrote.
func (a TestAccess) FillStock(ctx context.Context, clientID, uploadID string, seq iter.Seq[storelink.StockRow]) (int, error) {
	db := a.db
	const perTx = 1 << 20
	n := 0
	var tx *sql.Tx
	defer func() {
		if tx != nil {
			tx.Rollback()
		}
	}()
	w := &stockWriter{ctx: ctx, fixed: [3]any{clientID, uploadID, ms(db.Now())}}
	flush := func() error {
		if w.n == 0 {
			return nil
		}
		idx := make([]int32, w.n)
		for i := range idx {
			idx[i] = int32(i)
		}
		if _, err := w.upsert(idx, false); err != nil {
			return err
		}
		w.reset()
		return nil
	}
	commit := func() error {
		if tx == nil {
			return nil
		}
		if err := flush(); err != nil {
			return err
		}
		err := tx.Commit()
		tx = nil
		return err
	}
	for r := range seq {
		if tx == nil {
			var err error
			if tx, err = db.write.BeginTx(ctx, nil); err != nil {
				return n, err
			}
			prepared := map[string]*sql.Stmt{}
			w.tx, w.stmt = tx, func(q string) (*sql.Stmt, error) {
				if s := prepared[q]; s != nil {
					return s, nil
				}
				s, err := tx.PrepareContext(ctx, q)
				prepared[q] = s
				return s, err
			}
		}
		n++
		if !w.add(&r) {
			if err := flush(); err != nil {
				return n, err
			}
		}
		if n%perTx == 0 {
			if err := commit(); err != nil {
				return n, err
			}
		}
	}
	return n, commit()
}
