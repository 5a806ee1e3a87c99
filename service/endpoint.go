package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"storelink"
)

var _ storelink.EndpointService = (*Webhooks)(nil)

// Webhooks are the calls on webhook endpoints and their deliveries, and
// the deliverer's bookkeeping of attempts and claims.
type Webhooks struct {
	config
	d WebhookDriver
	// keys tells whether this process's secret key is still the
	// database's before a secret is sealed with it.
	keys *SecretKeys
}

// WebhookDriver is the webhook endpoints' and deliveries' driver: the
// endpoint calls' reads and one-step writes, the reads of the endpoint
// pages, the deliverer's bookkeeping, and write transactions of the
// endpoint calls. GetClient, ClientExists and Stores read partners' rows
// (PartnerDriver says what they return) that the endpoint calls check.
type WebhookDriver interface {
	// Begin starts a write transaction. The caller ends it with Commit or
	// Rollback; Rollback after Commit does nothing.
	Begin(ctx context.Context) (WebhookTx, error)
	// Transient tells whether err ended a transaction for a reason that a
	// fresh try of the same work can avoid, such as a deadlock between
	// writers: the service then runs the transaction again.
	Transient(err error) bool

	EndpointCalls
	EndpointReads
	Bookkeeping

	GetClient(ctx context.Context, id string) (*storelink.Client, error)
	Stores(ctx context.Context, clientID string) ([]storelink.Store, error)
}

// WebhookTx is one write transaction of the endpoint calls. Its row
// methods see what it wrote; nothing of it is seen by others before Commit.
type WebhookTx interface {
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error

	EndpointRows
	EndpointOpRows
}

// EndpointCalls are what the endpoint calls ask of a driver outside a
// transaction of theirs: reads, and the writes that are one step each
// (one statement, or one turn of the writer), which the database makes
// atomic on its own, so that they cost no more round trips than the step.
type EndpointCalls interface {
	// ClientExists tells whether a client of that id exists.
	ClientExists(ctx context.Context, id string) (bool, error)
	// InsertEndpoint writes a new endpoint, enabled, with its sealed key
	// and secret, and returns it as stored; ErrFull, writing nothing, when
	// the client has e.Max endpoints that are not deleted, also when
	// endpoints of the client are inserted at once.
	InsertEndpoint(ctx context.Context, e NewEndpoint) (*storelink.Endpoint, error)
	// RotateSecret moves the endpoint's secret aside as its previous one,
	// signing until p.Until, and makes p.Sealed its secret, in one step: the
	// secret moved aside is the one replaced, whatever runs meanwhile. It
	// returns the endpoint as stored, or ErrNotFound.
	RotateSecret(ctx context.Context, p RotateSecretParams) (*storelink.Endpoint, error)
	// ListEndpoints returns the endpoints of the clients that are not
	// deleted, oldest first, never nil, in one statement.
	ListEndpoints(ctx context.Context, clientIDs []string) ([]storelink.Endpoint, error)
	// ListDeliveries returns the deliveries f selects, newest first, at most
	// f.Limit, each with its attempts in their order; never nil. f.State is
	// empty or one of the delivery states; f.Before, when set, is a
	// delivery's id.
	ListDeliveries(ctx context.Context, f storelink.DeliveryFilter) ([]storelink.Delivery, error)
	// PendingDeliveries counts the pending deliveries and tells when the
	// oldest was made.
	PendingDeliveries(ctx context.Context) (Backlog, error)
	// FailedDeliveries counts the deliveries in state failed.
	FailedDeliveries(ctx context.Context) (int, error)
	// Redeliver puts delivery p.ID in state p.Pending again, due at p.At,
	// its tries counted afresh, and lets the deliverers know; a delivery in
	// state p.Pending whose lease is live is left to that attempt, as
	// sending it again meanwhile would send the event twice at once, and
	// one whose endpoint was deleted is left as it is. ErrNotFound when
	// there is none.
	Redeliver(ctx context.Context, p RedeliverParams) error
}

// RotateSecretParams are the endpoint whose secret RotateSecret replaces
// and its new secret.
type RotateSecretParams struct {
	ID string
	// Sealed is the new secret, sealed.
	Sealed string
	// Until is when the secret replaced stops signing.
	Until time.Time
	// At stamps the row.
	At time.Time
}

// RedeliverParams are the delivery Redeliver makes due again.
type RedeliverParams struct {
	ID string
	// At is when it is due, and stamps the row.
	At time.Time
	// Pending is the state of a delivery waiting for its attempt.
	Pending storelink.DeliveryState
}

// Backlog counts the pending deliveries.
type Backlog struct {
	Pending int
	// Oldest is when the oldest pending delivery was made, nil for none.
	Oldest *time.Time
}

// EndpointRows are the endpoint rows that the endpoint calls change inside
// their transaction.
type EndpointRows interface {
	// UpdateEndpoint writes the fields c sets and returns the endpoint as
	// the transaction sees it, or ErrNotFound. When c enables or disables
	// the endpoint, the deliverers are told: its parked deliveries resume,
	// or wait.
	UpdateEndpoint(ctx context.Context, id string, c EndpointChange) (*storelink.Endpoint, error)
}

// NewEndpoint is an endpoint as CreateEndpoint writes it: its key and
// secret sealed.
type NewEndpoint struct {
	ID, ClientID, URL string
	States            []storelink.OrderState
	APIKey, Secret    string // sealed; APIKey "" for none
	Description       string
	At                time.Time
	// Max is the most endpoints, not deleted, the client may have.
	Max int
}

// EndpointChange is what UpdateEndpoint writes; nil fields stay as they
// are.
type EndpointChange struct {
	URL            *string
	States         *[]storelink.OrderState
	APIKey         *string // sealed
	Description    *string
	Enabled        *bool
	DisabledReason *string
	DeletedAt      *time.Time
	At             time.Time
}

// CreateEndpoint registers an endpoint; its secret and key are sealed.
func (s *Webhooks) CreateEndpoint(ctx context.Context, clientID string, n storelink.NewEndpoint, secret string) (*storelink.Endpoint, error) {
	sealer, err := s.writeSealer(ctx)
	if err != nil {
		return nil, err
	}
	if err := storelink.CheckStates(n.States); err != nil {
		return nil, err
	}
	if err := storelink.CheckDescription(n.Description); err != nil {
		return nil, err
	}
	if ok, err := s.d.ClientExists(ctx, clientID); err != nil {
		return nil, err
	} else if !ok {
		return nil, storelink.Errorf(storelink.ENOTFOUND, "Client %q not found.", clientID)
	}
	full := storelink.Errorf(storelink.ECONFLICT, "Client %q has %d webhook endpoints, the most it may have: delete one first.", clientID, s.maxEndpoints)
	// A client at the bound is told so from a read, so that an exporter
	// that keeps trying does not take the writer each time; the insert's
	// own count is the guard against registrations at once.
	if have, err := s.d.ListEndpoints(ctx, []string{clientID}); err != nil {
		return nil, err
	} else if len(have) >= s.maxEndpoints {
		return nil, full
	}
	now := s.now()
	e, err := s.d.InsertEndpoint(ctx, NewEndpoint{ID: storelink.NewID(now), ClientID: clientID, URL: n.URL, States: n.States,
		APIKey: sealer.Seal(n.APIKey), Secret: sealer.Seal(secret), Description: n.Description, At: now, Max: s.maxEndpoints})
	if errors.Is(err, ErrFull) {
		return nil, full
	}
	if err != nil {
		return nil, fmt.Errorf("insert endpoint: %w", err)
	}
	return e, nil
}

// UpdateEndpoint changes URL, states, key, description or the enabled flag of an
// endpoint of clientID's (any when ""). Enabling or disabling an endpoint
// by hand clears the reason it was disabled (a 410 Gone); an endpoint
// enabled again sends its parked deliveries.
func (s *Webhooks) UpdateEndpoint(ctx context.Context, clientID, id string, p storelink.EndpointPatch) (*storelink.Endpoint, error) {
	sealer, err := s.writeSealer(ctx)
	if err != nil {
		return nil, err
	}
	if p.States != nil {
		if err := storelink.CheckStates(*p.States); err != nil {
			return nil, err
		}
	}
	if p.Description != nil {
		if err := storelink.CheckDescription(*p.Description); err != nil {
			return nil, err
		}
	}
	c := EndpointChange{URL: p.URL, States: p.States, Enabled: p.Enabled, Description: p.Description, At: s.now()}
	if p.APIKey != nil {
		sealed := sealer.Seal(*p.APIKey)
		c.APIKey = &sealed
	}
	if p.Enabled != nil {
		none := ""
		c.DisabledReason = &none
	}
	var e *storelink.Endpoint
	err = inTx(ctx, s.d, func(tx WebhookTx) error {
		cur, err := lockEndpointOf(ctx, tx, clientID, id)
		if err != nil {
			return err
		}
		if err := p.IfMatch.Check("endpoint", cur.Version()); err != nil {
			return err
		}
		if cur.DeletedAt != nil {
			return deletedEndpoint(cur)
		}
		c.At = laterThan(c.At, cur.UpdatedAt)
		e, err = tx.UpdateEndpoint(ctx, id, c)
		return err
	})
	if err != nil {
		return nil, endpointNotFound(err, id)
	}
	return e, nil
}

// laterThan is now, or a millisecond after prev when now is not later: a
// change of an endpoint always moves its updated_at, so that its version
// changes too, also where two changes come within one millisecond and
// change nothing else it shows (a new API key).
func laterThan(now, prev time.Time) time.Time {
	if next := prev.UTC().Truncate(time.Millisecond).Add(time.Millisecond); now.Before(next) {
		return next
	}
	return now
}

// RotateSecret makes r.Secret current and keeps the old one signing until
// r.Overlap ends, for an endpoint of clientID's (any when ""). An endpoint
// never changes client, so reading whose it is before the write is enough.
func (s *Webhooks) RotateSecret(ctx context.Context, clientID, id string, r storelink.SecretRotation) (*storelink.Endpoint, error) {
	sealer, err := s.writeSealer(ctx)
	if err != nil {
		return nil, err
	}
	cur, err := s.endpointOf(ctx, clientID, id)
	if err != nil {
		return nil, err
	} else if cur.DeletedAt != nil {
		return nil, deletedEndpoint(cur)
	}
	// updated_at moves on from the one read, so that a rotation within
	// the millisecond of the last change still gives a new version.
	now := laterThan(s.now(), cur.UpdatedAt)
	e, err := s.d.RotateSecret(ctx, RotateSecretParams{ID: id, Sealed: sealer.Seal(r.Secret), Until: now.Add(r.Overlap), At: now})
	if err != nil {
		return nil, endpointNotFound(err, id)
	}
	return e, nil
}

// Endpoints lists the clients' endpoints, oldest first.
func (s *Webhooks) Endpoints(ctx context.Context, clientIDs ...string) ([]storelink.Endpoint, error) {
	if len(clientIDs) == 0 {
		return []storelink.Endpoint{}, nil
	}
	return s.d.ListEndpoints(ctx, clientIDs)
}

// Deliveries lists deliveries, newest first, each with its attempts. A
// state no delivery has lists none.
func (s *Webhooks) Deliveries(ctx context.Context, f storelink.DeliveryFilter) ([]storelink.Delivery, error) {
	if f.Before != "" {
		// A before that is no delivery (of the client listed) would give
		// an empty page, which reads as the end of the list.
		d, err := s.d.GetDelivery(ctx, f.Before)
		if errors.Is(err, ErrNotFound) || err == nil && f.ClientID != "" && d.ClientID != f.ClientID {
			return nil, storelink.CursorError("before", f.Before)
		} else if err != nil {
			return nil, err
		}
	}
	if f.State != "" && !slices.Contains(storelink.DeliveryStates, f.State) {
		return []storelink.Delivery{}, nil
	}
	ds, err := s.d.ListDeliveries(ctx, f)
	for i := range ds {
		uploadChain(&ds[i])
	}
	return ds, err
}

// uploadChain moves the chain of an upload event's delivery, which a
// driver reads as its OrderID (the column an order event's deliveries go in
// order within), to its UploadID.
func uploadChain(d *storelink.Delivery) {
	if d.EventState == storelink.EventUploadFinished {
		d.UploadID, d.OrderID = d.OrderID, ""
	}
}

// Redeliver makes a delivery pending again, due now, with a fresh
// schedule (RedeliverFor of the operator).
func (s *Webhooks) Redeliver(ctx context.Context, id string) error {
	return s.RedeliverFor(ctx, "", id)
}

// PendingDeliveries counts pending deliveries and the age of the oldest.
func (s *Webhooks) PendingDeliveries(ctx context.Context) (int, time.Duration, error) {
	b, err := s.d.PendingDeliveries(ctx)
	if err != nil || b.Oldest == nil {
		return b.Pending, 0, err
	}
	return b.Pending, s.now().Sub(*b.Oldest), nil
}

// FailedDeliveries counts the deliveries that failed and wait for a
// redelivery or a recovery.
func (s *Webhooks) FailedDeliveries(ctx context.Context) (int, error) {
	return s.d.FailedDeliveries(ctx)
}

// writeSealer is the sealer of a call that seals a secret into the
// database: refused when the database has moved to another key since this
// process started (storelink secret-key rotate while it ran), since what it
// sealed could not be opened by the processes on the new key.
func (s *Webhooks) writeSealer(ctx context.Context) (*storelink.Sealer, error) {
	if s.sealer == nil {
		return nil, errNoSealer
	}
	if err := s.keys.SecretKeyCurrent(ctx); err != nil {
		return nil, err
	}
	return s.sealer, nil
}

// staleKeyRetry is the Retry-After, in seconds, of a call refused because
// this process's secret key is no longer the database's: another process,
// on the new key, can take it.
const staleKeyRetry = 5

// SecretKeyCurrent tells whether this process's secret key is still the
// database's (for /readyz and before sealing): EUNAVAILABLE, saying so,
// once the database moved to another key (storelink secret-key rotate)
// while the process ran; it is to be restarted with the new key, and
// meanwhile another process can take the call.
func (s *SecretKeys) SecretKeyCurrent(ctx context.Context) error {
	if s.sealer == nil {
		return nil
	}
	check, err := s.d.SealingKeyCheck(ctx)
	if err != nil {
		return err
	}
	if check != "" && check != s.sealer.Check() {
		e := storelink.Errorf(storelink.EUNAVAILABLE, "This service's secret key (fingerprint %s) is no longer the database's "+
			"(fingerprint %s): nothing was stored. The service must be restarted with the database's key; "+
			"retry after %d seconds.", s.sealer.Fingerprint(), storelink.KeyFingerprint(check), staleKeyRetry)
		e.RetryAfter = staleKeyRetry
		return e
	}
	return nil
}

// endpointNotFound turns ErrNotFound into ENOTFOUND for the endpoint id.
func endpointNotFound(err error, id string) error {
	if errors.Is(err, ErrNotFound) {
		return storelink.Errorf(storelink.ENOTFOUND, "Webhook endpoint %q not found.", id)
	}
	return err
}
