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

// ListPartners reads a page of partners on the pool, sorted bytewise
// (partners_name). lower() of a "C" text folds only A to Z, as the service
// folds q and SQLite's lower() does.
func (d *Driver) ListPartners(ctx context.Context, q string, after *storelink.ListCursor, limit int) ([]storelink.Partner, error) {
	var a args
	query := `SELECT id, name, created_at FROM partners WHERE true`
	if q != "" {
		p := a.add(q)
		query += ` AND (strpos(lower(name COLLATE "C"), ` + p + `) > 0 OR strpos(lower(id COLLATE "C"), ` + p + `) > 0)`
	}
	if after != nil {
		first, second := a.add(after.First), a.add(after.Second)
		query += ` AND (name COLLATE "C" > ` + first + ` OR name = ` + first + ` AND id COLLATE "C" > ` + second + `)`
	}
	rows, _ := d.db.pool.Query(ctx, query+` ORDER BY name COLLATE "C", id COLLATE "C" LIMIT `+a.add(limit), a...)
	return pgx.CollectRows(rows, pgx.RowToStructByPos[storelink.Partner])
}

// ListClients reads a page of clients with their partners' names on the
// pool, sorted bytewise (clients_partner); q is matched as ListPartners
// matches it.
func (d *Driver) ListClients(ctx context.Context, partnerID, q string, after *storelink.ListCursor, limit int) ([]storelink.ClientListing, error) {
	var a args
	query := `SELECT c.id, c.partner_id, c.country_code, c.currency, c.created_at, p.name
		FROM clients c JOIN partners p ON p.id = c.partner_id WHERE true`
	if partnerID != "" {
		query += ` AND c.partner_id = ` + a.add(partnerID)
	}
	if q != "" {
		p := a.add(q)
		query += ` AND (strpos(lower(c.id COLLATE "C"), ` + p + `) > 0 OR strpos(lower(c.country_code COLLATE "C"), ` + p + `) > 0
			OR strpos(lower(c.partner_id COLLATE "C"), ` + p + `) > 0 OR strpos(lower(p.name COLLATE "C"), ` + p + `) > 0)`
	}
	if after != nil {
		first, second := a.add(after.First), a.add(after.Second)
		query += ` AND (c.partner_id COLLATE "C" > ` + first + ` OR c.partner_id = ` + first + ` AND c.country_code COLLATE "C" > ` + second + `)`
	}
	rows, err := d.db.pool.Query(ctx, query+` ORDER BY c.partner_id COLLATE "C", c.country_code COLLATE "C" LIMIT `+a.add(limit), a...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (storelink.ClientListing, error) {
		var c storelink.ClientListing
		err := row.Scan(&c.ID, &c.PartnerID, &c.CountryCode, &c.Currency, &c.CreatedAt, &c.PartnerName)
		return c, err
	})
}
