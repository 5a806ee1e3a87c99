package worker

import (
	"slices"
	"sync"

	"storelink"
)

// sending is the deliveries claimed and not yet recorded, shared by Run's
// loop and the workers that make the attempts. A worker that has made an
// attempt takes the next delivery that may go itself, and tells the loop
// only when there is something for it to do: handing each attempt and each
// result over between goroutines would cost more than the attempt.
type sending struct {
	d       *Deliverer
	mu      sync.Mutex
	idle    *sync.Cond // workers with nothing to send wait here
	claimed []*storelink.DeliveryJob
	running int            // attempts in flight
	load    map[string]int // attempts in flight by endpoint
	batch   []storelink.AttemptResult
	closed  bool
	// signal tells the loop that results came in: the first of a batch,
	// or enough to record.
	signal chan struct{}
}

// add adds claimed deliveries and wakes as many idle workers as may go.
func (s *sending) add(jobs []storelink.DeliveryJob) {
	s.mu.Lock()
	for i := range jobs {
		s.claimed = append(s.claimed, &jobs[i])
	}
	// How many may go now, as s.next would count them.
	n, running, load := 0, s.running, map[string]int{}
	for _, j := range s.claimed {
		if running < s.d.Workers && s.load[j.EndpointID]+load[j.EndpointID] < s.d.PerEndpoint {
			n++
			running++
			load[j.EndpointID]++
		}
	}
	s.mu.Unlock()
	for range n {
		s.idle.Signal()
	}
}

// next takes the first claimed delivery that may go, or nil; s.mu is held.
func (s *sending) next() *storelink.DeliveryJob {
	if s.running >= s.d.Workers {
		return nil
	}
	for i, j := range s.claimed {
		if s.load[j.EndpointID] < s.d.PerEndpoint {
			s.claimed = slices.Delete(s.claimed, i, i+1)
			s.running++
			s.load[j.EndpointID]++
			return j
		}
	}
	return nil
}

// work makes attempts until Run ends.
func (s *sending) work() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		j := s.next()
		for j == nil {
			if s.closed {
				return
			}
			s.idle.Wait()
			j = s.next()
		}
		s.mu.Unlock()
		r := s.d.attempt(j)
		s.mu.Lock()
		s.batch = append(s.batch, r)
		s.running--
		if s.load[j.EndpointID]--; s.load[j.EndpointID] == 0 {
			delete(s.load, j.EndpointID)
		}
		// Counted as Run counts: the attempts still in flight are those
		// that will be once this worker has taken its next.
		if len(s.batch) == 1 || len(s.batch) >= s.running+min(1, s.startable()) || len(s.batch) >= recordBatch {
			select {
			case s.signal <- struct{}{}:
			default:
			}
		}
	}
}

// startable tells whether a claimed delivery may go now; s.mu is held.
func (s *sending) startable() int {
	if s.running >= s.d.Workers {
		return 0
	}
	for _, j := range s.claimed {
		if s.load[j.EndpointID] < s.d.PerEndpoint {
			return 1
		}
	}
	return 0
}
