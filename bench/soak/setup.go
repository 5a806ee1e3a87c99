package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// rngFor makes a goroutine's own random source from the run's seed.
func (s *soak) rngFor() *rand.Rand {
	return rand.New(rand.NewPCG(s.rng.Uint64(), s.rng.Uint64()))
}

// setupAccounts makes, through the operator API, a partner and a client per
// client model with three stores, its three receivers and their endpoints,
// and applies an initial feed of every EAN orders ask for in every store.
func (s *soak) setupAccounts(ctx context.Context) error {
	s.orders = newOrderBook()
	rng := s.rngFor()
	const d = 30 * time.Second
	for i := range s.cfg.clients {
		c := newClientModel(i)
		a, err := s.api.admin(ctx, rng, "setup", "POST", "/admin/partners", map[string]string{"name": fmt.Sprintf("Soak partner %d", i)}, d)
		if err != nil {
			return err
		}
		var p struct {
			ID string `json:"partner_id"`
		}
		if err := a.decode(&p); err != nil {
			return err
		}
		a, err = s.api.admin(ctx, rng, "setup", "POST", "/admin/partners/"+p.ID+"/clients", map[string]string{"country_code": "DE", "currency": "EUR"}, d)
		if err != nil {
			return err
		}
		var cl struct {
			ID     string `json:"client_id"`
			APIKey string `json:"api_key"`
		}
		if err := a.decode(&cl); err != nil {
			return err
		}
		c.id, c.apiKey = cl.ID, cl.APIKey
		for _, st := range c.stores {
			if _, err := s.api.admin(ctx, rng, "setup", "PUT", "/admin/clients/"+c.id+"/stores/"+st, map[string]string{"name": "Store " + st}, d); err != nil {
				return err
			}
		}
		profiles := []string{profileSteady, profileFlaky, profilePicky}
		if i == 0 {
			// One late receiver: its client's upload events alone spend
			// their retry schedule within a minute of workload.
			profiles = append(profiles, profileLate)
		}
		for _, profile := range profiles {
			r, err := newReceiver(c, profile, rng.Uint64())
			if err != nil {
				return err
			}
			s.receivers = append(s.receivers, r)
			body := map[string]any{"url": r.url()}
			if r.states != nil {
				body["states"] = r.states
			}
			a, err := s.api.admin(ctx, rng, "setup", "POST", "/admin/clients/"+c.id+"/webhooks", body, d)
			if err != nil {
				return err
			}
			var ep struct {
				ID     string `json:"endpoint_id"`
				Secret string `json:"secret"`
			}
			if err := a.decode(&ep); err != nil {
				return err
			}
			r.endpointID = ep.ID
			if err := r.setKey(ep.Secret); err != nil {
				return fmt.Errorf("endpoint %s: %w", ep.ID, err)
			}
			if profile == profileLate {
				r.goDown()
			}
		}
		s.clients = append(s.clients, c)
	}
	// The initial feeds, applied before the workload starts.
	for _, c := range s.clients {
		rec := s.upload(c, rng, -1, true)
		if rec.status != 200 {
			return fmt.Errorf("initial feed of client %d: %d", c.idx, rec.status)
		}
	}
	for _, c := range s.clients {
		for deadline := time.Now().Add(30 * time.Second); ; {
			a, err := s.api.admin(ctx, rng, "setup", "GET", "/stock/"+c.id+"/uploads/"+c.uploads[0].id, nil, d, "x-api-key", c.apiKey)
			if err != nil {
				return err
			}
			var st struct {
				Status string `json:"status"`
			}
			if err := a.decode(&st); err != nil {
				return err
			}
			if st.Status == "applied" {
				c.uploads[0].final = a.End
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("initial feed of client %d: still %s after 30s", c.idx, st.Status)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// runWorkload runs the uploaders, pollers, order workers and both fault
// loops until ctx is done, and waits for each to finish what it was doing
// (a fault is always healed before its loop returns).
func (s *soak) runWorkload(ctx context.Context) {
	var wg sync.WaitGroup
	for _, c := range s.clients {
		for n := range 2 {
			rng := s.rngFor()
			wg.Go(func() { s.uploader(ctx, c, rng, n) })
		}
		rng := s.rngFor()
		wg.Go(func() { s.poller(ctx, c, rng) })
	}
	for range s.cfg.workers {
		rng := s.rngFor()
		wg.Go(func() { s.orderWorker(ctx, rng) })
	}
	rng := s.rngFor()
	wg.Go(func() { s.serveFaults(ctx, rng) })
	rng2 := s.rngFor()
	wg.Go(func() { s.receiverFaults(ctx, rng2) })
	wg.Wait()
}
