package storetest

import (
	"time"

	"storelink"
)

func testCapacity(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	// Two stores: the bucket holds 1000 + 2×100 = 1200 bytes and starts full.
	c, err := s.Uploads.Capacity(ctx, id, policy)
	must(t, err)
	if c.BytesPerWindow != 1200 || c.BytesLeft != 1200 {
		t.Fatalf("fresh capacity = %+v, want 1200 of 1200", c)
	}
	up := func(n int) (*storelink.Upload, storelink.Capacity, error) {
		return s.Uploads.Accept(ctx, storelink.NewUpload{ClientID: id, FileName: "f.csv", Body: storelink.ChunksOf(make([]byte, n)), SHA256: "00"}, policy)
	}
	_, c, err = up(700)
	must(t, err)
	if c.BytesLeft != 500 {
		t.Fatalf("after 700 bytes: %+v, want 500 left", c)
	}
	_, c, err = up(600)
	wantCode(t, err, storelink.ERATELIMIT)
	// 100 bytes are missing; 1200 bytes refill per hour, so 3600/1200×100 = 300 s.
	if e := asError(err); e.RetryAfter != 300 {
		t.Fatalf("RetryAfter = %d, want 300", e.RetryAfter)
	}
	if c.BytesLeft != 500 {
		t.Fatalf("a refused upload must take nothing: %+v", c)
	}
	e.clock.Advance(299 * time.Second)
	_, _, err = up(600)
	wantCode(t, err, storelink.ERATELIMIT)
	e.clock.Advance(time.Second)
	_, c, err = up(600)
	must(t, err)
	if c.BytesLeft != 0 {
		t.Fatalf("after the retry: %+v, want 0 left", c)
	}
	// A third store raises the bucket size.
	_, _, err = s.Partners.PutStore(ctx, id, "S3", "")
	must(t, err)
	e.clock.Advance(2 * time.Hour)
	c, err = s.Uploads.Capacity(ctx, id, policy)
	must(t, err)
	if c.BytesPerWindow != 1300 || c.BytesLeft != 1300 || c.FullIn != 0 {
		t.Fatalf("after a refill with 3 stores: %+v, want 1300 of 1300", c)
	}
	// Refused uploads left nothing behind.
	list, err := s.Uploads.Uploads(ctx, id, storelink.UploadFilter{Limit: 10})
	must(t, err)
	if len(list) != 2 {
		t.Fatalf("%d uploads stored, want the 2 accepted", len(list))
	}
	_, _, err = s.Uploads.Accept(ctx, storelink.NewUpload{ClientID: "nope", FileName: "f.csv", Body: storelink.ChunksOf([]byte("x"))}, policy)
	wantCode(t, err, storelink.ENOTFOUND)
	// An id that PostgreSQL cannot even store fails inside the transaction;
	// the store is left as usable as after any other refusal, with nothing
	// written.
	_, _, err = s.Uploads.Accept(ctx, storelink.NewUpload{ClientID: "\xff\x00", FileName: "f.csv", Body: storelink.ChunksOf([]byte("x"))}, policy)
	wantCode(t, err, storelink.ENOTFOUND)
	_, _, err = up(1000)
	must(t, err)
	for range 20 { // more than a pool's connections: none is lost to a refusal
		_, _, err = up(1301)
		wantCode(t, err, storelink.ETOOLARGE)
		_, _, err = up(1000)
		wantCode(t, err, storelink.ERATELIMIT)
	}
	e.clock.Advance(time.Hour)
	_, c, err = up(1000)
	must(t, err)
	if c.BytesLeft != 300 {
		t.Fatalf("after the refusals and a refill: %+v, want 300 left", c)
	}
	list, err = s.Uploads.Uploads(ctx, id, storelink.UploadFilter{Limit: 10})
	must(t, err)
	if len(list) != 4 {
		t.Fatalf("%d uploads stored, want the 4 accepted", len(list))
	}
}

func testCapacityTooLarge(e *env) {
	_, c, err := e.s.Uploads.Accept(e.ctx, storelink.NewUpload{ClientID: e.client.ID, FileName: "f.csv", Body: storelink.ChunksOf(make([]byte, 1201))}, policy)
	wantCode(e.t, err, storelink.ETOOLARGE)
	if c.BytesLeft != 1200 {
		e.t.Fatalf("capacity after a refused upload = %+v", c)
	}
}
