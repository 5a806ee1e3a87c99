package httpapi

import (
	"context"
	"net/http"
	"sync"
	"time"

	"storelink"
)

// health remembers that a write found the disk full, so that /readyz says
// so while it lasts: a database that answers reads is no proof that it
// takes writes.
type health struct {
	mu        sync.Mutex
	fullSince time.Time // zero: no write has found the disk full since the last that succeeded
}

func (h *health) full(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fullSince.IsZero() {
		h.fullSince = now
	}
}

// wrote records a write that succeeded: there was room after all.
func (h *health) wrote() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fullSince = time.Time{}
}

func (h *health) since() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fullSince
}

// writable tells whether writes can be taken. After a write found the disk
// full it probes with a write of its own each time it is asked, so that the
// service becomes ready again without a restart once there is room, even
// when no client tries a write meanwhile.
func (s *Server) writable(ctx context.Context) error {
	since := s.health.since()
	if since.IsZero() || s.ProbeWrite == nil {
		return nil
	}
	if err := s.ProbeWrite(ctx); err != nil {
		if s.Fault != nil {
			err = s.Fault(err)
		}
		if storelink.ErrorCode(err) == storelink.ENOSPACE {
			return storelink.Errorf(storelink.EUNAVAILABLE, "The disk is full: writes have failed with no space left since %s.",
				since.UTC().Format(time.RFC3339))
		}
		return err
	}
	s.health.wrote()
	return nil
}

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.Ping(ctx); err != nil {
		s.logger.Warn("not ready", "error", err)
		writeProblem(w, r, storelink.EUNAVAILABLE, "The database does not answer.")
		return
	}
	if err := s.writable(ctx); err != nil {
		s.logger.Warn("not ready", "error", err)
		writeProblem(w, r, storelink.EUNAVAILABLE, storelink.ErrorMessage(err))
		return
	}
	if s.Ready != nil {
		if err := s.Ready(ctx); err != nil {
			s.logger.Warn("not ready", "error", err)
			msg := "The database does not answer."
			if storelink.ErrorCode(err) != storelink.EINTERNAL {
				msg = storelink.ErrorMessage(err)
			}
			writeProblem(w, r, storelink.EUNAVAILABLE, msg)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
