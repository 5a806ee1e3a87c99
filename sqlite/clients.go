package sqlite

import (
	"context"
	"database/sql"

	"storelink"
	"storelink/service"
)

// Partners lists every partner by name.
func (d partners) Partners(ctx context.Context) ([]storelink.Partner, error) {
	rows, err := d.db.read.QueryContext(ctx, `SELECT id, name, created_at FROM partners ORDER BY name, id`)
	return scanPartners(rows, err)
}

// Clients lists every client by partner and country.
func (d partners) Clients(ctx context.Context) ([]storelink.Client, error) {
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
func (d partners) ListPartners(ctx context.Context, q string, after *storelink.ListCursor, limit int) ([]storelink.Partner, error) {
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
func (d partners) ListClients(ctx context.Context, f service.ListClientsParams) ([]storelink.ClientListing, error) {
	query := `SELECT c.id, c.partner_id, c.country_code, c.currency, c.created_at, p.name
		FROM clients c JOIN partners p ON p.id = c.partner_id WHERE 1 = 1`
	var args []any
	if f.PartnerID != "" {
		query, args = query+` AND c.partner_id = ?`, append(args, f.PartnerID)
	}
	if f.Q != "" {
		query, args = query+clientMatch, append(args, f.Q, f.Q, f.Q, f.Q)
	}
	if f.After != nil {
		query, args = query+` AND (c.partner_id > ? OR c.partner_id = ? AND c.country_code > ?)`,
			append(args, f.After.First, f.After.First, f.After.Second)
	}
	query, args = query+` ORDER BY c.partner_id, c.country_code LIMIT ?`, append(args, f.Limit)
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

// clientMatch is the condition of a client list's search, on clients c and
// partners p, with q as its four arguments.
const clientMatch = ` AND (instr(lower(c.id), ?) > 0 OR instr(lower(c.country_code), ?) > 0 OR instr(lower(c.partner_id), ?) > 0
	OR instr(lower(p.name), ?) > 0)`

// clientFiguresSQL reads every client's figures in one statement: each
// count is one grouped pass over rows an index finds (failed deliveries by
// deliveries_failed_endpoint, rejected uploads by uploads_rejected), and
// the latest upload is one look into uploads_client per client.
const clientFiguresSQL = `SELECT c.id, c.partner_id, c.country_code, c.currency, c.created_at, p.name,
	coalesce(st.n, 0), coalesce(en.n, 0), coalesce(en.off, 0), coalesce(fd.n, 0), coalesce(rj.n, 0),
	k.tokens, k.updated_at, lu.id, lu.file_name, lu.size_bytes, lu.status, lu.received_at
FROM clients c JOIN partners p ON p.id = c.partner_id
LEFT JOIN (SELECT client_id, count(*) AS n FROM stores GROUP BY client_id) st ON st.client_id = c.id
LEFT JOIN (SELECT client_id, count(*) AS n, sum(enabled = 0) AS off FROM endpoints WHERE deleted_at IS NULL GROUP BY client_id) en
	ON en.client_id = c.id
LEFT JOIN (SELECT e.client_id, sum(f.n) AS n
	FROM (SELECT endpoint_id, count(*) AS n FROM deliveries WHERE state = ? GROUP BY endpoint_id) f
	JOIN endpoints e ON e.id = f.endpoint_id AND e.deleted_at IS NULL GROUP BY e.client_id) fd ON fd.client_id = c.id
LEFT JOIN (SELECT client_id, count(*) AS n FROM uploads WHERE status = ? AND received_at >= ? GROUP BY client_id) rj
	ON rj.client_id = c.id
LEFT JOIN capacity k ON k.client_id = c.id
LEFT JOIN uploads lu ON lu.seq = (SELECT max(seq) FROM uploads WHERE client_id = c.id)
WHERE 1 = 1`

// ClientFigures reads on the read pool. SQLite plans the statement again
// once the states are bound, so the partial indexes still serve.
func (d partners) ClientFigures(ctx context.Context, p service.ClientFiguresParams) ([]service.ClientFigures, error) {
	query, args := clientFiguresSQL, []any{p.Failed, p.Rejected, ms(p.RejectedSince)}
	if q := p.Q; q != "" {
		query, args = query+clientMatch, append(args, q, q, q, q)
	}
	rows, err := d.db.read.QueryContext(ctx, query+` ORDER BY c.partner_id, c.country_code`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []service.ClientFigures{}
	for rows.Next() {
		var f service.ClientFigures
		var created int64
		var tokens sql.NullFloat64
		var updated, size, received sql.NullInt64
		var upID, name, status sql.NullString
		if err := rows.Scan(&f.ID, &f.PartnerID, &f.CountryCode, &f.Currency, &created, &f.PartnerName,
			&f.Stores, &f.Endpoints, &f.EndpointsDisabled, &f.FailedDeliveries, &f.RejectedUploads,
			&tokens, &updated, &upID, &name, &size, &status, &received); err != nil {
			return nil, err
		}
		f.CreatedAt = fromMS(created)
		if tokens.Valid {
			f.Bucket = &storelink.Bucket{Tokens: tokens.Float64, UpdatedAt: fromMS(updated.Int64)}
		}
		if upID.Valid {
			f.LastUpload = &storelink.Upload{ID: upID.String, ClientID: f.ID, FileName: name.String, SizeBytes: size.Int64,
				Status: storelink.UploadStatus(status.String), ReceivedAt: fromMS(received.Int64)}
		}
		out = append(out, f)
	}
	return out, rows.Err()
}
