package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"storelink"
)

var _ storelink.AdminService = (*DB)(nil)
var _ storelink.Authenticator = (*DB)(nil)

// CreatePartner adds a partner.
func (db *DB) CreatePartner(ctx context.Context, name string) (*storelink.Partner, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return nil, storelink.Errorf(storelink.EINVALID, "name is required.")
	}
	if err := storelink.CheckText("name", name); err != nil {
		return nil, err
	}
	p := &storelink.Partner{ID: storelink.NewID(db.now()), Name: name, CreatedAt: db.now()}
	_, err := db.write.ExecContext(ctx, `INSERT INTO partners (id, name, created_at) VALUES (?, ?, ?)`,
		p.ID, p.Name, ms(p.CreatedAt))
	if err != nil {
		return nil, fmt.Errorf("insert partner: %w", err)
	}
	return p, nil
}

// PartnerCount counts partners.
func (db *DB) PartnerCount(ctx context.Context) (int, error) {
	var n int
	err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM partners`).Scan(&n)
	return n, err
}

// CreateClient adds a client for one country with its first API key.
func (db *DB) CreateClient(ctx context.Context, partnerID, country, currency string) (*storelink.NewClient, error) {
	country, currency = strings.ToUpper(strings.TrimSpace(country)), strings.ToUpper(strings.TrimSpace(currency))
	if !storelink.ValidCountryCode(country) {
		return nil, storelink.Errorf(storelink.EINVALID, "country_code must be an ISO 3166-1 alpha-2 code such as DE.")
	}
	if !storelink.ValidCurrency(currency) {
		return nil, storelink.Errorf(storelink.EINVALID, "currency must be an ISO 4217 code such as EUR.")
	}
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if err := exists(ctx, tx, `SELECT 1 FROM partners WHERE id = ?`, partnerID); err != nil {
		return nil, notFound(err, "partner %q", partnerID)
	}
	if err := exists(ctx, tx, `SELECT 1 FROM clients WHERE partner_id = ? AND country_code = ?`, partnerID, country); err == nil {
		return nil, storelink.Errorf(storelink.ECONFLICT, "partner %s already has a client for country %s.", partnerID, country)
	}
	now := db.now()
	c := &storelink.NewClient{Client: storelink.Client{
		ID: storelink.NewID(now), PartnerID: partnerID, CountryCode: country, Currency: currency, CreatedAt: now,
	}}
	if _, err := tx.ExecContext(ctx, `INSERT INTO clients (id, partner_id, country_code, currency, created_at) VALUES (?, ?, ?, ?, ?)`,
		c.ID, partnerID, country, currency, ms(now)); err != nil {
		return nil, fmt.Errorf("insert client: %w", err)
	}
	key, err := insertKey(ctx, tx, c.ID, now)
	if err != nil {
		return nil, err
	}
	c.APIKey = key.APIKey
	return c, tx.Commit()
}

// Client returns a client with its stores, keys and capacity.
func (db *DB) Client(ctx context.Context, clientID string) (*storelink.ClientDetail, error) {
	d := &storelink.ClientDetail{}
	var created int64
	err := db.read.QueryRowContext(ctx, `SELECT id, partner_id, country_code, currency, created_at FROM clients WHERE id = ?`, clientID).
		Scan(&d.ID, &d.PartnerID, &d.CountryCode, &d.Currency, &created)
	if err != nil {
		return nil, notFound(err, "client %q", clientID)
	}
	d.CreatedAt = fromMS(created)
	if d.Stores, err = db.Stores(ctx, clientID); err != nil {
		return nil, err
	}
	rows, err := db.read.QueryContext(ctx, `SELECT id, prefix, created_at FROM api_keys WHERE client_id = ? ORDER BY created_at, id`, clientID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	d.APIKeys = []storelink.APIKey{}
	for rows.Next() {
		k := storelink.APIKey{ClientID: clientID}
		if err := rows.Scan(&k.ID, &k.Prefix, &created); err != nil {
			return nil, err
		}
		k.CreatedAt = fromMS(created)
		d.APIKeys = append(d.APIKeys, k)
	}
	return d, rows.Err()
}

// CreateAPIKey adds a further key; earlier keys stay valid.
func (db *DB) CreateAPIKey(ctx context.Context, clientID string) (*storelink.NewAPIKey, error) {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if err := exists(ctx, tx, `SELECT 1 FROM clients WHERE id = ?`, clientID); err != nil {
		return nil, notFound(err, "client %q", clientID)
	}
	k, err := insertKey(ctx, tx, clientID, db.now())
	if err != nil {
		return nil, err
	}
	return k, tx.Commit()
}

func insertKey(ctx context.Context, tx *sql.Tx, clientID string, now time.Time) (*storelink.NewAPIKey, error) {
	secret := storelink.NewAPIKeySecret()
	k := &storelink.NewAPIKey{KeyID: storelink.NewID(now), APIKey: secret}
	_, err := tx.ExecContext(ctx, `INSERT INTO api_keys (id, client_id, hash, prefix, created_at) VALUES (?, ?, ?, ?, ?)`,
		k.KeyID, clientID, storelink.HashAPIKey(secret), storelink.KeyPrefix(secret), ms(now))
	if err != nil {
		return nil, fmt.Errorf("insert api key: %w", err)
	}
	return k, nil
}

// DeleteAPIKey revokes a key at once.
func (db *DB) DeleteAPIKey(ctx context.Context, clientID, keyID string) error {
	res, err := db.write.ExecContext(ctx, `DELETE FROM api_keys WHERE client_id = ? AND id = ?`, clientID, keyID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return storelink.Errorf(storelink.ENOTFOUND, "API key %q of client %q not found.", keyID, clientID)
	}
	return nil
}

// PutStore creates a store or renames it.
func (db *DB) PutStore(ctx context.Context, clientID, storeID, name string) (*storelink.Store, bool, error) {
	if err := storelink.ValidateStoreID(storeID); err != nil {
		return nil, false, err
	}
	if err := storelink.CheckText("name", name); err != nil {
		return nil, false, err
	}
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, err
	}
	defer tx.Rollback()
	if err := exists(ctx, tx, `SELECT 1 FROM clients WHERE id = ?`, clientID); err != nil {
		return nil, false, notFound(err, "client %q", clientID)
	}
	now := db.now()
	s := &storelink.Store{ClientID: clientID, ID: storeID, Name: strings.TrimSpace(name), CreatedAt: now}
	var created int64
	err = tx.QueryRowContext(ctx, `SELECT created_at FROM stores WHERE client_id = ? AND id = ?`, clientID, storeID).Scan(&created)
	isNew := errors.Is(err, sql.ErrNoRows)
	switch {
	case isNew:
		_, err = tx.ExecContext(ctx, `INSERT INTO stores (client_id, id, name, created_at) VALUES (?, ?, ?, ?)`, clientID, storeID, s.Name, ms(now))
	case err == nil:
		s.CreatedAt = fromMS(created)
		_, err = tx.ExecContext(ctx, `UPDATE stores SET name = ? WHERE client_id = ? AND id = ?`, s.Name, clientID, storeID)
	}
	if err != nil {
		return nil, false, fmt.Errorf("put store: %w", err)
	}
	return s, isNew, tx.Commit()
}

// DeleteStore removes a store and its stock.
func (db *DB) DeleteStore(ctx context.Context, clientID, storeID string) error {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM stores WHERE client_id = ? AND id = ?`, clientID, storeID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return storelink.Errorf(storelink.ENOTFOUND, "store %q of client %q not found.", storeID, clientID)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM stock WHERE client_id = ? AND store_id = ?`, clientID, storeID); err != nil {
		return err
	}
	return tx.Commit()
}

// Stores lists a client's stores by id.
func (db *DB) Stores(ctx context.Context, clientID string) ([]storelink.Store, error) {
	return queryStores(ctx, db.read, clientID)
}

type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

func queryStores(ctx context.Context, q querier, clientID string) ([]storelink.Store, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, name, created_at FROM stores WHERE client_id = ? ORDER BY id`, clientID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	stores := []storelink.Store{}
	for rows.Next() {
		s := storelink.Store{ClientID: clientID}
		var created int64
		if err := rows.Scan(&s.ID, &s.Name, &created); err != nil {
			return nil, err
		}
		s.CreatedAt = fromMS(created)
		stores = append(stores, s)
	}
	return stores, rows.Err()
}

// Authenticate resolves an API key for a client id. A key of another
// partner is as good as none: only the partner's own key for another of its
// clients is told apart (EFORBIDDEN).
func (db *DB) Authenticate(ctx context.Context, clientID, apiKey string) (*storelink.Client, error) {
	unauthorized := storelink.Errorf(storelink.EUNAUTHORIZED, "A valid x-api-key header for this client is required.")
	if apiKey == "" {
		return nil, unauthorized
	}
	var keyClient, keyPartner string
	err := db.read.QueryRowContext(ctx, `SELECT k.client_id, c.partner_id FROM api_keys k JOIN clients c ON c.id = k.client_id
		WHERE k.hash = ?`, storelink.HashAPIKey(apiKey)).Scan(&keyClient, &keyPartner)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, unauthorized
	} else if err != nil {
		return nil, err
	}
	c := &storelink.Client{}
	var created int64
	err = db.read.QueryRowContext(ctx, `SELECT id, partner_id, country_code, currency, created_at FROM clients WHERE id = ?`, clientID).
		Scan(&c.ID, &c.PartnerID, &c.CountryCode, &c.Currency, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, unauthorized
	} else if err != nil {
		return nil, err
	}
	switch {
	case keyPartner != c.PartnerID:
		return nil, unauthorized
	case keyClient != clientID:
		return nil, storelink.Errorf(storelink.EFORBIDDEN, "This API key belongs to another client of the same partner.")
	}
	c.CreatedAt = fromMS(created)
	return c, nil
}

// exists returns sql.ErrNoRows when the query finds nothing.
func exists(ctx context.Context, q querier, query string, args ...any) error {
	var one int
	return q.QueryRowContext(ctx, query, args...).Scan(&one)
}

// notFound turns sql.ErrNoRows into ENOTFOUND and passes other errors on.
func notFound(err error, format string, args ...any) error {
	if errors.Is(err, sql.ErrNoRows) {
		return storelink.Errorf(storelink.ENOTFOUND, strings.ToUpper(format[:1])+format[1:]+" not found.", args...)
	}
	return err
}
