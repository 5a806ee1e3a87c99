package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"
)

// stockKey is a row of the stock: a store and an EAN.
type stockKey struct{ store, ean string }

// feedRow is what a valid feed row sets.
type feedRow struct {
	quantity int
	price    string // as written: two decimals
	retail   string
	article  string
}

// feed is a generated stock file and what it should do.
type feed struct {
	body       []byte
	rows       map[stockKey]feedRow // the valid rows, the last one per key
	total      int                  // data rows
	badRows    int                  // rows that must be dropped as errors
	rejected   bool                 // the whole file must be rejected
	big        bool
	resent     bool              // the body of an earlier feed, sent again
	duplicates int               // valid rows overridden by a later row of the same key
	dupKeys    map[stockKey]bool // the keys given more than once: always written
}

// clientModel is one client account and everything its clients sent.
type clientModel struct {
	idx            int
	id, apiKey     string
	stores         []string
	hot, bulk      []string // EANs: those orders ask for; those of large files only
	mu             sync.Mutex
	uploads        []*uploadRec
	nextUpload     int
	endpointStates map[string][]string // endpoint id → states ([]: all)
}

// uploadRec is one upload as the client saw it.
type uploadRec struct {
	name     string
	feed     *feed
	uploader int
	sent     time.Time // the first byte of the one request that carried it
	answered time.Time
	status   int // 0: no answer
	id, sha  string
	// final is when a status read first showed it applied or rejected
	// (zero: never seen final while the workload ran).
	final time.Time
}

// ean13 completes 12 digits with their GS1 check digit.
func ean13(digits string) string {
	sum := 0
	for i, d := range digits {
		n := int(d - '0')
		if i%2 == 1 {
			n *= 3
		}
		sum += n
	}
	return digits + strconv.Itoa((10-sum%10)%10)
}

// newClientModel makes client idx's catalogue: 12 EANs that orders ask for
// and 4,000 that only large files carry.
func newClientModel(idx int) *clientModel {
	c := &clientModel{idx: idx, stores: []string{"S1", "S2", "S3"}, endpointStates: map[string][]string{}}
	for i := range 12 {
		c.hot = append(c.hot, ean13(fmt.Sprintf("40%02d1%07d", idx, i)))
	}
	for i := range 4000 {
		c.bulk = append(c.bulk, ean13(fmt.Sprintf("40%02d2%07d", idx, i)))
	}
	return c
}

func price(rng *rand.Rand) (string, int) {
	cents := 100 + rng.IntN(9900)
	return fmt.Sprintf("%d.%02d", cents/100, cents%100), cents
}

// makeFeed generates a file: small (a few dozen rows, now and then with
// bad rows or a duplicate), large (9,000 rows, about 300 KB), the latest
// acknowledged one sent again, or, rarely, one that must be rejected
// whole. seq names the upload in the article numbers, so the stock shows
// which upload set a row.
func (c *clientModel) makeFeed(rng *rand.Rand, seq int, initial bool) *feed {
	f := &feed{rows: map[stockKey]feedRow{}, dupKeys: map[stockKey]bool{}}
	var b bytes.Buffer
	roll := rng.Float64()
	if !initial && roll > 0.88 {
		// The client's latest acknowledged feed again, under a new name: the
		// rows no upload changed since are left unchanged, keeping the
		// upload_id of the upload that last changed them.
		c.mu.Lock()
		var prev *feed
		for i := len(c.uploads) - 1; i >= 0 && prev == nil; i-- {
			if u := c.uploads[i]; u.status == 200 && !u.feed.rejected {
				prev = u.feed
			}
		}
		c.mu.Unlock()
		if prev != nil {
			again := *prev
			again.resent = true
			return &again
		}
	}
	if !initial && roll < 0.03 {
		// No price column: "Missing mandatory columns", nothing applied.
		f.rejected = true
		b.WriteString("store;ean;article_number;quantity\n")
		for range 3 {
			fmt.Fprintf(&b, "S1;%s;A;5\n", c.hot[rng.IntN(len(c.hot))])
			f.total++
		}
		f.body = b.Bytes()
		return f
	}
	b.WriteString("store;ean;article_number;quantity;price;retail_price\n")
	row := func(k stockKey, qty int) {
		p, cents := price(rng)
		retail := cents + rng.IntN(1000)
		art := fmt.Sprintf("A%d-%s-%d", c.idx, k.ean[8:], seq)
		r := fmt.Sprintf("%d.%02d", retail/100, retail%100)
		fmt.Fprintf(&b, "%s;%s;%s;%d;%s;%s\n", k.store, k.ean, art, qty, p, r)
		if _, dup := f.rows[k]; dup {
			f.duplicates++
			f.dupKeys[k] = true
		}
		f.rows[k] = feedRow{quantity: qty, price: p, retail: r, article: art}
		f.total++
	}
	used := map[stockKey]bool{}
	switch {
	case initial:
		for _, s := range c.stores {
			for _, e := range c.hot {
				k := stockKey{s, e}
				row(k, 150+rng.IntN(100))
				used[k] = true
			}
		}
	case roll < 0.08:
		f.big = true
		start := rng.IntN(len(c.bulk))
		for i := range 9000 {
			k := stockKey{c.stores[i%len(c.stores)], c.bulk[(start+i/len(c.stores))%len(c.bulk)]}
			if used[k] {
				continue
			}
			row(k, rng.IntN(1001))
			used[k] = true
		}
		fallthrough
	default:
		n := 3 + rng.IntN(30)
		for range n {
			k := stockKey{c.stores[rng.IntN(len(c.stores))], c.hot[rng.IntN(len(c.hot))]}
			if rng.IntN(4) == 0 {
				k.ean = c.bulk[rng.IntN(len(c.bulk))]
			}
			if used[k] && rng.IntN(5) != 0 {
				continue
			}
			// Quantities of the EANs orders ask for stay high enough that
			// most orders find a store.
			row(k, 20+rng.IntN(200))
			used[k] = true
		}
	}
	if rng.Float64() < 0.3 {
		for i := range 1 + rng.IntN(3) {
			c.badRow(rng, &b, i)
			f.total++
			f.badRows++
		}
	}
	f.body = b.Bytes()
	return f
}

// badRow writes a row the checker must drop. Its EAN is of a range no
// valid row uses, and n makes it unlike the file's other bad rows.
func (c *clientModel) badRow(rng *rand.Rand, b *bytes.Buffer, n int) {
	ean := ean13(fmt.Sprintf("40%02d3%07d", c.idx, n))
	switch rng.IntN(5) {
	case 0: // a store that is not the client's
		fmt.Fprintf(b, "SX;%s;BAD;5;1.00;2.00\n", ean)
	case 1: // a wrong check digit
		bad := ean[:12] + strconv.Itoa((int(ean[12]-'0')+1)%10)
		fmt.Fprintf(b, "S1;%s;BAD;5;1.00;2.00\n", bad)
	case 2:
		fmt.Fprintf(b, "S1;%s;BAD;-3;1.00;2.00\n", ean)
	case 3:
		fmt.Fprintf(b, "S1;%s;BAD;5;1.234;2.00\n", ean)
	default: // retail below price
		fmt.Fprintf(b, "S1;%s;BAD;5;9.00;2.00\n", ean)
	}
}

// upload sends one generated feed once (again only after a 429, which
// stores nothing) and records it. It returns the record.
func (s *soak) upload(c *clientModel, rng *rand.Rand, uploader int, initial bool) *uploadRec {
	c.mu.Lock()
	seq := c.nextUpload
	c.nextUpload++
	c.mu.Unlock()
	rec := &uploadRec{name: fmt.Sprintf("c%d-u%05d.csv", c.idx, seq), uploader: uploader}
	rec.feed = c.makeFeed(rng, seq, initial)
	path := "/stock/" + c.id + "/" + rec.name
	var a answer
	for try := 0; try < 10; try++ {
		a = s.api.do(context.Background(), "upload", s.api.pick(rng), "PUT", path, rec.feed.body, "x-api-key", c.apiKey, "Content-Type", "text/csv")
		if a.Status != 429 {
			break
		}
		time.Sleep(jitter(rng, 200*time.Millisecond, time.Second))
	}
	rec.sent, rec.answered, rec.status = a.Start, a.End, a.Status
	if a.Status == 200 {
		var u struct {
			ID     string `json:"upload_id"`
			SHA256 string `json:"sha256"`
		}
		if err := a.decode(&u); err == nil {
			rec.id, rec.sha = u.ID, u.SHA256
		}
	}
	c.mu.Lock()
	c.uploads = append(c.uploads, rec)
	c.mu.Unlock()
	return rec
}

// uploader sends feeds one after the other until ctx is done.
func (s *soak) uploader(ctx context.Context, c *clientModel, rng *rand.Rand, n int) {
	for ctx.Err() == nil {
		rec := s.upload(c, rng, n, false)
		if rec.status == 0 {
			// The serve is down: do not hammer it.
			sleep(ctx, 300*time.Millisecond)
		}
		sleep(ctx, jitter(rng, 50*time.Millisecond, 500*time.Millisecond))
	}
}

// poller reads the status of the client's accepted uploads until they are
// final, noting when each was first seen final: the upper bound of its
// apply's commit.
func (s *soak) poller(ctx context.Context, c *clientModel, rng *rand.Rand) {
	for ctx.Err() == nil {
		c.mu.Lock()
		var open []*uploadRec
		for _, u := range c.uploads {
			if u.id != "" && u.final.IsZero() {
				open = append(open, u)
			}
		}
		c.mu.Unlock()
		for _, u := range open {
			if ctx.Err() != nil {
				return
			}
			a := s.api.do(context.Background(), "upload-status", s.api.pick(rng), "GET", "/stock/"+c.id+"/uploads/"+u.id, nil, "x-api-key", c.apiKey)
			var st struct {
				Status string `json:"status"`
			}
			if a.Status == 200 && a.decode(&st) == nil && (st.Status == "applied" || st.Status == "rejected") {
				c.mu.Lock()
				u.final = a.End
				c.mu.Unlock()
			}
		}
		sleep(ctx, 100*time.Millisecond)
	}
}
