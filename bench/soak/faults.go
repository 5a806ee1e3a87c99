package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"
)

// Grace periods added to a fault's window: requests answered a moment after
// the service is back may still meet the fault (a connection pool that has
// not yet noticed a restarted database).
const (
	serveGrace = 1 * time.Second
	pgGrace    = 5 * time.Second
)

// lifecycle collects what went wrong while injecting and healing faults:
// a serve that did not come back, or exited with an error on SIGTERM.
type lifecycle struct {
	mu       sync.Mutex
	problems []string
}

var serveLife lifecycle

func (l *lifecycle) add(format string, args ...any) {
	l.mu.Lock()
	l.problems = append(l.problems, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// serveFaults injects one fault of the serves or the database every 3 to 7
// seconds until ctx is done; one at a time, so on PostgreSQL at most one
// serve of the three is down. The kinds come in rounds, each a shuffle of
// two kills, a SIGTERM and (on PostgreSQL) a database restart, so that a
// short run has every kind.
func (s *soak) serveFaults(ctx context.Context, rng *rand.Rand) {
	kinds := []string{"kill", "kill", "term"}
	if s.pg != nil {
		kinds = append(kinds, "pg-restart")
	}
	for round := 0; ; round++ {
		rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		for _, kind := range kinds {
			sleep(ctx, jitter(rng, 3*time.Second, 7*time.Second))
			if ctx.Err() != nil {
				return
			}
			switch kind {
			case "pg-restart":
				s.restartPG(rng)
			case "kill":
				s.bounce(rng, s.serves[rng.IntN(len(s.serves))], syscall.SIGKILL)
			default:
				s.bounce(rng, s.serves[rng.IntN(len(s.serves))], syscall.SIGTERM)
			}
		}
	}
}

// bounce stops a serve with sig and starts it again a moment later.
func (s *soak) bounce(rng *rand.Rand, sv *serve, sig syscall.Signal) {
	kind := "kill"
	if sig == syscall.SIGTERM {
		kind = "term"
	}
	f := fault{Kind: kind, Serve: sv.idx, Start: time.Now()}
	sv.signal(sig)
	done, err := sv.wait(45 * time.Second)
	switch {
	case !done:
		serveLife.add("serve %d did not exit within 45s of %s", sv.idx, sig)
		sv.signal(syscall.SIGKILL)
		sv.wait(10 * time.Second)
	case sig == syscall.SIGTERM && err != nil:
		serveLife.add("serve %d exited with %v on SIGTERM (want 0)", sv.idx, err)
	}
	f.Note = fmt.Sprintf("stopped in %s", time.Since(f.Start).Round(time.Millisecond))
	time.Sleep(jitter(rng, 300*time.Millisecond, 2*time.Second))
	s.restart(sv)
	f.End = time.Now().Add(serveGrace)
	s.hist.addFault(f)
}

// restart starts a serve again; three tries.
func (s *soak) restart(sv *serve) {
	for try := 1; ; try++ {
		err := sv.start(context.Background())
		if err == nil {
			return
		}
		serveLife.add("restart of serve %d, try %d: %v", sv.idx, try, err)
		if try == 3 {
			return
		}
		time.Sleep(time.Second)
	}
}

// restartPG stops the database (a crash or a fast shutdown) for 1 to 3
// seconds and waits until every serve is ready again.
func (s *soak) restartPG(rng *rand.Rand) {
	mode := "immediate"
	if rng.IntN(2) == 0 {
		mode = "fast"
	}
	f := fault{Kind: "pg-restart", Serve: -1, Start: time.Now(), Note: mode}
	ctx := context.Background()
	if err := s.pg.stop(ctx, mode); err != nil {
		serveLife.add("%v", err)
	}
	time.Sleep(jitter(rng, time.Second, 3*time.Second))
	if err := s.pg.start(ctx); err != nil {
		serveLife.add("%v", err)
	}
	for _, sv := range s.serves {
		if sv.alive() && !sv.ready(ctx, 30*time.Second) {
			serveLife.add("serve %d not ready 30s after PostgreSQL came back", sv.idx)
		}
	}
	f.End = time.Now().Add(pgGrace)
	s.hist.addFault(f)
}

// receiverFaults, every 3 to 8 seconds until ctx is done, takes a flaky or
// picky receiver down for 2 to 8 seconds, or, every other time, makes a
// picky one answer 410 for 1 to 4 seconds and then enables its endpoint
// again.
func (s *soak) receiverFaults(ctx context.Context, rng *rand.Rand) {
	var downable, picky []*receiver
	for _, r := range s.receivers {
		if r.profile == profileFlaky || r.profile == profilePicky {
			downable = append(downable, r)
		}
		if r.profile == profilePicky {
			picky = append(picky, r)
		}
	}
	for n := 0; ; n++ {
		sleep(ctx, jitter(rng, 3*time.Second, 8*time.Second))
		if ctx.Err() != nil {
			return
		}
		if n%2 == 1 {
			r := picky[rng.IntN(len(picky))]
			d := jitter(rng, time.Second, 4*time.Second)
			f := fault{Kind: "gone", Serve: -1, Start: time.Now(), Note: r.name}
			r.setGone(d)
			time.Sleep(d)
			s.enable(rng, r)
			f.End = time.Now()
			s.hist.addFault(f)
			continue
		}
		r := downable[rng.IntN(len(downable))]
		f := fault{Kind: "receiver-down", Serve: -1, Start: time.Now(), Note: r.name}
		r.goDown()
		time.Sleep(jitter(rng, 2*time.Second, 8*time.Second))
		if err := r.up(); err != nil {
			serveLife.add("%v", err)
		}
		f.End = time.Now()
		s.hist.addFault(f)
	}
}

// enable enables the receiver's endpoint (it may have been disabled by a
// 410) and closes its gone window.
func (s *soak) enable(rng *rand.Rand, r *receiver) {
	a, err := s.api.admin(context.Background(), rng, "enable", "PATCH", "/admin/webhooks/"+r.endpointID, map[string]any{"enabled": true}, 60*time.Second)
	if err != nil {
		serveLife.add("enable endpoint %s: %v", r.name, err)
	}
	r.endGone(a.End)
}

// heal makes sure that every serve runs, the database answers, every
// receiver listens and every endpoint is enabled.
func (s *soak) heal(ctx context.Context) error {
	rng := s.rngFor()
	for _, sv := range s.serves {
		if !sv.alive() {
			serveLife.add("serve %d was not running after the workload", sv.idx)
			s.restart(sv)
		}
		if !sv.ready(ctx, 60*time.Second) {
			return fmt.Errorf("serve %d is not ready 60s after the workload; see %s", sv.idx, sv.logs)
		}
	}
	if err := s.awaitLateFailure(ctx, rng, lateWait); err != nil {
		return err
	}
	for _, r := range s.receivers {
		r.mu.Lock()
		down, gone := r.down, !r.goneFirst.IsZero()
		r.mu.Unlock()
		if down {
			if err := r.up(); err != nil {
				return err
			}
		}
		a, err := s.api.admin(ctx, rng, "heal", "GET", "/admin/webhooks/"+r.endpointID, nil, 30*time.Second)
		if err != nil {
			return err
		}
		var ep struct {
			Enabled bool `json:"enabled"`
		}
		if err := a.decode(&ep); err != nil {
			return err
		}
		if !ep.Enabled || gone {
			if !ep.Enabled && !gone {
				// Disabled after its window was closed (a 410 recorded
				// late): the window runs from its last start to now.
				r.mu.Lock()
				r.goneFirst = r.lastGoneStart()
				r.mu.Unlock()
			}
			s.enable(rng, r)
		}
	}
	return s.recoverLate(ctx, rng)
}

// lateWait bounds the wait, before the heal, for a delivery to a late
// receiver to fail for good.
const lateWait = 60 * time.Second

// awaitLateFailure waits, at most d, until a delivery to each late
// receiver, still down, has failed for good, so that the heal's recover
// has something to recover.
func (s *soak) awaitLateFailure(ctx context.Context, rng *rand.Rand, d time.Duration) error {
	deadline := time.Now().Add(d)
	for _, r := range s.receivers {
		if r.profile != profileLate {
			continue
		}
		for {
			id, err := s.firstDelivery(ctx, rng, "heal", "state=failed&endpoint_id="+r.endpointID)
			if err != nil {
				return err
			}
			if id != "" || time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
			sleep(ctx, time.Second)
		}
	}
	return nil
}

// recoverLate makes the failed deliveries of the late receivers' endpoints
// pending again, as a partner does once its receiver is back: those since
// the soak started. Their receivers listen again (heal); an attempt that
// failed a moment before they did may still end its delivery as failed
// after this call, and the drain recovers those (lateBehind).
func (s *soak) recoverLate(ctx context.Context, rng *rand.Rand) error {
	for _, r := range s.receivers {
		if r.profile != profileLate {
			continue
		}
		a, err := s.api.admin(ctx, rng, "recover", "POST", "/webhooks/"+r.client.id+"/endpoints/"+r.endpointID+"/recover",
			map[string]string{"since": s.started.Add(-time.Minute).UTC().Format(time.RFC3339Nano)}, 30*time.Second, "x-api-key", r.client.apiKey)
		if err != nil {
			return err
		}
		var rec struct {
			Deliveries int `json:"deliveries"`
		}
		if err := a.decode(&rec); err != nil {
			return fmt.Errorf("recover the deliveries of %s: %w", r.name, err)
		}
		s.recovered.Add(int64(rec.Deliveries))
	}
	return nil
}

// lastGoneStart is where the last gone window began; r.mu is held.
func (r *receiver) lastGoneStart() time.Time {
	if n := len(r.gone); n > 0 {
		return r.gone[n-1].start
	}
	return time.Time{}
}

// drain waits until no upload of any client waits or is being processed
// and no delivery is pending, at most the configured drain time.
func (s *soak) drain(ctx context.Context) error {
	rng := s.rngFor()
	deadline := time.Now().Add(s.cfg.drain)
	quiet := 0
	for {
		busy := ""
		for _, c := range s.clients {
			for _, q := range []string{"/stock/" + c.id + "/uploads?limit=1&status=accepted", "/stock/" + c.id + "/uploads?limit=1&status=processing"} {
				a, err := s.api.admin(ctx, rng, "drain", "GET", q, nil, 30*time.Second, "x-api-key", c.apiKey)
				if err != nil {
					return err
				}
				var l struct {
					Uploads []struct {
						ID string `json:"upload_id"`
					} `json:"uploads"`
				}
				if err := a.decode(&l); err != nil {
					return err
				}
				if busy == "" && len(l.Uploads) > 0 {
					busy = "upload " + l.Uploads[0].ID + " of client " + c.id
				}
			}
			id, err := s.firstDelivery(ctx, rng, "drain", "state=pending&client_id="+c.id)
			if err != nil {
				return err
			}
			if busy == "" && id != "" {
				busy = "delivery " + id + " of client " + c.id
			}
		}
		if busy == "" {
			var err error
			if busy, err = s.lateBehind(ctx, rng); err != nil {
				return err
			}
		}
		if busy == "" {
			if quiet++; quiet == 2 {
				return nil
			}
		} else {
			quiet = 0
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not drained %s after the workload: %s still pending", s.cfg.drain, busy)
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// lateBehind tells which late receiver has not yet had the event of every
// upload of its client that ended ("" when each has), and recovers its
// endpoint's deliveries again when some of them failed for good after the
// heal's recover (recoverLate). An upload's event is written a moment after
// it ends, so no pending delivery does not mean all are there.
func (s *soak) lateBehind(ctx context.Context, rng *rand.Rand) (string, error) {
	rd := reader{s: s, ctx: ctx, rng: rng}
	for _, r := range s.receivers {
		if r.profile != profileLate {
			continue
		}
		list, err := rd.uploads(r.client)
		if err != nil {
			return "", err
		}
		got := map[string]bool{}
		for _, h := range r.snapshot() {
			if h.success() {
				got[h.upload] = true
			}
		}
		for _, u := range list {
			if ended(u.Status) && !got[u.ID] {
				failed, err := s.firstDelivery(ctx, rng, "drain", "state=failed&endpoint_id="+r.endpointID)
				if err != nil {
					return "", err
				}
				if failed != "" {
					if err := s.recoverLate(ctx, rng); err != nil {
						return "", err
					}
				}
				return "the event of upload " + u.ID + " to " + r.name, nil
			}
		}
	}
	return "", nil
}

// ended tells whether an upload's status is final.
func ended(status string) bool {
	return status == "applied" || status == "rejected" || status == "cancelled"
}

// firstDelivery returns the id of the newest delivery the operator's
// listing selects with query ("" for none).
func (s *soak) firstDelivery(ctx context.Context, rng *rand.Rand, kind, query string) (string, error) {
	a, err := s.api.admin(ctx, rng, kind, "GET", "/admin/deliveries?limit=1&"+query, nil, 30*time.Second)
	if err != nil {
		return "", err
	}
	var l struct {
		Deliveries []struct {
			ID string `json:"delivery_id"`
		} `json:"deliveries"`
	}
	if err := a.decode(&l); err != nil {
		return "", err
	}
	if len(l.Deliveries) == 0 {
		return "", nil
	}
	return l.Deliveries[0].ID, nil
}
