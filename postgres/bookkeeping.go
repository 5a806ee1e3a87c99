package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
	"storelink/service"
)

// claimDeliveriesSQL picks due deliveries: pending (in state $11), due, not
// leased, to an enabled endpoint; per order and endpoint only the oldest pending event (so
// events of one order arrive in order); per endpoint no more than its cap
// leased to this owner ($2), counting those it holds already (so a slow
// endpoint holds few of its workers): $4 for an endpoint not among the caps
// given ($6, $7); and no more than $8 leased to every process together. It
// locks what it picked with SKIP LOCKED, checking again on the row as locked
// that it is still pending and not leased, leases it, and returns what the
// attempt needs, all in one statement.
//
// It reads endpoint by endpoint: eps is the enabled endpoints with a due
// delivery, inflight counts each one's deliveries leased (the index
// deliveries_leased holds the leased ones only), and due walks each one's
// pending deliveries in the order they are taken (deliveries_endpoint_due)
// and stops once it has the endpoint's share: what a claim reads is about
// what it can take, not the backlog.
//
// Each look is written so that the planner cannot but make it through an
// index, whatever the table's statistics say: a scalar subquery per
// endpoint for "has a due delivery" (its earliest due, the first entry of
// deliveries_endpoint_due) and per delivery for "is the oldest pending
// event of its order to this endpoint" (deliveries_order's first entry),
// each asked for in its index's order (with min(), the planner read the
// endpoint's every pending delivery for each candidate instead), an array
// of ids for the rows to lock. Written as EXISTS and NOT EXISTS, they are
// joins, which on a table whose statistics say it is nearly empty (a new
// database, a backlog grown since the last ANALYZE) the planner can make a
// scan of every due delivery and, for each candidate, of its endpoint's
// every pending delivery, the claim lock held meanwhile.
//
// It claims nothing unless the secret key's check value in settings ($10)
// is $9 or there is none: another process may have moved the database to a
// new key (storelink secret-key rotate) while this one ran.
//
// The transaction holds the delivery-claim advisory lock (claimLockSQL): the
// in-flight count is exact only if no other claim runs between counting and
// leasing, which SQLite's single writer gives for free and PostgreSQL needs
// a lock for.
const claimDeliveriesSQL = `
WITH eps AS (
	SELECT e.id FROM endpoints e
	WHERE e.enabled AND coalesce((SELECT value FROM settings WHERE name = $10), '') IN ('', $9)
	  AND (SELECT d.next_attempt_at FROM deliveries d WHERE d.endpoint_id = e.id AND d.state = $11
	       ORDER BY d.endpoint_id, d.next_attempt_at LIMIT 1) <= $1
), inflight AS (
	SELECT eps.id AS endpoint_id, f.n, f.own FROM eps CROSS JOIN LATERAL (
		SELECT count(*) AS n, count(*) FILTER (WHERE lease_owner = $2) AS own FROM deliveries
		WHERE endpoint_id = eps.id AND state = $11 AND lease_until IS NOT NULL AND lease_until >= $1) f
), due AS (
	SELECT d.id, d.next_attempt_at, d.event_seq
	FROM inflight i LEFT JOIN unnest($6::text[], $7::int[]) AS caps(endpoint_id, n) ON caps.endpoint_id = i.endpoint_id
	CROSS JOIN LATERAL (
		SELECT d.id, d.next_attempt_at, d.event_seq FROM deliveries d
		WHERE d.endpoint_id = i.endpoint_id AND d.state = $11 AND d.next_attempt_at <= $1
		  AND (d.lease_until IS NULL OR d.lease_until < $1)
		  AND d.event_seq = (SELECT p.event_seq FROM deliveries p
		                     WHERE p.endpoint_id = d.endpoint_id AND p.order_id = d.order_id AND p.state = $11
		                     ORDER BY p.endpoint_id, p.order_id, p.event_seq LIMIT 1)
		ORDER BY d.next_attempt_at, d.event_seq
		LIMIT greatest(least(coalesce(caps.n, $4) - i.own, $8 - i.n), 0)) d
), pick AS (
	SELECT id FROM due ORDER BY next_attempt_at, event_seq LIMIT $5
), locked AS (
	SELECT d.id FROM deliveries d
	WHERE d.id = ANY (ARRAY(SELECT id FROM pick)) AND d.state = $11 AND (d.lease_until IS NULL OR d.lease_until < $1)
	FOR UPDATE SKIP LOCKED
)
UPDATE deliveries d SET lease_owner = $2, lease_until = $3, attempts = d.attempts + 1, tries = d.tries + 1
FROM locked, events ev, endpoints e
WHERE d.id = locked.id AND ev.id = d.event_id AND e.id = d.endpoint_id
RETURNING d.id, d.event_id, d.endpoint_id, d.attempts, d.tries, ev.payload,
	e.url, e.api_key, e.secret, e.previous_secret, e.previous_secret_until, d.next_attempt_at, d.event_seq`

// claimLockSQL takes the delivery-claim advisory lock until the
// transaction ends and reads the secret key's check value under it. It has
// the claim that follows planned for its parameters each time
// (plan_cache_mode, until the transaction ends): a generic plan, which
// PostgreSQL may settle on for a statement prepared on the connection,
// knows neither the time nor the limits, and a claim is run hundreds of
// times a second on a table that changes as fast. Nor does it know the
// state the claim takes ($11), without which none of the partial indexes of pending
// deliveries (deliveries_endpoint_due, deliveries_leased,
// deliveries_order) serves.
const claimLockSQL = `SELECT coalesce((SELECT value FROM settings WHERE name = $2), '')
	FROM (SELECT pg_advisory_xact_lock($1, 0), set_config('plan_cache_mode', 'force_custom_plan', true)) AS l`

// BeginRound starts a round of the deliverer's bookkeeping. It sends
// nothing: the round's statements are queued and sent in one batch, by
// Commit or ClaimDue, which PostgreSQL runs as one implicit transaction
// (pgx's SendBatch), so that the claim lock is held by the server alone,
// from the claim to the commit, never across a round trip to this process.
// A context that has ended begins no round: its error is returned, as the
// other drivers' Begin return it.
func (d *webhooks) BeginRound(ctx context.Context) (service.RoundTx, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &roundTx{db: d.db}, nil
}

// roundTx is a round of the deliverer's bookkeeping: the record's
// statements, queued until the round is sent.
type roundTx struct {
	db   *DB
	b    pgx.Batch
	done bool
}

// Commit sends the round's record, if any, in one batch.
func (t *roundTx) Commit(ctx context.Context) error {
	if t.done {
		return nil
	}
	t.done = true
	if t.b.Len() == 0 {
		return nil
	}
	return t.db.pool.SendBatch(ctx, &t.b).Close()
}

// Rollback drops the round's record, unless it was sent.
func (t *roundTx) Rollback(context.Context) error {
	t.done = true
	return nil
}

// ClaimDue sends the round's record, the claim lock and the claim
// (claimDeliveriesSQL) in one batch, committed as one transaction, and
// returns what it leased, oldest due first. Should the claim fail, the
// record is sent again alone.
func (t *roundTx) ClaimDue(ctx context.Context, p service.ClaimDueParams) (service.ClaimDueResult, error) {
	owner, now, caps := p.Owner, p.Now, p.Caps
	if t.done {
		return service.ClaimDueResult{}, errors.New("claim in an ended round")
	}
	t.done = true
	ids, ns := make([]string, 0, len(caps.Of)), make([]int32, 0, len(caps.Of))
	for id, n := range caps.Of {
		ids, ns = append(ids, id), append(ns, int32(n))
	}
	all := caps.All
	if all <= 0 {
		all = math.MaxInt32
	}
	records := t.b.Len()
	b := &pgx.Batch{QueuedQueries: slices.Clone(t.b.QueuedQueries)}
	b.Queue(claimLockSQL, lockDeliveryClaims, settingKeyCheck)
	b.Queue(claimDeliveriesSQL, now, owner, now.Add(p.Lease), caps.Default, p.Limit, ids, ns, all, p.KeyCheck, settingKeyCheck, p.Pending)
	br := t.db.pool.SendBatch(ctx, b)
	claimed, check, err := readClaim(br, records, owner)
	if cerr := br.Close(); err == nil {
		err = cerr // the commit's
	}
	if err == nil {
		return service.ClaimDueResult{Claimed: claimed, KeyCheck: check}, nil
	}
	if records > 0 && ctx.Err() == nil {
		// The batch's transaction was rolled back: the attempts were made
		// all the same.
		if rerr := t.db.pool.SendBatch(ctx, &t.b).Close(); rerr != nil {
			return service.ClaimDueResult{}, fmt.Errorf("%w (and the record again: %v)", err, rerr)
		}
	}
	return service.ClaimDueResult{}, err
}

// readClaim reads a claim's batch: the record's results, the key check and
// the leased deliveries, oldest due first.
func readClaim(br pgx.BatchResults, records int, owner string) ([]service.Claimed, string, error) {
	for range records {
		if _, err := br.Exec(); err != nil {
			return nil, "", fmt.Errorf("record delivery attempts: %w", err)
		}
	}
	var check string
	if err := br.QueryRow().Scan(&check); err != nil {
		return nil, "", fmt.Errorf("take delivery claim lock: %w", err)
	}
	type row struct {
		service.Claimed
		due   time.Time
		seq   int64
		until *time.Time
	}
	rows, err := br.Query()
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var list []row
	for rows.Next() {
		c := row{Claimed: service.Claimed{Job: storelink.DeliveryJob{Owner: owner}}}
		j, k := &c.Job, &c.Keys
		var payload string
		if err := rows.Scan(&j.DeliveryID, &j.EventID, &j.EndpointID, &j.Attempt, &j.Try, &payload,
			&j.URL, &k.APIKey, &k.Secret, &k.Previous, &c.until, &c.due, &c.seq); err != nil {
			return nil, "", err
		}
		j.Body = []byte(payload)
		if c.until != nil {
			k.PreviousUntil = *c.until
		}
		list = append(list, c)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	// RETURNING has no order: the oldest due first, as SQLite gives them.
	slices.SortFunc(list, func(a, b row) int {
		if c := a.due.Compare(b.due); c != 0 {
			return c
		}
		return int(a.seq - b.seq)
	})
	out := make([]service.Claimed, len(list))
	for i := range list {
		out[i] = list[i].Claimed
	}
	return out, check, nil
}

// endedSQL ends a delivery in the state its move ends it in ($6,
// Move.End).
const endedSQL = `UPDATE deliveries SET state = $6, next_attempt_at = NULL, lease_owner = NULL,
		lease_until = NULL, updated_at = $4`

// RecordAttempts queues the statements that record finished attempts and
// move their deliveries on, sent with the round.
func (t *roundTx) RecordAttempts(_ context.Context, p service.RecordAttemptsParams) error {
	b := &t.b
	for i := range p.Results {
		r, m := &p.Results[i], &p.Moves[i]
		a := r.Attempt
		var code any
		if a.StatusCode != 0 {
			code = a.StatusCode
		}
		// A result recorded twice (a retried batch) is one attempt.
		b.Queue(`INSERT INTO delivery_attempts (delivery_id, number, at, duration_ms, status_code, error, response, url, endpoint_id,
				succeeded)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (delivery_id, number) DO NOTHING`,
			r.Job.DeliveryID, a.Number, a.At.UTC().Truncate(time.Millisecond), a.DurationMS, code, a.Error, a.Response, a.URL,
			r.Job.EndpointID, m.Kind == service.MoveSucceeded)
		// Only the lease holder moves the delivery on: the same owner and
		// the same attempt, since a lease that ran out may have been taken
		// again, even by this owner; and only while it is pending ($5).
		const held = ` WHERE id = $1 AND lease_owner = $2 AND attempts = $3 AND state = $5`
		job := []any{r.Job.DeliveryID, r.Job.Owner, r.Job.Attempt, p.Now, p.Pending}
		switch m.Kind {
		case service.MovePark:
			// The endpoint is disabled only when the lease holder's
			// delivery was parked, and was not changed since the attempt
			// began ($9, Move.Since).
			b.Queue(`WITH parked AS (
					UPDATE deliveries SET next_attempt_at = $7, tries = $8, lease_owner = NULL,
						lease_until = NULL, updated_at = $4`+held+` RETURNING endpoint_id)
				UPDATE endpoints SET enabled = false, disabled_reason = $6, updated_at = $4
				WHERE id IN (SELECT endpoint_id FROM parked) AND updated_at < $9`, append(job, m.Disable, m.NextAt, m.Tries, m.Since)...)
		case service.MoveRetry:
			b.Queue(`UPDATE deliveries SET next_attempt_at = $6, lease_owner = NULL, lease_until = NULL,
				updated_at = $4`+held, append(job, m.NextAt)...)
		default:
			b.Queue(endedSQL+held, append(job, m.End)...)
		}
	}
	return nil
}

// ReleaseClaims ends the leases that jobs still hold on pending deliveries,
// in one statement: the claim's attempt and try are taken back and the
// delivery is due as it was, and the deliverers of every process are woken
// to claim it again.
func (d *webhooks) ReleaseClaims(ctx context.Context, jobs []storelink.DeliveryJob, pending storelink.DeliveryState) error {
	ids, owners, attempts := make([]string, len(jobs)), make([]string, len(jobs)), make([]int32, len(jobs))
	for i, j := range jobs {
		ids[i], owners[i], attempts[i] = j.DeliveryID, j.Owner, int32(j.Attempt)
	}
	_, err := d.db.pool.Exec(ctx, `WITH released AS (
			UPDATE deliveries d SET lease_owner = NULL, lease_until = NULL,
				attempts = d.attempts - 1, tries = greatest(d.tries - 1, 0)
			FROM unnest($1::text[], $2::text[], $3::int[]) AS r(id, owner, attempt)
			WHERE d.id = r.id AND d.lease_owner = r.owner AND d.attempts = r.attempt AND d.state = $5
			RETURNING d.id)
		SELECT pg_notify($4, current_schema()) WHERE EXISTS (SELECT 1 FROM released)`, ids, owners, attempts, ChannelDeliveries, pending)
	return err
}
