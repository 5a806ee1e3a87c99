package service

import (
	"context"
	"time"
)

// CreateSession records a dashboard session and deletes the expired ones,
// in one transaction: the calls that add sessions keep the table to the
// live ones.
func (s *Service) CreateSession(ctx context.Context, idHash []byte, expires time.Time) error {
	return s.inTx(ctx, func(tx Tx) error {
		if err := tx.DeleteExpiredSessions(ctx, s.now()); err != nil {
			return err
		}
		return tx.InsertSession(ctx, idHash, expires)
	})
}

// SessionActive tells whether a dashboard session exists and has not expired.
func (s *Service) SessionActive(ctx context.Context, idHash []byte) (bool, error) {
	return s.d.SessionActive(ctx, idHash, s.now())
}

// DeleteSession ends a dashboard session.
func (s *Service) DeleteSession(ctx context.Context, idHash []byte) error {
	return s.d.DeleteSession(ctx, idHash)
}
