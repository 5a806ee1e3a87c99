package sqlite

import (
	"context"

	"storelink"
)

// Partners lists every partner by name.
func (d *Driver) Partners(ctx context.Context) ([]storelink.Partner, error) {
	rows, err := d.db.read.QueryContext(ctx, `SELECT id, name, created_at FROM partners ORDER BY name, id`)
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
