package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"

	"storelink"
)

// fullDisk is the webhook service with its writes failing as they do on a
// full disk (the write's ENOSPC under the store's wrapping), while reads
// work, as they do on a full disk.
type fullDisk struct{ storelink.WebhookService }

func (fullDisk) Redeliver(_ context.Context, id string) error {
	return fmt.Errorf("redeliver %s: write: %w", id, syscall.ENOSPC)
}

func (fullDisk) UpdateEndpoint(_ context.Context, _, id string, _ storelink.EndpointPatch) (*storelink.Endpoint, error) {
	return nil, fmt.Errorf("update endpoint %s: write: %w", id, syscall.ENOSPC)
}

// An action that finds the disk full answers 507 with a page saying so,
// not a 500 "Internal error."; the store's Fault function (Deps.Fault)
// tells it. A real full disk and an unreachable database are covered
// through serve in cmd/storelink.
func TestActionOnFullDisk(t *testing.T) {
	f := newFixture(t, fixtureOptions{webhooks: func(w storelink.WebhookService) storelink.WebhookService { return fullDisk{w} }})
	s := f.seedData()
	b := f.browser()
	b.login()
	token := b.csrf()
	for _, a := range []struct {
		path string
		form url.Values
	}{
		{"/dashboard/deliveries/" + s.FailedDelivery + "/redeliver", url.Values{"csrf": {token}}},
		{"/dashboard/endpoints/" + s.OffEndpointID + "/enabled", url.Values{"csrf": {token}, "enabled": {"true"}}},
	} {
		resp, body := b.post(a.path, a.form)
		if resp.StatusCode != http.StatusInsufficientStorage || !strings.Contains(body, "The server has no space left to store this; nothing was stored.") ||
			strings.Contains(body, "Internal error") {
			t.Errorf("POST %s on a full disk = %d:\n%s\nwant 507 saying there is no space left", a.path, resp.StatusCode, body)
		}
	}
	checkEndpointEnabled(t, f, s.ClientID, s.OffEndpointID, false)
}
