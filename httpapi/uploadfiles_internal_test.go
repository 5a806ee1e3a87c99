package httpapi

import (
	"errors"
	"net/http/httptest"
	"testing"

	"storelink"
)

// At most maxDownloads files are sent at once; one more is a 503 with
// Retry-After, and a place given back is taken again.
func TestDownloadPlaces(t *testing.T) {
	s := &Server{Deps: Deps{Downloads: NewDownloads()}}
	var releases []func()
	for range maxDownloads {
		release, err := s.download(httptest.NewRecorder())
		if err != nil {
			t.Fatalf("download %d: %v", len(releases)+1, err)
		}
		releases = append(releases, release)
	}
	_, err := s.download(httptest.NewRecorder())
	var e *storelink.Error
	if !errors.As(err, &e) || e.Code != storelink.EUNAVAILABLE || e.RetryAfter != 1 {
		t.Fatalf("download %d: %v, want unavailable with Retry-After 1", maxDownloads+1, err)
	}
	releases[0]()
	if _, err := s.download(httptest.NewRecorder()); err != nil {
		t.Fatalf("download after one ended: %v", err)
	}
}
