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

// Accepting never waits for applying: while an upload of a client applies
// (its apply's transaction open, its rows half put), a cancel of that
// client's next upload, which waits behind it, cancels it, and another
// client's upload is accepted. Where the database lets writers work side by
// side (Fixture.OneWriter false) both answer before the apply ends; with
// one writer they answer once it commits, the cancel still before the
// waiting upload is claimed. Either way the cancelled upload is never
// applied and the apply ends as if nothing had come between.
func testCancelDuringApply(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	p, err := s.Partners.CreatePartner(ctx, "Other")
	must(t, err)
	other, err := s.Partners.CreateClient(ctx, p.ID, "FR", "EUR")
	must(t, err)
	first := e.accept("first.csv", 10)
	waiting := e.accept("waiting.csv", 10)
	c, err := s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	if c == nil || c.ID != first.ID {
		t.Fatalf("claim = %+v, want upload %s", c, first.ID)
	}
	inside, release := make(chan struct{}), make(chan struct{})
	applied := make(chan error, 1)
	go func() {
		_, err := s.Uploads.Apply(ctx, c, func(stores map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
			if err := put(row("S1", "4006381333931", 5, 1999)); err != nil {
				return storelink.FeedReport{}, err
			}
			close(inside)
			<-release
			return storelink.FeedReport{RowsTotal: 1, RowsApplied: 1}, nil
		})
		applied <- err
	}()
	select {
	case <-inside:
	case err := <-applied:
		t.Fatalf("apply ended before it put its rows: %v", err)
	}
	type answer struct {
		u   *storelink.Upload
		err error
	}
	cancelled, accepted := make(chan answer, 1), make(chan answer, 1)
	go func() {
		u, err := s.Uploads.Cancel(ctx, id, waiting.ID, policy)
		cancelled <- answer{u, err}
	}()
	go func() {
		u, _, err := s.Uploads.Accept(ctx, storelink.NewUpload{ClientID: other.ID, FileName: "other.csv", Body: storelink.ChunksOf([]byte("x")), SHA256: "00"}, policy)
		accepted <- answer{u, err}
	}()
	var cancel, accept answer
	if e.fixture.OneWriter {
		close(release)
		cancel, accept = <-cancelled, <-accepted
	} else {
		deadline := time.After(30 * time.Second)
		for got := 0; got < 2; got++ {
			select {
			case cancel = <-cancelled:
			case accept = <-accepted:
			case <-deadline:
				close(release)
				t.Fatalf("the cancel or the other client's accept still waits 30 s into an apply that does not end: they wait for the apply")
			}
		}
		close(release)
	}
	must(t, <-applied)
	must(t, cancel.err)
	must(t, accept.err)
	if cancel.u.Status != storelink.UploadCancelled {
		t.Fatalf("cancelled upload = %+v, want cancelled", cancel.u)
	}
	if accept.u.Status != storelink.UploadAccepted || accept.u.ClientID != other.ID {
		t.Fatalf("other client's upload = %+v, want accepted", accept.u)
	}
	got, err := s.Uploads.Upload(ctx, id, first.ID)
	must(t, err)
	if got.Status != storelink.UploadApplied || got.RowsApplied != 1 {
		t.Fatalf("the upload applied beside the cancel = %+v, want applied with its row", got)
	}
	// The processor takes the other client's upload; the cancelled one never.
	next, err := s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	if next == nil || next.ID != accept.u.ID {
		t.Fatalf("claim = %+v, want the other client's upload %s", next, accept.u.ID)
	}
	if none, err := s.Uploads.Claim(ctx, "w", time.Minute); err != nil || none != nil {
		t.Fatalf("claim = %+v, %v; want none: the cancelled upload is not claimed", none, err)
	}
}
