package storetest

import (
	"strings"

	"storelink"
)

// testEndpointDescription: an endpoint's description is kept as given,
// read back with the endpoint wherever it is listed, changed and removed
// by an update, and left as it is by an update that does not name it; a
// description too long or with a control or invisible character is
// refused, at creation and at update, and changes nothing.
func testEndpointDescription(e *env) {
	t, ctx, s, id := e.t, e.ctx, e.s, e.client.ID
	note := "Orders to the ERP — Zürich"
	ep, err := s.Webhooks.CreateEndpoint(ctx, id, storelink.NewEndpoint{URL: "https://a.test", Description: note}, newSecret())
	must(t, err)
	if ep.Description != note {
		t.Fatalf("created endpoint's description = %q, want %q", ep.Description, note)
	}
	plain, _ := e.endpoint("https://b.test", "")
	if plain.Description != "" {
		t.Fatalf("endpoint created without a description has %q", plain.Description)
	}
	read := func() string {
		t.Helper()
		d, err := s.Webhooks.Endpoint(ctx, id, ep.ID)
		must(t, err)
		list, err := s.Webhooks.EndpointDetails(ctx, id)
		must(t, err)
		for _, l := range list {
			if l.ID == ep.ID && l.Description != d.Description {
				t.Fatalf("listed description %q, read alone %q", l.Description, d.Description)
			}
		}
		return d.Description
	}
	if got := read(); got != note {
		t.Fatalf("description read back = %q, want %q", got, note)
	}
	for _, bad := range []string{strings.Repeat("é", storelink.MaxDescription+1), "two\nlines", "tab\there", "hidden\u200bspace", "\xff"} {
		_, err := s.Webhooks.CreateEndpoint(ctx, id, storelink.NewEndpoint{URL: "https://c.test", Description: bad}, newSecret())
		wantCode(t, err, storelink.EUNPROCESSABLE)
		_, err = s.Webhooks.UpdateEndpoint(ctx, id, ep.ID, storelink.EndpointPatch{Description: &bad})
		wantCode(t, err, storelink.EUNPROCESSABLE)
	}
	if got := read(); got != note {
		t.Fatalf("description after refused updates = %q, want %q", got, note)
	}
	longest := strings.Repeat("é", storelink.MaxDescription)
	if _, err := s.Webhooks.UpdateEndpoint(ctx, id, ep.ID, storelink.EndpointPatch{Description: &longest}); err != nil {
		t.Fatalf("a description of %d characters: %v", storelink.MaxDescription, err)
	}
	off := false
	_, err = s.Webhooks.UpdateEndpoint(ctx, id, ep.ID, storelink.EndpointPatch{Enabled: &off})
	must(t, err)
	if got := read(); got != longest {
		t.Fatalf("description after an update of enabled alone = %q, want it kept", got)
	}
	none := ""
	_, err = s.Webhooks.UpdateEndpoint(ctx, id, ep.ID, storelink.EndpointPatch{Description: &none})
	must(t, err)
	if got := read(); got != "" {
		t.Fatalf("description after it was removed = %q, want none", got)
	}
}
