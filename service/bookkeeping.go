package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"storelink"
)

var _ storelink.DeliveryQueue = (*Webhooks)(nil)

// Bookkeeping is the deliverer's side of a Driver: the transactions in which
// it records attempts and claims deliveries, and the return of claims it
// did not attempt. Its rounds are transactions of their own, apart from
// Begin's, because a driver may commit them with less care than an order
// (a lost round only sends an event again, which at-least-once delivery
// allows) and runs them hundreds of times a second.
type Bookkeeping interface {
	// BeginRound starts a transaction of the deliverer's bookkeeping. The
	// caller ends it with Commit or Rollback; Rollback after Commit does
	// nothing.
	BeginRound(ctx context.Context) (RoundTx, error)
	// ReleaseClaims ends the leases that jobs still hold, on deliveries
	// that were not attempted and are in state pending: each is
	// claimable again at once, as it was before its claim, its attempt and
	// try not counted. A job whose lease was lost changes nothing.
	ReleaseClaims(ctx context.Context, jobs []storelink.DeliveryJob, pending storelink.DeliveryState) error
}

// RoundTx is one transaction of the deliverer's bookkeeping, ended by Commit
// or by its claim (ClaimDue). Its claim sees what its record wrote; nothing
// of either is seen by others before the round commits, and a driver may
// send nothing before then.
type RoundTx interface {
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error

	// RecordAttempts writes the attempt of every result of p (one attempt,
	// should the same come twice), with the URL it went to, its job's
	// endpoint, and as succeeded when p.Moves[i] is MoveSucceeded, and, for
	// each result whose job still holds its delivery's lease (the same
	// owner and attempt: a lease that ran out may have been taken again,
	// even by the same owner), ends the lease and makes the change
	// p.Moves[i] says, provided the delivery is still in state p.Pending;
	// the others change nothing but their attempt. p.Now stamps the rows.
	RecordAttempts(ctx context.Context, p RecordAttemptsParams) error
	// ClaimDue ends the round: it commits the round's record together with
	// a claim, so that a driver can send them at once and hold no lock of
	// its claims across a round trip to this process (which the kernel may
	// stop for a while: a process capped by a CPU quota). Commit and
	// Rollback after it do nothing. Should the claim fail, the record
	// commits all the same, if it can, and the claim's error is returned.
	//
	// The claim keeps the other claims waiting until it commits, so that
	// each counts the deliveries in flight per endpoint as the one before
	// left them, and leases nothing unless the check value of the secret key
	// that the database's secrets are sealed with is p.KeyCheck, or the
	// database has none; it returns the database's check value, or "" when
	// nothing but this process can change it. It leases up to p.Limit
	// deliveries for p.Owner until p.Now+p.Lease, each counted as an attempt
	// and a try: pending ones (in state p.Pending), due at p.Now, not in
	// flight, to enabled endpoints; of the pending deliveries of one order
	// to one endpoint only the one of the oldest event (so that an order's
	// events arrive in order). Those are the rules; p.Caps is the
	// deliverer's pacing, which the claim applies as given
	// (ClaimDueParams). The oldest due go first, in that order.
	ClaimDue(ctx context.Context, p ClaimDueParams) (ClaimDueResult, error)
}

// RecordAttemptsParams are the attempts RecordAttempts writes and what
// each does to its delivery.
type RecordAttemptsParams struct {
	Results []storelink.AttemptResult
	// Moves are, by result, the change each makes to its delivery.
	Moves []Move
	// Now stamps the rows.
	Now time.Time
	// Pending is the state of a delivery waiting for its attempt: only a
	// delivery still in it is moved on.
	Pending storelink.DeliveryState
}

// ClaimDueParams are what ClaimDue leases, to whom and for how long.
type ClaimDueParams struct {
	// Pending is the state of the deliveries waiting for their attempts,
	// the only ones claimed.
	Pending storelink.DeliveryState
	// Owner is the deliverer the leases are for.
	Owner string
	// KeyCheck is the check value of this process's secret key.
	KeyCheck string
	// Now is the time the claim is made at: the deliveries due at it go.
	Now time.Time
	// Lease is how long a lease lasts from Now.
	Lease time.Duration
	// Limit bounds the deliveries leased.
	Limit int
	// Caps is the deliverer's pacing, not a rule of deliveries: the worker
	// sets it from what it has learnt of each endpoint (worker.Deliverer),
	// and the claim leaves an endpoint at no more leased deliveries than
	// its cap (storelink.ClaimCaps says which count). It reaches the
	// claim's SQL as a plain value because the cap must be applied while
	// the claim counts the deliveries in flight under its lock: a cap
	// applied after the claim would lease deliveries and give them back,
	// counting attempts never made, and another process's claim could take
	// them meanwhile.
	Caps storelink.ClaimCaps
}

// ClaimDueResult is what ClaimDue leased, and the database's key check value
// ("" when nothing but this process can change it).
type ClaimDueResult struct {
	Claimed  []Claimed
	KeyCheck string
}

// Move is what a recorded attempt does to its delivery, decided once here
// (moves) and written by the driver.
type Move struct {
	Kind MoveKind
	// NextAt is when a delivery that stays pending is due again.
	NextAt time.Time
	// Disable is the reason its endpoint is disabled for, by MovePark.
	Disable string
	// Since is when the parked attempt began (MovePark): an endpoint
	// changed at or after it (updated_at), as by an operator enabling it
	// again while the attempt was in flight, is left as it is, so that an
	// answer older than the change does not undo it.
	Since time.Time
	// Tries is the count of tries a parked delivery keeps (MovePark): the
	// one before this attempt's, which does not count.
	Tries int
	// End is the state an ended delivery goes to (MoveSucceeded,
	// MoveFailed).
	End storelink.DeliveryState
}

// MoveKind is the kind of a Move; drivers keep a statement for each.
type MoveKind int

const (
	// MoveSucceeded ends the delivery, succeeded.
	MoveSucceeded MoveKind = iota
	// MoveRetry keeps it pending, due again at NextAt.
	MoveRetry
	// MoveFailed ends it, failed: its schedule is spent.
	MoveFailed
	// MovePark keeps it pending, due at NextAt, its try not counted, and
	// disables its endpoint unless the endpoint changed since the attempt
	// began (Since): it goes again once the endpoint is enabled, or at once
	// if it is.
	MovePark
)

// Claimed is a delivery a claim leased, with what its attempt needs as the
// database keeps it: Job has everything but the endpoint's key and secrets,
// which are still sealed in Keys.
type Claimed struct {
	Job  storelink.DeliveryJob
	Keys SealedKeys
}

// SealedKeys is an endpoint's API key and signing secrets, sealed as they
// are kept. The previous secret signs beside the current one until
// PreviousUntil.
type SealedKeys struct {
	APIKey, Secret, Previous string
	PreviousUntil            time.Time
}

// errNoSealer is what a claim answers when the service was given no sealer:
// nothing it claimed could be signed.
var errNoSealer = errors.New("service: no sealer (WithSealer): webhook secrets cannot be stored or read")

// ClaimDeliveries leases due deliveries and reads what their attempts need.
func (s *Webhooks) ClaimDeliveries(ctx context.Context, r storelink.ClaimRequest) ([]storelink.DeliveryJob, error) {
	if s.sealer == nil {
		return nil, errNoSealer
	}
	return s.RecordAndClaim(ctx, nil, r)
}

// RecordAttempts records finished attempts and moves their deliveries on.
func (s *Webhooks) RecordAttempts(ctx context.Context, results []storelink.AttemptResult) error {
	_, err := s.RecordAndClaim(ctx, results, storelink.ClaimRequest{})
	return err
}

// RecordAndClaim records results and claims up to r.Limit deliveries for
// r.Owner in one transaction (storelink.DeliveryQueue). A transaction that
// the driver says ended for a transient reason is run again, as inTx does.
func (s *Webhooks) RecordAndClaim(ctx context.Context, results []storelink.AttemptResult, r storelink.ClaimRequest) ([]storelink.DeliveryJob, error) {
	if len(results) == 0 && r.Limit <= 0 {
		return nil, nil
	}
	var refused error // the claim's, when there can be none
	if r.Limit > 0 && s.sealer == nil {
		if len(results) == 0 {
			return nil, errNoSealer
		}
		refused, r.Limit = errNoSealer, 0
	}
	for try := 1; ; try++ {
		jobs, err := s.round(ctx, results, r)
		if try < maxTries && err != nil && s.d.Transient(err) {
			continue
		}
		if err == nil {
			err = refused
		}
		return jobs, err
	}
}

// round is one try of RecordAndClaim. A claim that fails leaves the record
// to commit all the same: the attempts were made.
func (s *Webhooks) round(ctx context.Context, results []storelink.AttemptResult, r storelink.ClaimRequest) ([]storelink.DeliveryJob, error) {
	now := s.now()
	tx, err := s.d.BeginRound(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	if len(results) > 0 {
		if err := tx.RecordAttempts(ctx, RecordAttemptsParams{Results: results, Moves: moves(results, now), Now: now,
			Pending: storelink.DeliveryPending}); err != nil {
			return nil, fmt.Errorf("record delivery attempts: %w", err)
		}
	}
	if r.Limit <= 0 {
		return nil, tx.Commit(ctx)
	}
	claimed, err := s.claim(ctx, tx, r, now)
	if err != nil {
		return nil, err
	}
	return s.open(claimed, now), nil
}

// claim leases due deliveries in tx and commits it. A process whose key is
// no longer the database's (storelink secret-key rotate while it ran)
// claims nothing, rather than count attempts it cannot make.
func (s *Webhooks) claim(ctx context.Context, tx RoundTx, r storelink.ClaimRequest, now time.Time) ([]Claimed, error) {
	due, err := tx.ClaimDue(ctx, ClaimDueParams{Pending: storelink.DeliveryPending, Owner: r.Owner, KeyCheck: s.sealer.Check(),
		Now: now, Lease: r.Lease, Limit: r.Limit, Caps: r.Caps})
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	if check := due.KeyCheck; check != "" && check != s.sealer.Check() {
		return nil, fmt.Errorf("this process's secret key (fingerprint %s) is no longer the database's (fingerprint %s): "+
			"no delivery is claimed; restart it with the database's key", s.sealer.Fingerprint(), storelink.KeyFingerprint(check))
	}
	return due.Claimed, nil
}

// moves decides what each result does to its delivery: a success ends it,
// a retry makes it due again when the deliverer's policy said, a spent
// schedule fails it, and a 410 parks it, disabling its endpoint, so that it
// goes again, its try not counted, once the endpoint is enabled. A 410 to
// an attempt that began before the endpoint's last change (an operator
// enabled it again meanwhile) leaves the endpoint as the operator left it:
// the delivery is due at once, and its next attempt's answer decides.
func moves(results []storelink.AttemptResult, now time.Time) []Move {
	out := make([]Move, len(results))
	for i := range results {
		r := &results[i]
		switch r.Outcome {
		case storelink.OutcomeSucceeded:
			out[i] = Move{Kind: MoveSucceeded, End: storelink.DeliverySucceeded}
		case storelink.OutcomeRetry:
			out[i] = Move{Kind: MoveRetry, NextAt: r.NextAt.UTC().Truncate(time.Millisecond)}
		case storelink.OutcomeFailed:
			out[i] = Move{Kind: MoveFailed, End: storelink.DeliveryFailed}
		case storelink.OutcomeGone:
			out[i] = Move{Kind: MovePark, NextAt: now, Tries: max(r.Job.Try-1, 0), Since: r.Attempt.At.UTC(),
				Disable: "The endpoint answered 410 Gone at " + r.Attempt.At.UTC().Format(time.RFC3339) + "."}
		}
	}
	return out
}

// opened is an endpoint's key and secrets as its jobs carry them.
type opened struct {
	apiKey, unsealable string
	secrets            []string
}

// open makes the jobs of what a claim leased, opening each endpoint's key
// and secrets once. An endpoint whose secrets cannot be opened holds up
// only its own deliveries, which go to the deliverer all the same, to be
// recorded as attempts that failed for that reason (the claim counted
// them), so that the other endpoints' deliveries in the claim go out.
func (s *Webhooks) open(claimed []Claimed, now time.Time) []storelink.DeliveryJob {
	if len(claimed) == 0 {
		return nil
	}
	jobs := make([]storelink.DeliveryJob, len(claimed))
	endpoints := make(map[string]opened, 1)
	for i := range claimed {
		c := &claimed[i]
		o, ok := endpoints[c.Job.EndpointID]
		if !ok {
			o = s.openKeys(c.Keys, now)
			endpoints[c.Job.EndpointID] = o
		}
		jobs[i] = c.Job
		jobs[i].APIKey, jobs[i].Secrets, jobs[i].Unsealable = o.apiKey, o.secrets, o.unsealable
	}
	return jobs
}

// openKeys opens an endpoint's key and secrets to sign with at now: the
// previous secret only while its overlap lasts.
func (s *Webhooks) openKeys(k SealedKeys, now time.Time) opened {
	previous := k.Previous
	if !k.PreviousUntil.After(now) {
		previous = ""
	}
	var o opened
	var sealed bool
	if o.apiKey, o.secrets, sealed = s.sealer.OpenEndpoint(k.APIKey, k.Secret, previous); !sealed {
		o = opened{unsealable: storelink.UnsealableReason}
	}
	return o
}

// ReleaseClaims gives back claimed deliveries that were not attempted
// (storelink.DeliveryQueue).
func (s *Webhooks) ReleaseClaims(ctx context.Context, jobs []storelink.DeliveryJob) error {
	if len(jobs) == 0 {
		return nil
	}
	return s.d.ReleaseClaims(ctx, jobs, storelink.DeliveryPending)
}
