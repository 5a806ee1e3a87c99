package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
	"storelink/service"
)

// partners is the driver of the partner calls (service.PartnerDriver):
// partners, clients, API keys, stores and sessions, on the pool or in a
// transaction of their own.
type partners struct{ db *DB }

var _ service.PartnerDriver = partners{}

// Begin starts a transaction at READ COMMITTED on a connection of the
// pool, waiting for one until ctx ends. Every statement is a round trip
// of its own, so that each error is the answer of the statement that
// caused it: no partner call is frequent enough for the round trips to
// count.
func (d partners) Begin(ctx context.Context) (service.PartnerTx, error) {
	tx, err := d.db.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return partnerTx{tx: tx}, nil
}

// Transient tells deadlock victims and serialization failures.
func (partners) Transient(err error) bool { return retryable(err) }

// partnerTx is a transaction of the partner calls.
type partnerTx struct{ tx pgx.Tx }

// Commit commits.
func (t partnerTx) Commit(ctx context.Context) error { return t.tx.Commit(ctx) }

// Rollback rolls back; after Commit it does nothing.
func (t partnerTx) Rollback(ctx context.Context) error { return rollbackUnlessDone(ctx, t.tx) }

// rollbackUnlessDone rolls tx back, unless it ended already.
func rollbackUnlessDone(ctx context.Context, tx pgx.Tx) error {
	if err := tx.Rollback(ctx); !errors.Is(err, pgx.ErrTxClosed) {
		return err
	}
	return nil
}

// GetClient, ClientExists and Stores of the webhooks' driver are the
// partners' reads, which other areas make too.

// GetClient reads a client on the pool.
func (d *webhooks) GetClient(ctx context.Context, id string) (*storelink.Client, error) {
	return partners{d.db}.GetClient(ctx, id)
}

// ClientExists looks the client up on the pool.
func (d *webhooks) ClientExists(ctx context.Context, id string) (bool, error) {
	return partners{d.db}.ClientExists(ctx, id)
}

// Stores reads a client's stores on the pool.
func (d *webhooks) Stores(ctx context.Context, clientID string) ([]storelink.Store, error) {
	return partners{d.db}.Stores(ctx, clientID)
}

// PartnerCount counts partners on the pool.
func (d partners) PartnerCount(ctx context.Context) (int, error) {
	var n int
	err := d.db.pool.QueryRow(ctx, `SELECT count(*) FROM partners`).Scan(&n)
	return n, err
}

// GetClient reads a client on the pool.
func (d partners) GetClient(ctx context.Context, id string) (*storelink.Client, error) {
	c := &storelink.Client{}
	err := d.db.pool.QueryRow(ctx, `SELECT id, partner_id, country_code, currency, created_at FROM clients WHERE id = $1`, id).
		Scan(&c.ID, &c.PartnerID, &c.CountryCode, &c.Currency, &c.CreatedAt)
	if err != nil {
		return nil, noRow(err)
	}
	return c, nil
}

// ClientExists looks the client up on the pool.
func (d partners) ClientExists(ctx context.Context, id string) (bool, error) {
	return found(exists(ctx, d.db.pool, `SELECT 1 FROM clients WHERE id = $1`, id))
}

// Stores reads a client's stores on the pool (an error of Query comes back
// from CollectRows, as pgx means it to); pgx scans the columns into
// the fields in their order.
func (d partners) Stores(ctx context.Context, clientID string) ([]storelink.Store, error) {
	rows, _ := d.db.pool.Query(ctx, `SELECT client_id, id, name, created_at FROM stores WHERE client_id = $1 ORDER BY id`, clientID)
	return pgx.CollectRows(rows, pgx.RowToStructByPos[storelink.Store])
}

// APIKeys reads a client's keys on the pool, scanned as Stores are.
func (d partners) APIKeys(ctx context.Context, clientID string) ([]storelink.APIKey, error) {
	rows, _ := d.db.pool.Query(ctx, `SELECT id, client_id, prefix, created_at, last_used_at FROM api_keys WHERE client_id = $1 ORDER BY created_at, id`, clientID)
	return pgx.CollectRows(rows, pgx.RowToStructByPos[storelink.APIKey])
}

// TouchAPIKeys writes the uses in one statement.
func (d partners) TouchAPIKeys(ctx context.Context, uses []service.KeyUse) error {
	hashes, at := make([]string, len(uses)), make([]time.Time, len(uses))
	for i, u := range uses {
		hashes[i], at[i] = u.Hash, u.At
	}
	_, err := d.db.pool.Exec(ctx, `UPDATE api_keys k SET last_used_at = greatest(k.last_used_at, u.at)
		FROM unnest($1::text[], $2::timestamptz[]) AS u (hash, at) WHERE k.hash = u.hash`, hashes, at)
	return err
}

// KeyClient reads the client and the key's client in one round trip.
func (d partners) KeyClient(ctx context.Context, clientID, keyHash string) (*service.KeyMatch, error) {
	var keyClient, keyPartner *string
	m := &service.KeyMatch{}
	c := &m.Client
	err := d.db.pool.QueryRow(ctx, `SELECT k.client_id, kc.partner_id, c.id, c.partner_id, c.country_code, c.currency, c.created_at
		FROM clients c LEFT JOIN api_keys k ON k.hash = $2 LEFT JOIN clients kc ON kc.id = k.client_id
		WHERE c.id = $1`, clientID, keyHash).
		Scan(&keyClient, &keyPartner, &c.ID, &c.PartnerID, &c.CountryCode, &c.Currency, &c.CreatedAt)
	if err != nil {
		return nil, noRow(err)
	}
	if keyClient == nil || keyPartner == nil {
		return nil, service.ErrNotFound
	}
	m.HolderClientID, m.HolderPartnerID = *keyClient, *keyPartner
	return m, nil
}

// InsertPartner writes a partner on the pool.
func (d partners) InsertPartner(ctx context.Context, p *storelink.Partner) error {
	_, err := d.db.pool.Exec(ctx, `INSERT INTO partners (id, name, created_at) VALUES ($1, $2, $3)`, p.ID, p.Name, p.CreatedAt)
	return err
}

// DeleteAPIKey deletes a key on the pool.
func (d partners) DeleteAPIKey(ctx context.Context, clientID, keyID string) (bool, error) {
	tag, err := d.db.pool.Exec(ctx, `DELETE FROM api_keys WHERE client_id = $1 AND id = $2`, clientID, keyID)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

// PutStore is one upsert, which decides between two processes putting the
// same store at once; xmax = 0 tells an inserted row from an updated one.
func (d partners) PutStore(ctx context.Context, s *storelink.Store) (bool, error) {
	var created bool
	err := d.db.pool.QueryRow(ctx, `INSERT INTO stores (client_id, id, name, created_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (client_id, id) DO UPDATE SET name = excluded.name
		RETURNING created_at, xmax = 0`, s.ClientID, s.ID, s.Name, s.CreatedAt).Scan(&s.CreatedAt, &created)
	return created, err
}

// PartnerExists looks the partner up as committed when the statement runs.
func (t partnerTx) PartnerExists(ctx context.Context, id string) (bool, error) {
	return found(exists(ctx, t.tx, `SELECT 1 FROM partners WHERE id = $1`, id))
}

// ClientExists looks the client up as committed when the statement runs.
func (t partnerTx) ClientExists(ctx context.Context, id string) (bool, error) {
	return found(exists(ctx, t.tx, `SELECT 1 FROM clients WHERE id = $1`, id))
}

// InsertClient lets the unique key decide between two processes creating
// the same client at once; ON CONFLICT keeps the transaction usable.
func (t partnerTx) InsertClient(ctx context.Context, c *storelink.Client) (bool, error) {
	tag, err := t.tx.Exec(ctx, `INSERT INTO clients (id, partner_id, country_code, currency, created_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (partner_id, country_code) DO NOTHING`, c.ID, c.PartnerID, c.CountryCode, c.Currency, c.CreatedAt)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

// LockAPIKeys locks the client's row, which every change of its keys
// that counts them locks first, then counts its keys: in a statement of
// its own, whose snapshot is taken once the lock is held, so that it sees
// what the transaction it waited for committed.
func (t partnerTx) LockAPIKeys(ctx context.Context, clientID string) (int, error) {
	if ok, err := found(exists(ctx, t.tx, `SELECT 1 FROM clients WHERE id = $1 FOR UPDATE`, clientID)); err != nil {
		return 0, err
	} else if !ok {
		return 0, service.ErrNotFound
	}
	var n int
	err := t.tx.QueryRow(ctx, `SELECT count(*) FROM api_keys WHERE client_id = $1`, clientID).Scan(&n)
	return n, err
}

// DeleteAPIKey deletes a key's row in the transaction.
func (t partnerTx) DeleteAPIKey(ctx context.Context, clientID, keyID string) (bool, error) {
	tag, err := t.tx.Exec(ctx, `DELETE FROM api_keys WHERE client_id = $1 AND id = $2`, clientID, keyID)
	return tag.RowsAffected() > 0, err
}

// InsertAPIKey writes a key's row; the hash is unique.
func (t partnerTx) InsertAPIKey(ctx context.Context, k storelink.APIKey, hash string) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO api_keys (id, client_id, hash, prefix, created_at) VALUES ($1, $2, $3, $4, $5)`,
		k.ID, k.ClientID, hash, k.Prefix, k.CreatedAt)
	return err
}

// DeleteStore deletes a store's row and tells by the command tag.
func (t partnerTx) DeleteStore(ctx context.Context, clientID, storeID string) (bool, error) {
	tag, err := t.tx.Exec(ctx, `DELETE FROM stores WHERE client_id = $1 AND id = $2`, clientID, storeID)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

// DeleteStoreStock deletes the rows committed when it runs.
func (t partnerTx) DeleteStoreStock(ctx context.Context, clientID, storeID string) error {
	_, err := t.tx.Exec(ctx, `DELETE FROM stock WHERE client_id = $1 AND store_id = $2`, clientID, storeID)
	return err
}
