package httpapi

import (
	"context"

	"storelink"
)

// checkWaiting refuses an upload of a client that has as many uploads
// waiting as it may have, before its body is read. Accept counts again
// under the client's lock, so concurrent uploads cannot overshoot; this
// look spares reading the body of an upload that would be refused.
func (s *Server) checkWaiting(ctx context.Context, clientID string) error {
	limit := s.Capacity.MaxWaiting
	if limit <= 0 {
		return nil
	}
	b, err := s.Uploads.Backlog(ctx, clientID)
	if err != nil {
		return err
	}
	if b.Waiting < limit {
		return nil
	}
	return s.backlogFull(b)
}

// backlogFull is the answer to an upload refused for too many waiting: how
// many wait, and when to retry, from the recent processing rate.
func (s *Server) backlogFull(b storelink.Backlog) error {
	rate := 0.0
	if s.UploadRate != nil {
		rate = s.UploadRate()
	}
	return storelink.BacklogFull(b, s.Capacity.MaxWaiting, rate)
}

// refusedWaiting turns Accept's EBACKLOG into the full answer; the store
// knows the count, not the processing rate.
func (s *Server) refusedWaiting(ctx context.Context, clientID string, err error) error {
	if storelink.ErrorCode(err) != storelink.EBACKLOG {
		return err
	}
	b, berr := s.Uploads.Backlog(ctx, clientID)
	if berr != nil {
		return err
	}
	b.Waiting = max(b.Waiting, s.Capacity.MaxWaiting) // what Accept counted, though some may have been picked up since
	return s.backlogFull(b)
}
