package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"storelink"
	"storelink/service"
)

// claim picks up to p.Limit due deliveries for p.Owner from the queue, at
// most p.Caps leased per endpoint, and returns them and the leases to take
// for them once the transaction commits. It reads only: the picked rows,
// their endpoints, and the rows queued since the last claim. A picked row
// no longer in state p.Pending leaves the queue. The leases ending, those
// of the results recorded in the same transaction, count as ended.
func claim(ctx context.Context, tx *unsyncedTx, book *leaseBook, q *deliveryQueue, ending []*deliveryLease,
	p service.ClaimDueParams) ([]service.Claimed, map[string]*deliveryLease, error) {
	owner, now, lease, limit, caps, pending := p.Owner, p.Now, p.Lease, p.Limit, p.Caps, p.Pending
	nowMS := ms(now)
	if err := q.sync(ctx, tx, book, ending, nowMS); err != nil {
		return nil, nil, err
	}
	lines := q.pick(nowMS, limit, caps)
	if len(lines) == 0 {
		return nil, nil, nil
	}
	seqs := make([]int64, len(lines))
	for i, l := range lines {
		seqs[i] = l.entries[0].seq
	}
	rows := make(map[int64]*claimed, len(lines))
	if err := eachRow(ctx, tx, pickedSQL, jsonInts(seqs), func(r *sql.Rows) error {
		var c claimed
		if err := r.Scan(&c.seq, &c.id, &c.eventID, &c.attempts, &c.tries, &c.state, &c.next, &c.payload); err != nil {
			return err
		}
		rows[c.seq] = &c
		return nil
	}); err != nil {
		return nil, nil, err
	}
	endpoints := make([]string, 0, 1)
	for _, l := range lines {
		if id := l.key.endpoint.id; !slices.Contains(endpoints, id) {
			endpoints = append(endpoints, id)
		}
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
	out := make([]service.Claimed, 0, len(lines))
	taken := make(map[string]*deliveryLease, len(lines))
	until := ms(now.Add(lease))
	for _, l := range lines {
		e, d := l.key.endpoint, &l.entries[0]
		row, t := rows[d.seq], targets[e.id]
		switch {
		case row == nil || row.state != string(pending):
			// Not pending (or gone) in the file: out of the queue.
			l.entries = slices.Delete(l.entries, 0, 1)
			q.fix(l)
			continue
		case row.next > nowMS:
			d.next = row.next
			q.fix(l)
			continue
		case t == nil:
			// Disabled (or gone): its deliveries wait, parked.
			e.disabled = true
			q.fix(l)
			continue
		}
		// A lease that ran out on this delivery was an attempt and a try,
		// whether or not its result came in.
		attempts, tries, lostAttempt, lostTry := row.attempts, row.tries, 0, 0
		if a, t := book.previous(row.id, ending); a > 0 {
			attempts, tries = max(attempts, a), max(tries, t)
			lostAttempt, lostTry = attempts, tries
		}
		out = append(out, service.Claimed{Job: storelink.DeliveryJob{DeliveryID: row.id, EventID: row.eventID, EndpointID: e.id,
			Attempt: attempts + 1, Try: tries + 1, URL: t.url, Body: row.payload, Owner: owner}, Keys: t.keys})
		taken[row.id] = &deliveryLease{id: row.id, seq: row.seq, endpointID: e.id, order: l.key.order, owner: owner, until: until,
			attempt: attempts + 1, try: tries + 1, lostAttempt: lostAttempt, lostTry: lostTry}
		d.leased = true
		e.leased++
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
