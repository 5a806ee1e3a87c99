package storetest

import (
	"bytes"
	"strings"
	"time"

	"storelink"
)

// An upload's file is kept as received, with the error file its processing
// made, until the retention has passed since it was received; then both
// are gone, saying when. A file still waiting is kept whatever its age.
func testUploadFiles(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	body := []byte("store;ean;article_number;quantity;price\nS1;4006381333931;SKU;5;1.00\n")
	accept := func(name string) *storelink.Upload {
		u, _, err := s.Uploads.Accept(ctx, storelink.NewUpload{ClientID: id, FileName: name, Body: storelink.ChunksOf(body), SHA256: "00"}, policy)
		must(t, err)
		return u
	}
	applied := accept("applied.csv")
	errorFile := []byte("store;ean;line;problem_type;problem_detail\nS9;1;3;Store does not exist;Not a store.\n")
	c, err := s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	_, err = s.Uploads.Apply(ctx, c, func(stores map[string]bool, put func(storelink.StockRow) error) (storelink.FeedReport, error) {
		rep, err := rows(row("S1", "4006381333931", 5, 100))(stores, put)
		rep.ErrorFile = errorFile
		return rep, err
	})
	must(t, err)
	failed := accept("failed.csv")
	c, err = s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	must(t, s.Uploads.Fail(ctx, c, storelink.Problem{Type: "Processing failed", Message: "It failed.", LineNumbers: []storelink.LineRef{}}))
	cancelled := accept("cancelled.csv")
	_, err = s.Uploads.Cancel(ctx, id, cancelled.ID, policy)
	must(t, err)
	e.clock.Advance(time.Hour)
	waiting := accept("waiting.csv")

	// A cancelled upload's bytes go with the cancel, their size back to
	// the capacity.
	_, err = s.Uploads.UploadFile(ctx, id, cancelled.ID)
	wantCode(t, err, storelink.EGONE)
	for _, u := range []*storelink.Upload{applied, failed, waiting} {
		got, err := s.Uploads.UploadFile(ctx, id, u.ID)
		must(t, err)
		if !bytes.Equal(got.Bytes(), body) {
			t.Fatalf("file of %s = %q, want the bytes received", u.FileName, got)
		}
	}
	got, err := s.Uploads.UploadErrorFile(ctx, id, applied.ID)
	must(t, err)
	if !bytes.Equal(got, errorFile) {
		t.Fatalf("error file of the applied upload = %q, want the one its processing made", got)
	}
	got, err = s.Uploads.UploadErrorFile(ctx, id, failed.ID)
	must(t, err)
	if string(got) != "line;problem_type;problem_detail\n0;Processing failed;It failed.\n" {
		t.Fatalf("error file of an upload set aside = %q, want its problem at line 0", got)
	}
	_, err = s.Uploads.UploadErrorFile(ctx, id, cancelled.ID)
	wantCode(t, err, storelink.ECONFLICT)
	_, err = s.Uploads.UploadErrorFile(ctx, id, waiting.ID)
	wantCode(t, err, storelink.ECONFLICT)
	_, err = s.Uploads.UploadFile(ctx, id, "no-such-upload")
	wantCode(t, err, storelink.ENOTFOUND)
	_, err = s.Uploads.UploadErrorFile(ctx, id, "no-such-upload")
	wantCode(t, err, storelink.ENOTFOUND)
	other, err := s.Partners.CreateClient(ctx, e.client.PartnerID, "FR", "EUR")
	must(t, err)
	_, err = s.Uploads.UploadFile(ctx, other.ID, applied.ID)
	wantCode(t, err, storelink.ENOTFOUND)

	// Within the retention nothing goes.
	retention := 24 * time.Hour
	n, err := s.Uploads.ExpireFiles(ctx, retention)
	must(t, err)
	if n != 0 {
		t.Fatalf("%d files removed within the retention, want none", n)
	}
	// A day after the first ones: they go, the one still waiting stays.
	e.clock.Advance(23*time.Hour + time.Second)
	expiredAt := e.clock.Now()
	n, err = s.Uploads.ExpireFiles(ctx, retention)
	must(t, err)
	if n != 2 {
		t.Fatalf("%d files removed, want the 2 finished uploads' (the cancelled one's went with the cancel)", n)
	}
	for _, u := range []*storelink.Upload{applied, failed} {
		_, err := s.Uploads.UploadFile(ctx, id, u.ID)
		wantCode(t, err, storelink.EGONE)
		if msg := asError(err).Message; !strings.Contains(msg, expiredAt.UTC().Format(storelink.EventTimeLayout)) {
			t.Fatalf("gone file of %s: %q, want it to say when it expired (%s)", u.FileName, msg, expiredAt)
		}
	}
	_, err = s.Uploads.UploadErrorFile(ctx, id, applied.ID)
	wantCode(t, err, storelink.EGONE)
	if got, err := s.Uploads.UploadFile(ctx, id, waiting.ID); err != nil || !bytes.Equal(got.Bytes(), body) {
		t.Fatalf("the waiting upload's file after the sweep: %q, %v; want it kept", got, err)
	}
	// Its upload is still there, and it is still processed from its bytes.
	if u, err := s.Uploads.Upload(ctx, id, applied.ID); err != nil || u.Status != storelink.UploadApplied {
		t.Fatalf("upload after its file expired: %+v, %v", u, err)
	}
	c, err = s.Uploads.Claim(ctx, "w", time.Minute)
	must(t, err)
	if c == nil || c.ID != waiting.ID || !bytes.Equal(c.Body.Bytes(), body) {
		t.Fatalf("claim after the sweep = %+v, want the waiting upload with its bytes", c)
	}
	n, err = s.Uploads.ExpireFiles(ctx, retention)
	must(t, err)
	if n != 0 {
		t.Fatalf("a second sweep removed %d, want none", n)
	}
}
