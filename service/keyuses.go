package service

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// keyUses are the API keys used since the last flush, by hash, with the
// time of their last use. Authentication never writes to the database: a
// partner's every request would otherwise be a write, on SQLite behind the
// one writer. FlushKeyUses writes them in one statement, a minute apart
// (serve), so a key's last use is known to the minute; a crash loses at
// most that minute. The set holds the keys authenticated since the flush,
// at most every key there is.
type keyUses struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (u *keyUses) note(hash string, at time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.last == nil {
		u.last = map[string]time.Time{}
	}
	if at.After(u.last[hash]) {
		u.last[hash] = at
	}
}

// take empties the set and returns what it held.
func (u *keyUses) take() map[string]time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	m := u.last
	u.last = nil
	return m
}

// KeyUse is a key's last use that FlushKeyUses writes
// (PartnerDriver.TouchAPIKeys).
type KeyUse struct {
	Hash string
	At   time.Time
}

// FlushKeyUses writes when each key authenticated since the last flush was
// last used; a key's recorded time never goes back (another process may
// have written a later one). What could not be written is kept for the
// next flush.
func (s *Partners) FlushKeyUses(ctx context.Context) error {
	m := s.uses.take()
	if len(m) == 0 {
		return nil
	}
	list := make([]KeyUse, 0, len(m))
	for h, at := range m {
		list = append(list, KeyUse{Hash: h, At: at})
	}
	if err := s.d.TouchAPIKeys(ctx, list); err != nil {
		for _, u := range list {
			s.uses.note(u.Hash, u.At)
		}
		return fmt.Errorf("record when API keys were last used: %w", err)
	}
	return nil
}
