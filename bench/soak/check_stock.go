package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// appliedUpload is an upload the service applied, with what the checker
// knows of when its apply committed: after started, and before final (when
// a status read saw it final; zero if none did during the workload).
type appliedUpload struct {
	id      string
	name    string
	feed    *feed
	started time.Time
	final   time.Time
}

// stockState is the model of the stock the checker builds: per client and
// row, the applied uploads that set the row in acceptance order, and the
// units orders hold reserved (certainly, and perhaps).
type stockState struct {
	applied map[string]*appliedUpload
	byKey   map[int]map[stockKey][]*appliedUpload
	lo, hi  map[int]map[stockKey]int
	// cur is the stock the applied uploads leave, in acceptance order: per
	// row, its values and the upload that last changed them.
	cur map[int]map[stockKey]current
}

type current struct {
	row    feedRow
	upload *appliedUpload
}

func (st *stockState) key(c *clientModel) {
	if st.byKey == nil {
		st.byKey, st.lo, st.hi = map[int]map[stockKey][]*appliedUpload{}, map[int]map[stockKey]int{}, map[int]map[stockKey]int{}
		st.cur = map[int]map[stockKey]current{}
	}
	if st.byKey[c.idx] == nil {
		st.byKey[c.idx], st.lo[c.idx], st.hi[c.idx] = map[stockKey][]*appliedUpload{}, map[stockKey]int{}, map[stockKey]int{}
		st.cur[c.idx] = map[stockKey]current{}
	}
}

type uploadCounts struct{ sent, acked, applied, rejected, maybeFound, listed, resent, unchanged int }

// checkUploads: every acknowledged upload is listed once with its id and
// checksum, applied (or rejected, for a file that must be) with the rows
// its file has; an upload listed is one a client sent, and one answered
// 4xx is not listed. Acceptance order extends what each client saw (an
// upload sent after another's 200 comes after it), and uploads finish in
// acceptance order.
func (s *soak) checkUploads(c *clientModel, list []uploadJSON, once, order *invariant, st *stockState, n *uploadCounts) {
	st.key(c)
	c.mu.Lock()
	recs := append([]*uploadRec(nil), c.uploads...)
	c.mu.Unlock()
	byName := map[string]*uploadRec{}
	for _, r := range recs {
		byName[r.name] = r
		n.sent++
		if r.status == 200 {
			n.acked++
		}
	}
	pos := map[*uploadRec]int{}
	seen := map[string]bool{}
	for i, u := range list {
		n.listed++
		if seen[u.ID] || seen[u.FileName] {
			once.fail("client %d: upload %s (%s) listed twice", c.idx, u.ID, u.FileName)
			continue
		}
		seen[u.ID], seen[u.FileName] = true, true
		r := byName[u.FileName]
		if r == nil {
			once.fail("client %d: upload %s (%s) listed, which no client sent", c.idx, u.ID, u.FileName)
			continue
		}
		pos[r] = i
		switch {
		case r.status == 200:
			if u.ID != r.id || u.SHA256 != r.sha {
				once.fail("upload %s: listed as %s with sha256 %s; its 200 said %s, %s", r.name, u.ID, u.SHA256, r.id, r.sha)
			}
		case r.status == 0 || r.status >= 500:
			n.maybeFound++
		default:
			once.fail("upload %s (%s) answered %d is listed: anything short of a 200 leaves nothing behind", r.name, u.ID, r.status)
		}
		want := "applied"
		if r.feed.rejected {
			want = "rejected"
		}
		var types []string
		for _, e := range u.Errors {
			types = append(types, e.Type)
		}
		switch {
		case u.Status != want:
			once.fail("upload %s (%s): %s with errors %v, want %s", r.name, u.ID, u.Status, types, want)
		case want == "applied" && (u.RowsTotal != r.feed.total || u.RowsApplied != len(r.feed.rows) || u.RowsRejected != r.feed.badRows):
			once.fail("upload %s (%s): rows total/applied/rejected %d/%d/%d, its file has %d/%d/%d", r.name, u.ID,
				u.RowsTotal, u.RowsApplied, u.RowsRejected, r.feed.total, len(r.feed.rows), r.feed.badRows)
		case want == "applied":
			n.applied++
		default:
			n.rejected++
		}
		if u.Status == "applied" && u.StartedAt != nil {
			a := &appliedUpload{id: u.ID, name: r.name, feed: r.feed, started: *u.StartedAt, final: r.final}
			st.applied[u.ID] = a
			unchanged := 0
			for k, row := range r.feed.rows {
				st.byKey[c.idx][k] = append(st.byKey[c.idx][k], a)
				if was, ok := st.cur[c.idx][k]; ok && was.row == row && !r.feed.dupKeys[k] {
					unchanged++
					continue
				}
				st.cur[c.idx][k] = current{row, a}
			}
			n.unchanged += unchanged
			if r.feed.resent {
				n.resent++
			}
			if u.RowsUnchanged != unchanged {
				once.fail("upload %s (%s): %d rows unchanged, %d by the uploads applied before it", r.name, u.ID, u.RowsUnchanged, unchanged)
			}
		}
	}
	for _, r := range recs {
		if _, ok := pos[r]; !ok && r.status == 200 {
			once.fail("acknowledged upload %s (%s, 200 at %s) is not listed", r.name, r.id, r.answered.Format("15:04:05.000"))
		}
	}

	// What each client saw: an upload sent after another's 200 was
	// accepted after it.
	acked := make([]*uploadRec, 0, len(recs))
	for _, r := range recs {
		if _, ok := pos[r]; ok && r.status == 200 {
			acked = append(acked, r)
		}
	}
	sort.Slice(acked, func(i, j int) bool { return acked[i].answered.Before(acked[j].answered) })
	bySent := append([]*uploadRec(nil), recs...)
	sort.Slice(bySent, func(i, j int) bool { return bySent[i].sent.Before(bySent[j].sent) })
	var latest *uploadRec
	p := 0
	for _, b := range bySent {
		for ; p < len(acked) && acked[p].answered.Before(b.sent); p++ {
			if latest == nil || pos[acked[p]] > pos[latest] {
				latest = acked[p]
			}
		}
		if pb, ok := pos[b]; ok && latest != nil && pb < pos[latest] {
			order.fail("client %d: upload %s was sent at %s, after %s's 200 at %s, yet accepted before it",
				c.idx, b.name, b.sent.Format("15:04:05.000"), latest.name, latest.answered.Format("15:04:05.000"))
		}
	}
	// Applied one after the other in acceptance order: an upload's apply
	// begins only once the one before it has committed, and each stamps
	// finished_at inside its transaction, so the stamps follow acceptance
	// order. (started_at is stamped before the claim is sent, which may
	// wait for a connection: it can precede the end of the upload before.)
	var prev *uploadJSON
	for i := range list {
		u := &list[i]
		if u.FinishedAt == nil {
			continue
		}
		if prev != nil && u.FinishedAt.Before(*prev.FinishedAt) {
			order.fail("client %d: upload %s (%s) finished at %s, before %s (%s), accepted before it, finished at %s",
				c.idx, u.ID, u.FileName, u.FinishedAt.Format("15:04:05.000"), prev.ID, prev.FileName, prev.FinishedAt.Format("15:04:05.000"))
		}
		prev = u
	}
}

// cents reads a decimal with at most two places ("12.3", "12.30", "12").
func cents(s string) int {
	whole, frac, _ := strings.Cut(s, ".")
	frac = (frac + "00")[:2]
	n := 0
	for _, d := range whole + frac {
		if d < '0' || d > '9' {
			return -1
		}
		n = n*10 + int(d-'0')
	}
	return n
}

type stockCounts struct{ rows, reserved, uncertain int }

// checkStock: the stock in force is, row by row, what the last applied
// upload that set the row set (quantity, prices, article number), with the
// id of the upload that last changed it, and with the units reserved that
// the orders hold.
func (s *soak) checkStock(c *clientModel, rows []stockJSON, st *stockState, inv *invariant, n *stockCounts) {
	st.key(c)
	got := map[stockKey]stockJSON{}
	for _, r := range rows {
		k := stockKey{r.StoreID, r.EAN}
		if _, dup := got[k]; dup {
			inv.fail("client %d: stock lists %s/%s twice", c.idx, k.store, k.ean)
		}
		got[k] = r
	}
	n.rows += len(rows)
	for k, cur := range st.cur[c.idx] {
		want, last := cur.row, cur.upload
		g, ok := got[k]
		switch {
		case !ok:
			inv.fail("client %d: %s/%s, set by upload %s, is not in the stock", c.idx, k.store, k.ean, last.name)
		case g.UploadID != last.id || g.Quantity != want.quantity || cents(g.Price.String()) != cents(want.price) ||
			g.Retail == nil || cents(g.Retail.String()) != cents(want.retail) || g.Article != want.article:
			inv.fail("client %d: %s/%s is quantity %d, price %s, retail %v, article %s from upload %s; the upload that last changed it, %s (%s), says %d, %s, %s, %s",
				c.idx, k.store, k.ean, g.Quantity, g.Price, g.Retail, g.Article, g.UploadID, last.name, last.id, want.quantity, want.price, want.retail, want.article)
		}
	}
	for k, g := range got {
		if _, ok := st.cur[c.idx][k]; !ok {
			inv.fail("client %d: %s/%s is in the stock (from upload %s), which no applied upload set", c.idx, k.store, k.ean, g.UploadID)
		}
		lo, hi := st.lo[c.idx][k], st.hi[c.idx][k]
		n.reserved += g.Reserved
		n.uncertain += hi - lo
		if g.Reserved < lo || g.Reserved > hi {
			inv.fail("client %d: %s/%s has %d units reserved; the orders hold %d (and %d more whose release by a feed is uncertain)",
				c.idx, k.store, k.ean, g.Reserved, lo, hi-lo)
		}
	}
	for k, hi := range st.hi[c.idx] {
		if _, ok := got[k]; !ok && hi > 0 {
			inv.fail("client %d: orders hold units of %s/%s, which is not in the stock", c.idx, k.store, k.ean)
		}
	}
}

// reserve counts an order item's reservation: an assigned unit certainly; a
// fulfilled or returned one unless a feed row for its store and EAN was
// applied after the fulfilment, which is certain when the apply began after
// the fulfil's answer, and uncertain when it may have committed after the
// fulfil was sent.
func (st *stockState) reserve(c *clientModel, store string, it itemJSON, fulfil *call) string {
	k := stockKey{store, it.EAN}
	switch it.Status {
	case "assigned":
		st.lo[c.idx][k]++
		st.hi[c.idx][k]++
		return ""
	case "fulfilled", "returned":
	default:
		return ""
	}
	if fulfil == nil {
		st.hi[c.idx][k]++
		return fmt.Sprintf("item %s is %s, but no fulfil of its order was seen", it.ItemID, it.Status)
	}
	uncertain := false
	for _, a := range st.byKey[c.idx][k] {
		if a.started.After(fulfil.answered) {
			return "" // released for certain
		}
		if a.final.IsZero() || !a.final.Before(fulfil.sent) {
			uncertain = true
		}
	}
	st.hi[c.idx][k]++
	if !uncertain {
		st.lo[c.idx][k]++
	}
	return ""
}
