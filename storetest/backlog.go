package storetest

import (
	"time"

	"storelink"
)

// testBacklog: a client with MaxWaiting uploads waiting gets EBACKLOG and
// nothing is stored or taken from its bucket; another client is not
// affected; an upload picked up by a processor no longer counts as waiting.
func testBacklog(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	limited := storelink.CapacityPolicy{Base: 1 << 30, Window: time.Hour, MaxWaiting: 2}
	p, err := s.Partners.CreatePartner(ctx, "Other")
	must(t, err)
	other, err := s.Partners.CreateClient(ctx, p.ID, "FR", "EUR")
	must(t, err)
	send := func(clientID string) error {
		_, _, err := s.Uploads.Accept(ctx, storelink.NewUpload{ClientID: clientID, FileName: "f.csv", Body: storelink.ChunksOf([]byte("x")), SHA256: "00"}, limited)
		return err
	}

	b, err := s.Uploads.Backlog(ctx, "")
	must(t, err)
	if b != (storelink.Backlog{}) {
		t.Fatalf("backlog of an empty store = %+v", b)
	}
	must(t, send(other.ID))
	e.clock.Advance(time.Second)
	must(t, send(e.client.ID))
	e.clock.Advance(time.Second)
	must(t, send(e.client.ID))
	before, err := s.Uploads.Capacity(ctx, e.client.ID, limited)
	must(t, err)
	wantCode(t, send(e.client.ID), storelink.EBACKLOG)
	after, err := s.Uploads.Capacity(ctx, e.client.ID, limited)
	must(t, err)
	if after.BytesLeft != before.BytesLeft {
		t.Fatalf("a refused upload took from the bucket: %d bytes left, before %d", after.BytesLeft, before.BytesLeft)
	}
	must(t, send(other.ID)) // the other client has one waiting, below the limit

	b, err = s.Uploads.Backlog(ctx, e.client.ID)
	must(t, err)
	start := NewClock().Now()
	if b.Waiting != 2 || b.Ahead != 2 || !b.Oldest.Equal(start.Add(time.Second)) {
		t.Fatalf("client backlog = %+v, want 2 waiting, 2 ahead (the other client's first and its own first), oldest at %v", b, start.Add(time.Second))
	}
	b, err = s.Uploads.Backlog(ctx, "")
	must(t, err)
	if b.Waiting != 4 || b.Ahead != 4 || !b.Oldest.Equal(start) {
		t.Fatalf("service backlog = %+v, want 4 waiting, 4 ahead, oldest at %v", b, start)
	}

	// The other client's first upload is claimed: it no longer waits, but is
	// still ahead (unfinished). Then the client's own first is claimed: it
	// has a place free again.
	c, err := s.Uploads.Claim(ctx, "w1", time.Minute)
	must(t, err)
	if c == nil || c.ClientID != other.ID {
		t.Fatalf("first claim = %+v, want the other client's first upload", c)
	}
	wantCode(t, send(e.client.ID), storelink.EBACKLOG)
	c, err = s.Uploads.Claim(ctx, "w2", time.Minute)
	must(t, err)
	if c == nil || c.ClientID != e.client.ID {
		t.Fatalf("second claim = %+v, want the client's first upload", c)
	}
	b, err = s.Uploads.Backlog(ctx, e.client.ID)
	must(t, err)
	if b.Waiting != 1 || b.Ahead != 3 {
		t.Fatalf("client backlog after two claims = %+v, want 1 waiting with 3 unfinished up to it", b)
	}
	must(t, send(e.client.ID))
	wantCode(t, send(e.client.ID), storelink.EBACKLOG)
}
