package main

import (
	"slices"
	"testing"
)

func TestAllowedMethods(t *testing.T) {
	sp := &spec{ops: []operation{
		{id: "upload", method: "PUT", path: "/stock/{client_id}/{file}"},
		{id: "listUploads", method: "GET", path: "/stock/{client_id}/uploads"},
		{id: "getUpload", method: "GET", path: "/stock/{client_id}/uploads/{upload_id}"},
		{id: "cancelUpload", method: "DELETE", path: "/stock/{client_id}/uploads/{upload_id}"},
	}}
	cases := map[string][]string{
		// uploads is also a file name the upload takes.
		"/stock/walk/uploads":      {"GET", "HEAD", "PUT"},
		"/stock/walk/walk":         {"PUT"},
		"/stock/walk/uploads/walk": {"DELETE", "GET", "HEAD"},
		"/stock/walk":              nil,
	}
	for path, want := range cases {
		if got := sp.allowedMethods(path); !slices.Equal(got, want) {
			t.Errorf("allowedMethods(%q) = %q, want %q", path, got, want)
		}
	}
	if got := concretePath("/stock/{client_id}/uploads/{upload_id}"); got != "/stock/walk/uploads/walk" {
		t.Errorf("concretePath = %q", got)
	}
}
