package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"storelink"
)

var (
	_ storelink.AdminService  = (*Partners)(nil)
	_ storelink.Authenticator = (*Partners)(nil)
	_ storelink.SessionStore  = (*Partners)(nil)
)

// Partners are the operator's calls on partners, clients, API keys and
// stores, the authentication of API keys, and the sessions of the
// dashboard and the portal.
type Partners struct {
	config
	d    PartnerDriver
	uses *keyUses
}

// PartnerDriver is what the partner calls ask of a database: the rows of
// partners, clients, API keys, stores and sessions, read or written alone,
// and write transactions (PartnerTx) for the calls that write more than one
// row. A driver may still run one of the single calls as a transaction of
// its own when its database needs that to keep it whole.
type PartnerDriver interface {
	// Begin starts a write transaction; it returns ctx's error when ctx
	// ends before the transaction could begin. The caller ends it with
	// Commit or Rollback; Rollback after Commit does nothing.
	Begin(ctx context.Context) (PartnerTx, error)
	// Transient tells whether err ended a transaction for a reason that a
	// fresh try of the same work can avoid, such as a deadlock between
	// writers: the service then runs the transaction again.
	Transient(err error) bool

	// PartnerCount counts the partners.
	PartnerCount(ctx context.Context) (int, error)
	// Partners returns every partner ordered by name, then id, bytewise.
	Partners(ctx context.Context) ([]storelink.Partner, error)
	// Clients returns every client ordered by partner id, then country
	// code, bytewise.
	Clients(ctx context.Context) ([]storelink.Client, error)
	// ListPartners returns up to limit partners ordered by name, then id,
	// bytewise, after the key after (nil: from the start), whose id or
	// name holds q once its letters A to Z are lower case (q is folded
	// so; "" matches all). Never nil.
	ListPartners(ctx context.Context, q string, after *storelink.ListCursor, limit int) ([]storelink.Partner, error)
	// ListClients returns a page of clients, with their partner's name, as
	// p asks. Never nil.
	ListClients(ctx context.Context, p ListClientsParams) ([]storelink.ClientListing, error)
	// GetClient returns a client, or ErrNotFound.
	GetClient(ctx context.Context, id string) (*storelink.Client, error)
	// ClientExists tells whether a client of that id exists.
	ClientExists(ctx context.Context, id string) (bool, error)
	// Stores returns a client's stores ordered by id, never nil.
	Stores(ctx context.Context, clientID string) ([]storelink.Store, error)
	// APIKeys returns a client's keys, oldest first, never nil.
	APIKeys(ctx context.Context, clientID string) ([]storelink.APIKey, error)
	// TouchAPIKeys sets when each key of uses, known by its hash, was last
	// used, unless a later time is recorded; an unknown hash (a key
	// revoked since) is passed over.
	TouchAPIKeys(ctx context.Context, uses []KeyUse) error
	// KeyClient returns the client clientID with the ids of the client
	// that holds the API key of hash keyHash and of its partner. It
	// returns ErrNotFound when there is no client clientID or no such key.
	KeyClient(ctx context.Context, clientID, keyHash string) (*KeyMatch, error)
	// ClientFigures returns every client with its partner's name and its
	// figures as p counts them, ordered as ListClients. Never nil.
	ClientFigures(ctx context.Context, p ClientFiguresParams) ([]ClientFigures, error)
	// GetSession returns the client of the session of that id hash ("" for
	// the operator's) when the session expires after now and, for a
	// client's, its key hash is still the hash of a key of that client;
	// ErrNotFound otherwise.
	GetSession(ctx context.Context, idHash []byte, now time.Time) (clientID string, err error)

	// InsertPartner writes a new partner.
	InsertPartner(ctx context.Context, p *storelink.Partner) error
	// DeleteAPIKey deletes a client's key and tells whether there was one.
	DeleteAPIKey(ctx context.Context, clientID, keyID string) (bool, error)
	// PutStore writes a store of an existing client: a new one made at
	// s.CreatedAt, or a new name for the one of that id, whose creation
	// time it then sets in s. created tells which. Two calls for one new
	// store at once make it once.
	PutStore(ctx context.Context, s *storelink.Store) (created bool, err error)
	// DeleteSession deletes a session, if there is one.
	DeleteSession(ctx context.Context, idHash []byte) error
}

// PartnerTx is one write transaction of a PartnerDriver. Its row methods
// see what it wrote; nothing of it is seen by others before Commit. An
// error is the answer of the call that returns it.
type PartnerTx interface {
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error

	// PartnerExists tells whether a partner of that id exists.
	PartnerExists(ctx context.Context, id string) (bool, error)
	// ClientExists tells whether a client of that id exists.
	ClientExists(ctx context.Context, id string) (bool, error)
	// InsertClient writes a new client, unless its partner has a client
	// for its country already: then it writes nothing and returns false.
	InsertClient(ctx context.Context, c *storelink.Client) (inserted bool, err error)
	// LockAPIKeys counts a client's keys and keeps every other
	// transaction that locks them waiting until this one ends; ErrNotFound
	// for no client.
	LockAPIKeys(ctx context.Context, clientID string) (int, error)
	// InsertAPIKey writes a client's key: its hash, never the key.
	InsertAPIKey(ctx context.Context, k storelink.APIKey, hash string) error
	// DeleteAPIKey deletes a client's key and tells whether there was one.
	DeleteAPIKey(ctx context.Context, clientID, keyID string) (bool, error)
	// DeleteStore deletes a client's store and tells whether there was
	// one; its stock is DeleteStoreStock's.
	DeleteStore(ctx context.Context, clientID, storeID string) (bool, error)
	// DeleteStoreStock deletes the stock rows of a client's store.
	DeleteStoreStock(ctx context.Context, clientID, storeID string) error
	// DeleteExpiredSessions deletes the sessions that expire at or before
	// now.
	DeleteExpiredSessions(ctx context.Context, now time.Time) error
	// InsertSession writes a session.
	InsertSession(ctx context.Context, s SessionRow) error
}

// ListClientsParams select a page of clients: up to Limit of them ordered
// by partner id, then country code, bytewise, after the key After (nil:
// from the start), of PartnerID when it is not "", whose id, country code,
// partner id or partner name holds Q as ListPartners matches it.
type ListClientsParams struct {
	PartnerID, Q string
	After        *storelink.ListCursor
	Limit        int
}

// ClientFiguresParams say which clients ClientFigures returns and what it
// counts: the clients whose id, country code, partner id or partner name
// holds Q as ListPartners matches it; FailedDeliveries counts the
// deliveries in state Failed of the endpoints not deleted, and
// RejectedUploads the uploads in status Rejected received at or after
// RejectedSince.
type ClientFiguresParams struct {
	Q             string
	Failed        storelink.DeliveryState
	Rejected      storelink.UploadStatus
	RejectedSince time.Time
}

// KeyMatch is what KeyClient finds: the client asked for, and the client
// that holds the key with its partner, which Authenticate compares.
type KeyMatch struct {
	Client                          storelink.Client
	HolderClientID, HolderPartnerID string
}

// SessionRow is a session as stored: the operator's when ClientID is "",
// else a client's, opened with the API key of hash KeyHash.
type SessionRow struct {
	IDHash            []byte
	ClientID, KeyHash string
	Expires           time.Time
}

// CreatePartner adds a partner.
func (s *Partners) CreatePartner(ctx context.Context, name string) (*storelink.Partner, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return nil, storelink.Errorf(storelink.EINVALID, "name is required.")
	}
	if err := storelink.CheckName("name", name); err != nil {
		return nil, err
	}
	now := s.now()
	p := &storelink.Partner{ID: storelink.NewID(now), Name: name, CreatedAt: now}
	if err := s.d.InsertPartner(ctx, p); err != nil {
		return nil, fmt.Errorf("insert partner: %w", err)
	}
	return p, nil
}

// PartnerCount counts partners.
func (s *Partners) PartnerCount(ctx context.Context) (int, error) { return s.d.PartnerCount(ctx) }

// Partners lists every partner by name.
func (s *Partners) Partners(ctx context.Context) ([]storelink.Partner, error) {
	return s.d.Partners(ctx)
}

// Clients lists every client by partner and country.
func (s *Partners) Clients(ctx context.Context) ([]storelink.Client, error) { return s.d.Clients(ctx) }

// ListPartners is a page of partners by name (storelink.PartnerFilter).
func (s *Partners) ListPartners(ctx context.Context, f storelink.PartnerFilter) (*storelink.PartnerPage, error) {
	after, err := listCursor(f.After, f.Limit)
	if err != nil {
		return nil, err
	}
	rows, err := s.d.ListPartners(ctx, storelink.FoldQuery(f.Q), after, f.Limit+1)
	if err != nil {
		return nil, err
	}
	p := &storelink.PartnerPage{Partners: rows}
	if len(rows) > f.Limit {
		p.Partners = rows[:f.Limit]
		last := p.Partners[f.Limit-1]
		p.NextCursor = storelink.ListCursor{First: last.Name, Second: last.ID}.String()
	}
	return p, nil
}

// ListClients is a page of clients by partner and country
// (storelink.ClientFilter).
func (s *Partners) ListClients(ctx context.Context, f storelink.ClientFilter) (*storelink.ClientPage, error) {
	after, err := listCursor(f.After, f.Limit)
	if err != nil {
		return nil, err
	}
	rows, err := s.d.ListClients(ctx, ListClientsParams{PartnerID: f.PartnerID, Q: storelink.FoldQuery(f.Q), After: after, Limit: f.Limit + 1})
	if err != nil {
		return nil, err
	}
	p := &storelink.ClientPage{Clients: rows}
	if len(rows) > f.Limit {
		p.Clients = rows[:f.Limit]
		last := p.Clients[f.Limit-1]
		p.NextCursor = storelink.ListCursor{First: last.PartnerID, Second: last.CountryCode}.String()
	}
	return p, nil
}

// listCursor checks a list's page size and reads its cursor, nil for none.
func listCursor(after string, limit int) (*storelink.ListCursor, error) {
	if limit < 1 {
		return nil, storelink.Errorf(storelink.EINVALID, "limit must be at least 1.")
	}
	if after == "" {
		return nil, nil
	}
	c, err := storelink.ParseListCursor("after", after)
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// CreateClient adds a client for one country with its first API key.
func (s *Partners) CreateClient(ctx context.Context, partnerID, country, currency string) (*storelink.NewClient, error) {
	country, currency = strings.ToUpper(strings.TrimSpace(country)), strings.ToUpper(strings.TrimSpace(currency))
	if !storelink.ValidCountryCode(country) {
		return nil, storelink.Errorf(storelink.EINVALID, "country_code must be an ISO 3166-1 alpha-2 code such as DE.")
	}
	if !storelink.ValidCurrency(currency) {
		return nil, storelink.Errorf(storelink.EINVALID, "currency must be an ISO 4217 code such as EUR.")
	}
	var c *storelink.NewClient
	err := inTx(ctx, s.d, func(tx PartnerTx) error {
		if ok, err := tx.PartnerExists(ctx, partnerID); err != nil {
			return err
		} else if !ok {
			return storelink.Errorf(storelink.ENOTFOUND, "Partner %q not found.", partnerID)
		}
		now := s.now()
		c = &storelink.NewClient{Client: storelink.Client{
			ID: storelink.NewID(now), PartnerID: partnerID, CountryCode: country, Currency: currency, CreatedAt: now,
		}}
		if ok, err := tx.InsertClient(ctx, &c.Client); err != nil {
			return fmt.Errorf("insert client: %w", err)
		} else if !ok {
			return storelink.Errorf(storelink.ECONFLICT, "partner %s already has a client for country %s.", partnerID, country)
		}
		key, err := insertKey(ctx, tx, c.ID, now)
		if err != nil {
			return err
		}
		c.KeyID, c.APIKey = key.KeyID, key.APIKey
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Client returns a client with its stores and keys; the HTTP API adds its
// capacity, which is the uploads' to tell.
func (s *Partners) Client(ctx context.Context, clientID string) (*storelink.ClientDetail, error) {
	c, err := s.d.GetClient(ctx, clientID)
	if errors.Is(err, ErrNotFound) {
		return nil, storelink.Errorf(storelink.ENOTFOUND, "Client %q not found.", clientID)
	} else if err != nil {
		return nil, err
	}
	d := &storelink.ClientDetail{Client: *c}
	if d.Stores, err = s.d.Stores(ctx, clientID); err != nil {
		return nil, err
	}
	if d.APIKeys, err = s.d.APIKeys(ctx, clientID); err != nil {
		return nil, err
	}
	return d, nil
}

// CreateAPIKey adds a further key; earlier keys stay valid. A client has
// at most storelink.MaxAPIKeys keys: one more is ECONFLICT.
func (s *Partners) CreateAPIKey(ctx context.Context, clientID string) (*storelink.NewAPIKey, error) {
	var k *storelink.NewAPIKey
	err := inTx(ctx, s.d, func(tx PartnerTx) error {
		n, err := tx.LockAPIKeys(ctx, clientID)
		if errors.Is(err, ErrNotFound) {
			return storelink.Errorf(storelink.ENOTFOUND, "Client %q not found.", clientID)
		} else if err != nil {
			return err
		}
		if n >= storelink.MaxAPIKeys {
			return storelink.Errorf(storelink.ECONFLICT, "Client %q has %d API keys, the most it may have: revoke one first.", clientID, n)
		}
		k, err = insertKey(ctx, tx, clientID, s.now())
		return err
	})
	if err != nil {
		return nil, err
	}
	return k, nil
}

// insertKey makes a new key of a client and writes its hash.
func insertKey(ctx context.Context, tx PartnerTx, clientID string, now time.Time) (*storelink.NewAPIKey, error) {
	secret := storelink.NewAPIKeySecret()
	k := &storelink.NewAPIKey{KeyID: storelink.NewID(now), APIKey: secret}
	row := storelink.APIKey{ID: k.KeyID, ClientID: clientID, Prefix: storelink.KeyPrefix(secret), CreatedAt: now}
	if err := tx.InsertAPIKey(ctx, row, storelink.HashAPIKey(secret)); err != nil {
		return nil, fmt.Errorf("insert api key: %w", err)
	}
	return k, nil
}

// DeleteAPIKey revokes a key at once.
func (s *Partners) DeleteAPIKey(ctx context.Context, clientID, keyID string) error {
	ok, err := s.d.DeleteAPIKey(ctx, clientID, keyID)
	if err != nil {
		return err
	} else if !ok {
		return storelink.Errorf(storelink.ENOTFOUND, "API key %q of client %q not found.", keyID, clientID)
	}
	return nil
}

// RevokeOwnAPIKey revokes a key at the client's own request: as
// DeleteAPIKey, except that the client's last key stays (ECONFLICT), since
// without one the client could no longer call at all.
func (s *Partners) RevokeOwnAPIKey(ctx context.Context, clientID, keyID string) error {
	return inTx(ctx, s.d, func(tx PartnerTx) error {
		n, err := tx.LockAPIKeys(ctx, clientID)
		if errors.Is(err, ErrNotFound) {
			return storelink.Errorf(storelink.ENOTFOUND, "Client %q not found.", clientID)
		} else if err != nil {
			return err
		}
		ok, err := tx.DeleteAPIKey(ctx, clientID, keyID)
		if err != nil {
			return err
		} else if !ok {
			return storelink.Errorf(storelink.ENOTFOUND, "API key %q of client %q not found.", keyID, clientID)
		}
		if n <= 1 {
			return storelink.Errorf(storelink.ECONFLICT, "API key %q is the last key of client %q: create another before revoking it.", keyID, clientID)
		}
		return nil
	})
}

// APIKeys lists a client's keys, oldest first: their ids, prefixes and
// creation times, never the keys.
func (s *Partners) APIKeys(ctx context.Context, clientID string) ([]storelink.APIKey, error) {
	return s.d.APIKeys(ctx, clientID)
}

// PutStore creates a store or renames it.
func (s *Partners) PutStore(ctx context.Context, clientID, storeID, name string) (*storelink.Store, bool, error) {
	if err := storelink.ValidateStoreID(storeID); err != nil {
		return nil, false, err
	}
	if err := storelink.CheckName("name", name); err != nil {
		return nil, false, err
	}
	if ok, err := s.d.ClientExists(ctx, clientID); err != nil {
		return nil, false, err
	} else if !ok {
		return nil, false, storelink.Errorf(storelink.ENOTFOUND, "Client %q not found.", clientID)
	}
	st := &storelink.Store{ClientID: clientID, ID: storeID, Name: strings.TrimSpace(name), CreatedAt: s.now()}
	created, err := s.d.PutStore(ctx, st)
	if err != nil {
		return nil, false, fmt.Errorf("put store: %w", err)
	}
	return st, created, nil
}

// DeleteStore removes a store and its stock.
func (s *Partners) DeleteStore(ctx context.Context, clientID, storeID string) error {
	return inTx(ctx, s.d, func(tx PartnerTx) error {
		if ok, err := tx.DeleteStore(ctx, clientID, storeID); err != nil {
			return err
		} else if !ok {
			return storelink.Errorf(storelink.ENOTFOUND, "store %q of client %q not found.", storeID, clientID)
		}
		return tx.DeleteStoreStock(ctx, clientID, storeID)
	})
}

// Stores lists a client's stores by id.
func (s *Partners) Stores(ctx context.Context, clientID string) ([]storelink.Store, error) {
	return s.d.Stores(ctx, clientID)
}

// Authenticate resolves an API key for a client id. A key of another
// partner is as good as none: only the partner's own key for another of its
// clients is told apart (EFORBIDDEN).
func (s *Partners) Authenticate(ctx context.Context, clientID, apiKey string) (*storelink.Client, error) {
	unauthorized := storelink.Errorf(storelink.EUNAUTHORIZED, "A valid x-api-key header for this client is required.")
	if apiKey == "" {
		return nil, unauthorized
	}
	m, err := s.d.KeyClient(ctx, clientID, storelink.HashAPIKey(apiKey))
	if errors.Is(err, ErrNotFound) {
		return nil, unauthorized
	} else if err != nil {
		return nil, err
	}
	if m.HolderPartnerID != m.Client.PartnerID {
		// Another partner's key is as good as none: the answer tells
		// nothing of which client ids exist.
		return nil, unauthorized
	}
	if m.HolderClientID != clientID {
		return nil, storelink.Errorf(storelink.EFORBIDDEN, "This API key belongs to another client of the same partner.")
	}
	s.uses.note(storelink.HashAPIKey(apiKey), s.now())
	return &m.Client, nil
}

// CreateSession records a session and deletes the expired ones, in one
// transaction: the calls that add sessions keep the table to the live
// ones. A partner's session keeps the hash of its API key, never the key.
func (s *Partners) CreateSession(ctx context.Context, n storelink.NewSession) error {
	keyHash := ""
	if n.ClientID != "" {
		if n.APIKey == "" {
			return storelink.Errorf(storelink.EINVALID, "A partner's session needs the API key it was opened with.")
		}
		keyHash = storelink.HashAPIKey(n.APIKey)
	}
	return inTx(ctx, s.d, func(tx PartnerTx) error {
		if err := tx.DeleteExpiredSessions(ctx, s.now()); err != nil {
			return err
		}
		return tx.InsertSession(ctx, SessionRow{IDHash: n.IDHash, ClientID: n.ClientID, KeyHash: keyHash, Expires: n.Expires})
	})
}

// Session tells whose a session is and whether it is active.
func (s *Partners) Session(ctx context.Context, idHash []byte) (string, bool, error) {
	clientID, err := s.d.GetSession(ctx, idHash, s.now())
	if errors.Is(err, ErrNotFound) {
		return "", false, nil
	} else if err != nil {
		return "", false, err
	}
	return clientID, true, nil
}

// DeleteSession ends a session.
func (s *Partners) DeleteSession(ctx context.Context, idHash []byte) error {
	return s.d.DeleteSession(ctx, idHash)
}

// ClientFigures are a client's figures as a driver reads them for the
// overview (storelink.ClientSummary without its capacity, which the
// service works out of the bucket).
type ClientFigures struct {
	storelink.ClientListing
	Stores, Endpoints, EndpointsDisabled int
	FailedDeliveries, RejectedUploads    int
	// Bucket is the client's capacity bucket, nil when it never took
	// from it.
	Bucket     *storelink.Bucket
	LastUpload *storelink.Upload
}

// ClientSummaries lists the clients that match q with their figures.
func (s *Partners) ClientSummaries(ctx context.Context, q string, policy storelink.CapacityPolicy) ([]storelink.ClientSummary, error) {
	now := s.now()
	rows, err := s.d.ClientFigures(ctx, ClientFiguresParams{Q: storelink.FoldQuery(q), Failed: storelink.DeliveryFailed,
		Rejected: storelink.UploadRejected, RejectedSince: now.Add(-storelink.StatsWindow)})
	if err != nil {
		return nil, fmt.Errorf("read client figures: %w", err)
	}
	out := make([]storelink.ClientSummary, len(rows))
	for i, r := range rows {
		out[i] = storelink.ClientSummary{ClientListing: r.ClientListing, Stores: r.Stores, Endpoints: r.Endpoints,
			EndpointsDisabled: r.EndpointsDisabled, FailedDeliveries: r.FailedDeliveries, RejectedUploads: r.RejectedUploads,
			LastUpload: r.LastUpload, Capacity: policy.Peek(r.Bucket, r.Stores, now)}
	}
	return out, nil
}
