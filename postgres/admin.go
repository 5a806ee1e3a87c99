package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

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
	_, err := db.pool.Exec(ctx, `INSERT INTO partners (id, name, created_at) VALUES ($1, $2, $3)`, p.ID, p.Name, p.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("insert partner: %w", err)
	}
	return p, nil
}

// PartnerCount counts partners.
func (db *DB) PartnerCount(ctx context.Context) (int, error) {
	var n int
	err := db.pool.QueryRow(ctx, `SELECT count(*) FROM partners`).Scan(&n)
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
	conflict := storelink.Errorf(storelink.ECONFLICT, "partner %s already has a client for country %s.", partnerID, country)
	var c *storelink.NewClient
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		if err := exists(ctx, tx, `SELECT 1 FROM partners WHERE id = $1`, partnerID); err != nil {
			return notFound(err, "partner %q", partnerID)
		}
		now := db.now()
		c = &storelink.NewClient{Client: storelink.Client{
			ID: storelink.NewID(now), PartnerID: partnerID, CountryCode: country, Currency: currency, CreatedAt: now,
		}}
		// The unique key decides between two processes creating the same
		// client at once; ON CONFLICT keeps the transaction usable.
		tag, err := tx.Exec(ctx, `INSERT INTO clients (id, partner_id, country_code, currency, created_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (partner_id, country_code) DO NOTHING`, c.ID, partnerID, country, currency, now)
		if err != nil {
			return fmt.Errorf("insert client: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return conflict
		}
		key, err := insertKey(ctx, tx, c.ID, now)
		if err != nil {
			return err
		}
		c.APIKey = key.APIKey
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Client returns a client with its stores, keys and capacity.
func (db *DB) Client(ctx context.Context, clientID string) (*storelink.ClientDetail, error) {
	d := &storelink.ClientDetail{}
	err := db.pool.QueryRow(ctx, `SELECT id, partner_id, country_code, currency, created_at FROM clients WHERE id = $1`, clientID).
		Scan(&d.ID, &d.PartnerID, &d.CountryCode, &d.Currency, &d.CreatedAt)
	if err != nil {
		return nil, notFound(err, "client %q", clientID)
	}
	if d.Stores, err = db.Stores(ctx, clientID); err != nil {
		return nil, err
	}
	rows, err := db.pool.Query(ctx, `SELECT id, prefix, created_at FROM api_keys WHERE client_id = $1 ORDER BY created_at, id`, clientID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	d.APIKeys = []storelink.APIKey{}
	for rows.Next() {
		k := storelink.APIKey{ClientID: clientID}
		if err := rows.Scan(&k.ID, &k.Prefix, &k.CreatedAt); err != nil {
			return nil, err
		}
		d.APIKeys = append(d.APIKeys, k)
	}
	return d, rows.Err()
}

// CreateAPIKey adds a further key; earlier keys stay valid.
func (db *DB) CreateAPIKey(ctx context.Context, clientID string) (*storelink.NewAPIKey, error) {
	var k *storelink.NewAPIKey
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		if err := exists(ctx, tx, `SELECT 1 FROM clients WHERE id = $1`, clientID); err != nil {
			return notFound(err, "client %q", clientID)
		}
		var err error
		k, err = insertKey(ctx, tx, clientID, db.now())
		return err
	})
	if err != nil {
		return nil, err
	}
	return k, nil
}

func insertKey(ctx context.Context, tx pgx.Tx, clientID string, now time.Time) (*storelink.NewAPIKey, error) {
	secret := storelink.NewAPIKeySecret()
	k := &storelink.NewAPIKey{KeyID: storelink.NewID(now), APIKey: secret}
	_, err := tx.Exec(ctx, `INSERT INTO api_keys (id, client_id, hash, prefix, created_at) VALUES ($1, $2, $3, $4, $5)`,
		k.KeyID, clientID, storelink.HashAPIKey(secret), storelink.KeyPrefix(secret), now)
	if err != nil {
		return nil, fmt.Errorf("insert api key: %w", err)
	}
	return k, nil
}

// DeleteAPIKey revokes a key at once.
func (db *DB) DeleteAPIKey(ctx context.Context, clientID, keyID string) error {
	tag, err := db.pool.Exec(ctx, `DELETE FROM api_keys WHERE client_id = $1 AND id = $2`, clientID, keyID)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return storelink.Errorf(storelink.ENOTFOUND, "API key %q of client %q not found.", keyID, clientID)
	}
	return nil
}

// PutStore creates a store or renames it. One upsert decides between two
// processes putting the same store at once; xmax = 0 tells an inserted row
// from an updated one.
func (db *DB) PutStore(ctx context.Context, clientID, storeID, name string) (*storelink.Store, bool, error) {
	if err := storelink.ValidateStoreID(storeID); err != nil {
		return nil, false, err
	}
	if err := storelink.CheckText("name", name); err != nil {
		return nil, false, err
	}
	if err := exists(ctx, db.pool, `SELECT 1 FROM clients WHERE id = $1`, clientID); err != nil {
		return nil, false, notFound(err, "client %q", clientID)
	}
	s := &storelink.Store{ClientID: clientID, ID: storeID, Name: strings.TrimSpace(name)}
	var created bool
	err := db.pool.QueryRow(ctx, `INSERT INTO stores (client_id, id, name, created_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (client_id, id) DO UPDATE SET name = excluded.name
		RETURNING created_at, xmax = 0`, clientID, storeID, s.Name, db.now()).Scan(&s.CreatedAt, &created)
	if err != nil {
		return nil, false, fmt.Errorf("put store: %w", err)
	}
	return s, created, nil
}

// DeleteStore removes a store and its stock.
func (db *DB) DeleteStore(ctx context.Context, clientID, storeID string) error {
	return db.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM stores WHERE client_id = $1 AND id = $2`, clientID, storeID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return storelink.Errorf(storelink.ENOTFOUND, "store %q of client %q not found.", storeID, clientID)
		}
		_, err = tx.Exec(ctx, `DELETE FROM stock WHERE client_id = $1 AND store_id = $2`, clientID, storeID)
		return err
	})
}

// Stores lists a client's stores by id.
func (db *DB) Stores(ctx context.Context, clientID string) ([]storelink.Store, error) {
	return queryStores(ctx, db.pool, clientID)
}

func queryStores(ctx context.Context, q querier, clientID string) ([]storelink.Store, error) {
	rows, err := q.Query(ctx, `SELECT id, name, created_at FROM stores WHERE client_id = $1 ORDER BY id`, clientID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	stores := []storelink.Store{}
	for rows.Next() {
		s := storelink.Store{ClientID: clientID}
		if err := rows.Scan(&s.ID, &s.Name, &s.CreatedAt); err != nil {
			return nil, err
		}
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
	// One round trip: the key's client if it is of the same partner, and
	// the client asked for.
	var keyClient *string
	c := &storelink.Client{}
	err := db.pool.QueryRow(ctx, `SELECT (SELECT k.client_id FROM api_keys k JOIN clients kc ON kc.id = k.client_id
			WHERE k.hash = $2 AND kc.partner_id = clients.partner_id),
		id, partner_id, country_code, currency, created_at
		FROM clients WHERE id = $1`, clientID, storelink.HashAPIKey(apiKey)).
		Scan(&keyClient, &c.ID, &c.PartnerID, &c.CountryCode, &c.Currency, &c.CreatedAt)
	if noRows(err) {
		return nil, unauthorized
	} else if err != nil {
		return nil, err
	}
	switch {
	case keyClient == nil:
		return nil, unauthorized
	case *keyClient != clientID:
		return nil, storelink.Errorf(storelink.EFORBIDDEN, "This API key belongs to another client of the same partner.")
	}
	return c, nil
}
