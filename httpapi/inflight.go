package httpapi

import (
	"net/http"
	"sync"

	"storelink"
)

// DefaultMaxUploadsInFlight is the number of uploads and validations one
// partner's clients together may have in flight at once when Deps does not
// say. A partner's exporter sends its clients' files one after another;
// four at once is room for a retry and a validation beside it.
const DefaultMaxUploadsInFlight = 4

// inFlightRetryAfter is the Retry-After of that 429: a slot frees as soon as
// one of the partner's bodies is received and answered, which is usually
// well within a second; one second is the least the header can say.
const inFlightRetryAfter = 1

// inFlight counts, per partner (all its clients together), the uploads and
// validations whose handler runs: from after authentication, through
// reading the body, to the answer. Each holds a goroutine and up to a
// whole file in memory, so the count bounds what one partner can make this
// process hold, however many clients it has; the upload memory bounds what
// all partners do together. The count is per process.
type inFlight struct {
	mu  sync.Mutex
	max int
	n   map[string]int
}

func newInFlight(max int) *inFlight {
	return &inFlight{max: max, n: make(map[string]int)}
}

// acquire takes a slot for the partner; ok is false when all are taken.
func (f *inFlight) acquire(partnerID string) (release func(), ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[partnerID] >= f.max {
		return nil, false
	}
	f.n[partnerID]++
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.n[partnerID]--; f.n[partnerID] <= 0 {
				delete(f.n, partnerID)
			}
		})
	}, true
}

// limitInFlight runs h only while the client's partner holds a slot. It sits after
// authentication, so that nobody can take a client's slots without its
// key, and before h reads anything of the body.
// With rateLimit, the refusal carries the RateLimit headers as every
// answer to an upload does.
func (s *Server) limitInFlight(rateLimit bool, h func(http.ResponseWriter, *http.Request, *storelink.Client)) func(http.ResponseWriter, *http.Request, *storelink.Client) {
	return func(w http.ResponseWriter, r *http.Request, c *storelink.Client) {
		release, err := s.takeInFlight(c.PartnerID)
		if err != nil {
			if rateLimit {
				cp, err := s.Uploads.Capacity(r.Context(), c.ID, s.Capacity)
				if err != nil {
					s.writeError(w, r, err)
					return
				}
				setRateLimit(w, cp)
			}
			s.writeError(w, r, err)
			return
		}
		defer release()
		h(&answerReleases{ResponseWriter: w, release: release}, r, c)
	}
}

// takeInFlight takes one of the partner's slots, or says why not: the
// uploads_in_flight problem, apart from rate_limited (capacity) because
// waiting for Retry-After does not make the same upload fit here: one of
// the partner's other bodies has to end first.
func (s *Server) takeInFlight(partnerID string) (release func(), err error) {
	release, ok := s.inFlight.acquire(partnerID)
	if !ok {
		e := storelink.Errorf(storelink.EINFLIGHT,
			"This partner's clients already have %d uploads or validations in flight, the most allowed at once; "+
				"send this one when one of them has been answered (Retry-After).", s.inFlight.max)
		e.RetryAfter = inFlightRetryAfter
		return nil, e
	}
	return release, nil
}

// answerReleases gives the slot back as the answer starts, before its
// bytes reach the client: a client told to send again "when one of them
// has been answered" finds the slot free as soon as it reads the answer.
// The work the slot bounds (reading the body, checking or accepting it) is
// over by then.
type answerReleases struct {
	http.ResponseWriter
	release func()
}

func (a *answerReleases) WriteHeader(code int) {
	if code >= 200 {
		a.release()
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *answerReleases) Write(b []byte) (int, error) {
	a.release()
	return a.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's deadlines.
func (a *answerReleases) Unwrap() http.ResponseWriter { return a.ResponseWriter }
