package storelink

import "math"

// BacklogRetryMax bounds the Retry-After of EBACKLOG: past it the estimate
// says little more than "later", and a client should look again.
const BacklogRetryMax = 300

// BacklogFull is the EBACKLOG error for a client whose backlog b has reached
// limit. perSecond is the recent rate at which uploads were finished; the
// client is told to come back when the uploads ahead of its oldest waiting
// one should be done at that rate, at least 1 second and at most
// BacklogRetryMax. With no recent rate (nothing finished lately) it is told
// to come back in a minute, the span the rate is measured over.
func BacklogFull(b Backlog, limit int, perSecond float64) *Error {
	wait := 60
	if perSecond > 0 {
		wait = int(math.Ceil(float64(max(b.Ahead, 1)) / perSecond))
	}
	wait = min(max(wait, 1), BacklogRetryMax)
	err := Errorf(EBACKLOG, "%d uploads of this client are waiting to be processed, the most allowed is %d; "+
		"%d uploads of all clients are ahead of its oldest waiting one. Retry after %d seconds.",
		b.Waiting, limit, b.Ahead, wait)
	err.RetryAfter = wait
	return err
}
