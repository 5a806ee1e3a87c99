package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"storelink"
)

// DefaultValidationsPerMinute is the rate of validations one client may
// make when Deps does not say. A validation takes no capacity but costs
// the CPU of checking up to a whole file; an exporter checks a file before
// sending it, so 30 a minute (one every two seconds, 30 at once after a
// quiet minute) is far above use, and keeps a loop of validations from
// taking a core.
const DefaultValidationsPerMinute = 30

// DefaultWritesPerMinute is the rate of writes one client may make
// through the partner API and the portal (NewWriteLimit) when Deps does not
// say. An integration writes a handful of times: it registers an endpoint
// or two, rotates a secret or an API key now and then, cancels an upload
// sent by mistake, redelivers a few deliveries; a bulk recovery after an
// outage is one call (recover), not one redeliver per delivery. So 60 a
// minute (one a second, 60 at once after a quiet minute) is far above
// use, and a loop of cheap writes holds the database's writer (SQLite has
// one) for at most one write a second per client.
const DefaultWritesPerMinute = 60

// RateLimit is a token bucket per client of one policy: each client may
// make perMinute requests of the policy a minute, refilled evenly over the
// minute, and starts full. It is kept in memory, per process: a restart or
// a second process gives a client a full bucket, which is no worse than
// the first minute.
type RateLimit struct {
	policy    string // the policy's name in the RateLimit headers
	unit      string // what it counts, for the refusal: "validations"
	undone    string // what a refusal leaves undone: "nothing was checked"
	perMinute int

	mu      sync.Mutex
	buckets map[string]rateBucket
	now     func() time.Time
}

type rateBucket struct {
	tokens float64
	at     time.Time
}

// pruneFrom is the number of buckets beyond which full ones are dropped: a
// full bucket is the same as none.
const pruneFrom = 1024

// NewWriteLimit is the "write" policy: the writes of a client through the
// partner API (routes.go) and the portal's forms, perMinute a minute.
// Serve shares one between the API and the portal so that both count
// together.
func NewWriteLimit(perMinute int) *RateLimit {
	return newRateLimit("write", "writes", "nothing was written", perMinute)
}

// newValidateLimit is the "validate" policy: the validations of a client.
func newValidateLimit(perMinute int) *RateLimit {
	return newRateLimit("validate", "validations", "nothing was checked", perMinute)
}

func newRateLimit(policy, unit, undone string, perMinute int) *RateLimit {
	return &RateLimit{policy: policy, unit: unit, undone: undone, perMinute: perMinute,
		buckets: make(map[string]rateBucket), now: time.Now}
}

// rateState is what the RateLimit headers say after a request.
type rateState struct {
	left   int // requests left now
	fullIn int // seconds until the bucket is full again
}

// take takes one request of the client's when one is left, and reports
// the bucket after it; when none is left it is ERATELIMIT with the seconds
// until one is.
func (l *RateLimit) take(clientID string) (rateState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now, size := l.now(), float64(l.perMinute)
	b, found := l.buckets[clientID]
	if !found {
		b = rateBucket{tokens: size, at: now}
	}
	if d := now.Sub(b.at); d > 0 {
		b.tokens = math.Min(size, b.tokens+size*d.Minutes())
	}
	b.at = now
	ok := b.tokens >= 1-tolerance
	if ok {
		b.tokens--
	}
	if len(l.buckets) >= pruneFrom {
		l.prune(now, size)
	}
	l.buckets[clientID] = b
	perSecond := size / 60
	st := rateState{left: int(b.tokens + tolerance), fullIn: int(math.Ceil((size-b.tokens)/perSecond - tolerance))}
	if ok {
		return st, nil
	}
	wait := max(1, int(math.Ceil((1-b.tokens)/perSecond-tolerance)))
	err := storelink.Errorf(storelink.ERATELIMIT, "This client has used up its %s (%d a minute, refilled evenly); %s. Retry after %d seconds.",
		l.unit, l.perMinute, l.undone, wait)
	err.RetryAfter = wait
	return st, err
}

// Take takes one request of the client's, as the API's routes of the
// policy do: ERATELIMIT, with RetryAfter, when none is left.
func (l *RateLimit) Take(clientID string) error {
	_, err := l.take(clientID)
	return err
}

// tolerance absorbs float rounding in the refill.
const tolerance = 1e-9

// prune drops the buckets that are full by now.
func (l *RateLimit) prune(now time.Time, size float64) {
	for id, b := range l.buckets {
		if b.tokens+size*now.Sub(b.at).Minutes() >= size {
			delete(l.buckets, id)
		}
	}
}

// setHeaders sets the policy's items of the RateLimit-Policy and RateLimit
// headers.
func (l *RateLimit) setHeaders(h http.Header, st rateState) {
	setRateLimitItem(h, "RateLimit-Policy", l.policy, fmt.Sprintf(`"%s";q=%d;w=60`, l.policy, l.perMinute))
	setRateLimitItem(h, "RateLimit", l.policy, fmt.Sprintf(`"%s";r=%d;t=%d`, l.policy, st.left, st.fullIn))
}

// setRateLimitItem sets the item of a policy in a RateLimit header, a list
// with one item per policy, keeping the other policies' items: cancelling
// an upload answers with the "upload" policy and the "write" one. The
// "upload" item comes first, so that a reader of the first item, as of an
// upload's answer, reads the capacity.
func setRateLimitItem(h http.Header, field, policy, item string) {
	items := []string{item}
	for it := range strings.SplitSeq(h.Get(field), ", ") {
		if it != "" && !strings.HasPrefix(it, `"`+policy+`";`) {
			items = append(items, it)
		}
	}
	if policy != "upload" {
		items = append(items[1:], item)
	}
	h.Set(field, strings.Join(items, ", "))
}

// limitRate answers a request of a client that has none of the policy's
// left with 429 rate_limited and Retry-After, before it is read; every
// answer after authentication carries the policy's RateLimit headers.
func (s *Server) limitRate(l *RateLimit, h func(http.ResponseWriter, *http.Request, *storelink.Client)) func(http.ResponseWriter, *http.Request, *storelink.Client) {
	return func(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
		st, err := l.take(c.ID)
		l.setHeaders(w.Header(), st)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		h(w, r, c)
	}
}
