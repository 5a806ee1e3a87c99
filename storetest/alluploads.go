package storetest

import (
	"time"

	"storelink"
)

// testAllUploads: the operator's list holds every client's uploads, newest
// first, in pages; a client's list never holds another's, and the empty
// client id is no client (it never means every client there).
func testAllUploads(e *env) {
	t, ctx, s := e.t, e.ctx, e.s
	p, err := s.Partners.CreatePartner(ctx, "Other")
	must(t, err)
	other, err := s.Partners.CreateClient(ctx, p.ID, "FR", "EUR")
	must(t, err)
	var want []string // newest last
	for i := range 4 {
		client := e.client.ID
		if i%2 == 1 {
			client = other.ID
		}
		u, _, err := s.Uploads.Accept(ctx, storelink.NewUpload{ClientID: client, FileName: "f.csv", Body: storelink.ChunksOf([]byte("x")), SHA256: "00"},
			storelink.CapacityPolicy{Base: 1 << 30, Window: time.Hour})
		must(t, err)
		want = append(want, u.ID)
		e.clock.Advance(time.Millisecond)
	}
	page, err := s.Uploads.AllUploads(ctx, storelink.UploadFilter{Limit: 3})
	must(t, err)
	if len(page) != 3 || page[0].ID != want[3] || page[1].ID != want[2] || page[2].ID != want[1] || page[0].ClientID != other.ID {
		t.Fatalf("every client's first page = %+v, want the newest three of both clients", page)
	}
	page, err = s.Uploads.AllUploads(ctx, storelink.UploadFilter{Limit: 3, Before: want[1]})
	must(t, err)
	if len(page) != 1 || page[0].ID != want[0] {
		t.Fatalf("every client's next page = %+v, want the oldest", page)
	}
	_, err = s.Uploads.AllUploads(ctx, storelink.UploadFilter{Limit: 3, Before: "garbage"})
	wantCode(t, err, storelink.EINVALID)
	mine, err := s.Uploads.Uploads(ctx, e.client.ID, storelink.UploadFilter{Limit: 10})
	must(t, err)
	if len(mine) != 2 || mine[0].ID != want[2] || mine[1].ID != want[0] {
		t.Fatalf("one client's list = %+v, want its two", mine)
	}
	// Another client's upload is no cursor of this client's list.
	_, err = s.Uploads.Uploads(ctx, e.client.ID, storelink.UploadFilter{Limit: 10, Before: want[1]})
	wantCode(t, err, storelink.EINVALID)
	_, err = s.Uploads.Uploads(ctx, "", storelink.UploadFilter{Limit: 10})
	wantCode(t, err, storelink.ENOTFOUND)
}
