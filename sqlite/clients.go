package sqlite

import (
	"context"
	"database/sql"

	"storelink"
)

// Partners lists every partner by name.
func (d *Driver) Partners(ctx context.Context) ([]storelink.Partner, error) {
	rows, err := d.db.read.QueryContext(ctx, `SELECT id, name, created_at FROM partners ORDER BY name, id`)
	return scanPartners(rows, err)
}

// Clients lists every client by partner and country.
func (d *Driver) Clients(ctx context.Context) ([]storelink.Client, error) {
	rows, err := d.db.read.QueryContext(ctx, `SELECT id, partner_id, country_code, currency, created_at
		FROM clients ORDER BY partner_id, country_code`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []storelink.Client{}
	for rows.Next() {
		var c storelink.Client
		var created int64
		if err := rows.Scan(&c.ID, &c.PartnerID, &c.CountryCode, &c.Currency, &created); err != nil {
			return nil, err
		}
		c.CreatedAt = fromMS(created)
		out = append(out, c)
	}
	return out, rows.Err()
}

// ListPartners reads a page of partners on the read pool, by the index of
// their names (partners_name). SQLite's lower() folds only A to Z, as the
// service folds q.
func (d *Driver) ListPartners(ctx context.Context, q string, after *storelink.ListCursor, limit int) ([]storelink.Partner, error) {
	query, args := `SELECT id, name, created_at FROM partners WHERE 1 = 1`, []any{}
	if q != "" {
		query, args = query+` AND (instr(lower(name), ?) > 0 OR instr(lower(id), ?) > 0)`, append(args, q, q)
	}
	if after != nil {
		query, args = query+` AND (name > ? OR name = ? AND id > ?)`, append(args, after.First, after.First, after.Second)
	}
	rows, err := d.db.read.QueryContext(ctx, query+` ORDER BY name, id LIMIT ?`, append(args, limit)...)
	return scanPartners(rows, err)
}

// ListClients reads a page of clients with their partners' names on the
// read pool, by the index of the clients' partner and country.
func (d *Driver) ListClients(ctx context.Context, partnerID, q string, after *storelink.ListCursor, limit int) ([]storelink.ClientListing, error) {
	query := `SELECT c.id, c.partner_id, c.country_code, c.currency, c.created_at, p.name
		FROM clients c JOIN partners p ON p.id = c.partner_id WHERE 1 = 1`
	var args []any
	if partnerID != "" {
		query, args = query+` AND c.partner_id = ?`, append(args, partnerID)
	}
	if q != "" {
		query += ` AND (instr(lower(c.id), ?) > 0 OR instr(lower(c.country_code), ?) > 0 OR instr(lower(c.partner_id), ?) > 0
			OR instr(lower(p.name), ?) > 0)`
		args = append(args, q, q, q, q)
	}
	if after != nil {
		query, args = query+` AND (c.partner_id > ? OR c.partner_id = ? AND c.country_code > ?)`,
			append(args, after.First, after.First, after.Second)
	}
	query, args = query+` ORDER BY c.partner_id, c.country_code LIMIT ?`, append(args, limit)
	rows, err := d.db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []storelink.ClientListing{}
	for rows.Next() {
		var c storelink.ClientListing
		var created int64
		if err := rows.Scan(&c.ID, &c.PartnerID, &c.CountryCode, &c.Currency, &created, &c.PartnerName); err != nil {
			return nil, err
		}
		c.CreatedAt = fromMS(created)
		out = append(out, c)
	}
	return out, rows.Err()
}

// scanPartners reads rows of id, name and created_at; err is the query's.
func scanPartners(rows *sql.Rows, err error) ([]storelink.Partner, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []storelink.Partner{}
	for rows.Next() {
		var p storelink.Partner
		var created int64
		if err := rows.Scan(&p.ID, &p.Name, &created); err != nil {
			return nil, err
		}
		p.CreatedAt = fromMS(created)
		out = append(out, p)
	}
	return out, rows.Err()
}
