package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
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

// validateLimit is the token bucket of validations of each client: it
// holds perMinute validations, refilled evenly over a minute, and starts
// full. It is kept in memory, per process: a restart or a second process
// gives a client a full bucket, which is no worse than the first minute.
type validateLimit struct {
	mu        sync.Mutex
	perMinute int
	buckets   map[string]validateBucket
	now       func() time.Time
}

type validateBucket struct {
	tokens float64
	at     time.Time
}

// pruneFrom is the number of buckets beyond which full ones are dropped: a
// full bucket is the same as none.
const pruneFrom = 1024

func newValidateLimit(perMinute int) *validateLimit {
	return &validateLimit{perMinute: perMinute, buckets: make(map[string]validateBucket), now: time.Now}
}

// validateState is what the RateLimit headers of a validation say.
type validateState struct {
	left   int // validations left now
	fullIn int // seconds until the bucket is full again
	wait   int // seconds until the next validation fits; 0 when one does now
}

// take takes one validation of the client's when one is left, and reports
// the bucket after it.
func (l *validateLimit) take(clientID string) (st validateState, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now, size := l.now(), float64(l.perMinute)
	b, found := l.buckets[clientID]
	if !found {
		b = validateBucket{tokens: size, at: now}
	}
	if d := now.Sub(b.at); d > 0 {
		b.tokens = math.Min(size, b.tokens+size*d.Minutes())
	}
	b.at = now
	if ok = b.tokens >= 1-tolerance; ok {
		b.tokens--
	}
	if len(l.buckets) >= pruneFrom {
		l.prune(now, size)
	}
	l.buckets[clientID] = b
	perSecond := size / 60
	st = validateState{left: int(b.tokens + tolerance), fullIn: int(math.Ceil((size-b.tokens)/perSecond - tolerance))}
	if !ok {
		st.wait = max(1, int(math.Ceil((1-b.tokens)/perSecond-tolerance)))
	}
	return st, ok
}

// tolerance absorbs float rounding in the refill.
const tolerance = 1e-9

// prune drops the buckets that are full by now.
func (l *validateLimit) prune(now time.Time, size float64) {
	for id, b := range l.buckets {
		if b.tokens+size*now.Sub(b.at).Minutes() >= size {
			delete(l.buckets, id)
		}
	}
}

// limitValidations answers a validation of a client that has none left
// with 429 rate_limited and Retry-After; every validation answer after
// authentication carries the RateLimit headers of the "validate" policy.
func (s *Server) limitValidations(h func(http.ResponseWriter, *http.Request, *storelink.Client)) func(http.ResponseWriter, *http.Request, *storelink.Client) {
	return func(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
		st, ok := s.validate.take(c.ID)
		w.Header().Set("RateLimit-Policy", fmt.Sprintf(`"validate";q=%d;w=60`, s.validate.perMinute))
		w.Header().Set("RateLimit", fmt.Sprintf(`"validate";r=%d;t=%d`, st.left, st.fullIn))
		if !ok {
			w.Header().Set("Retry-After", strconv.Itoa(st.wait))
			writeProblem(w, r, storelink.ERATELIMIT, fmt.Sprintf(
				"This client has used up its validations (%d a minute, refilled evenly); nothing was checked. Retry after %d seconds.",
				s.validate.perMinute, st.wait))
			return
		}
		h(w, r, c)
	}
}
