package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"storelink"
)

// claimDeliveriesSQL picks due deliveries: pending, due, not leased, to an
// enabled endpoint; per order and endpoint only the oldest pending event (so
// events of one order arrive in order); per endpoint no more than a cap in
// flight, counting those already leased (so a slow endpoint holds few
// workers). It locks what it picked with SKIP LOCKED, checking again on the
// row as locked that it is still pending and not leased, leases it, and
// returns what the attempt needs, all in one statement.
//
// The caller holds the delivery-claim advisory lock: the in-flight count
// is exact only if no other claim runs between counting and leasing, which
// SQLite's single writer gives for free and PostgreSQL needs a lock for.
const claimDeliveriesSQL = `
WITH due AS (
	SELECT d.id, d.endpoint_id, d.next_attempt_at, d.event_seq,
	       row_number() OVER (PARTITION BY d.endpoint_id ORDER BY d.next_attempt_at, d.event_seq) AS rn
	FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id
	WHERE d.state = 'pending' AND d.next_attempt_at <= $1 AND (d.lease_until IS NULL OR d.lease_until < $1)
	  AND e.enabled
	  AND NOT EXISTS (SELECT 1 FROM deliveries p WHERE p.endpoint_id = d.endpoint_id AND p.order_id = d.order_id
	                  AND p.state = 'pending' AND p.event_seq < d.event_seq)
), inflight AS (
	SELECT endpoint_id, count(*) AS n FROM deliveries WHERE state = 'pending' AND lease_until >= $1 GROUP BY endpoint_id
), pick AS (
	SELECT due.id FROM due LEFT JOIN inflight ON inflight.endpoint_id = due.endpoint_id
	WHERE due.rn + coalesce(inflight.n, 0) <= $4
	ORDER BY due.next_attempt_at, due.event_seq LIMIT $5
), locked AS (
	SELECT d.id FROM deliveries d
	WHERE d.id IN (SELECT id FROM pick) AND d.state = 'pending' AND (d.lease_until IS NULL OR d.lease_until < $1)
	FOR UPDATE SKIP LOCKED
)
UPDATE deliveries d SET lease_owner = $2, lease_until = $3, attempts = d.attempts + 1, tries = d.tries + 1
FROM locked, events ev, endpoints e
WHERE d.id = locked.id AND ev.id = d.event_id AND e.id = d.endpoint_id
RETURNING d.id, d.event_id, d.endpoint_id, d.attempts, d.tries, ev.payload,
	e.url, e.api_key, e.secret, e.previous_secret, e.previous_secret_until, d.next_attempt_at, d.event_seq`

// ClaimDeliveries leases due deliveries and reads what their attempts need.
func (db *DB) ClaimDeliveries(ctx context.Context, owner string, lease time.Duration, limit, perEndpoint int) ([]storelink.DeliveryJob, error) {
	sealer, err := db.sealer()
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	type claimed struct {
		job   storelink.DeliveryJob
		due   time.Time
		seq   int64
		keys  [3]string // api key, secret, previous secret (sealed)
		until *time.Time
	}
	var list []claimed
	now := db.now()
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		list = list[:0]
		// The key is checked again under the lock, in the same round trip:
		// a process left running with the old key after the database moved
		// to a new one (storelink secret-key rotate) claims nothing, rather
		// than count attempts it cannot make.
		var check string
		if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT value FROM settings WHERE name = $2), '')
			FROM (SELECT pg_advisory_xact_lock($1, 0)) AS l`, lockDeliveryClaims, settingKeyCheck).Scan(&check); err != nil {
			return fmt.Errorf("take delivery claim lock: %w", err)
		}
		if check != "" && check != sealer.Check() {
			return fmt.Errorf("this process's secret key (fingerprint %s) is no longer the database's (fingerprint %s): "+
				"no delivery is claimed; restart it with the database's key", sealer.Fingerprint(), storelink.KeyFingerprint(check))
		}
		rows, err := tx.Query(ctx, claimDeliveriesSQL, now, owner, now.Add(lease), perEndpoint, limit)
		if err != nil {
			return fmt.Errorf("claim deliveries: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			c := claimed{job: storelink.DeliveryJob{Owner: owner}}
			var payload string
			if err := rows.Scan(&c.job.DeliveryID, &c.job.EventID, &c.job.EndpointID, &c.job.Attempt, &c.job.Try, &payload,
				&c.job.URL, &c.keys[0], &c.keys[1], &c.keys[2], &c.until, &c.due, &c.seq); err != nil {
				return err
			}
			c.job.Body = []byte(payload)
			list = append(list, c)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	// RETURNING has no order: the oldest due first, as SQLite gives them.
	slices.SortFunc(list, func(a, b claimed) int {
		if c := a.due.Compare(b.due); c != 0 {
			return c
		}
		return int(a.seq - b.seq)
	})
	// Each endpoint's secrets are opened on their own: one that cannot be
	// opened holds up only its own deliveries, which go to the deliverer
	// to be recorded as attempts that failed for that reason (the claim
	// counted them).
	jobs := make([]storelink.DeliveryJob, 0, len(list))
	for _, c := range list {
		j := c.job
		previous := c.keys[2]
		if c.until == nil || !c.until.After(now) {
			previous = ""
		}
		var ok bool
		if j.APIKey, j.Secrets, ok = sealer.OpenEndpoint(c.keys[0], c.keys[1], previous); !ok {
			j.Unsealable = storelink.UnsealableReason
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// RecordAttempts records finished attempts and moves their deliveries on,
// all in one transaction sent as one batch.
func (db *DB) RecordAttempts(ctx context.Context, results []storelink.AttemptResult) error {
	if len(results) == 0 {
		return nil
	}
	return db.inTx(ctx, func(tx pgx.Tx) error {
		now := db.now()
		b := &pgx.Batch{}
		for _, r := range results {
			a := r.Attempt
			var code any
			if a.StatusCode != 0 {
				code = a.StatusCode
			}
			// A result recorded twice (a retried batch) is one attempt.
			b.Queue(`INSERT INTO delivery_attempts (delivery_id, number, at, duration_ms, status_code, error, response)
				VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (delivery_id, number) DO NOTHING`,
				r.Job.DeliveryID, a.Number, a.At.UTC().Truncate(time.Millisecond), a.DurationMS, code, a.Error, a.Response)
			// Only the lease holder moves the delivery on: the same owner
			// and the same attempt, since a lease that ran out may have
			// been taken again, even by this owner.
			const held = ` WHERE id = $1 AND lease_owner = $2 AND attempts = $3 AND state = 'pending'`
			job := []any{r.Job.DeliveryID, r.Job.Owner, r.Job.Attempt, now}
			switch r.Outcome {
			case storelink.OutcomeSucceeded:
				b.Queue(`UPDATE deliveries SET state = 'succeeded', next_attempt_at = NULL, lease_owner = NULL,
					lease_until = NULL, updated_at = $4`+held, job...)
			case storelink.OutcomeRetry:
				b.Queue(`UPDATE deliveries SET next_attempt_at = $5, lease_owner = NULL, lease_until = NULL,
					updated_at = $4`+held, append(job, r.NextAt.UTC().Truncate(time.Millisecond))...)
			case storelink.OutcomeFailed:
				b.Queue(`UPDATE deliveries SET state = 'failed', next_attempt_at = NULL, lease_owner = NULL,
					lease_until = NULL, updated_at = $4`+held, job...)
			case storelink.OutcomeGone:
				// Parked, not failed: the try does not count, and the
				// delivery goes out again as soon as the endpoint is
				// enabled. Only the lease holder's 410 disables it.
				b.Queue(`WITH parked AS (
						UPDATE deliveries SET next_attempt_at = $4, tries = greatest(tries - 1, 0), lease_owner = NULL,
							lease_until = NULL, updated_at = $4`+held+` RETURNING endpoint_id)
					UPDATE endpoints SET enabled = false, disabled_reason = $5, updated_at = $4
					WHERE id IN (SELECT endpoint_id FROM parked)`,
					append(job, "The endpoint answered 410 Gone at "+a.At.UTC().Format(time.RFC3339)+".")...)
			}
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("record delivery attempts: %w", err)
		}
		return nil
	})
}
