package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"storelink"
)

// Partners reads every partner on the pool. COLLATE "C" sorts by bytes, as
// SQLite does, whatever the database's locale; pgx scans the columns into
// the fields in their order.
func (d *Driver) Partners(ctx context.Context) ([]storelink.Partner, error) {
	rows, _ := d.db.pool.Query(ctx, `SELECT id, name, created_at FROM partners ORDER BY name COLLATE "C", id COLLATE "C"`)
	return pgx.CollectRows(rows, pgx.RowToStructByPos[storelink.Partner])
}

// Clients reads every client on the pool, sorted bytewise and scanned as
// Partners are.
func (d *Driver) Clients(ctx context.Context) ([]storelink.Client, error) {
	rows, _ := d.db.pool.Query(ctx, `SELECT id, partner_id, country_code, currency, created_at
		FROM clients ORDER BY partner_id COLLATE "C", country_code COLLATE "C"`)
	return pgx.CollectRows(rows, pgx.RowToStructByPos[storelink.Client])
}
