package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"storelink"
	"storelink/service"
)

// candidatesSQL reads the pending deliveries due at ?1 that are the first
// of their order's to their endpoint (an order's events go in order), of
// enabled endpoints, oldest due first: deliveries_due walks them, and
// deliveries_order finds an earlier one of the same order. p is inlined in
// both places (a view, not materialized), each then carrying the predicate
// of the partial indexes.
const candidatesSQL = `WITH p AS NOT MATERIALIZED (SELECT seq, endpoint_id, order_id, event_seq, next_attempt_at
		FROM deliveries WHERE state = 'pending')
	SELECT h.seq, h.endpoint_id FROM p AS h JOIN endpoints e ON e.id = h.endpoint_id
	WHERE h.next_attempt_at <= ?1 AND e.enabled
		AND NOT EXISTS (SELECT 1 FROM p WHERE p.endpoint_id = h.endpoint_id AND p.order_id = h.order_id
			AND p.event_seq < h.event_seq)
	ORDER BY h.next_attempt_at, h.seq`

// claim picks up to limit due deliveries for owner, at most caps.Cap leased
// per endpoint, and returns them and the leases to take for them once the
// transaction commits. It reads only: the due deliveries first in their
// line, oldest first, until it has limit; then the picked rows and their
// endpoints. The deliveries in flight, and how many per endpoint, are the
// live leases in the book, but for those ending (the results recorded in the
// same transaction).
func claim(ctx context.Context, tx *unsyncedTx, book *leaseBook, ending []*deliveryLease, owner string,
	now time.Time, lease time.Duration, limit int, caps storelink.ClaimCaps) ([]service.Claimed, map[string]*deliveryLease, error) {
	nowMS := ms(now)
	leased, inFlight := book.inFlight(nowMS, ending)
	type pick struct {
		seq      int64
		endpoint string
	}
	var picks []pick
	picking := map[string]int{}
	rows, err := tx.QueryContext(ctx, candidatesSQL, nowMS)
	if err != nil {
		return nil, nil, fmt.Errorf("read due deliveries: %w", err)
	}
	var endpointID sql.RawBytes
	for len(picks) < limit && rows.Next() {
		var seq int64
		if err := rows.Scan(&seq, &endpointID); err != nil {
			rows.Close()
			return nil, nil, err
		}
		if leased[seq] {
			continue
		}
		id := string(endpointID)
		// The leases are all this process's (one holds the file): the
		// owner's cap and every owner's bound count the same.
		c := caps.Cap(id)
		if caps.All > 0 {
			c = min(c, caps.All)
		}
		if inFlight[id]+picking[id] >= c {
			continue
		}
		picking[id]++
		picks = append(picks, pick{seq, id})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read due deliveries: %w", err)
	}
	if len(picks) == 0 {
		return nil, nil, nil
	}
	seqs := make([]int64, len(picks))
	for i, p := range picks {
		seqs[i] = p.seq
	}
	picked := make(map[int64]*claimed, len(picks))
	if err := eachRow(ctx, tx, pickedSQL, jsonInts(seqs), func(r *sql.Rows) error {
		var c claimed
		if err := r.Scan(&c.seq, &c.id, &c.eventID, &c.attempts, &c.tries, &c.state, &c.next, &c.payload); err != nil {
			return err
		}
		picked[c.seq] = &c
		return nil
	}); err != nil {
		return nil, nil, err
	}
	endpoints := make([]string, 0, len(picking))
	for id := range picking {
		endpoints = append(endpoints, id)
	}
	targets := make(map[string]*target, len(endpoints))
	if err := eachRow(ctx, tx, endpointsSQL, jsonList(endpoints), func(rows *sql.Rows) error {
		var id string
		var enabled bool
		var until int64
		t := &target{}
		if err := rows.Scan(&id, &enabled, &t.url, &t.keys.APIKey, &t.keys.Secret, &t.keys.Previous, &until); err != nil {
			return err
		}
		if enabled {
			t.keys.PreviousUntil = fromMS(until)
			targets[id] = t
		}
		return nil
	}); err != nil {
		return nil, nil, fmt.Errorf("read claimed endpoints: %w", err)
	}
	out := make([]service.Claimed, 0, len(picks))
	taken := make(map[string]*deliveryLease, len(picks))
	until := ms(now.Add(lease))
	for _, pk := range picks {
		p, t := picked[pk.seq], targets[pk.endpoint]
		if p == nil || t == nil {
			continue // read in the same transaction: never
		}
		// A lease that ran out on this delivery was an attempt and a try,
		// whether or not its result came in.
		attempts, tries, lostAttempt, lostTry := p.attempts, p.tries, 0, 0
		if a, t := book.previous(p.id, ending); a > 0 {
			attempts, tries = max(attempts, a), max(tries, t)
			lostAttempt, lostTry = attempts, tries
		}
		out = append(out, service.Claimed{Job: storelink.DeliveryJob{DeliveryID: p.id, EventID: p.eventID, EndpointID: pk.endpoint,
			Attempt: attempts + 1, Try: tries + 1, URL: t.url, Body: p.payload, Owner: owner}, Keys: t.keys})
		taken[p.id] = &deliveryLease{id: p.id, seq: p.seq, endpointID: pk.endpoint, owner: owner, until: until,
			attempt: attempts + 1, try: tries + 1, lostAttempt: lostAttempt, lostTry: lostTry}
	}
	return out, taken, nil
}

// target is where a claimed delivery goes and what it is signed with, as
// the file keeps it: sealed. The service opens the keys.
type target struct {
	url  string
	keys service.SealedKeys
}

// eachRow runs a prepared query with one argument and calls fn on each row.
func eachRow(ctx context.Context, tx *unsyncedTx, query, arg string, fn func(*sql.Rows) error) error {
	rows, err := tx.QueryContext(ctx, query, arg)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// claimed is a delivery picked by a claim, as the file has it.
type claimed struct {
	seq                int64
	id, eventID, state string
	attempts, tries    int
	next               int64
	payload            []byte
}

// jsonList is a JSON array of strings.
func jsonList(list []string) string {
	b := []byte{'['}
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return string(append(b, ']'))
}

// jsonInts is a JSON array of integers.
func jsonInts(list []int64) string {
	b := []byte{'['}
	for i, n := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, n, 10)
	}
	return string(append(b, ']'))
}

// appendJSONString appends s as a JSON string, as encoding/json writes it
// but for HTML characters, which it leaves alone: invalid UTF-8 becomes
// U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\\ufffd"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
