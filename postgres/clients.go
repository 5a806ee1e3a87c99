package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
	"storelink/service"
)

// Partners reads every partner on the pool. COLLATE "C" sorts by bytes, as
// SQLite does, whatever the database's locale; pgx scans the columns into
// the fields in their order.
func (d partners) Partners(ctx context.Context) ([]storelink.Partner, error) {
	rows, _ := d.db.pool.Query(ctx, `SELECT id, name, created_at FROM partners ORDER BY name COLLATE "C", id COLLATE "C"`)
	return pgx.CollectRows(rows, pgx.RowToStructByPos[storelink.Partner])
}

// Clients reads every client on the pool, sorted bytewise and scanned as
// Partners are.
func (d partners) Clients(ctx context.Context) ([]storelink.Client, error) {
	rows, _ := d.db.pool.Query(ctx, `SELECT id, partner_id, country_code, currency, created_at
		FROM clients ORDER BY partner_id COLLATE "C", country_code COLLATE "C"`)
	return pgx.CollectRows(rows, pgx.RowToStructByPos[storelink.Client])
}

// ListPartners reads a page of partners on the pool, sorted bytewise
// (partners_name). lower() of a "C" text folds only A to Z, as the service
// folds q and SQLite's lower() does.
func (d partners) ListPartners(ctx context.Context, q string, after *storelink.ListCursor, limit int) ([]storelink.Partner, error) {
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
func (d partners) ListClients(ctx context.Context, f service.ListClientsParams) ([]storelink.ClientListing, error) {
	var a args
	query := `SELECT c.id, c.partner_id, c.country_code, c.currency, c.created_at, p.name
		FROM clients c JOIN partners p ON p.id = c.partner_id WHERE true`
	if f.PartnerID != "" {
		query += ` AND c.partner_id = ` + a.add(f.PartnerID)
	}
	if f.Q != "" {
		query += clientMatch(a.add(f.Q))
	}
	if f.After != nil {
		first, second := a.add(f.After.First), a.add(f.After.Second)
		query += ` AND (c.partner_id COLLATE "C" > ` + first + ` OR c.partner_id = ` + first + ` AND c.country_code COLLATE "C" > ` + second + `)`
	}
	rows, err := d.db.pool.Query(ctx, query+` ORDER BY c.partner_id COLLATE "C", c.country_code COLLATE "C" LIMIT `+a.add(f.Limit), a...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (storelink.ClientListing, error) {
		var c storelink.ClientListing
		err := row.Scan(&c.ID, &c.PartnerID, &c.CountryCode, &c.Currency, &c.CreatedAt, &c.PartnerName)
		return c, err
	})
}

// clientMatch is the condition of a client list's search, on clients c and
// partners p, for the parameter p of q.
func clientMatch(p string) string {
	return ` AND (strpos(lower(c.id COLLATE "C"), ` + p + `) > 0 OR strpos(lower(c.country_code COLLATE "C"), ` + p + `) > 0
		OR strpos(lower(c.partner_id COLLATE "C"), ` + p + `) > 0 OR strpos(lower(p.name COLLATE "C"), ` + p + `) > 0)`
}

// clientFiguresSQL reads every client's figures in one statement: each
// count is one grouped pass over rows an index finds (failed deliveries by
// deliveries_failed_endpoint, rejected uploads by uploads_rejected), and
// the latest upload is one look into uploads_client per client.
const clientFiguresSQL = `SELECT c.id, c.partner_id, c.country_code, c.currency, c.created_at, p.name,
	coalesce(st.n, 0), coalesce(en.n, 0), coalesce(en.off, 0), coalesce(fd.n, 0), coalesce(rj.n, 0),
	k.tokens, k.updated_at, lu.id, lu.file_name, lu.size_bytes, lu.status, lu.received_at
FROM clients c JOIN partners p ON p.id = c.partner_id
LEFT JOIN (SELECT client_id, count(*) AS n FROM stores GROUP BY client_id) st ON st.client_id = c.id
LEFT JOIN (SELECT client_id, count(*) AS n, count(*) FILTER (WHERE NOT enabled) AS off FROM endpoints
	WHERE deleted_at IS NULL GROUP BY client_id) en ON en.client_id = c.id
LEFT JOIN (SELECT e.client_id, sum(f.n)::bigint AS n
	FROM (SELECT endpoint_id, count(*) AS n FROM deliveries WHERE state = $1 GROUP BY endpoint_id) f
	JOIN endpoints e ON e.id = f.endpoint_id AND e.deleted_at IS NULL GROUP BY e.client_id) fd ON fd.client_id = c.id
LEFT JOIN (SELECT client_id, count(*) AS n FROM uploads WHERE status = $2 AND received_at >= $3 GROUP BY client_id) rj
	ON rj.client_id = c.id
LEFT JOIN capacity k ON k.client_id = c.id
LEFT JOIN LATERAL (SELECT id, file_name, size_bytes, status, received_at FROM uploads
	WHERE client_id = c.id ORDER BY seq DESC LIMIT 1) lu ON true
WHERE true`

// ClientFigures reads on the pool, sorted bytewise as ListClients.
func (d partners) ClientFigures(ctx context.Context, p service.ClientFiguresParams) ([]service.ClientFigures, error) {
	a := args{string(p.Failed), string(p.Rejected), p.RejectedSince}
	query := clientFiguresSQL
	if p.Q != "" {
		query += clientMatch(a.add(p.Q))
	}
	rows, err := d.db.pool.Query(ctx, query+` ORDER BY c.partner_id COLLATE "C", c.country_code COLLATE "C"`, a...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (service.ClientFigures, error) {
		var f service.ClientFigures
		var tokens *float64
		var updated, received *time.Time
		var upID, name, status *string
		var size *int64
		err := row.Scan(&f.ID, &f.PartnerID, &f.CountryCode, &f.Currency, &f.CreatedAt, &f.PartnerName,
			&f.Stores, &f.Endpoints, &f.EndpointsDisabled, &f.FailedDeliveries, &f.RejectedUploads,
			&tokens, &updated, &upID, &name, &size, &status, &received)
		if tokens != nil && updated != nil {
			f.Bucket = &storelink.Bucket{Tokens: *tokens, UpdatedAt: *updated}
		}
		if upID != nil {
			f.LastUpload = &storelink.Upload{ID: *upID, ClientID: f.ID, FileName: *name, SizeBytes: *size,
				Status: storelink.UploadStatus(*status), ReceivedAt: *received}
		}
		return f, err
	})
}
