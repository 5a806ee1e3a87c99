// Package dbtest gives tests and benchmarks raw SQL on storelink's
// databases: they inject faults with it (a trigger that makes event writes
// fail), look at what is stored (that secrets are sealed), make and drop
// PostgreSQL schemas, and fill grown tables before they measure.
//
// Only test files and benchmarks import it; serve never does
// (cmd/storelink's TestServeHasNoTestHooks checks), so that the drivers'
// API has no raw-SQL call: SQLite's database is reached through
// sqlite.DB.TestAccess, which needs its write connection, and PostgreSQL's
// through connections of this package's own.
package dbtest

import (
	"context"
	"iter"

	"storelink"
	"storelink/sqlite"
)

// SQLite is raw SQL on an open SQLite database.
type SQLite struct{ a sqlite.TestAccess }

// OnSQLite returns raw SQL on db.
func OnSQLite(db *sqlite.DB) SQLite { return SQLite{a: db.TestAccess()} }

// Exec runs one statement on the database's write connection; the
// database forgets what it keeps in memory of the rows the statement may
// have changed (its queue of pending deliveries).
func (s SQLite) Exec(ctx context.Context, query string) error { return s.a.Exec(ctx, query) }

// Query runs a query and returns its rows, each column as text by name
// (NULL as "").
func (s SQLite) Query(ctx context.Context, query string, args ...any) ([]map[string]string, error) {
	return s.a.Query(ctx, query, args...)
}

// FillStock writes the rows of seq to the stock of one client, as an apply
// writes them but without an upload, its file or the comparison. The
// client's stores must exist; rows already stored for a pair are replaced.
// It returns how many rows it wrote.
func (s SQLite) FillStock(ctx context.Context, clientID, uploadID string, seq iter.Seq[storelink.StockRow]) (int, error) {
	return s.a.FillStock(ctx, clientID, uploadID, seq)
}
