package storetest

import (
	"time"
)

// testKeyLastUsed: a request authenticated with a key does not write its
// last use; the flush does, with the time of the key's latest use, and a
// flush never takes a key's recorded use back to an earlier one. A key
// never used shows none, and a revoked key's pending use is passed over.
func testKeyLastUsed(e *env) {
	t, ctx, s, c := e.t, e.ctx, e.s, e.client
	second, err := s.Partners.CreateAPIKey(ctx, c.ID)
	must(t, err)
	third, err := s.Partners.CreateAPIKey(ctx, c.ID)
	must(t, err)
	used := func() map[string]*time.Time {
		t.Helper()
		keys, err := s.Partners.APIKeys(ctx, c.ID)
		must(t, err)
		out := map[string]*time.Time{}
		for _, k := range keys {
			out[k.ID] = k.LastUsedAt
		}
		return out
	}
	auth := func(key string) {
		t.Helper()
		if _, err := s.Partners.Authenticate(ctx, c.ID, key); err != nil {
			t.Fatal(err)
		}
	}
	first := e.clock.Now()
	auth(c.APIKey)
	e.clock.Advance(time.Second)
	last := e.clock.Now()
	auth(c.APIKey) // the later use of the same key wins
	auth(second.APIKey)
	for id, at := range used() {
		if at != nil {
			t.Fatalf("key %s shows a use at %v before any flush; authentication must not write", id, at)
		}
	}
	must(t, s.Partners.FlushKeyUses(ctx))
	got := used()
	if at := got[second.KeyID]; at == nil || !at.Equal(last) {
		t.Fatalf("second key's last use = %v, want %v", at, last)
	}
	if at := got[third.KeyID]; at != nil {
		t.Fatalf("a key never used shows a use at %v", at)
	}
	var firstID string
	for id, at := range got {
		if id != second.KeyID && id != third.KeyID {
			firstID = id
			if at == nil || !at.Equal(last) {
				t.Fatalf("first key's last use = %v, want its later use %v (not %v)", at, last, first)
			}
		}
	}
	// A use older than the one recorded, flushed late (by another process,
	// say), leaves the recorded one.
	e.clock.Set(first)
	auth(c.APIKey)
	must(t, s.Partners.FlushKeyUses(ctx))
	if at := used()[firstID]; at == nil || !at.Equal(last) {
		t.Fatalf("first key's last use after an older use was flushed = %v, want %v kept", at, last)
	}
	// A key revoked between its use and the flush is passed over.
	e.clock.Set(last.Add(time.Minute))
	auth(third.APIKey)
	must(t, s.Partners.DeleteAPIKey(ctx, c.ID, third.KeyID))
	must(t, s.Partners.FlushKeyUses(ctx))
	if _, ok := used()[third.KeyID]; ok {
		t.Fatal("the revoked key is still listed")
	}
}
