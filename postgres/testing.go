package postgres

import "context"

// ExecForTest runs one statement on the pool. It is for tests only: the
// conformance suite uses it to inject faults (a trigger that makes event
// writes fail) and show that an order's state change never outlives its
// event. No service code calls it.
func (db *DB) ExecForTest(ctx context.Context, query string) error {
	_, err := db.pool.Exec(ctx, query)
	return err
}
