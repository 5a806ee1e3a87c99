package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"storelink"
)

// EndpointReads are the reads of an endpoint's operations: the endpoint as
// stored, its keys for a test send, the figures of its stats, and one
// delivery, each outside a transaction of the service's.
type EndpointReads interface {
	// GetEndpoint returns an endpoint, deleted or not, or ErrNotFound.
	GetEndpoint(ctx context.Context, id string) (*storelink.Endpoint, error)
	// EndpointKeys returns an endpoint's key and secrets, sealed as kept,
	// or ErrNotFound.
	EndpointKeys(ctx context.Context, id string) (SealedKeys, error)
	// EndpointStats reads the figures p asks of the attempts of each of
	// p's endpoints made at or after p.Since and of its deliveries now, in
	// a number of statements that does not grow with the endpoints; those
	// not asked are zero, and an endpoint with no figures may be missing
	// from the map.
	EndpointStats(ctx context.Context, p EndpointStatsParams) (map[string]EndpointFigures, error)
	// GetDelivery returns a delivery without its attempts, or ErrNotFound.
	GetDelivery(ctx context.Context, id string) (*storelink.Delivery, error)
}

// EndpointStatsParams say which figures EndpointStats reads, and of which
// endpoints.
type EndpointStatsParams struct {
	// EndpointIDs are the endpoints whose counts are read.
	EndpointIDs []string
	// Since is when the attempts counted begin.
	Since time.Time
	// Counts asks for the counts of attempts and deliveries and the times
	// of the last attempts of each of EndpointIDs.
	Counts bool
	// Ranks are, by endpoint, the ranks from 0 of the durations to read
	// among its attempts counted, ordered by duration; none for no
	// durations. Its endpoints need not be among EndpointIDs.
	Ranks map[string][]int64
}

// EndpointFigures are an endpoint's figures as a driver reads them.
type EndpointFigures struct {
	// Attempts counts the attempts made at or after Since, Succeeded those
	// recorded as succeeded.
	Attempts, Succeeded int
	// LastSuccess and LastFailure are when its last attempt recorded as
	// succeeded and its last other one were made, however long ago (nil
	// for none).
	LastSuccess, LastFailure *time.Time
	// Durations are, by rank, the durations (ms) at the ranks asked: one
	// for each rank there is among the attempts counted.
	Durations map[int64]int64
	// Pending and Failed count the endpoint's deliveries in those states.
	Pending, Failed int
}

// EndpointOpRows are the rows that deleting an endpoint and recovering its
// deliveries change inside their transaction.
type EndpointOpRows interface {
	// LockEndpoint returns an endpoint, deleted or not, and keeps other
	// transactions from changing it until this one ends; ErrNotFound for
	// none. It does not hold up the transactions that queue deliveries to
	// it.
	LockEndpoint(ctx context.Context, id string) (*storelink.Endpoint, error)
	// LockClientEvents keeps the transactions that write events of the
	// client waiting until this one ends, and lets this one's later
	// statements see the deliveries the ones before it queued.
	LockClientEvents(ctx context.Context, clientID string) error
	// CancelDeliveries puts every pending delivery of the endpoint in
	// state p.To, due never, and returns how many; an attempt in flight is
	// still recorded, and moves it no more.
	CancelDeliveries(ctx context.Context, p MoveDeliveriesParams) (int, error)
	// RecoverDeliveries puts every failed delivery of the endpoint queued
	// at or after p.Since in state p.To, due at p.At, its tries counted
	// afresh, lets the deliverers know, and returns how many.
	RecoverDeliveries(ctx context.Context, p MoveDeliveriesParams) (int, error)
}

// MoveDeliveriesParams are the deliveries of an endpoint that
// CancelDeliveries or RecoverDeliveries move, and the state they go to.
// Which deliveries each moves (pending ones, failed ones) is its name's:
// the drivers find them in indexes of that state alone.
type MoveDeliveriesParams struct {
	EndpointID string
	// Since bounds the deliveries recovered to those queued at or after it.
	Since time.Time
	// At stamps the rows (and is when recovered ones are due).
	At time.Time
	// To is the state the deliveries go to.
	To storelink.DeliveryState
}

// Endpoint returns an endpoint, deleted or not, with its stats; of
// clientID's when it is not "".
func (s *Webhooks) Endpoint(ctx context.Context, clientID, id string) (*storelink.EndpointDetail, error) {
	e, err := s.endpointOf(ctx, clientID, id)
	if err != nil {
		return nil, err
	}
	out, err := s.withStats(ctx, []storelink.Endpoint{*e})
	if err != nil {
		return nil, err
	}
	return &out[0], nil
}

// EndpointDetails lists a client's endpoints, oldest first, with their
// stats: three statements however many endpoints the client has.
func (s *Webhooks) EndpointDetails(ctx context.Context, clientID string) ([]storelink.EndpointDetail, error) {
	list, err := s.d.ListEndpoints(ctx, []string{clientID})
	if err != nil {
		return nil, err
	}
	return s.withStats(ctx, list)
}

// ClientEndpoints is a page of a client's endpoints, oldest first, with
// their stats, paged by (created_at, id) as ListEndpoints orders them: the
// stats are worked out for the page's endpoints only.
func (s *Webhooks) ClientEndpoints(ctx context.Context, f storelink.EndpointFilter) (*storelink.EndpointPage, error) {
	if f.Limit < 1 {
		return nil, storelink.Errorf(storelink.EINVALID, "limit must be at least 1.")
	}
	var after *storelink.ListCursor
	var afterAt time.Time
	if f.After != "" {
		c, err := storelink.ParseListCursor("after", f.After)
		if err != nil {
			return nil, err
		}
		if afterAt, err = time.Parse(time.RFC3339Nano, c.First); err != nil {
			return nil, storelink.CursorError("after", f.After)
		}
		after = &c
	}
	if ok, err := s.d.ClientExists(ctx, f.ClientID); err != nil {
		return nil, err
	} else if !ok {
		return nil, storelink.Errorf(storelink.ENOTFOUND, "Client %q not found.", f.ClientID)
	}
	list, err := s.d.ListEndpoints(ctx, []string{f.ClientID})
	if err != nil {
		return nil, err
	}
	if after != nil {
		list = slices.DeleteFunc(list, func(e storelink.Endpoint) bool {
			return e.CreatedAt.Before(afterAt) || e.CreatedAt.Equal(afterAt) && e.ID <= after.Second
		})
	}
	p := &storelink.EndpointPage{}
	if len(list) > f.Limit {
		list = list[:f.Limit]
		last := list[f.Limit-1]
		p.NextCursor = storelink.ListCursor{First: last.CreatedAt.UTC().Format(time.RFC3339Nano), Second: last.ID}.String()
	}
	if p.Endpoints, err = s.withStats(ctx, list); err != nil {
		return nil, err
	}
	return p, nil
}

// endpointOf reads an endpoint; one of another client than clientID (when
// set) is not found, as one that does not exist.
func (s *Webhooks) endpointOf(ctx context.Context, clientID, id string) (*storelink.Endpoint, error) {
	e, err := s.d.GetEndpoint(ctx, id)
	if err != nil {
		return nil, endpointNotFound(err, id)
	}
	if clientID != "" && e.ClientID != clientID {
		return nil, endpointNotFound(ErrNotFound, id)
	}
	return e, nil
}

// withStats works the endpoints' stats out of their attempts of the last
// StatsWindow and their deliveries now: the counts of every endpoint in one
// read, then the durations at the ranks of the latencies of those with
// attempts in another. The latencies are by nearest rank: the p-quantile
// of n durations is the ceil(p·n)-th smallest.
func (s *Webhooks) withStats(ctx context.Context, list []storelink.Endpoint) ([]storelink.EndpointDetail, error) {
	out := make([]storelink.EndpointDetail, len(list))
	if len(list) == 0 {
		return out, nil
	}
	since := s.now().Add(-storelink.StatsWindow)
	ids := make([]string, len(list))
	for i, e := range list {
		out[i].Endpoint, ids[i] = e, e.ID
	}
	counts, err := s.d.EndpointStats(ctx, EndpointStatsParams{EndpointIDs: ids, Since: since, Counts: true})
	if err != nil {
		return nil, fmt.Errorf("count attempts and deliveries of %d endpoints: %w", len(ids), err)
	}
	ranks := map[string][]int64{}
	for i, id := range ids {
		c := counts[id]
		st := storelink.EndpointStats{Since: since}
		st.Attempts, st.Succeeded, st.Failed = c.Attempts, c.Succeeded, c.Attempts-c.Succeeded
		st.LastSuccessAt, st.LastFailureAt = c.LastSuccess, c.LastFailure
		st.Pending, st.FailedDeliveries = c.Pending, c.Failed
		if c.Attempts > 0 {
			rate := math.Round(float64(c.Succeeded)/float64(c.Attempts)*1e4) / 1e4
			st.SuccessRate = &rate
			ranks[id] = []int64{nearestRank(0.5, c.Attempts), nearestRank(0.95, c.Attempts)}
		}
		out[i].Stats = st
	}
	if len(ranks) == 0 {
		return out, nil
	}
	ds, err := s.d.EndpointStats(ctx, EndpointStatsParams{Since: since, Ranks: ranks})
	if err != nil {
		return nil, fmt.Errorf("read attempt durations of %d endpoints: %w", len(ranks), err)
	}
	for i, id := range ids {
		r, ok := ranks[id]
		if !ok {
			continue
		}
		st := &out[i].Stats
		if d, ok := ds[id].Durations[r[0]]; ok {
			st.LatencyP50MS = &d
		}
		if d, ok := ds[id].Durations[r[1]]; ok {
			st.LatencyP95MS = &d
		}
	}
	return out, nil
}

// nearestRank is the rank, from 0, of the p-quantile of n values.
func nearestRank(p float64, n int) int64 {
	return max(int64(math.Ceil(p*float64(n)))-1, 0)
}

// lockEndpointOf locks an endpoint in tx; one of another client than
// clientID (when set) is ErrNotFound, as one that does not exist.
func lockEndpointOf(ctx context.Context, tx WebhookTx, clientID, id string) (*storelink.Endpoint, error) {
	e, err := tx.LockEndpoint(ctx, id)
	if err == nil && clientID != "" && e.ClientID != clientID {
		return nil, ErrNotFound
	}
	return e, err
}

// DeleteEndpoint disables an endpoint of clientID's (any when "") for
// good, marks it deleted and cancels its pending deliveries, in one
// transaction. The events of its client wait meanwhile, so that none
// queues a delivery to it after the cancellation.
//
// An endpoint deleted already is answered as deleted whatever m says: the
// change asked for is made, and a retry of a deletion whose answer was
// lost must not be refused.
func (s *Webhooks) DeleteEndpoint(ctx context.Context, clientID, id string, m *storelink.IfMatch) error {
	err := inTx(ctx, s.d, func(tx WebhookTx) error {
		e, err := lockEndpointOf(ctx, tx, clientID, id)
		if err != nil || e.DeletedAt != nil {
			return err
		}
		if err := m.Check("endpoint", e.Version()); err != nil {
			return err
		}
		if err := tx.LockClientEvents(ctx, e.ClientID); err != nil {
			return err
		}
		now := laterThan(s.now(), e.UpdatedAt)
		off, none := false, ""
		if _, err := tx.UpdateEndpoint(ctx, id, EndpointChange{Enabled: &off, DisabledReason: &none, DeletedAt: &now, At: now}); err != nil {
			return err
		}
		if _, err := tx.CancelDeliveries(ctx, MoveDeliveriesParams{EndpointID: id, At: now, To: storelink.DeliveryCancelled}); err != nil {
			return fmt.Errorf("cancel deliveries of endpoint %s: %w", id, err)
		}
		return nil
	})
	return endpointNotFound(err, id)
}

// RecoverDeliveries makes the failed deliveries queued since then of an
// endpoint of clientID's (any when "") pending again. They go out as any
// pending delivery does: per order, in the order of their events, each
// after the earlier ones of its order that are pending too.
func (s *Webhooks) RecoverDeliveries(ctx context.Context, clientID, endpointID string, since time.Time) (int, error) {
	var n int
	err := inTx(ctx, s.d, func(tx WebhookTx) error {
		e, err := lockEndpointOf(ctx, tx, clientID, endpointID)
		if err != nil {
			return err
		}
		if e.DeletedAt != nil {
			return deletedEndpoint(e)
		}
		n, err = tx.RecoverDeliveries(ctx, MoveDeliveriesParams{EndpointID: endpointID, Since: since.UTC().Truncate(time.Millisecond),
			At: s.now(), To: storelink.DeliveryPending})
		return err
	})
	if err != nil {
		return 0, endpointNotFound(err, endpointID)
	}
	return n, nil
}

// RedeliverFor makes a delivery of clientID's (any when "") pending again,
// due now, with a fresh schedule, unless its endpoint was deleted. A
// delivery being attempted right now is left to that attempt.
func (s *Webhooks) RedeliverFor(ctx context.Context, clientID, id string) error {
	notFound := storelink.Errorf(storelink.ENOTFOUND, "Delivery %q not found.", id)
	d, err := s.d.GetDelivery(ctx, id)
	if errors.Is(err, ErrNotFound) || err == nil && clientID != "" && d.ClientID != clientID {
		return notFound
	} else if err != nil {
		return err
	}
	e, err := s.d.GetEndpoint(ctx, d.EndpointID)
	if err != nil {
		return err
	}
	if e.DeletedAt != nil {
		return deletedEndpoint(e)
	}
	if err := s.d.Redeliver(ctx, RedeliverParams{ID: id, At: s.now(), Pending: storelink.DeliveryPending}); errors.Is(err, ErrNotFound) {
		return notFound
	} else if err != nil {
		return err
	}
	return nil
}

// TestDelivery makes the job of a test send: an example event of state
// for the endpoint's client, signed with the endpoint's secrets, sent with
// its key, never stored.
func (s *Webhooks) TestDelivery(ctx context.Context, clientID, endpointID string, state storelink.OrderState) (*storelink.DeliveryJob, error) {
	if s.sealer == nil {
		return nil, errNoSealer
	}
	if state == storelink.StateNone {
		state = storelink.StateAssigned
	}
	if err := storelink.CheckStates([]storelink.OrderState{state}); err != nil {
		return nil, storelink.Errorf(storelink.EUNPROCESSABLE, "state: %q is neither an order state nor %s.", state, storelink.EventUploadFinished)
	}
	e, err := s.endpointOf(ctx, clientID, endpointID)
	if err != nil {
		return nil, err
	}
	if e.DeletedAt != nil {
		return nil, deletedEndpoint(e)
	}
	keys, err := s.d.EndpointKeys(ctx, e.ID)
	if err != nil {
		return nil, endpointNotFound(err, e.ID)
	}
	c, err := s.d.GetClient(ctx, e.ClientID)
	if err != nil {
		return nil, err
	}
	stores, err := s.d.Stores(ctx, e.ClientID)
	if err != nil {
		return nil, err
	}
	store := "TEST-STORE"
	if len(stores) > 0 {
		store = stores[0].ID
	}
	now := s.now()
	var id string
	var body []byte
	if state == storelink.EventUploadFinished {
		u := storelink.ExampleUpload(e.ClientID, now, newIDFunc(now))
		ev := storelink.NewUploadEvent(u, storelink.NewID(now), s.statusURL(u.ClientID, u.ID))
		id, body = ev.EventID, ev.Marshal()
	} else {
		ev := storelink.ExampleEvent(state, store, c.Currency, now, newIDFunc(now))
		id, body = ev.EventID, ev.Marshal()
	}
	o := s.openKeys(keys, now)
	return &storelink.DeliveryJob{EventID: id, EndpointID: e.ID, URL: e.URL, Body: body,
		APIKey: o.apiKey, Secrets: o.secrets, Unsealable: o.unsealable}, nil
}

// deletedEndpoint is the answer to a change of a deleted endpoint.
func deletedEndpoint(e *storelink.Endpoint) error {
	return storelink.Errorf(storelink.ECONFLICT, "Webhook endpoint %q was deleted at %s; it can be read but nothing is sent to it any more.",
		e.ID, e.DeletedAt.UTC().Format(time.RFC3339))
}
