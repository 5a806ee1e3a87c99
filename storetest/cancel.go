package storetest

import (
	"time"

	"storelink"
)

// An accepted upload can be cancelled until a processor picks it up: it is
// never applied, it no longer holds back the client's later uploads, and
// its bytes go back to the capacity. Once processing began, or for a
// finished upload, the cancel is a conflict and the capacity stays used.
func testCancelUpload(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	up := func(n int) *storelink.Upload {
		u, _, err := s.Uploads.Accept(ctx, storelink.NewUpload{ClientID: id, FileName: "f.csv", Body: storelink.ChunksOf(make([]byte, n)), SHA256: "00"}, policy)
		must(t, err)
		return u
	}
	first, second, third := up(300), up(400), up(200)
	c, err := s.Uploads.Capacity(ctx, id, policy)
	must(t, err)
	if c.BytesLeft != 300 {
		t.Fatalf("capacity after 900 bytes: %+v, want 300 of 1200 left", c)
	}

	e.clock.Advance(time.Second)
	u, err := s.Uploads.Cancel(ctx, id, second.ID, policy)
	must(t, err)
	if u.ID != second.ID || u.Status != storelink.UploadCancelled || u.FinishedAt == nil || !u.FinishedAt.Equal(e.clock.Now()) || u.RowsApplied != 0 {
		t.Fatalf("cancelled upload = %+v, want status cancelled, finished now", u)
	}
	c, err = s.Uploads.Capacity(ctx, id, policy)
	must(t, err)
	// 300 left, 400 given back, and one second of refill (1200 bytes an
	// hour: a third of a byte).
	if c.BytesLeft != 700 {
		t.Fatalf("capacity after the cancel: %+v, want the 400 bytes back (700 left)", c)
	}
	got, err := s.Uploads.Upload(ctx, id, second.ID)
	must(t, err)
	if got.Status != storelink.UploadCancelled {
		t.Fatalf("upload as read = %+v, want cancelled", got)
	}
	// Cancelling again answers the cancelled upload and gives nothing back.
	u, err = s.Uploads.Cancel(ctx, id, second.ID, policy)
	must(t, err)
	if u.Status != storelink.UploadCancelled {
		t.Fatalf("second cancel = %+v", u)
	}
	if c2, err := s.Uploads.Capacity(ctx, id, policy); err != nil || c2.BytesLeft != c.BytesLeft {
		t.Fatalf("capacity after a second cancel: %+v, %v; want it unchanged at %d", c2, err, c.BytesLeft)
	}

	// The processor takes first, then third: the cancelled one never.
	claim, err := s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	if claim == nil || claim.ID != first.ID {
		t.Fatalf("first claim = %+v, want upload %s", claim, first.ID)
	}
	_, err = s.Uploads.Cancel(ctx, id, first.ID, policy)
	wantCode(t, err, storelink.ECONFLICT)
	if _, err := s.Uploads.Apply(ctx, claim, rows(row("S1", "4006381333931", 5, 1999))); err != nil {
		t.Fatal(err)
	}
	_, err = s.Uploads.Cancel(ctx, id, first.ID, policy)
	wantCode(t, err, storelink.ECONFLICT)
	claim, err = s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	if claim == nil || claim.ID != third.ID {
		t.Fatalf("second claim = %+v, want upload %s: a cancelled upload holds nothing back", claim, third.ID)
	}
	if c3, err := s.Uploads.Capacity(ctx, id, policy); err != nil || c3.BytesLeft != c.BytesLeft {
		t.Fatalf("capacity after refused cancels: %+v, %v; want it unchanged at %d", c3, err, c.BytesLeft)
	}

	// A cancelled upload between two others holds nothing back, and lets
	// nothing overtake: the one after it waits for the one before.
	_, err = s.Uploads.Apply(ctx, claim, rows(row("S1", "4006381333931", 6, 1999)))
	must(t, err)
	fourth, fifth, sixth := up(10), up(10), up(10)
	_, err = s.Uploads.Cancel(ctx, id, fifth.ID, policy)
	must(t, err)
	claim, err = s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	if claim == nil || claim.ID != fourth.ID {
		t.Fatalf("claim = %+v, want upload %s", claim, fourth.ID)
	}
	if next, err := s.Uploads.Claim(ctx, "w", time.Minute); err != nil || next != nil {
		t.Fatalf("claim while %s is processing = %+v, %v; want none: %s comes after it", fourth.ID, next, err, sixth.ID)
	}
	_, err = s.Uploads.Cancel(ctx, id, "no-such-upload", policy)
	wantCode(t, err, storelink.ENOTFOUND)
	_, err = s.Uploads.Cancel(ctx, "no-such-client", second.ID, policy)
	wantCode(t, err, storelink.ENOTFOUND)
	// Another client's upload is not found either.
	other, err := s.Partners.CreateClient(ctx, e.client.PartnerID, "FR", "EUR")
	must(t, err)
	_, err = s.Uploads.Cancel(ctx, other.ID, third.ID, policy)
	wantCode(t, err, storelink.ENOTFOUND)
}
