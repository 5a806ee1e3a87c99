package sqlite

import (
	"context"
	"database/sql"
)

// ExecForTest runs one statement on the write connection. It is for tests
// only: the conformance suite uses it to inject faults (a trigger that makes
// event writes fail) and show that an order's state change never outlives
// its event. No service code calls it.
//
// The queue of pending deliveries is read again from the file afterwards,
// as the statement may have changed deliveries behind its back.
func (db *DB) ExecForTest(ctx context.Context, query string) error {
	conn, err := db.write.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.ExecContext(ctx, query)
	db.queue.reset()
	return err
}

// QueryForTest runs a query on the read pool and returns its rows, each
// column as text by name (NULL as ""). It is for tests only: the SQLite
// tests use it to look at what is stored, such as that secrets are sealed.
func (db *DB) QueryForTest(ctx context.Context, query string, args ...any) ([]map[string]string, error) {
	rows, err := db.read.QueryContext(ctx, query, args...)
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
