package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"storelink"
	"storelink/service"
)

// partners is the driver of the partner calls (service.PartnerDriver):
// partners, clients, API keys, stores and sessions. Reads go to the read
// pool; writes, alone or in a transaction, to the write pool.
type partners struct{ db *DB }

var _ service.PartnerDriver = partners{}

// Begin starts a write transaction (BEGIN IMMEDIATE: the write lock) on
// the write pool, waiting for its connection until ctx ends.
func (d partners) Begin(ctx context.Context) (service.PartnerTx, error) {
	tx, err := d.db.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return partnerTx{tx: tx}, nil
}

// Transient is always false: with one writer no transaction is ever a
// deadlock's victim.
func (partners) Transient(error) bool { return false }

// partnerTx is a transaction of the partner calls: statements on the one
// write connection, each answering for itself.
type partnerTx struct{ tx *sql.Tx }

// Commit commits.
func (t partnerTx) Commit(context.Context) error { return t.tx.Commit() }

// Rollback rolls back; after Commit it does nothing.
func (t partnerTx) Rollback(context.Context) error { return rollbackUnlessDone(t.tx) }

// rollbackUnlessDone rolls tx back, unless it ended already.
func rollbackUnlessDone(tx *sql.Tx) error {
	if err := tx.Rollback(); !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}

// GetClient, ClientExists and Stores of the webhooks' driver are the
// partners' reads, which other areas make too.

// GetClient reads a client from the read pool.
func (d *webhooks) GetClient(ctx context.Context, id string) (*storelink.Client, error) {
	return partners{d.db}.GetClient(ctx, id)
}

// ClientExists looks the client up in the read pool.
func (d *webhooks) ClientExists(ctx context.Context, id string) (bool, error) {
	return partners{d.db}.ClientExists(ctx, id)
}

// Stores reads a client's stores from the read pool.
func (d *webhooks) Stores(ctx context.Context, clientID string) ([]storelink.Store, error) {
	return partners{d.db}.Stores(ctx, clientID)
}

// PartnerCount counts partners.
func (d partners) PartnerCount(ctx context.Context) (int, error) {
	var n int
	err := d.db.read.QueryRowContext(ctx, `SELECT count(*) FROM partners`).Scan(&n)
	return n, err
}

// GetClient reads a client from the read pool.
func (d partners) GetClient(ctx context.Context, id string) (*storelink.Client, error) {
	c := &storelink.Client{}
	var created int64
	err := d.db.read.QueryRowContext(ctx, clientSQL, id).Scan(&c.ID, &c.PartnerID, &c.CountryCode, &c.Currency, &created)
	if err != nil {
		return nil, noRow(err)
	}
	c.CreatedAt = fromMS(created)
	return c, nil
}

// ClientExists looks the client up in the read pool: clients are never
// deleted, so no writer can make the answer wrong.
func (d partners) ClientExists(ctx context.Context, id string) (bool, error) {
	return found(exists(ctx, d.db.read, `SELECT 1 FROM clients WHERE id = ?`, id))
}

// Stores reads a client's stores from the read pool.
func (d partners) Stores(ctx context.Context, clientID string) ([]storelink.Store, error) {
	return queryStores(ctx, d.db.read, clientID)
}

// APIKeys reads a client's keys from the read pool.
func (d partners) APIKeys(ctx context.Context, clientID string) ([]storelink.APIKey, error) {
	rows, err := d.db.read.QueryContext(ctx, `SELECT id, prefix, created_at, last_used_at FROM api_keys WHERE client_id = ? ORDER BY created_at, id`, clientID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	keys := []storelink.APIKey{}
	for rows.Next() {
		k := storelink.APIKey{ClientID: clientID}
		var created int64
		var used sql.NullInt64
		if err := rows.Scan(&k.ID, &k.Prefix, &created, &used); err != nil {
			return nil, err
		}
		k.CreatedAt, k.LastUsedAt = fromMS(created), fromNullMS(used)
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// TouchAPIKeys writes the uses in one statement on the write pool.
func (d partners) TouchAPIKeys(ctx context.Context, uses []service.KeyUse) error {
	hashes, at := make([]string, len(uses)), make([]int64, len(uses))
	for i, u := range uses {
		hashes[i], at[i] = u.Hash, ms(u.At)
	}
	h, _ := json.Marshal(hashes)
	a, _ := json.Marshal(at)
	_, err := d.db.write.ExecContext(ctx, `UPDATE api_keys SET last_used_at = max(coalesce(last_used_at, 0), u.at)
		FROM (SELECT h.value AS hash, a.value AS at FROM json_each(?1) h JOIN json_each(?2) a ON a.key = h.key) u
		WHERE api_keys.hash = u.hash`, string(h), string(a))
	return err
}

// KeyClient looks the key up first and the client only for a known key:
// two statements, since a statement costs no round trip here.
func (d partners) KeyClient(ctx context.Context, clientID, keyHash string) (*service.KeyMatch, error) {
	m := &service.KeyMatch{}
	err := d.db.read.QueryRowContext(ctx, `SELECT k.client_id, c.partner_id FROM api_keys k JOIN clients c ON c.id = k.client_id
		WHERE k.hash = ?`, keyHash).Scan(&m.HolderClientID, &m.HolderPartnerID)
	if err != nil {
		return nil, noRow(err)
	}
	c, err := d.GetClient(ctx, clientID)
	if err != nil {
		return nil, err
	}
	m.Client = *c
	return m, nil
}

// InsertPartner writes a partner on the write pool.
func (d partners) InsertPartner(ctx context.Context, p *storelink.Partner) error {
	_, err := d.db.write.ExecContext(ctx, `INSERT INTO partners (id, name, created_at) VALUES (?, ?, ?)`, p.ID, p.Name, ms(p.CreatedAt))
	return err
}

// DeleteAPIKey deletes a key on the write pool.
func (d partners) DeleteAPIKey(ctx context.Context, clientID, keyID string) (bool, error) {
	res, err := d.db.write.ExecContext(ctx, `DELETE FROM api_keys WHERE client_id = ? AND id = ?`, clientID, keyID)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// PutStore reads the store and inserts or renames it, in a transaction of
// its own: with one writer nobody comes between the read and the write.
func (d partners) PutStore(ctx context.Context, s *storelink.Store) (bool, error) {
	tx, err := d.db.write.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	var created int64
	err = tx.QueryRowContext(ctx, `SELECT created_at FROM stores WHERE client_id = ? AND id = ?`, s.ClientID, s.ID).Scan(&created)
	isNew := errors.Is(err, sql.ErrNoRows)
	switch {
	case isNew:
		_, err = tx.ExecContext(ctx, `INSERT INTO stores (client_id, id, name, created_at) VALUES (?, ?, ?, ?)`, s.ClientID, s.ID, s.Name, ms(s.CreatedAt))
	case err == nil:
		s.CreatedAt = fromMS(created)
		_, err = tx.ExecContext(ctx, `UPDATE stores SET name = ? WHERE client_id = ? AND id = ?`, s.Name, s.ClientID, s.ID)
	}
	if err != nil {
		return false, err
	}
	return isNew, tx.Commit()
}

// PartnerExists looks the partner up in the transaction.
func (t partnerTx) PartnerExists(ctx context.Context, id string) (bool, error) {
	return found(exists(ctx, t.tx, `SELECT 1 FROM partners WHERE id = ?`, id))
}

// ClientExists looks the client up in the transaction.
func (t partnerTx) ClientExists(ctx context.Context, id string) (bool, error) {
	return found(exists(ctx, t.tx, `SELECT 1 FROM clients WHERE id = ?`, id))
}

// InsertClient lets the unique key of partner and country decide, as on
// PostgreSQL; ON CONFLICT keeps the transaction usable.
func (t partnerTx) InsertClient(ctx context.Context, c *storelink.Client) (bool, error) {
	res, err := t.tx.ExecContext(ctx, `INSERT INTO clients (id, partner_id, country_code, currency, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (partner_id, country_code) DO NOTHING`, c.ID, c.PartnerID, c.CountryCode, c.Currency, ms(c.CreatedAt))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// LockAPIKeys counts the keys in the transaction, which holds the write
// lock already.
func (t partnerTx) LockAPIKeys(ctx context.Context, clientID string) (int, error) {
	var n int
	err := t.tx.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM api_keys WHERE client_id = c.id) FROM clients c WHERE c.id = ?`, clientID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, service.ErrNotFound
	}
	return n, err
}

// DeleteAPIKey deletes a key's row in the transaction.
func (t partnerTx) DeleteAPIKey(ctx context.Context, clientID, keyID string) (bool, error) {
	res, err := t.tx.ExecContext(ctx, `DELETE FROM api_keys WHERE client_id = ? AND id = ?`, clientID, keyID)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// InsertAPIKey writes a key's row.
func (t partnerTx) InsertAPIKey(ctx context.Context, k storelink.APIKey, hash string) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO api_keys (id, client_id, hash, prefix, created_at) VALUES (?, ?, ?, ?, ?)`,
		k.ID, k.ClientID, hash, k.Prefix, ms(k.CreatedAt))
	return err
}

// DeleteStore deletes a store's row.
func (t partnerTx) DeleteStore(ctx context.Context, clientID, storeID string) (bool, error) {
	res, err := t.tx.ExecContext(ctx, `DELETE FROM stores WHERE client_id = ? AND id = ?`, clientID, storeID)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// DeleteStoreStock deletes a store's stock rows.
func (t partnerTx) DeleteStoreStock(ctx context.Context, clientID, storeID string) error {
	_, err := t.tx.ExecContext(ctx, `DELETE FROM stock WHERE client_id = ? AND store_id = ?`, clientID, storeID)
	return err
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

// exists returns sql.ErrNoRows when the query finds nothing.
func exists(ctx context.Context, q querier, query string, args ...any) error {
	var one int
	return q.QueryRowContext(ctx, query, args...).Scan(&one)
}

// found turns the answer of exists into whether a row was found.
func found(err error) (bool, error) {
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}
