// Package storelink is the domain of the storelink service: partners, their
// per-country clients, stores, stock feeds, orders, their events and the
// webhook deliveries of those events.
//
// It holds the types, the state tables and transitions, the errors, and the
// service interfaces by area (AdminService, OrderService, UploadService,
// WebhookService and their neighbours) that package service implements and
// that httpapi, dashboard and worker use. It imports only the standard
// library, so every rule here can be read without knowing how it is stored
// or served.
package storelink

import (
	"context"
	"time"
)

// Partner is a retailer that integrates with the marketplace. A partner has
// one Client per country it sells in.
type Partner struct {
	ID        string    `json:"partner_id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// Client is a partner's presence in one country: its own client id, API keys,
// stores, stock feed and capacity. The seed makes keys and feeds per country,
// so everything partner-facing hangs off the client, not the partner.
type Client struct {
	ID          string    `json:"client_id"`
	PartnerID   string    `json:"partner_id"`
	CountryCode string    `json:"country_code"`
	Currency    string    `json:"currency"`
	CreatedAt   time.Time `json:"created_at"`
}

// APIKey describes a key without its secret: the secret is shown once, when
// made, and only its hash is kept.
type APIKey struct {
	ID        string    `json:"key_id"`
	ClientID  string    `json:"client_id"`
	Prefix    string    `json:"prefix"` // first characters, to tell keys apart
	CreatedAt time.Time `json:"created_at"`
	// LastUsedAt is when the key last authenticated a request, to the
	// minute; nil when it never did (or not since this was recorded).
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
}

// Store is a physical store of a client. Its ID is chosen by the partner and
// is the value written in the `store` column of the feed.
type Store struct {
	ClientID  string    `json:"client_id"`
	ID        string    `json:"store_id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// Capacity is a client's upload token bucket as of a moment: the bucket size
// (bytes per window) and the bytes that can be sent now.
type Capacity struct {
	BytesPerWindow int64         `json:"bytes_per_window"`
	BytesLeft      int64         `json:"bytes_left"`
	Window         time.Duration `json:"-"`
	// FullIn is how long until the bucket is full again.
	FullIn time.Duration `json:"-"`
}

// CapacityPolicy sets how much CSV a client may send: Base plus PerStore for
// each registered store, refilled evenly over Window; and how many of its
// uploads may wait to be processed at once.
type CapacityPolicy struct {
	Base     int64
	PerStore int64
	Window   time.Duration
	// MaxWaiting is how many uploads of one client may be accepted and not
	// yet picked up by a processor; 0 is no limit. The bucket bounds bytes
	// over an hour; this bounds how far a client can run ahead of the
	// processing, so that one client cannot fill the queue for all.
	MaxWaiting int
	// MinUpload is the least an upload is charged, whatever its size:
	// every upload costs a request, a row and a processing run, so that
	// many tiny files cannot cost next to nothing. 0 charges bytes only.
	MinUpload int64
}

// Size is the bucket size for a client with the given number of stores.
func (p CapacityPolicy) Size(stores int) int64 { return p.Base + p.PerStore*int64(stores) }

// ClientDetail is what an operator sees of a client.
type ClientDetail struct {
	Client
	Stores   []Store  `json:"stores"`
	APIKeys  []APIKey `json:"api_keys"`
	Capacity Capacity `json:"capacity"`
	// Endpoints are the client's webhook endpoints.
	Endpoints []Endpoint `json:"webhook_endpoints"`
}

// NewClient is the answer to creating a client: the only time its first API
// key is shown, with the key's id (the one to revoke it by).
type NewClient struct {
	Client
	KeyID  string `json:"key_id"`
	APIKey string `json:"api_key"`
}

// MaxAPIKeys is how many API keys a client may hold at once.
const MaxAPIKeys = 5

// NewAPIKey is the answer to making a further key: the only time it is shown.
type NewAPIKey struct {
	KeyID  string `json:"key_id"`
	APIKey string `json:"api_key"`
}

// AdminService is the operator's view of partners, clients, keys and stores.
//
// Errors: EINVALID for malformed fields, ENOTFOUND for an unknown partner,
// client, key or store, ECONFLICT for a second client of a partner in one
// country.
type AdminService interface {
	CreatePartner(ctx context.Context, name string) (*Partner, error)
	CreateClient(ctx context.Context, partnerID, countryCode, currency string) (*NewClient, error)
	Client(ctx context.Context, clientID string) (*ClientDetail, error)
	// CreateAPIKey makes a further key; ECONFLICT when the client has
	// MaxAPIKeys already.
	CreateAPIKey(ctx context.Context, clientID string) (*NewAPIKey, error)
	DeleteAPIKey(ctx context.Context, clientID, keyID string) error
	// RevokeOwnAPIKey is DeleteAPIKey at the client's own request, which
	// keeps the client's last key (ECONFLICT).
	RevokeOwnAPIKey(ctx context.Context, clientID, keyID string) error
	// APIKeys lists the client's keys, oldest first, never the keys
	// themselves.
	APIKeys(ctx context.Context, clientID string) ([]APIKey, error)
	// PutStore creates or renames a store; created tells which.
	PutStore(ctx context.Context, clientID, storeID, name string) (store *Store, created bool, err error)
	DeleteStore(ctx context.Context, clientID, storeID string) error
	// Stores lists the client's stores ordered by id.
	Stores(ctx context.Context, clientID string) ([]Store, error)
	// PartnerCount tells whether the database is empty (for --demo).
	PartnerCount(ctx context.Context) (int, error)
	// Partners lists every partner ordered by name, then id: the operator
	// dashboard shows clients under their partner's name.
	Partners(ctx context.Context) ([]Partner, error)
	// Clients lists every client ordered by partner id, then country code:
	// the operator dashboard's overview starts from it.
	Clients(ctx context.Context) ([]Client, error)
	// ListPartners is a page of the partners f selects (listing.go).
	// EINVALID for an After that is not a cursor of this list.
	ListPartners(ctx context.Context, f PartnerFilter) (*PartnerPage, error)
	// ListClients is a page of the clients f selects (listing.go).
	// EINVALID for an After that is not a cursor of this list.
	ListClients(ctx context.Context, f ClientFilter) (*ClientPage, error)
	// ClientSummaries lists every client whose id, country code, partner
	// id or partner name holds q (as ClientFilter's Q), ordered as
	// ListClients, each with the figures the operator's overview sorts
	// by, read together rather than client by client; policy gives the
	// capacity.
	ClientSummaries(ctx context.Context, q string, policy CapacityPolicy) ([]ClientSummary, error)
}

// Authenticator resolves partner API keys.
//
// Errors: EUNAUTHORIZED when the key is unknown, valid but the client id
// does not exist, or valid for a client of another partner (none of these is
// told apart from the others); EFORBIDDEN when the key is valid for another
// client of the same partner (its other country).
type Authenticator interface {
	Authenticate(ctx context.Context, clientID, apiKey string) (*Client, error)
}

// SessionStore keeps the sessions of the operator dashboard and of the
// partner portal in the database, so that logging out ends a session for
// good: in every process sharing the database and across restarts,
// whatever becomes of its cookie. A session is named by the SHA-256 of its
// id, never by the id the cookie carries.
type SessionStore interface {
	// CreateSession records a session and forgets the sessions that have
	// expired.
	CreateSession(ctx context.Context, s NewSession) error
	// Session tells whether the session exists and is active, and whose it
	// is: "" for the operator's, the client id for a partner's. A
	// partner's session is active only while the API key it was opened
	// with is still a key of its client.
	Session(ctx context.Context, idHash []byte) (clientID string, active bool, err error)
	// DeleteSession ends a session; ending one that does not exist (any
	// more) is not an error.
	DeleteSession(ctx context.Context, idHash []byte) error
}

// NewSession is a session to record: the operator's when ClientID is "",
// else a partner's portal session of that client, opened with APIKey, of
// which only the hash is kept, so that deleting the key ends the session.
type NewSession struct {
	IDHash   []byte
	ClientID string
	APIKey   string
	Expires  time.Time
}
