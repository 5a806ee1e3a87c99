package postgres

import (
	"context"

	"storelink"
)

// Partners lists every partner by name. COLLATE "C" sorts by bytes, as
// SQLite does, whatever the database's locale.
func (d *Driver) Partners(ctx context.Context) ([]storelink.Partner, error) {
	rows, err := d.db.pool.Query(ctx, `SELECT id, name, created_at FROM partners ORDER BY name COLLATE "C", id COLLATE "C"`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []storelink.Partner{}
	for rows.Next() {
		var p storelink.Partner
		if err := rows.Scan(&p.ID, &p.Name, &p.CreatedAt); err != nil {
			return nil, err
		}
		p.CreatedAt = p.CreatedAt.UTC()
		out = append(out, p)
	}
	return out, rows.Err()
}

// Clients lists every client by partner and country, bytewise as above.
func (d *Driver) Clients(ctx context.Context) ([]storelink.Client, error) {
	rows, err := d.db.pool.Query(ctx, `SELECT id, partner_id, country_code, currency, created_at
		FROM clients ORDER BY partner_id COLLATE "C", country_code COLLATE "C"`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []storelink.Client{}
	for rows.Next() {
		var c storelink.Client
		if err := rows.Scan(&c.ID, &c.PartnerID, &c.CountryCode, &c.Currency, &c.CreatedAt); err != nil {
			return nil, err
		}
		c.CreatedAt = c.CreatedAt.UTC()
		out = append(out, c)
	}
	return out, rows.Err()
}
